/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_qos.c CASE: burstable memory in the library (issue 35): the budget in force, min(limit,
 * max(request, grant)), from the settings, live, and through the loan channel to a test arbiter
 * (tests/lib/test_arbiter.c), checked against what the program is told (cuMemGetInfo), what is
 * admitted, the ledger's figures and the fake driver's record of the card. A 1 GiB fake card.
 *   formula   rows of settings, one child process each: sizes, percentages, per device (ordinal,
 *             UUID, environment), a grant above the limit (clamped), below the request, without a
 *             request (ignored: the budget is the limit), a request above the limit (refused: best
 *             effort), a malformed one, no limit (the card): the total reported and the admission
 *             boundary are the figure in force, and the ledger's qos_* fields say R, L, G
 *   drvlimit  under a driver limit of 512 MiB (FAKECUDA_DRIVER_LIMIT): a percentage request is of
 *             the driver's figure, and no grant passes the driver's limit
 *   locked    under the platform's lock (TEST_PLATFORM): the environment may lower the request,
 *             never raise it (for all devices, per ordinal, per UUID), and sets no grant
 *   envgrant  GPUCAP_MEMORY_GRANT (and _0) in the environment are ignored, and do not hold off a
 *             live lowering of the file's grant
 *   live      the grant raised and lowered in the settings file under a running process, applied
 *             exactly (the fake's record never above the figure in force for what is admitted after
 *             the change), recorded as the arbiter's change (limit_by, the change record)
 *   loan      a denial above the request asks the test arbiter (`loan <uuid> <bytes> <pid>`), which
 *             writes a grant: the same call is admitted; loan_asks counts the datagram
 *   loanthreads six threads denied at once each ask: what is admitted never passes the grant written
 *   ledgerdir the arbiter at <ledger directory>/arbiter.sock, found without a setting
 *   noarbiter no socket: the denial stands at once, no datagram, no grant
 *   forged    an arbiter answering `granted 1 TiB` without writing the file: nothing changes
 *   slow      an arbiter that answers after 2 s: the denied call returns within the bounded wait,
 *             and the grant it writes later is applied at the next allocation
 *   need      a guaranteed process's allocation within its budget is refused by the driver (a
 *             borrower fills the card): `need` goes to the arbiter, which ends the borrower; the call
 *             made before succeeds, within reclaim_grace + 1 s
 *   needpitch the same for cuMemAllocPitch_v2
 *   needgrace the arbiter never frees the card: the refusal stands after reclaim_grace (1 s) + 1 s,
 *             not before; beyond the request nothing waits; an arbiter that refuses (nothing on loan)
 *             and no arbiter: soon
 */
#include "common.h"
#include "ledger_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static char settings[1024], base_ledger[512];
static bool locked;
static unsigned long long generation;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The settings file with `lines` under [gpucap] (device sections after them as written), in place
 * (never shorter), its generation line bumped once the text is complete as gpucap-agent does. */
static void write_settings(const char *lines)
{
    char text[4096], line[64];
    snprintf(line, sizeof line, "; generation = %017llx\n", generation);
    snprintf(text, sizeof text, "%s[gpucap]\ncontext_reserve = 0\n%s%s%s\n%s\n", line,
             locked ? "lock = true\nledger = " : "", locked ? getenv("GPUCAP_LEDGER") : "", locked ? "\n" : "", lines);
    int fd = open(settings, O_WRONLY | O_CREAT, 0644);
    REQUIRE(fd >= 0, "open %s", settings);
    write_in_place(fd, text);
    snprintf(line, sizeof line, "; generation = %017llx\n", ++generation);
    REQUIRE(pwrite(fd, line, strlen(line), 0) == (ssize_t)strlen(line), "pwrite generation");
    close(fd);
}

/* The admission boundary is `in_force` with `held` bytes held: `in_force - held` more is admitted,
 * 1 MiB beyond it is not (everything admitted here is freed again). */
