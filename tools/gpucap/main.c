/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: the `gpucap` command: finds the subcommand and hands it its arguments. Help and the man
 * page are help.c's, what the subcommands share is shared.c's, each subcommand is its own file.
 *
 *   gpucap run     run a command under a budget, audit it, inject faults, report its usage
 *   gpucap check   validate the environment and an ini file, show the effective budgets
 *   gpucap doctor  check a node or pod before trusting a cap
 *   gpucap status  show the ledger: budgets, usage and processes
 *   gpucap inject  fill a pod's gpucap volume (the webhook's init container)
 *   gpucap plot    draw a JSON report's usage timeline as an SVG picture
 *   gpucap set-memory  change the budget of running processes (a `gpucap run`, a ledger)
 */
#include "cli.h"

#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const struct tool_cmd *help;
} commands[] = {
    {"run", cmd_run, &cli_run_cmd},          {"check", cmd_check, &cli_check_cmd},
    {"doctor", cmd_doctor, &cli_doctor_cmd}, {"status", cmd_status, &cli_status_cmd},
    {"inject", cmd_inject, &cli_inject_cmd}, {"plot", cmd_plot, &cli_plot_cmd},
    {"set-memory", cmd_set_memory, &cli_setmem_cmd},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static int find(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return i;
    return -1;
}

static int unknown(const char *what, const char *name)
{
    fprintf(stderr, "gpucap: unknown %s '%s' (see 'gpucap --help')\n", what, name);
    return CLI_USAGE;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;
    if (!cmd) {
        fputs("gpucap: no command given (see 'gpucap --help')\n", stderr);
        return CLI_USAGE;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        cli_print_help(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        tool_version("gpucap");
        return 0;
    }
    if (strcmp(cmd, "--help-man") == 0) {
        cli_print_man(stdout);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        /* gpucap help: this text; gpucap help CMD: CMD's; gpucap help --help: help's own (this). */
        if (argc == 2 || argv[2][0] == '-') {
            cli_print_help(stdout);
            return 0;
        }
        int i = find(argv[2]);
        if (i < 0)
            return unknown("command", argv[2]);
        tool_help(commands[i].help, stdout);
        return 0;
    }
    if (cmd[0] == '-')
        return unknown("option", cmd);
    int i = find(cmd);
    if (i < 0)
        return unknown("command", cmd);
    return commands[i].fn(argc - 1, argv + 1);
}
