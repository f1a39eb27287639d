/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.c: `gpucap run [options] -- CMD ARGS...`.
 *
 * Runs CMD with libgpucap.so prepended to LD_PRELOAD and a fresh private ledger (a file in a new
 * mkdtemp directory, named by GPUCAP_LEDGER) that CMD and all its children share, so the budget
 * and the figures are those of this run alone. Options become GPUCAP_* settings of the child:
 * the child's library reads them through the same table as always; a device without a budget is
 * measured under 100% of itself. Signals sent to gpucap are
 * passed on to CMD (not those the terminal sends to the whole foreground group: CMD has them
 * already). When CMD is gone, the run's report is written from the ledger (with the command, how it
 * ended, its wall time) to a file, to stdout (`--report -`: CMD's own stdout then goes to stderr, so
 * that stdout holds the report alone) or to a descriptor (`--report-fd N`; /dev/stdout, /dev/stderr
 * and /dev/fd/N as a FILE are these descriptors; one open on stdout's file sends CMD's stdout to
 * stderr as `-` does), the ledger removed, and gpucap exits with CMD's status, or dies of CMD's
 * signal so that the shell sees the same thing. A report file that could not be written is refused
 * before CMD runs. gpucap's own failures exit 125, a CMD that cannot be executed 126, one not found
 * 127 (env(1)). With --memory-request the run is burstable: its directory is its registration with the
 * user's arbiter (runqos.c), and its limit and request are in its own settings file (GPUCAP_CONFIG),
 * where the arbiter writes its grant.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { F_MEMORY, F_MEMORY_REQUEST, F_DEVICE_MEMORY, F_AUDIT, F_REPORT, F_REPORT_FD, F_JSON, F_FAIL_AFTER, F_FAIL_RATE, F_SEED,
       F_BACKTRACE, F_LIB, F_COUNT };

static const struct tool_flag run_flags[F_COUNT] = {
    [F_MEMORY] = {"memory", 'm', "SIZE", "GPUCAP_MEMORY_LIMIT", NULL, "budget for every device"},
    [F_MEMORY_REQUEST] = {"memory-request", 0, "SIZE", "GPUCAP_MEMORY_REQUEST", NULL,
                          "burstable: SIZE of every device guaranteed, up to --memory when the user's arbiter\n"
                          "(gpucap-agent --local) lends it; the run registers with it (0: best effort)"},
    [F_DEVICE_MEMORY] = {"device-memory", 'd', "DEV=SIZE", "GPUCAP_MEMORY_LIMIT_<DEV>", NULL,
                         "budget for one device, DEV its ordinal (0, 1, ...) or UUID (GPU-...); repeatable"},
    [F_AUDIT] = {"audit", 'a', NULL, "GPUCAP_MODE=audit", NULL,
                 "deny nothing; count what the budget would deny; CMD sees the whole card, so the\n"
                 "report's peak is the budget the job needs (see README: frameworks that size themselves)"},
    [F_REPORT] = {"report", 'r', "FILE", "GPUCAP_REPORT", NULL,
                  "write the run's report to FILE when CMD is gone; FILE.svg: a picture of the usage;\n"
                  "'-': stdout, and CMD's own stdout goes to stderr (stdout holds the report alone)"},
    [F_REPORT_FD] = {"report-fd", 0, "N", NULL, NULL,
                     "write the report to open descriptor N (3>report.json); one on stdout's file: as '-'"},
    [F_JSON] = {"json", 'j', NULL, "GPUCAP_REPORT_FORMAT=json", NULL, "the report as JSON"},
    [F_FAIL_AFTER] = {"fail-after", 0, "N", "GPUCAP_FAIL_AFTER", NULL, "allocations after the N-th of each process fail"},
    [F_FAIL_RATE] = {"fail-rate", 0, "P", "GPUCAP_FAIL_RATE", NULL, "a share P (0..1, or 5%) of allocations fail"},
    [F_SEED] = {"seed", 0, "S", "GPUCAP_FAIL_SEED", NULL, "which ones: the same seed fails the same allocations"},
    [F_BACKTRACE] = {"backtrace", 'b', NULL, "GPUCAP_BACKTRACE=1", NULL, "log the call stack of each denied allocation"},
    [F_LIB] = {"lib", 0, "FILE", "GPUCAP_LIB", NULL, "the libgpucap.so to preload (default: found beside gpucap)"},
};