static void check_boundary(uint64_t in_force, uint64_t held, const char *what)
{
    CUdeviceptr p = 0, q = 0;
    if (in_force > held) {
        CHECK(cuMemAlloc_v2(&p, in_force - held) == CUDA_SUCCESS, "%s: %llu bytes up to the budget in force denied",
              what, (unsigned long long)(in_force - held));
    }
    CHECK(cuMemAlloc_v2(&q, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "%s: 1 MiB past the budget in force %llu admitted", what,
          (unsigned long long)in_force);
    if (q)
        cuMemFree_v2(q);
    if (p)
        cuMemFree_v2(p);
}

/* The path of the helper programs beside this one. */
static void beside(char *out, size_t len, const char *name)
{
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0, "readlink");
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(out, len, "%s/%s", self, name);
}

/* ---- formula ---- */

struct row {
    const char *lines;   /* the settings file's */
    const char *env;     /* NAME=VALUE or NULL */
    uint64_t in_force;
    bool burstable;
    uint64_t request, limit, grant; /* the ledger's qos_* when burstable */
};

static void run_row(const struct row *r, int i)
{
    char ledger[600], ini[700];
    snprintf(ledger, sizeof ledger, "%s.%d", base_ledger, i);
    snprintf(ini, sizeof ini, "%s.ini", ledger);
    unlink(ledger);
    setenv("GPUCAP_LEDGER", ledger, 1);
    if (!locked) {
        snprintf(settings, sizeof settings, "%s", ini);
        unlink(settings);
        setenv("GPUCAP_CONFIG", settings, 1);
    }
    write_settings(r->lines);
    if (r->env) {
        char name[128];
        const char *eq = strchr(r->env, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - r->env), r->env);
        setenv(name, eq + 1, 1);
    }
    if (locked) {
        unlink(ledger);
        REQUIRE(gpc_ledger_create(ledger, 0666) == 0, "the platform's ledger");
    }
    make_context(0);
    char what[600];
    snprintf(what, sizeof what, "row %d [%s]%s%s", i, r->lines, r->env ? " with " : "", r->env ? r->env : "");
    uint64_t t = total_now();
    CHECK(t == r->in_force, "%s: total %llu, not the budget in force %llu", what, (unsigned long long)t,
          (unsigned long long)r->in_force);
    check_boundary(r->in_force, 0, what);
    struct gpc_ledger *l = map_ledger();
    const struct gpc_ledger_dev *d = &l->dev[0];
    bool b = atomic_load(&d->qos_flags) & GPC_QOS_BURSTABLE;
    CHECK(b == r->burstable, "%s: burstable %d", what, b);
    if (r->burstable) {
        CHECK(atomic_load(&d->qos_request) == r->request && atomic_load(&d->qos_limit) == r->limit &&
                  atomic_load(&d->qos_grant) == r->grant,
              "%s: the ledger says request %llu limit %llu grant %llu", what,
              (unsigned long long)atomic_load(&d->qos_request), (unsigned long long)atomic_load(&d->qos_limit),
              (unsigned long long)atomic_load(&d->qos_grant));
    }
}

static void run_rows(const struct row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        fflush(NULL);
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            run_row(&rows[i], i);
            _exit(test_result());
        }
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "row %d failed (status %d)", i, status);
    }
}

