/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: `gpucap run [options] -- CMD ARGS...`.
 *
 * Runs CMD with libgpucap.so prepended to LD_PRELOAD and a fresh private ledger (a file in a new
 * mkdtemp directory, named by GPUCAP_LEDGER) that CMD and all its children share, so the budget
 * and the figures are those of this run alone. Options become GPUCAP_* settings of the child:
 * the child's library reads them through the same table as always. Signals sent to gpucap are
 * passed on to CMD (not those the terminal sends to the whole foreground group: CMD has them
 * already). When CMD is gone, the run's report is written from the ledger, the ledger removed, and
 * gpucap exits with CMD's status, or dies of CMD's signal so that the shell sees the same thing.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

static const char run_usage[] =
    "usage: gpucap run [options] [--] CMD ARGS...\n"
    "\n"
    "Runs CMD with libgpucap.so preloaded and a ledger private to this run and its children.\n"
    "\n"
    "  -m, --memory SIZE          budget for every device (GPUCAP_MEMORY_LIMIT)\n"
    "  -d, --device-memory DEV=SIZE\n"
    "                             budget for device ordinal DEV (GPUCAP_MEMORY_LIMIT_<DEV>); repeatable\n"
    "  -a, --audit                deny nothing; log and count what the budget would deny (GPUCAP_MODE=audit);\n"
    "                             the report's peak is the budget the job needs\n"
    "  -r, --report FILE|-        write the run's report to FILE ('-': stderr) when CMD is gone;\n"
    "                             FILE.svg: a picture of each device's usage over time\n"
    "  -j, --json                 the report as JSON\n"
    "      --fail-after N         allocations after the N-th of each process fail (GPUCAP_FAIL_AFTER)\n"
    "      --fail-rate P          a share P (0..1) of allocations fail (GPUCAP_FAIL_RATE)\n"
    "      --seed S               which ones: the same seed fails the same allocations (GPUCAP_FAIL_SEED)\n"
    "  -b, --backtrace            log the call stack of each denied allocation (GPUCAP_BACKTRACE=1)\n"
    "      --lib PATH             the libgpucap.so to preload (GPUCAP_LIB; default: found beside gpucap)\n"
    "  -h, --help                 this text\n"
    "\n"
    "Without a budget from an option, the environment or the ini file, the run is measured under a\n"
    "budget of 100% of each device. GPUCAP_REPORT in the environment is taken as --report.\n"
    "Exit status: CMD's (or CMD's signal); 2 for a usage error; 127 when CMD cannot be run.\n"
    "\n"
    "example: gpucap run --audit --report - -- python train.py\n"
    "\n";

static volatile sig_atomic_t child_pid;
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof forwarded / sizeof forwarded[0])

static void forward(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    /* The terminal signals the whole foreground group, CMD included: do not deliver it twice. */
    if (info && info->si_code == SI_KERNEL)
        return;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static int die(const char *msg)
{
    fprintf(stderr, "gpucap run: %s\n", msg);
    return CLI_USAGE;
}

/* Prepends `lib` to LD_PRELOAD, keeping every entry that was there (once). */
static void prepend_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old) {
        setenv("LD_PRELOAD", lib, 1);
        return;
    }
    size_t n = strlen(lib) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v)
        return;
    snprintf(v, n, "%s:%s", lib, old);
    setenv("LD_PRELOAD", v, 1);
    free(v);
}

struct run_report {
    const struct gpc_ledger *l;
    bool json, audit;
    const char *dir, *dest;
};

static int write_run_report(int fd, void *arg)
{
    const struct run_report *r = arg;
    return cli_report_write(fd, r->l, r->json, r->audit, r->dir, r->dest);
}

static void write_report(const char *ledger, const char *dir, const char *dest, bool json, bool audit)
{
    char why[256];
    const struct gpc_ledger *l = NULL;
    if (access(ledger, F_OK) == 0) {
        l = cli_map_ledger(ledger, why, sizeof why);
        if (!l)
            fprintf(stderr, "gpucap run: the run's ledger %s %s; no figures\n", ledger, why);
    }
    /* No ledger: CMD made no CUDA allocation under the library (or did not load it). */
    struct run_report r = {l, json, audit, dir, dest};
    if (strcmp(dest, "-") == 0)
        write_run_report(STDERR_FILENO, &r);
    else if (gpc_report_file(dest, write_run_report, &r, why, sizeof why) != 0)
        fprintf(stderr, "gpucap run: the report cannot be written to %s: %s\n", dest, why);
    if (l)
        munmap((void *)l, sizeof *l);
}

/* A flag's value becomes the variable of its settings row, which the child's library reads. */
static void set_row(enum gpc_opt o, const char *text)
{
    setenv(gpc_option_defs[o].env, text, 1);
}

static int set_size(const char *opt, const char *name, const char *text)
{
    struct gpc_size sz;
    int rc = gpc_parse_size(text, &sz);
    if (rc != 0) {
        fprintf(stderr, "gpucap run: %s: '%s' is %s; accepted: %s\n", opt, text,
                rc == -ERANGE ? "out of range" : "not a size", gpc_size_forms);
        return -1;
    }
    setenv(name, text, 1);
    return 0;
}

static int set_count(const char *flag, enum gpc_opt o, const char *text)
{
    struct gpc_value v;
    if (gpc_option_parse(o, text, &v) != 0) {
        fprintf(stderr, "gpucap run: %s: '%s' is not a whole number >= 0\n", flag, text);
        return -1;
    }
    set_row(o, text);
    return 0;
}