const struct tool_cmd cli_run_cmd = {
    CLI_COMMAND("run", run_flags, "[OPTION...] [--] CMD [ARG...]", "run a command under a GPU memory budget"),
    .about = "Runs CMD with libgpucap.so preloaded and a ledger private to this run and its children.",
    .tail = "The run is measured under a budget of 100% of each device that has none from an option or\n"
            "the environment. GPUCAP_REPORT in the environment is taken as --report.\n"
            "The report: per device budget, peak, use, allocations, frees, denials, refusals by the driver,\n"
            "context reserves, largest request; the command, its exit status or signal, wall time, version.\n"
            "Exit status: CMD's (or CMD's signal); 125 when gpucap fails or is used wrongly, 126 when CMD\n"
            "cannot be executed, 127 when CMD is not found.\n"
            "\n"
            "example: gpucap run --audit --json --report - -- python train.py | jq .devices\n"
            "\n" CLI_SETTINGS_NOTE,
    .stop_at_operand = true,
    .usage_exit = TOOL_EXIT_OWN,
    .max_operands = TOOL_ANY,
    .no_operand = "no command to run",
};

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
    int ledger_fd;
    bool json, audit;
    const char *dir, *dest;
    const struct gpc_report_run *run;
};

static int write_run_report(int fd, void *arg)
{
    const struct run_report *r = arg;
    return cli_report_write(fd, r->l, r->ledger_fd, r->json, r->audit, r->dir, r->dest, r->run);
}

/* The report of the run to `dest` (a file, "-" for stdout) or, with dest NULL, to descriptor `fd`.
 * 0, or -1 after saying why. */
static int write_report(const char *ledger, const char *dir, const char *dest, int fd, bool json, bool audit,
                        struct gpc_report_run *run)
{
    char why[256];
    struct gpc_ledger *l = NULL;
    int ledger_fd = -1;
    if (access(ledger, F_OK) == 0) {
        l = cli_read_ledger(ledger, why, sizeof why, NULL, &ledger_fd);
        if (!l)
            tool_error("gpucap run", "the run's ledger %s %s; no figures", ledger, why);
    }
    /* The cards by the index and name NVML gives them. */
    struct gpc_report_device named[GPC_LEDGER_DEVICES];
    run->ndev = 0;
    for (int i = 0; l && i < GPC_LEDGER_DEVICES; i++) {
        if (atomic_load(&l->dev[i].state) != 1)
            continue;
        struct gpc_report_device *d = &named[run->ndev++];
        char uuid[GPC_UUID_TEXT];
        memcpy(d->uuid, l->dev[i].uuid, sizeof d->uuid);
        gpc_uuid_format(d->uuid, uuid);
        cli_device_name(uuid, &d->index, d->name, sizeof d->name);
    }
    run->dev = named;
    /* No ledger: CMD made no CUDA allocation under the library (or did not load it). */
    struct run_report r = {l, ledger_fd, json, audit, dir, dest, run};
    int rc = 0;
    if (!dest || strcmp(dest, "-") == 0) {
        fflush(stdout);
        if ((rc = write_run_report(dest ? STDOUT_FILENO : fd, &r)) != 0)
            tool_error("gpucap run", "the report cannot be written to %s: %s", dest ? "stdout" : "its descriptor",
                       strerror(-rc));
    } else if ((rc = gpc_report_file(dest, write_run_report, &r, why, sizeof why)) != 0) {
        tool_error("gpucap run", "the report cannot be written to %s: %s", dest, why);
    }
    free(l);
    if (ledger_fd >= 0)
        close(ledger_fd);
    return rc ? -1 : 0;
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
    if (rc != 0)
        return tool_usage_error(&cli_run_cmd, "%s: '%s' is %s; accepted: %s", opt, text,
                                rc == -ERANGE ? "out of range" : "not a size", gpc_size_forms);
    setenv(name, text, 1);
    return 0;
}

static int set_count(const char *flag, enum gpc_opt o, const char *text)
{
    struct gpc_value v;
    if (gpc_option_parse(o, text, &v) != 0)
        return tool_usage_error(&cli_run_cmd, "%s: '%s' is not a whole number >= 0", flag, text);
    set_row(o, text);
    return 0;
}