static void case_formula(void)
{
    static const struct row rows[] = {
        {"memory_limit = 512MiB\nmemory_request = 128MiB", NULL, 128 * MiB, true, 128 * MiB, 512 * MiB, 0},
        {"memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 300MiB", NULL, 300 * MiB, true, 128 * MiB,
         512 * MiB, 300 * MiB},
        /* A grant above the limit: clamped. */
        {"memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 2GiB", NULL, 512 * MiB, true, 128 * MiB,
         512 * MiB, 512 * MiB},
        /* Below the request: the request. */
        {"memory_limit = 512MiB\nmemory_request = 256MiB\nmemory_grant = 64MiB", NULL, 256 * MiB, true, 256 * MiB,
         512 * MiB, 64 * MiB},
        /* No request: not burstable, the budget is the limit whatever the grant says. */
        {"memory_limit = 512MiB\nmemory_grant = 100MiB", NULL, 512 * MiB, false, 0, 0, 0},
        /* Percentages of the card. */
        {"memory_limit = 50%\nmemory_request = 25%\nmemory_grant = 37.5%", NULL, 384 * MiB, true, 256 * MiB,
         512 * MiB, 384 * MiB},
        /* Request 0: best effort, the grant alone. */
        {"memory_limit = 512MiB\nmemory_request = 0\nmemory_grant = 200MiB", NULL, 200 * MiB, true, 0, 512 * MiB,
         200 * MiB},
        /* A request above the limit: refused, best effort. */
        {"memory_limit = 512MiB\nmemory_request = 600MiB\nmemory_grant = 100MiB", NULL, 100 * MiB, true, 0,
         512 * MiB, 100 * MiB},
        /* Above the platform's maximum (the limit it bounds). */
        {"memory_limit = 512MiB\nmemory_limit_max = 256MiB\nmemory_request = 300MiB\nmemory_grant = 64MiB", NULL,
         64 * MiB, true, 0, 256 * MiB, 64 * MiB},
        /* Malformed: best effort. */
        {"memory_limit = 512MiB\nmemory_request = 12 parsecs\nmemory_grant = 64MiB", NULL, 64 * MiB, true, 0,
         512 * MiB, 64 * MiB},
        /* No limit: the card is the limit. */
        {"memory_request = 256MiB\nmemory_grant = 2GiB", NULL, 1 * GiB, true, 256 * MiB, 1 * GiB, 1 * GiB},
        /* Per device: ordinal, UUID (a prefix), the environment's per ordinal and for all. */
        {"memory_limit = 512MiB\n[device.0]\nmemory_request = 200MiB", NULL, 200 * MiB, true, 200 * MiB, 512 * MiB, 0},
        {"memory_limit = 512MiB\nmemory_request = 64MiB\n[device.GPU-fa4ec0da]\nmemory_request = 300MiB\n"
         "memory_grant = 320MiB", NULL, 320 * MiB, true, 300 * MiB, 512 * MiB, 320 * MiB},
        {"memory_limit = 512MiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST_0=100MiB", 100 * MiB, true,
         100 * MiB, 512 * MiB, 0},
        {"memory_limit = 512MiB", "GPUCAP_MEMORY_REQUEST=96MiB", 96 * MiB, true, 96 * MiB, 512 * MiB, 0},
    };
    run_rows(rows, (int)(sizeof rows / sizeof rows[0]));
}

static void case_drvlimit(void)
{
    static const struct row rows[] = {
        {"memory_limit = 900MiB\nmemory_request = 50%", NULL, 256 * MiB, true, 256 * MiB, 512 * MiB, 0},
        {"memory_limit = 900MiB\nmemory_request = 50%\nmemory_grant = 1GiB", NULL, 512 * MiB, true, 256 * MiB,
         512 * MiB, 512 * MiB},
        {"memory_limit = 900MiB\nmemory_request = 600MiB\nmemory_grant = 300MiB", NULL, 512 * MiB, true, 512 * MiB,
         512 * MiB, 300 * MiB},
    };
    run_rows(rows, (int)(sizeof rows / sizeof rows[0]));
}

