/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: the `gpucap` command: dispatch, --help (generated from libgpucap's options table, the
 * same rows the library reads), --help-man (gpucap(1), from the same texts; the build runs it),
 * --version, and what the subcommands share: finding the library, reading settings, mapping a ledger.
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
#include "gpucap_version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: gpucap <command> [options]\n"
    "\n"
    "Caps GPU memory per device by preloading libgpucap.so into CUDA programs.\n"
    "\n"
    "commands:\n"
    "  run [options] -- CMD ARGS...  run CMD under a budget; audit, fault injection, a report at exit\n"
    "  check [FILE]                  validate the environment and an ini file; show the effective budgets\n"
    "  doctor                        check this node or pod before trusting a cap\n"
    "  status [--ledger FILE]        show the ledger: budgets, usage, processes\n"
    "  inject --to DIR NAME=SIZE...  fill a pod's gpucap volume (the webhook's init container)\n"
    "  plot REPORT.json [-o OUT.svg] draw a JSON report's usage over time as an SVG picture\n"
    "  set-memory [--pid PID] SIZE   change the budget of running processes (a `gpucap run`, a ledger)\n"
    "  help [COMMAND]                this text, or a command's\n"
    "  --version                     gpucap's version\n"
    "\n"
    "`gpucap COMMAND --help` describes a command.\n";

static const char *type_name(const struct gpc_option_def *d)
{
    switch (d->type) {
    case GPC_T_SIZE: return "size";
    case GPC_T_BOOL: return "bool";
    case GPC_T_INT: return "int";
    case GPC_T_STRING: return "text";
    case GPC_T_ENUM: return d->choices;
    }
    return "";
}

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
        fprintf(f, "\n      %s <%s>%s%s%s\n", d->key, type_name(d), d->def ? ", default " : "", d->def ? d->def : "",
                "");
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

void cli_print_settings_note(FILE *f)
{
    fputs("Settings (GPUCAP_* variables, ini keys): `gpucap --help` or man gpucap lists them all.\n", f);
}

static void print_help(FILE *f)
{
    fputs(usage, f);
    fputc('\n', f);
    cli_print_options(f);
}

/* Writes `text` as roff body text: backslashes and leading dots or quotes escaped, '-' as \-. */
static void man_text(FILE *f, const char *text)
{
    bool bol = true;
    for (const char *p = text; *p; p++) {
        if (bol && (*p == '.' || *p == '\''))
            fputs("\\&", f);
        if (*p == '\\')
            fputs("\\e", f);
        else if (*p == '-')
            fputs("\\-", f);
        else
            fputc(*p, f);
        bol = *p == '\n';
    }
}

/* Writes the text a command prints for --help, as a verbatim roff block. */
static void man_command(FILE *f, int (*cmd)(int, char **), const char *name)
{
    char *args[] = {(char *)name, "--help", NULL};
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    /* The commands print their help on stdout (assignable in glibc): collect it to escape it. */
    FILE *saved = stdout;
    stdout = mem;
    cmd(2, args);
    stdout = saved;
    fclose(mem);
    fprintf(f, ".SS gpucap %s\n.nf\n", name);
    man_text(f, text);
    fputs(".fi\n", f);
    free(text);
}

/*
 * gpucap(1), generated: the commands' --help texts and the options table, the same rows as
 * `gpucap --help`, so the man page cannot drift from the program.
 */
static void print_man(FILE *f)
{
    fprintf(f, ".TH GPUCAP 1 \"\" \"gpucap %s\" \"User Commands\"\n", GPUCAP_VERSION_STRING);
    fputs(".SH NAME\ngpucap \\- cap GPU memory per device for CUDA programs\n", f);
    fputs(".SH SYNOPSIS\n.B gpucap\n.I command\n[\\fIoptions\\fR]\n.br\n.B gpucap\n\\-\\-version | \\-\\-help | "
          "\\-\\-help\\-man\n", f);
    fputs(".SH DESCRIPTION\n.nf\n", f);
    man_text(f, usage);
    fputs(".fi\n.SH OPTIONS\nEach command's options, as its \\-\\-help prints them.\n", f);
    man_command(f, cmd_run, "run");
    man_command(f, cmd_check, "check");
    man_command(f, cmd_doctor, "doctor");
    man_command(f, cmd_status, "status");
    man_command(f, cmd_inject, "inject");
    man_command(f, cmd_plot, "plot");
    fputs(".SH EXIT STATUS\n\\fBgpucap run\\fR exits with the command's status, 128 + the signal that ended "
          "it, 126 when it cannot be run, 127 when it is not found, 1 when gpucap could not start it (no "
          "library); the other commands 0 on success and 1 on failure (\\fBcheck\\fR: a setting is not valid; "
          "\\fBdoctor\\fR: a check failed); every command 2 for a bad option or argument.\n", f);
    fputs(".SH ENVIRONMENT\nThe settings below are environment variables and keys of the ini file "
          "(gpucap.ini(5)); \\fBgpucap run\\fR sets them for the command it runs.\n", f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        cli_print_options(mem);
        fclose(mem);
        fputs(".nf\n", f);
        man_text(f, text);
        fputs(".fi\n", f);
        free(text);
    }
    fputs(".SH FILES\n.TP\n.I /etc/gpucap/gpucap.ini\nthe default settings file (GPUCAP_CONFIG names another)\n", f);
    fputs(".SH SEE ALSO\n.BR gpucap.ini (5),\n.BR gpucap\\-webhook (1),\n.BR gpucap\\-exporter (1)\n", f);
}

