/* SPDX-License-Identifier: Apache-2.0 */
/*
 * help.c: `gpucap --help` (the commands, then every setting of libgpucap's options table, the same
 * rows the library reads) and gpucap(1), generated from the same texts by --help-man (the build
 * runs it), so neither can drift from the program.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "gpucap_version.h"
#include "man.h"

static const char usage[] =
    "usage: gpucap COMMAND [ARG...]\n"
    "       gpucap help [COMMAND]\n"
    "       gpucap -V|--version\n"
    "\n"
    "Caps GPU memory per device by preloading libgpucap.so into CUDA programs.\n"
    "\n"
    "commands:\n"
    "  run [OPTION...] [--] CMD [ARG...]  run CMD under a budget; audit, fault injection, a report\n"
    "  check [--json] [FILE]             validate the environment and an ini file; the effective budgets\n"
    "  doctor [--json] [--lib FILE]      check this node or pod before trusting a cap\n"
    "  status [--json] [--ledger FILE]   show a ledger: budgets, usage, processes\n"
    "  inject --to DIR NAME=SIZE...      fill a pod's gpucap volume (the webhook's init container)\n"
    "  plot REPORT.json [-o OUT.svg]     draw a JSON report's usage over time as an SVG picture\n"
    "  set-memory [--pid PID] SIZE       change the budget of running processes (a `gpucap run`, a ledger)\n"
    "  help [COMMAND]                    this text, or a command's\n"
    "\n"
    "`gpucap COMMAND --help` describes a command. Exit status: see each command.\n";

void cli_print_options(FILE *f)
{
    fprintf(f, "settings (environment variable, ini key in [gpucap] of the file GPUCAP_CONFIG names):\n");
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        fprintf(f, "  %s", d->env);
        if (d->flags & GPC_OPTF_PER_DEVICE)
            fprintf(f, ", %s_<ordinal>, %s_GPU-<uuid>", d->env, d->env);
        if (d->flags & GPC_OPTF_ENV_ONLY)
            fprintf(f, "  (environment only)");
        else if (d->flags & GPC_OPTF_PER_DEVICE)
            fprintf(f, "  [ini: %s in [gpucap], [device.<ordinal>], [device.GPU-<uuid>]]", d->key);
        else
            fprintf(f, "  [ini: %s]", d->key);
        if (d->flags & GPC_OPTF_FILE_ONLY)
            fprintf(f, "  (the platform file only; the variable is refused)");
        fprintf(f, "\n      %s = %s%s%s\n", d->key, cli_value_form(d, "0|1"), d->def ? ", default " : "",
                d->def ? d->def : "");
        /* Wrap the documentation at about 96 columns. */
        const char *p = d->doc;
        while (*p) {
            size_t n = strlen(p);
            if (n > 90) {
                n = 90;
                while (n > 0 && p[n] != ' ')
                    n--;
                if (n == 0)
                    n = 90;
            }
            fprintf(f, "      %.*s\n", (int)n, p);
            p += n;
            while (*p == ' ')
                p++;
        }
    }
    fprintf(f, "sizes: %s\n", gpc_size_forms);
}

void cli_print_help(FILE *f)
{
    fputs(usage, f);
    fputc('\n', f);
    cli_print_options(f);
}

/* A command's --help as a verbatim roff block under its name. */
static void man_command(FILE *f, const struct tool_cmd *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    tool_help(c, mem);
    fclose(mem);
    fputs(".SS ", f);
    gpc_man_text(f, c->name);
    fputs("\n.nf\n", f);
    gpc_man_text(f, text);
    fputs(".fi\n", f);
    free(text);
}

/*
 * gpucap(1), generated: the commands' --help texts and the options table, the same rows as
 * `gpucap --help`, so the man page cannot drift from the program.
 */
void cli_print_man(FILE *f)
{
    fprintf(f, ".TH GPUCAP 1 \"\" \"gpucap %s\" \"User Commands\"\n", GPUCAP_VERSION_STRING);
    fputs(".SH NAME\ngpucap \\- cap GPU memory per device for CUDA programs\n", f);
    fputs(".SH SYNOPSIS\n.B gpucap\n.I command\n[\\fIoptions\\fR]\n.br\n.B gpucap\n\\-\\-version | \\-\\-help | "
          "help [\\fIcommand\\fR]\n", f);
    fputs(".SH DESCRIPTION\n.nf\n", f);
    gpc_man_text(f, usage);
    fputs(".fi\n.SH OPTIONS\nEach command's options, as its \\-\\-help prints them.\n", f);
    const struct tool_cmd *cmds[] = {&cli_run_cmd,    &cli_check_cmd, &cli_doctor_cmd, &cli_status_cmd,
                                     &cli_inject_cmd, &cli_plot_cmd,  &cli_setmem_cmd};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        man_command(f, cmds[i]);
    gpc_man_section(f, "EXIT STATUS",
                    "gpucap run exits with the command's status, or dies of the signal that ended it; 125 when "
                    "gpucap itself fails or is used wrongly (no library, a bad option, the report not written), "
                    "126 when the command cannot be executed, 127 when it is not found, as env(1). The other "
                    "commands: 0 on success, 1 on failure or a problem found (check: a setting is not valid; "
                    "doctor: a check failed), 2 for a bad option or argument.");
    fputs(".SH ENVIRONMENT\nThe settings below are environment variables and keys of the ini file "
          "(gpucap.ini(5)); \\fBgpucap run\\fR sets them for the command it runs.\n", f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        cli_print_options(mem);
        fclose(mem);
        fputs(".nf\n", f);
        gpc_man_text(f, text);
        fputs(".fi\n", f);
        free(text);
    }
    fputs(".SH EXAMPLES\n", f);
    static const char *const examples[][2] = {
        {"gpucap run \\-\\-memory 8GiB \\-\\- python train.py", "run a job under an 8 GiB budget on every device"},
        {"gpucap run \\-\\-audit \\-\\-report \\- \\-\\- python train.py",
         "deny nothing and print the budget the job needs (the report alone on stdout)"},
        {"gpucap run \\-\\-audit \\-\\-report usage.svg \\-\\- python train.py", "the same, as a picture"},
        {"gpucap run \\-\\-fail\\-rate 0.05 \\-\\-seed 42 \\-\\-backtrace \\-\\- ./my\\-test",
         "fail 5% of the allocations, the same ones each time, with the call stack of each"},
        {"gpucap run \\-\\-memory 8GiB \\-\\- python train.py & gpucap set\\-memory \\-\\-pid $! 12GiB",
         "raise the budget of a running job"},
        {"gpucap status \\-\\-pid 4242", "budgets, use and processes of the ledger of the run with pid 4242"},
        {"gpucap check /etc/gpucap/gpucap.ini", "every error of a settings file, and the budgets that apply"},
        {"gpucap doctor", "check this node or pod before trusting a cap"},
    };
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        fprintf(f, ".TP\n.B %s\n%s\n", examples[i][0], examples[i][1]);
    fputs(".SH FILES\n.TP\n.I /etc/gpucap/gpucap.ini\nthe default settings file (GPUCAP_CONFIG names another)\n", f);
    fputs(".SH SEE ALSO\n.BR gpucap.ini (5),\n.BR gpucap\\-webhook (1),\n.BR gpucap\\-exporter (1),\n.BR gpucap\\-agent (1)\n",
          f);
}