static void case_locked(void)
{
    REQUIRE(locked, "TEST_PLATFORM");
    static const struct row rows[] = {
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST=512MiB", 256 * MiB, true, 256 * MiB,
         1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST_0=900MiB", 256 * MiB, true, 256 * MiB,
         1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST_GPU-fa4ec0da=900MiB", 256 * MiB, true,
         256 * MiB, 1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST=75%", 256 * MiB, true, 256 * MiB,
         1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_REQUEST=128MiB", 128 * MiB, true, 128 * MiB,
         1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB", "GPUCAP_MEMORY_GRANT=1GiB", 256 * MiB, true, 256 * MiB,
         1 * GiB, 0},
        {"memory_limit = 1GiB\nmemory_request = 256MiB\nmemory_grant = 300MiB", "GPUCAP_MEMORY_GRANT_0=1GiB",
         300 * MiB, true, 256 * MiB, 1 * GiB, 300 * MiB},
    };
    run_rows(rows, (int)(sizeof rows / sizeof rows[0]));
}

/* ---- envgrant, live ---- */

static void case_envgrant(void)
{
    setenv("GPUCAP_MEMORY_GRANT", "1GiB", 1);
    setenv("GPUCAP_MEMORY_GRANT_0", "900MiB", 1);
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 256MiB");
    make_context(0);
    CHECK(total_now() == 256 * MiB, "the environment's grant applied: total %llu", (unsigned long long)total_now());
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 0");
    CHECK(total_now() == 128 * MiB, "a lowering of the file's grant was held off by the environment: total %llu",
          (unsigned long long)total_now());
    check_boundary(128 * MiB, 0, "after the lowering");
}

static void case_live(void)
{
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB");
    make_context(0);
    CUdeviceptr held[16];
    int n = 0;
    CHECK(cuMemAlloc_v2(&held[n++], 128 * MiB) == CUDA_SUCCESS, "the request denied");
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "64 MiB past the request admitted without a grant");
    /* Raised: admitted at once, up to the grant exactly. */
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 384MiB");
    for (int i = 0; i < 4; i++)
        CHECK(cuMemAlloc_v2(&held[n++], 64 * MiB) == CUDA_SUCCESS, "64 MiB #%d within the raised grant denied", i);
    CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "1 MiB past the grant admitted");
    CHECK(fakecuda_outstanding(0) == 384 * MiB, "the card holds %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    struct gpc_ledger *l = map_ledger();
    struct gpc_ledger_dev *d = &l->dev[0];
    CHECK((atomic_load(&d->limit_by) & GPC_LIMIT_BY_MASK) == GPC_LIMIT_BY_ARBITER, "the raise is recorded as by %u",
          atomic_load(&d->limit_by));
    uint16_t k = atomic_load(&d->limit_changes);
    const struct gpc_limit_change *c = &d->changes[(k - 1) % GPC_LEDGER_CHANGES];
    CHECK(atomic_load(&c->from) == 128 * MiB && atomic_load(&c->to) == 384 * MiB &&
              atomic_load(&c->by) == GPC_LIMIT_BY_ARBITER,
          "the change record says %llu -> %llu by %u", (unsigned long long)atomic_load(&c->from),
          (unsigned long long)atomic_load(&c->to), atomic_load(&c->by));
    CHECK(atomic_load(&d->qos_grant) == 384 * MiB, "the ledger's grant %llu", (unsigned long long)atomic_load(&d->qos_grant));
    CHECK(atomic_load(&d->loaned_peak) >= 256 * MiB, "the loaned peak %llu", (unsigned long long)atomic_load(&d->loaned_peak));
    /* Lowered below what is held: nothing more until the use is below it, exactly. */
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 192MiB");
    CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted above a lowered grant");
    CHECK(total_now() == 192 * MiB, "total %llu after the lowering", (unsigned long long)total_now());
    while (n > 1)
        cuMemFree_v2(held[--n]);
    CHECK(cuMemAlloc_v2(&held[n++], 64 * MiB) == CUDA_SUCCESS, "64 MiB within the lowered grant denied");
    CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "1 MiB past the lowered grant admitted");
    CHECK(fakecuda_outstanding(0) == 192 * MiB, "the card holds %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    /* The limit moved: the platform's change, not the arbiter's. */
    write_settings("memory_limit = 160MiB\nmemory_request = 128MiB\nmemory_grant = 192MiB");
    CHECK(total_now() == 160 * MiB, "total %llu after the limit's lowering", (unsigned long long)total_now());
    CHECK((atomic_load(&d->limit_by) & GPC_LIMIT_BY_MASK) == GPC_LIMIT_BY_PLATFORM, "a limit's change recorded as by %u",
          atomic_load(&d->limit_by));
}