int cmd_run(int argc, char **argv)
{
    enum { OPT_FAIL_AFTER = 1000, OPT_FAIL_RATE, OPT_SEED, OPT_LIB };
    static const struct option longopts[] = {
        {"memory", required_argument, NULL, 'm'},
        {"device-memory", required_argument, NULL, 'd'},
        {"audit", no_argument, NULL, 'a'},
        {"report", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"fail-after", required_argument, NULL, OPT_FAIL_AFTER},
        {"fail-rate", required_argument, NULL, OPT_FAIL_RATE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"backtrace", no_argument, NULL, 'b'},
        {"lib", required_argument, NULL, OPT_LIB},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *lib_opt = NULL, *report = NULL;
    bool json = false;
    /* '+': stop at the first non-option, CMD's own options are CMD's. */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+m:d:ar:jbh", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (set_size("--memory", gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env, optarg) != 0)
                return CLI_USAGE;
            break;
        case 'd': {
            char *eq = strchr(optarg, '=');
            char *end;
            long dev = eq ? strtol(optarg, &end, 10) : -1;
            if (!eq || end != eq || dev < 0 || dev >= GPC_MAX_DEVICES)
                return die("--device-memory takes DEV=SIZE, DEV a device ordinal (0, 1, ...)");
            char name[64];
            snprintf(name, sizeof name, "%s_%ld", gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env, dev);
            if (set_size("--device-memory", name, eq + 1) != 0)
                return CLI_USAGE;
            break;
        }
        case 'a':
            set_row(GPC_OPT_MODE, "audit");
            break;
        case 'r':
            report = optarg;
            break;
        case 'j':
            json = true;
            break;
        case OPT_FAIL_AFTER:
            if (set_count("--fail-after", GPC_OPT_FAIL_AFTER, optarg) != 0)
                return CLI_USAGE;
            break;
        case OPT_FAIL_RATE: {
            uint64_t r;
            if (gpc_fault_parse_rate(optarg, &r) != 0)
                return die("--fail-rate takes a share from 0 to 1 (0.05) or a percentage (5%)");
            set_row(GPC_OPT_FAIL_RATE, optarg);
            break;
        }
        case OPT_SEED:
            if (set_count("--seed", GPC_OPT_FAIL_SEED, optarg) != 0)
                return CLI_USAGE;
            break;
        case 'b':
            set_row(GPC_OPT_BACKTRACE, "1");
            break;
        case OPT_LIB:
            lib_opt = optarg;
            break;
        case 'h':
            fputs(run_usage, stdout);
            cli_print_settings_note(stdout);
            return 0;
        default:
            fputs(run_usage, stderr);
            return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return die("no command to run (gpucap run [options] -- CMD ARGS...)");
    char **cmd = argv + optind;

    char lib[PATH_MAX], tried[2048];
    if (cli_find_lib(lib_opt, lib, sizeof lib, tried, sizeof tried) != 0) {
        fprintf(stderr, "gpucap run: libgpucap.so not found (looked at %s); pass --lib PATH or set GPUCAP_LIB\n",
                tried);
        return 1;
    }

    /* The settings as CMD will read them: a mode or report format from the environment or the ini
     * file counts as given here (for the report), and GPUCAP_REPORT is taken as --report. */
    extern char **environ;
    struct gpc_settings s;
    cli_settings_quiet(&s, environ);
    bool audit = gpc_opt_enum(&s, GPC_OPT_MODE) == GPC_MODE_AUDIT;
    json = json || gpc_opt_enum(&s, GPC_OPT_REPORT_FORMAT) == GPC_REPORT_JSON;
    if (!report && s.opt[GPC_OPT_REPORT].src == GPC_SRC_ENV)
        report = gpc_opt_string(&s, GPC_OPT_REPORT);
    if (!gpc_settings_any_limit(&s))
        set_row(GPC_OPT_MEMORY_LIMIT, "100%");

    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], ledger[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/gpucap-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "gpucap run: cannot create a directory for the run's ledger in %s (%s)\n",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return 1;
    }
    snprintf(ledger, sizeof ledger, "%s/ledger", dir);
    set_row(GPC_OPT_LEDGER, ledger);
    /* With a report, the processes of the run write their usage timelines into the run's directory. */
    if (report && *report)
        set_row(GPC_OPT_TIMELINE, dir);
    /* The one report of the run is ours; the processes of the run write none. */
    unsetenv(gpc_option_defs[GPC_OPT_REPORT].env);
    unsetenv(gpc_option_defs[GPC_OPT_REPORT_FORMAT].env);
    prepend_preload(lib);

    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaction(forwarded[i], &sa, NULL);

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpucap run: fork: %s\n", strerror(errno));
        rmdir(dir);
        return 1;
    }
    if (pid == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (size_t i = 0; i < N_FORWARDED; i++)
            sigaction(forwarded[i], &dfl, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(cmd[0], cmd);
        fprintf(stderr, "gpucap run: %s: %s\n", cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    child_pid = 0;

    if (report && *report)
        write_report(ledger, dir, report, json, audit);
    cli_timeline_clean(dir);
    unlink(ledger);
    rmdir(dir);

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        /* Die of the same signal, without a core file of our own. */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        fflush(NULL);
        raise(sig);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