struct run_opts {
    const char *given[F_COUNT]; /* the flags kept as given: --report, --json ("1"), --lib */
    int report_fd;              /* -1: none */
};

static int on_flag(void *arg, int flag, const char *v)
{
    struct run_opts *o = arg;
    switch (flag) {
    case F_MEMORY:
        o->given[F_MEMORY] = v;
        return set_size("--memory", gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env, v);
    case F_MEMORY_REQUEST: {
        struct gpc_size sz;
        int rc = gpc_parse_size(v, &sz);
        if (rc != 0)
            return tool_usage_error(&cli_run_cmd, "--memory-request: '%s' is %s; accepted: %s", v,
                                    rc == -ERANGE ? "out of range" : "not a size", gpc_size_forms);
        o->given[F_MEMORY_REQUEST] = v;
        return 0;
    }
    case F_DEVICE_MEMORY: {
        /* DEV=SIZE: DEV an ordinal or a UUID (or its start), the names the settings take. */
        const char *eq = strchr(v, '=');
        char dev[GPC_UUID_TEXT] = "", name[96];
        if (eq && (size_t)(eq - v) < sizeof dev)
            snprintf(dev, sizeof dev, "%.*s", (int)(eq - v), v);
        char *end;
        long ordinal = dev[0] ? strtol(dev, &end, 10) : -1;
        bool is_ordinal = dev[0] && !*end && ordinal >= 0 && ordinal < GPC_MAX_DEVICES;
        if (!is_ordinal && !gpc_settings_uuid_text(dev))
            return tool_usage_error(&cli_run_cmd, "--device-memory takes DEV=SIZE, DEV a device ordinal (0, 1, "
                                    "...) or UUID (GPU-...), not '%s'", v);
        snprintf(name, sizeof name, "%s_%s", gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env, dev);
        /* A UUID no card here has would be a budget for nothing: said (NVML's list, when there is one). */
        if (!is_ordinal && cli_devices_matching(dev) == 0)
            tool_error("gpucap run", "warning: --device-memory %s: no card here has a UUID that starts so (`gpucap "
                       "doctor` lists the cards); the budget applies to none", dev);
        return set_size("--device-memory", name, eq + 1);
    }
    case F_AUDIT:
        set_row(GPC_OPT_MODE, "audit");
        return 0;
    case F_REPORT_FD: {
        char *end;
        errno = 0;
        long fd = strtol(v, &end, 10);
        if (errno || end == v || *end || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
            return tool_usage_error(&cli_run_cmd, "--report-fd: '%s' is not an open file descriptor", v);
        o->report_fd = (int)fd;
        return 0;
    }
    case F_FAIL_AFTER:
        return set_count("--fail-after", GPC_OPT_FAIL_AFTER, v);
    case F_FAIL_RATE: {
        uint64_t r;
        if (gpc_fault_parse_rate(v, &r) != 0)
            return tool_usage_error(&cli_run_cmd, "--fail-rate takes a share from 0 to 1 (0.05) or a percentage "
                                    "(5%%), not '%s'", v);
        set_row(GPC_OPT_FAIL_RATE, v);
        return 0;
    }
    case F_SEED:
        return set_count("--seed", GPC_OPT_FAIL_SEED, v);
    case F_BACKTRACE:
        set_row(GPC_OPT_BACKTRACE, "1");
        return 0;
    default: /* --report, --json, --lib: read by cmd_run */
        o->given[flag] = v ? v : "1";
        return 0;
    }
}

/* The descriptor a report FILE names (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), or -1:
 * such a name is a descriptor of this process, not a file to replace. */
static int named_fd(const char *path)
{
    if (strcmp(path, "/dev/stdout") == 0)
        return STDOUT_FILENO;
    if (strcmp(path, "/dev/stderr") == 0)
        return STDERR_FILENO;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0 ? path + 8
                    : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14 : NULL;
    if (!n || *n < '0' || *n > '9')
        return -1;
    char *end;
    long fd = strtol(n, &end, 10);
    return *end || fd > INT_MAX ? -1 : (int)fd;
}

/* Is descriptor `fd` open on the same file as stdout (a report there would mix with CMD's output)? */
static bool same_as_stdout(int fd)
{
    struct stat a, b;
    return fd == STDOUT_FILENO ||
           (fstat(fd, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

/*
 * Does a budget of 100% for every device (GPUCAP_MEMORY_LIMIT in CMD's environment) measure the
 * devices that have no budget, and change none that has one? Yes when nothing sets a budget for
 * every device and every per-device budget is the environment's (which outranks it); not under the
 * lock (the environment may only tighten there).
 */
static bool measure_all(const struct gpc_settings *s)
{
    if (s->locked || s->config_bad || s->env_bad || s->opt[GPC_OPT_MEMORY_LIMIT].set)
        return false;
    for (int i = 0; i < GPC_MAX_DEVICES; i++)
        if (s->dev_limit[i].set && s->dev_limit[i].src != GPC_SRC_ENV)
            return false;
    for (int i = 0; i < s->n_uuid; i++)
        if (s->uuid_limit[i].v.set && s->uuid_limit[i].v.src != GPC_SRC_ENV)
            return false;
    return true;
}

static const char *signal_name(int sig)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    static char buf[32];
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) {
        snprintf(buf, sizeof buf, "SIG%s", abbrev);
        return buf;
    }
#endif
    return strsignal(sig);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = {.report_fd = -1};
    int first, rc = tool_begin(&cli_run_cmd, argc, argv, on_flag, &o, &first);
    if (rc >= 0)
        return rc;
    const char *report = o.given[F_REPORT];
    if (report && o.report_fd >= 0) {
        tool_usage_error(&cli_run_cmd, "--report and --report-fd: choose one");
        return TOOL_EXIT_OWN;
    }
    char **cmd = argv + first;
    /* --memory-request: a burstable run, registered with the user's arbiter; its limit (--memory, else
     * the environment's, else the whole card) and request go into its own settings file. */
    const char *request = o.given[F_MEMORY_REQUEST];
    char limit[256] = "100%";
    if (request) {
        const char *l = o.given[F_MEMORY] ? o.given[F_MEMORY] : getenv(gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env);
        struct gpc_size rs, ls;
        if (l && *l) {
            if (gpc_parse_size(l, &ls) != 0) {
                tool_usage_error(&cli_run_cmd, "the limit '%s' is not a size; accepted: %s", l, gpc_size_forms);
                return TOOL_EXIT_OWN;
            }
            snprintf(limit, sizeof limit, "%s", l);
        } else {
            gpc_parse_size(limit, &ls);
        }
        gpc_parse_size(request, &rs);
        if (rs.is_percent == ls.is_percent && (rs.is_percent ? rs.ppm > ls.ppm : rs.bytes > ls.bytes)) {
            tool_usage_error(&cli_run_cmd, "--memory-request %s is above the limit %s", request, limit);
            return TOOL_EXIT_OWN;
        }
        unsetenv(gpc_option_defs[GPC_OPT_MEMORY_LIMIT].env);
        unsetenv("GPUCAP_MEMORY_REQUEST");
    }

    char lib[PATH_MAX], tried[2048];
    if (cli_find_lib(o.given[F_LIB], lib, sizeof lib, tried, sizeof tried) != 0) {
        tool_error("gpucap run", "libgpucap.so not found (looked at %s); pass --lib FILE or set GPUCAP_LIB", tried);
        return TOOL_EXIT_OWN;
    }

    /* The settings as CMD will read them: a mode or report format from the environment or the ini
     * file counts as given here (for the report), and GPUCAP_REPORT is taken as --report. */
    extern char **environ;
    struct gpc_settings s, platform;
    cli_settings_quiet(&s, &platform, environ);
    if (request && s.locked) {
        tool_error("gpucap run", "--memory-request: the platform's settings (%s) are locked: a run cannot have a "
                   "settings file of its own here", s.platform ? s.platform->config_path : "/etc/gpucap/gpucap.ini");
        return TOOL_EXIT_OWN;
    }
    bool audit = gpc_opt_enum(&s, GPC_OPT_MODE) == GPC_MODE_AUDIT;
    bool json = o.given[F_JSON] != NULL || gpc_opt_enum(&s, GPC_OPT_REPORT_FORMAT) == GPC_REPORT_JSON;
    if (!report && o.report_fd < 0 && s.opt[GPC_OPT_REPORT].src == GPC_SRC_ENV)
        report = gpc_opt_string(&s, GPC_OPT_REPORT);
    if (report && !*report)
        report = NULL;
    /* /dev/stdout and its kin name a descriptor: the report is written there, as with --report-fd. */
    if (report && named_fd(report) >= 0) {
        int fd = named_fd(report);
        if (fcntl(fd, F_GETFD) < 0) {
            tool_error("gpucap run", "--report %s: descriptor %d is not open", report, fd);
            return TOOL_EXIT_OWN;
        }
        o.report_fd = fd;
        report = NULL;
    }
    /* A report file that cannot be written is refused now, not after CMD's work. */
    char why[256];
    if (report && strcmp(report, "-") != 0 && gpc_report_file_check(report, why, sizeof why) != 0) {
        tool_error("gpucap run", "the report cannot be written to %s: %s", report, why);
        return TOOL_EXIT_OWN;
    }
    /* stdout holds the report alone: CMD's own stdout goes to stderr. */
    bool report_on_stdout = (report && strcmp(report, "-") == 0) || (o.report_fd >= 0 && same_as_stdout(o.report_fd));
    bool want_report = report || o.report_fd >= 0;
    /* Every device is measured: one without a budget is under 100% of itself (a budget for one
     * device, -d 1=8GiB, leaves the others in the report). */
    if (!request && measure_all(&s))
        set_row(GPC_OPT_MEMORY_LIMIT, "100%");
    /* CMD does not get the report's descriptor. */
    if (o.report_fd > 2)
        fcntl(o.report_fd, F_SETFD, FD_CLOEXEC);

    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], ledger[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/gpucap-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (request) {
        if (cli_qos_register(request, limit, dir, sizeof dir, why, sizeof why) != 0) {
            tool_error("gpucap run", "--memory-request: %s", why);
            return TOOL_EXIT_OWN;
        }
    } else if (!mkdtemp(dir)) {
        tool_error("gpucap run", "cannot create a directory for the run's ledger in %s (%s)",
                   tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return TOOL_EXIT_OWN;
    }
    snprintf(ledger, sizeof ledger, "%s/ledger", dir);
    set_row(GPC_OPT_LEDGER, ledger);
    /* With a report, the processes of the run write their usage timelines into the run's directory. */
    if (want_report)
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
    uint64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        tool_error("gpucap run", "fork: %s", strerror(errno));
        if (request)
            cli_qos_unregister(dir);
        rmdir(dir);
        return TOOL_EXIT_OWN;
    }
    if (pid == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (size_t i = 0; i < N_FORWARDED; i++)
            sigaction(forwarded[i], &dfl, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        /* --report - (or a descriptor on stdout's file): stdout is the report's; CMD writes its own
         * output to stderr. */
        if (report_on_stdout)
            dup2(STDERR_FILENO, STDOUT_FILENO);
        execvp(cmd[0], cmd);
        int err = errno;
        tool_error("gpucap run", "%s: %s", cmd[0], strerror(err));
        _exit(err == ENOENT ? TOOL_EXIT_NOT_FOUND : TOOL_EXIT_CANNOT_EXEC);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    child_pid = 0;
    /* Nothing left to forward to: a signal now (SIGTERM while the report is written) ends gpucap
     * as it would end any program. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaction(forwarded[i], &dfl, NULL);
    struct gpc_report_run run = {
        .argv = cmd,
        .argc = argc - first,
        .status = WIFEXITED(status) ? WEXITSTATUS(status) : 0,
        .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0,
        .wall_ns = now_ns() - t0,
    };
    if (run.signal)
        run.signal_name = signal_name(run.signal);

    bool report_failed = want_report && write_report(ledger, dir, report, o.report_fd, json, audit, &run) != 0;
    cli_timeline_clean(dir);
    unlink(ledger);
    if (request)
        cli_qos_unregister(dir);
    rmdir(dir);

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        /* Die of the same signal, without a core file of our own. */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        sigaction(sig, &dfl, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        fflush(NULL);
        raise(sig);
        return 128 + sig;
    }
    /* CMD's status wins; a report that could not be written is gpucap's failure when CMD succeeded. */
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : TOOL_EXIT_OWN;
    return rc == 0 && report_failed ? TOOL_EXIT_OWN : rc;
}