/* ---- the loan channel ---- */

static char sock[1024], arblog[1024];
static pid_t arbiter;

/* Starts the test arbiter in `mode` on `sock` for this test's settings file (no library under it);
 * returns once it serves. */
static void start_arbiter(const char *mode, uint64_t request, uint64_t limit, const char *lines)
{
    char exe[1100], r[32], l[32];
    beside(exe, sizeof exe, "test_arbiter");
    snprintf(r, sizeof r, "%llu", (unsigned long long)request);
    snprintf(l, sizeof l, "%llu", (unsigned long long)limit);
    snprintf(arblog, sizeof arblog, "%s.arb.log", base_ledger);
    unlink(arblog);
    setenv("TEST_ARB_LOG", arblog, 1);
    char *argv[] = {exe, sock, settings, (char *)mode, r, l, (char *)(lines ? lines : ""), NULL};
    int fd;
    arbiter = spawn_unpreloaded(argv, &fd);
    char buf[16] = "";
    REQUIRE(read(fd, buf, sizeof buf - 1) > 0 && strncmp(buf, "ready", 5) == 0, "the arbiter did not start");
    close(fd);
    generation = 0; /* its own generations from now on: the file is its */
}

static void stop_arbiter(void)
{
    if (arbiter > 0) {
        kill(arbiter, SIGTERM);
        waitpid(arbiter, NULL, 0);
        arbiter = 0;
    }
}

/* How many lines of the arbiter's log start with `verb` (and the first of them in *first). */
static int asked(const char *verb, char *first, size_t len)
{
    FILE *f = fopen(arblog, "r");
    int n = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, verb, strlen(verb)) == 0 && n++ == 0 && first)
            snprintf(first, len, "%s", line);
    if (f)
        fclose(f);
    return n;
}

static void case_loan(void)
{
    start_arbiter("grant", 128 * MiB, 512 * MiB, NULL);
    make_context(0);
    CUdeviceptr p, q;
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS, "the request denied");
    CHECK(total_now() == 128 * MiB, "in force %llu before the loan", (unsigned long long)total_now());
    CHECK(cuMemAlloc_v2(&q, 64 * MiB) == CUDA_SUCCESS, "64 MiB past the request denied with an arbiter that lends");
    char line[512] = "";
    CHECK(asked("loan ", line, sizeof line) == 1, "the arbiter was asked %d times", asked("loan ", NULL, 0));
    char want[128];
    snprintf(want, sizeof want, "loan GPU-fa4ec0da-0000-4000-8000-000000000000 %llu %d\n",
             (unsigned long long)(64 * MiB), (int)getpid());
    CHECK(strcmp(line, want) == 0, "the datagram was '%s', not '%s'", line, want);
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].loan_asks) == 1, "loan_asks %u", atomic_load(&l->dev[0].loan_asks));
    CHECK(atomic_load(&l->dev[0].qos_grant) == 192 * MiB, "the ledger's grant %llu",
          (unsigned long long)atomic_load(&l->dev[0].qos_grant));
    CHECK(total_now() == 192 * MiB, "in force %llu after the loan", (unsigned long long)total_now());
    CHECK(fakecuda_outstanding(0) == 192 * MiB, "the card holds %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    /* Up to the limit, and not past it: at the limit nothing is asked. */
    CUdeviceptr r;
    CHECK(cuMemAlloc_v2(&r, 320 * MiB) == CUDA_SUCCESS, "320 MiB more up to the limit denied");
    int before = asked("loan ", NULL, 0);
    CHECK(cuMemAlloc_v2(&r, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted past the limit");
    CHECK(asked("loan ", NULL, 0) == before, "asked for a loan at the limit");
    stop_arbiter();
}

/* Threads denied at once each ask (a reply socket each), the live re-reads serialise: what is
 * admitted never passes the grant written, and the loans admit. */
static _Atomic int loans_admitted;
static void *loan_thread(void *arg)
{
    cuCtxSetCurrent((CUcontext)arg);
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 32 * MiB) == CUDA_SUCCESS)
        atomic_fetch_add(&loans_admitted, 1);
    return NULL;
}