/* ---- shared by the subcommands ---- */

static bool usable_file(const char *path)
{
    return path && *path && access(path, R_OK) == 0;
}

static void add_tried(char *tried, size_t len, const char *path)
{
    size_t n = strlen(tried);
    snprintf(tried + n, len - n, "%s%s", n ? ", " : "", path);
}

int cli_find_lib(const char *given, char *buf, size_t len, char *tried, size_t tried_len)
{
    tried[0] = '\0';
    extern char **environ;
    struct gpc_settings s;
    cli_settings_quiet(&s, environ);
    const char *env = gpc_opt_string(&s, GPC_OPT_LIB);
    const char *first[] = {given, env && *env ? env : NULL};
    for (int i = 0; i < 2; i++) {
        if (!first[i])
            continue;
        /* An explicit choice is final: a typo must not silently pick another library. */
        if (!usable_file(first[i]) || !realpath(first[i], buf)) {
            add_tried(tried, tried_len, first[i]);
            return -ENOENT;
        }
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char cand[PATH_MAX + 64];
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        /* build tree: build/tools/gpucap/gpucap and build/lib/; installed: PREFIX/bin and
         * PREFIX/lib/<multiarch>/gpucap (GPUCAP_LIB_FROM_BIN), or an image's /usr/local/gpucap/{bin,lib}. */
        const char *rel[] = {"../../lib/libgpucap.so", GPUCAP_LIB_FROM_BIN, "../lib/gpucap/libgpucap.so",
                             "../lib/libgpucap.so"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(cand, sizeof cand, "%s/%s", self, rel[i]);
            if (usable_file(cand) && realpath(cand, buf))
                return 0;
            add_tried(tried, tried_len, cand);
        }
    }
    const char *fixed[] = {GPUCAP_LIB_INSTALLED, "/usr/local/lib/gpucap/libgpucap.so", "/usr/lib/gpucap/libgpucap.so"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (i > 0 && strcmp(fixed[i], fixed[0]) == 0)
            continue;
        if (usable_file(fixed[i]) && realpath(fixed[i], buf))
            return 0;
        add_tried(tried, tried_len, fixed[i]);
    }
    (void)len;
    return -ENOENT;
}

static void discard(enum gpc_log_level level, const char *line, void *arg)
{
    (void)level, (void)line, (void)arg;
}

void cli_settings_quiet(struct gpc_settings *s, char *const *envp)
{
    int threshold = gpc_log_threshold;
    gpc_settings_load_to(s, envp, discard, NULL);
    gpc_log_threshold = threshold;
}

const struct gpc_ledger *cli_map_ledger(const char *path, char *why, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "cannot be opened (%s)", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, len, "is not a regular file");
        return NULL;
    }
    if ((uint64_t)st.st_size < sizeof(uint64_t) * 2) {
        close(fd);
        snprintf(why, len, "truncated (shorter than its header)");
        return NULL;
    }
    /* Mapping past the end is fine as long as we read nothing there: gpc_ledger_check reads the
     * header only once the size holds it. */
    const struct gpc_ledger *l = mmap(NULL, sizeof *l, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (l == MAP_FAILED) {
        snprintf(why, len, "cannot be mapped (%s)", strerror(errno));
        return NULL;
    }
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, why, (unsigned)len);
    if (bad) {
        if (bad != why)
            snprintf(why, len, "%s", bad);
        munmap((void *)l, sizeof *l);
        return NULL;
    }
    return l;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || (strcmp(cmd, "help") == 0 && argc == 2)) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(cmd, "--help-man") == 0) {
        print_man(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("gpucap %s\n", GPUCAP_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        /* gpucap help run == gpucap run --help */
        static char *args[4];
        args[0] = argv[0];
        args[1] = argv[2];
        args[2] = "--help";
        argv = args;
        argc = 3;
        cmd = args[1];
    }
    argv++;
    argc--;
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc, argv);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc, argv);
    if (strcmp(cmd, "doctor") == 0)
        return cmd_doctor(argc, argv);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(argc, argv);
    if (strcmp(cmd, "inject") == 0)
        return cmd_inject(argc, argv);
    if (strcmp(cmd, "plot") == 0)
        return cmd_plot(argc, argv);
    if (strcmp(cmd, "set-memory") == 0)
        return cmd_set_memory(argc, argv);
    fprintf(stderr, "gpucap: unknown command '%s'\n\n%s", cmd, usage);
    return CLI_USAGE;
}