static void case_loanthreads(void)
{
    start_arbiter("grant", 128 * MiB, 512 * MiB, NULL);
    CUcontext ctx = make_context(0);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS, "the request denied");
    pthread_t t[6];
    for (int i = 0; i < 6; i++)
        pthread_create(&t[i], NULL, loan_thread, ctx);
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    struct gpc_ledger *l = map_ledger();
    uint64_t grant = atomic_load(&l->dev[0].qos_grant), card = fakecuda_outstanding(0);
    CHECK(atomic_load(&loans_admitted) >= 1, "no loan admitted of 6 threads");
    CHECK(card == 128 * MiB + (uint64_t)atomic_load(&loans_admitted) * 32 * MiB && card <= grant,
          "the card holds %llu MiB, the grant is %llu MiB", (unsigned long long)(card / MiB),
          (unsigned long long)(grant / MiB));
    CHECK(asked("loan ", NULL, 0) == (int)atomic_load(&l->dev[0].loan_asks), "%d datagrams, loan_asks %u",
          asked("loan ", NULL, 0), atomic_load(&l->dev[0].loan_asks));
    stop_arbiter();
}

static void case_ledgerdir(void)
{
    /* The ledger in a directory of its own, with the arbiter's socket beside it. */
    char dir[600], ledger[700];
    snprintf(dir, sizeof dir, "%s.d", base_ledger);
    mkdir(dir, 0755);
    snprintf(ledger, sizeof ledger, "%s/ledger", dir);
    unlink(ledger);
    setenv("GPUCAP_LEDGER", ledger, 1);
    snprintf(sock, sizeof sock, "%s/arbiter.sock", dir);
    unsetenv("GPUCAP_ARBITER_SOCKET");
    start_arbiter("grant", 0, 256 * MiB, NULL);
    make_context(0);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS, "a best-effort container's loan beside its ledger denied");
    CHECK(asked("loan ", NULL, 0) == 1, "asked %d times", asked("loan ", NULL, 0));
    stop_arbiter();
}

static void case_noarbiter(void)
{
    write_settings("memory_limit = 512MiB\nmemory_request = 128MiB");
    make_context(0);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS, "the request denied");
    uint64_t t0 = mono_ms();
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted past the request without an arbiter");
    uint64_t took = mono_ms() - t0;
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].loan_asks) == 0, "%u datagrams sent to no arbiter", atomic_load(&l->dev[0].loan_asks));
    CHECK(took < 40, "the denial took %llu ms: it waited for no arbiter", (unsigned long long)took);
}

static void case_forged(void)
{
    start_arbiter("forge", 128 * MiB, 512 * MiB, NULL);
    make_context(0);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS, "the request denied");
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "a forged answer admitted past the request");
    CHECK(asked("loan ", NULL, 0) == 1, "asked %d times", asked("loan ", NULL, 0));
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].qos_grant) == 0, "a forged answer moved the grant to %llu",
          (unsigned long long)atomic_load(&l->dev[0].qos_grant));
    CHECK(total_now() == 128 * MiB, "in force %llu after a forged answer", (unsigned long long)total_now());
    stop_arbiter();
}

static void case_slow(void)
{
    setenv("TEST_ARB_DELAY_MS", "1500", 1);
    start_arbiter("slow", 128 * MiB, 512 * MiB, NULL);
    make_context(0);
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS, "the request denied");
    uint64_t t0 = mono_ms();
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted before the slow arbiter granted");
    uint64_t took = mono_ms() - t0;
    CHECK(took < 1000, "the denied call waited %llu ms for a slow arbiter (the wait is bounded)", (unsigned long long)took);
    /* The grant it writes later applies at the next allocation. */
    sleep_ms(2500);
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_SUCCESS, "the grant written late was not applied");
    stop_arbiter();
}

/* A borrower on the same card (its own ledger, no budget it could be denied by): holds `bytes`,
 * then waits to be ended. Its pid. */
static pid_t borrower(uint64_t bytes)
{
    int ready[2];
    REQUIRE(pipe(ready) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        char ledger[600];
        snprintf(ledger, sizeof ledger, "%s.borrower", base_ledger);
        unlink(ledger);
        setenv("GPUCAP_LEDGER", ledger, 1);
        setenv("GPUCAP_CONFIG", "/dev/null", 1);
        setenv("GPUCAP_MEMORY_LIMIT", "1GiB", 1);
        make_context(0);
        CUdeviceptr p;
        char b = cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(ready[1], &b, 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    close(ready[1]);
    char b = 0;
    REQUIRE(read(ready[0], &b, 1) == 1 && b == 'y', "the borrower holds its memory");
    close(ready[0]);
    return pid;
}

static void need(bool pitch)
{
    pid_t b = borrower(900 * MiB);
    char victim[32];
    snprintf(victim, sizeof victim, "%d", (int)b);
    setenv("TEST_ARB_VICTIM", victim, 1);
    /* Guaranteed: no request, the budget is all request. */
    start_arbiter("need", 512 * MiB, 512 * MiB, NULL);
    write_settings("memory_limit = 512MiB\nreclaim_grace = 3");
    make_context(0);
    CUdeviceptr p;
    size_t pitch_bytes = 0;
    uint64_t t0 = mono_ms();
    CUresult rc = pitch ? cuMemAllocPitch_v2(&p, &pitch_bytes, MiB, 256, 4) : cuMemAlloc_v2(&p, 256 * MiB);
    uint64_t took = mono_ms() - t0;
    CHECK(rc == CUDA_SUCCESS, "the allocation within the budget failed (%d) after the arbiter ended the borrower", rc);
    CHECK(took < 4000, "it took %llu ms, past reclaim_grace + 1 s", (unsigned long long)took);
    char line[512] = "", want[128];
    CHECK(asked("need ", line, sizeof line) >= 1, "no need was sent");
    snprintf(want, sizeof want, "need GPU-fa4ec0da-0000-4000-8000-000000000000 %llu %d\n",
             (unsigned long long)(256 * MiB), (int)getpid());
    if (!pitch)
        CHECK(strcmp(line, want) == 0, "the datagram was '%s', not '%s'", line, want);
    CHECK(fakecuda_outstanding(0) == (pitch ? (uint64_t)pitch_bytes * 256 : 256 * MiB), "the card holds %llu MiB",
          (unsigned long long)(fakecuda_outstanding(0) / MiB));
    kill(b, SIGKILL); /* ended by the arbiter already, unless the test failed */
    waitpid(b, NULL, 0);
    stop_arbiter();
}

static void case_need(void)
{
    need(false);
}

static void case_needpitch(void)
{
    need(true);
}

static void case_needgrace(void)
{
    pid_t b = borrower(900 * MiB);
    start_arbiter("hold", 512 * MiB, 512 * MiB, NULL);
    write_settings("memory_limit = 512MiB\nreclaim_grace = 1");
    make_context(0);
    CUdeviceptr p;
    uint64_t t0 = mono_ms();
    CUresult rc = cuMemAlloc_v2(&p, 256 * MiB);
    uint64_t took = mono_ms() - t0;
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY, "admitted on a full card (%d)", rc);
    CHECK(took >= 2000 && took < 3500, "the refusal came after %llu ms, not reclaim_grace + 1 s", (unsigned long long)took);
    CHECK(asked("need ", NULL, 0) >= 2, "the arbiter was asked %d times over the grace", asked("need ", NULL, 0));
    CHECK(fakecuda_outstanding(0) == 900 * MiB, "the card holds %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    /* Above the request (a burstable container's loan): no wait, no need. */
    stop_arbiter();
    int before = asked("need ", NULL, 0);
    start_arbiter("hold", 0, 512 * MiB, NULL);
    unlink(arblog);
    t0 = mono_ms();
    rc = cuMemAlloc_v2(&p, 256 * MiB); /* best effort, granted 0: denied by gpucap, a loan asked */
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY && mono_ms() - t0 < 1000, "best effort: %d after %llu ms", rc,
          (unsigned long long)(mono_ms() - t0));
    CHECK(asked("need ", NULL, 0) == 0, "a need for memory beyond the request (%d before)", before);
    stop_arbiter();
    /* An arbiter with nothing on loan to take back (it refuses the need): the refusal stands soon. */
    start_arbiter("grant", 512 * MiB, 512 * MiB, NULL);
    write_settings("memory_limit = 512MiB\nreclaim_grace = 1");
    t0 = mono_ms();
    rc = cuMemAlloc_v2(&p, 128 * MiB);
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY && mono_ms() - t0 < 1000, "a refused need: %d after %llu ms", rc,
          (unsigned long long)(mono_ms() - t0));
    CHECK(asked("need ", NULL, 0) == 1, "asked %d times after a refusal", asked("need ", NULL, 0));
    stop_arbiter();
    /* No arbiter at all: at once. */
    unlink(sock);
    write_settings("memory_limit = 512MiB\nreclaim_grace = 1");
    t0 = mono_ms();
    rc = cuMemAlloc_v2(&p, 128 * MiB);
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY && mono_ms() - t0 < 200, "no arbiter: %d after %llu ms", rc,
          (unsigned long long)(mono_ms() - t0));
    kill(b, SIGKILL);
    waitpid(b, NULL, 0);
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_qos CASE");
    snprintf(base_ledger, sizeof base_ledger, "%s", getenv("GPUCAP_LEDGER"));
    locked = getenv("TEST_PLATFORM") != NULL;
    unsetenv("GPUCAP_MEMORY_LIMIT");
    unsetenv("XDG_RUNTIME_DIR");
    snprintf(sock, sizeof sock, "%s.sock", base_ledger);
    unlink(sock);
    setenv("GPUCAP_ARBITER_SOCKET", sock, 1);
    if (locked) {
        snprintf(settings, sizeof settings, "%s", getenv("TEST_PLATFORM"));
        unsetenv("GPUCAP_CONFIG");
        unsetenv("GPUCAP_CONTEXT_RESERVE");
        unsetenv("GPUCAP_ARBITER_SOCKET"); /* fixed under the lock: the platform file's (none) */
        unlink(settings);
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", settings);
        if (strrchr(dir, '/')) {
            *strrchr(dir, '/') = '\0';
            mkdir(dir, 0755);
        }
    } else {
        snprintf(settings, sizeof settings, "%s.ini", base_ledger);
        unlink(settings);
        setenv("GPUCAP_CONFIG", settings, 1);
    }
    static const struct test_case cases[] = {
        {"formula", case_formula}, {"drvlimit", case_drvlimit}, {"locked", case_locked},
        {"envgrant", case_envgrant}, {"live", case_live},       {"loan", case_loan},
        {"loanthreads", case_loanthreads},
        {"ledgerdir", case_ledgerdir}, {"noarbiter", case_noarbiter}, {"forged", case_forged},
        {"slow", case_slow},       {"need", case_need},         {"needpitch", case_needpitch},         {"needgrace", case_needgrace},
    };
    RUN_CASE(cases, argv[1]);
    stop_arbiter();
    if (locked)
        unlink(settings);
    return test_result();
}
