/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_live_exact.c CASE: live budgets exact at every moment (issue 31), against the fake driver's
 * record of what the card holds. The settings file (GPUCAP_CONFIG, here `<ledger>.ini`) is rewritten
 * in place, with its generation line bumped after the text as gpucap-agent does (TEST_GEN=1), or
 * without one (a rewrite in place by anyone else); `gpucap set-memory` is TEST_CLI.
 *   lower     4 processes x 2 threads churn 8-16 MiB allocations, some 350 MiB of 512 (no denial);
 *             the file says 128 MiB: a call made after the rewrite returned is never admitted with
 *             the card above 128 MiB (with the generation line; without, at most the spare each
 *             process held, 16 MiB), no allocation is charged on the card while it stays above, and
 *             it comes under 128 MiB as the threads free
 *   private   the same with GPUCAP_LEDGER=off: one process, 8 threads, its own budget
 *   burst     1 GiB with 100 MiB held, the file says 128 MiB, then 12 x 64 MiB at once: none
 *   busy      a process holds 300 of 512 MiB; the device entry's lock is held (a process
 *             descheduled inside a locked step): `set-memory 64MiB` exits 1 saying what is pending,
 *             and the process that frees 200 MiB and asks for them again is denied; the lock
 *             released, set-memory exits 0 printing the figure in force
 *   forkstale a child forked before a lowering to 64 MiB claims its entry after it, its parent
 *             leaves: 200 MiB more is denied, the ledger's limit stays 64 MiB
 *   forkraise a child forked before a raise from 64 to 256 MiB claims its entry after it: the raise
 *             stays (its copy of the older figure is not asked for)
 *   execlow   set-memory lowers 256 MiB (the environment's) to 64 MiB, the process execs itself:
 *             the new image is held to 64 MiB
 *   raisegone set-memory raises 256 to 600 MiB, the run's last process leaves: the next run (256 MiB
 *             in its settings) is denied 300 MiB, and the change is recorded, not "256 to 256"
 *   drvlimit  under a 512 MiB driver limit: set-memory 900MiB gives 512 MiB (cuDeviceTotalMem and
 *             cuMemGetInfo agree), set-memory 50% gives 256 MiB, the file at 75% 384 MiB
 *   device    two cards, the process sees them as 1,0: set-memory --device 1 (CUDA ordinal) and
 *             --device GPU-... change GPU 1's budget, not the ledger's entry 1
 *   poolcache after a lowering below what a pool keeps, a request the pool serves from its cache is
 *             admitted (no new bytes), and one that needs more trims the pool before it is denied
 *   forkhold  a process holding 200 of 256 MiB forks a child that never calls CUDA and exits: the
 *             card keeps its memory while the child lives, and so does the budget (another
 *             process is denied 100 MiB) until the child exits
 *   rawexec   a process holding 200 of 256 MiB replaces its image by a raw execve system call: the
 *             card has its memory back, and so has the budget (another process is admitted 200)
 *   rawclone  a raw clone(SIGCHLD) child allocates 100 MiB and outlives its parent: the budget
 *             counts what the card holds for it until it exits
 */
#include "common.h"
#include "common/units.h"
#include "ledger_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char settings[1024];
static unsigned long long generation;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The settings file with `lines`, written in place (never shorter), as gpucap-agent writes it: its
 * generation line first, bumped by a second write once the text is complete (TEST_GEN=1); without
 * TEST_GEN a plain rewrite in place. */
static void write_settings(const char *lines)
{
    bool gen = getenv("TEST_GEN") && strcmp(getenv("TEST_GEN"), "1") == 0;
    char text[2048], line[80];
    snprintf(line, sizeof line, "; generation = %017llx\n", generation);
    snprintf(text, sizeof text, "%s[gpucap]\ncontext_reserve = 0\n%s\n", gen ? line : "", lines);
    int fd = open(settings, O_WRONLY | O_CREAT, 0644);
    REQUIRE(fd >= 0, "open %s", settings);
    write_in_place(fd, text);
    if (gen) {
        /* Complete: the generation moves (its low digits are what every process watches). */
        snprintf(line, sizeof line, "; generation = %017llx\n", ++generation);
        REQUIRE(pwrite(fd, line, strlen(line), 0) == (ssize_t)strlen(line), "pwrite generation");
    }
    close(fd);
}

static CUresult alloc(CUdeviceptr *p, uint64_t bytes)
{
    return cuMemAlloc_v2(p, bytes);
}

/* make_context(0), then `mib` MiB allocated there (the program stops when refused): the pointer. */
static CUdeviceptr holding(uint64_t mib)
{
    make_context(0);
    CUdeviceptr p;
    REQUIRE(alloc(&p, mib * MiB) == CUDA_SUCCESS, "%llu MiB", (unsigned long long)mib);
    return p;
}

/* Two pipes `a` and `b`, then fork(): its result (the program stops when either fails). */
static pid_t fork_piped(int a[2], int b[2])
{
    REQUIRE(pipe(a) == 0 && pipe(b) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    return pid;
}

/* In a child: returns once the parent wrote its word on `fd`; exits 3 when the pipe closed first. */
static void await_go(int fd)
{
    char b;
    if (read(fd, &b, 1) != 1)
        _exit(3);
}

/* Runs `gpucap ARGS...` (TEST_CLI) with stdout into `out` (may be NULL): its exit status. */
static int cli(char *out, size_t outlen, const char *const *args)
{
    const char *exe = getenv("TEST_CLI");
    REQUIRE(exe, "TEST_CLI is not set");
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)exe;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    int fd;
    pid_t pid = spawn_unpreloaded(argv, &fd); /* the command is not a CUDA program */
    size_t got = 0;
    char sink[256];
    for (ssize_t r; (r = read(fd, out && got < outlen - 1 ? out + got : sink,
                              out && got < outlen - 1 ? outlen - 1 - got : sizeof sink)) > 0;)
        if (out && got < outlen - 1)
            got += (size_t)r;
    if (out)
        out[got] = '\0';
    close(fd);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* cli() on a thread of its own, for a command that waits while this process goes on. */
struct cli_run {
    const char *const *args;
    char out[2048];
    int rc;
    _Atomic int done;
};
static void *cli_thread(void *arg)
{
    struct cli_run *r = arg;
    r->rc = cli(r->out, sizeof r->out, r->args);
    atomic_store(&r->done, 1);
    return NULL;
}

/* `gpucap ARGS...` while this process goes on allocating (its admissions apply what it posts). */
static int cli_applying(char *out, size_t len, const char *const *args)
{
    struct cli_run r = {.args = args};
    pthread_t t;
    pthread_create(&t, NULL, cli_thread, &r);
    while (!atomic_load(&r.done)) {
        size_t f, tot;
        cuMemGetInfo_v2(&f, &tot); /* a memory query looks at once */
        sleep_ms(5);
    }
    pthread_join(t, NULL);
    snprintf(out, len, "%s", r.out);
    return r.rc;
}

/* `gpucap set-memory --ledger <this test's> SIZE`, applied by this process meanwhile: exits 0. */
static void set_memory(const char *size)
{
    char out[2048];
    const char *args[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), size, NULL};
    int rc = cli_applying(out, sizeof out, args);
    REQUIRE(rc == 0, "set-memory %s: rc %d, %s", size, rc, out);
}

/* ---- lower / private: threads churning while the file lowers the budget ---- */

struct churn {
    _Atomic int stop;
    _Atomic int started;
    _Atomic uint64_t done_ns;   /* when the rewrite returned (CLOCK_MONOTONIC), 0 before */
    _Atomic uint64_t past[8];   /* per process: bytes admitted by calls made after it, the card above 128 MiB */
};
static struct churn *ch;
static int proc_index;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *churn_thread(void *arg)
{
    CUcontext ctx = arg;
    cuCtxSetCurrent(ctx);
    unsigned seed = (unsigned)getpid() * 7919u + (unsigned)(uintptr_t)&seed;
    /* Four slots of 8-16 MiB a thread, each freed and taken again at once: 8 threads hold some
     * 350 MiB of 512, with no denial to make anyone look at once. */
    CUdeviceptr held[4] = {0};
    atomic_fetch_add(&ch->started, 1);
    while (!atomic_load(&ch->stop)) {
        int k = (int)(rand_r(&seed) % 4);
        if (held[k]) {
            CHECK_RC(cuMemFree_v2(held[k]), CUDA_SUCCESS);
            held[k] = 0;
        }
        uint64_t bytes = (8 + rand_r(&seed) % 9) * MiB, t0 = mono_ns(), done = atomic_load(&ch->done_ns);
        if (alloc(&held[k], bytes) != CUDA_SUCCESS) {
            held[k] = 0;
        } else if (done && t0 > done && fakecuda_outstanding(0) > 128 * MiB) {
            /* Asked for after the rewrite had returned, and admitted with the card above it. */
            atomic_fetch_add(&ch->past[proc_index], bytes);
        }
    }
    for (int k = 0; k < 4; k++)
        if (held[k])
            cuMemFree_v2(held[k]);
    return NULL;
}

static void churn_process(int threads)
{
    CUcontext ctx = make_context(0);
    pthread_t t[8];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, churn_thread, ctx);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
}

/* The churn under 512 MiB, the file lowered to 128 MiB, the card watched through the fake's record. */
static void lower_under_churn(int procs, int threads)
{
    write_settings("memory_limit = 512MiB");
    ch = mmap(NULL, sizeof *ch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(ch != MAP_FAILED, "mmap");
    pid_t pid[8];
    for (int p = 0; p < procs; p++) {
        pid[p] = fork();
        REQUIRE(pid[p] >= 0, "fork");
        if (pid[p] == 0) {
            proc_index = p;
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed check of the parent does not leave it running */
            churn_process(threads);
            _exit(failures ? 1 : 0);
        }
    }
    for (int i = 0; atomic_load(&ch->started) < procs * threads; i++) {
        REQUIRE(i < 5000, "the churn did not start");
        sleep_ms(1);
    }
    sleep_ms(300);
    uint64_t before = fakecuda_outstanding(0);
    REQUIRE(before > 128 * MiB, "the churn holds %llu MiB, not above the budget to come",
            (unsigned long long)(before / MiB));
    /* TEST_GEN=2: the budget lowered by a per-device line, the first memory_limit left as it was (no
     * word the processes watch moves: each looks at its next admission that leaves its lease). */
    if (getenv("TEST_GEN") && strcmp(getenv("TEST_GEN"), "2") == 0)
        write_settings("memory_limit = 512MiB\n[device.0]\nmemory_limit = 128MiB");
    else
        write_settings("memory_limit = 128MiB");
    atomic_store(&ch->done_ns, mono_ns());
    /* A moment for what was admitted before the rewrite returned to reach the card. */
    sleep_ms(100);
    uint64_t at = fakecuda_outstanding(0), allocs = fakecuda_alloc_count(0);
    fakecuda_reset_peak(0);
    /* While the card stays above the lowered budget, nothing more is charged on it: the threads
     * only free (a charge with the card above 128 MiB was admitted past the lowering). */
    uint64_t charged = 0, above_for = 0;
    for (int i = 0;; i++) {
        REQUIRE(i < 5000, "the card stays at %llu MiB above a 128 MiB budget",
                (unsigned long long)(fakecuda_outstanding(0) / MiB));
        uint64_t n = fakecuda_alloc_count(0), out = fakecuda_outstanding(0);
        if (out <= 128 * MiB)
            break;
        charged = n - allocs;
        above_for = (uint64_t)i;
        sleep_ms(1);
    }
    uint64_t peak = fakecuda_peak(0), bound = at > 128 * MiB ? at : 128 * MiB;
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "before %llu MiB, at %llu MiB, charged %llu while above for %llu ms, peak %llu MiB\n",
                (unsigned long long)(before / MiB), (unsigned long long)(at / MiB), (unsigned long long)charged,
                (unsigned long long)above_for, (unsigned long long)(peak / MiB));
    /* What the card shows can still carry calls admitted before the rewrite returned whose thread
     * was kept off the CPU past the grace (two shared cores): one per thread, 16 MiB at most. */
    uint64_t inflight = (uint64_t)(procs * threads), slack = inflight * 16 * MiB;
    CHECK(charged <= inflight, "%llu allocations charged on the card while it stayed above a lowered budget of "
          "128 MiB (for %llu ms after the rewrite was applied; %llu threads)", (unsigned long long)charged,
          (unsigned long long)above_for, (unsigned long long)inflight);
    CHECK(peak <= bound + slack, "%llu MiB on the card after the lowering to 128 MiB had been applied (it held %llu "
          "MiB then, %llu MiB before the rewrite)", (unsigned long long)(peak / MiB), (unsigned long long)(at / MiB),
          (unsigned long long)(before / MiB));
    fakecuda_reset_peak(0);
    sleep_ms(300);
    CHECK(fakecuda_peak(0) <= 128 * MiB + slack, "the card went back to %llu MiB above a 128 MiB budget",
          (unsigned long long)(fakecuda_peak(0) / MiB));
    atomic_store(&ch->stop, 1);
    for (int p = 0; p < procs; p++) {
        int status;
        waitpid(pid[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "churn process %d: status %d", p, status);
    }
    /* The bound: a call made once the rewrite returned is never admitted above it when the rewrite
     * moves a word the processes watch (the generation line, or the limit's value in place); else
     * (TEST_GEN=2) a process admits from what it holds spare until its next admission that leaves
     * its lease (what the card holds is bounded above, not how often a spare is taken and given). */
    bool weak = getenv("TEST_GEN") && strcmp(getenv("TEST_GEN"), "2") == 0;
    for (int p = 0; p < procs && !weak; p++) {
        uint64_t past = atomic_load(&ch->past[p]), allowed = 0;
        if (getenv("TEST_VERBOSE"))
            fprintf(stderr, "process %d: %llu MiB admitted after the rewrite above the new budget\n", p,
                    (unsigned long long)(past / MiB));
        CHECK(past <= allowed, "process %d was admitted %llu MiB by calls made after the rewrite to 128 MiB had "
              "returned, the card above it (bound %llu MiB)", p, (unsigned long long)(past / MiB),
              (unsigned long long)(allowed / MiB));
    }
}

static void case_lower(void)
{
    lower_under_churn(4, 2);
}

static void case_private(void)
{
    REQUIRE(getenv("GPUCAP_LEDGER") && strcmp(getenv("GPUCAP_LEDGER"), "off") == 0, "a private budget");
    lower_under_churn(1, 8);
}

static void case_burst(void)
{
    write_settings("memory_limit = 1GiB");
    make_context(0);
    CUdeviceptr p, q;
    REQUIRE(alloc(&p, 100 * MiB) == CUDA_SUCCESS, "100 MiB");
    write_settings("memory_limit = 128MiB");
    int admitted = 0;
    for (int i = 0; i < 12; i++)
        admitted += alloc(&q, 64 * MiB) == CUDA_SUCCESS;
    CHECK(admitted == 0 && fakecuda_outstanding(0) == 100 * MiB, "%d of 12 x 64 MiB admitted after 1 GiB -> 128 MiB: "
          "the card holds %llu MiB", admitted, (unsigned long long)(fakecuda_outstanding(0) / MiB));
    CHECK(alloc(&q, 28 * MiB) == CUDA_SUCCESS, "the room left under 128 MiB");
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "above 128 MiB");
}

/* ---- busy: set-memory while a device lock is held ---- */

static void case_busy(void)
{
    write_settings("memory_limit = 512MiB");
    make_context(0);
    CUdeviceptr p, q;
    REQUIRE(alloc(&p, 100 * MiB) == CUDA_SUCCESS && alloc(&q, 200 * MiB) == CUDA_SUCCESS, "300 MiB");
    struct gpc_ledger *l = map_ledger();
    /* A process descheduled inside a locked step: here, this test holds the lock from another
     * process (robust and process-shared, as the library's). */
    int go[2], held[2];
    pid_t locker = fork_piped(go, held);
    if (locker == 0) {
        char b = 0;
        int rc = pthread_mutex_lock(&l->dev[0].lock);
        if (write(held[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
            _exit(3);
        if (rc == 0)
            pthread_mutex_unlock(&l->dev[0].lock);
        _exit(0);
    }
    char b;
    REQUIRE(read(held[0], &b, 1) == 1, "the lock is held");
    char out[2048];
    const char *lower[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), "--wait", "1", "64MiB", NULL};
    int rc = cli(out, sizeof out, lower);
    CHECK(rc == 1 && strstr(out, "pending") && strstr(out, "64MiB asked"),
          "set-memory with the lock held: rc %d, said '%s' (it must not say it is done)", rc, out);
    /* Freed and asked for again while the lowering waits for the lock: not from the spare. */
    CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK(alloc(&q, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "200 MiB re-admitted above a pending lowering to 64 MiB");
    CHECK(fakecuda_outstanding(0) == 100 * MiB, "the card holds %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    REQUIRE(write(go[1], &b, 1) == 1, "release");
    waitpid(locker, NULL, 0);
    /* Now the command waits while this process goes on: its next admission applies the change. */
    struct cli_run r = {.args = lower};
    pthread_t t;
    pthread_create(&t, NULL, cli_thread, &r);
    for (int i = 0; i < 500 && !atomic_load(&r.done); i++) {
        CUdeviceptr x;
        if (alloc(&x, 1 * MiB) == CUDA_SUCCESS)
            cuMemFree_v2(x);
        sleep_ms(10);
    }
    pthread_join(t, NULL);
    rc = r.rc;
    snprintf(out, sizeof out, "%s", r.out);
    /* (The first request stayed posted: the process applied it at its first admission after the
     * lock came free; the command finds it in force.) */
    CHECK(rc == 0 && strstr(out, "budget 64.00 MiB (was "), "set-memory once the lock is free: rc %d, '%s'", rc, out);
    uint16_t n = atomic_load(&l->dev[0].limit_changes);
    CHECK(n >= 1 && atomic_load(&l->dev[0].changes[(n - 1) % GPC_LEDGER_CHANGES].from) == 512 * MiB &&
              atomic_load(&l->dev[0].changes[(n - 1) % GPC_LEDGER_CHANGES].to) == 64 * MiB,
          "the change is recorded from 512 MiB to 64 MiB");
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted above 64 MiB once in force");
    CHECK(atomic_load(&l->dev[0].slot.limit) == 64 * MiB, "the limit in force");
}

/* ---- stale copies: fork, exec, the next run ---- */

static void case_forkstale(void)
{
    int go[2], result[2];
    pid_t parent = fork_piped(go, result);
    if (parent == 0) {
        CUdeviceptr p = holding(8);
        pid_t c = fork();
        if (c == 0) {
            await_go(go[0]); /* its parent lowered and left */
            CUdeviceptr q;
            char r = alloc(&q, 1 * MiB) != CUDA_SUCCESS                ? '1'
                     : alloc(&q, 200 * MiB) != CUDA_ERROR_OUT_OF_MEMORY ? '2'
                                                                         : '0';
            if (write(result[1], &r, 1) != 1)
                _exit(4);
            _exit(0);
        }
        /* Lowered by set-memory after the fork; the child claims its entry only later. */
        set_memory("64MiB");
        size_t t = total_now();
        CHECK(t == 64 * MiB, "the lowering applied: total %zu", t);
        CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
        _exit(failures ? 1 : 0);
    }
    int status;
    waitpid(parent, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the parent (status %d)", status);
    char b = 0;
    REQUIRE(write(go[1], &b, 1) == 1, "go");
    /* The child is the test's grandchild: it reports through a pipe. */
    close(result[1]);
    REQUIRE(read(result[0], &b, 1) == 1, "the child's result");
    CHECK(b != '1', "the child forked before the lowering was denied 1 MiB under 64");
    CHECK(b != '2', "the child forked before the lowering was admitted 200 MiB under 64 MiB (its older copy of 256)");
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].slot.limit) == 64 * MiB, "the ledger's limit is %llu MiB after the child claimed",
          (unsigned long long)(atomic_load(&l->dev[0].slot.limit) / MiB));
}

static void case_forkraise(void)
{
    if (getenv("TEST_FILE"))
        write_settings("memory_limit = 64MiB");
    holding(8);
    int go[2];
    REQUIRE(pipe(go) == 0, "pipe");
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        await_go(go[0]);
        CUdeviceptr q;
        CHECK(alloc(&q, 200 * MiB) == CUDA_SUCCESS, "child forked before a raise to 256 MiB: denied 200 MiB");
        _exit(failures ? 1 : 0);
    }
    struct gpc_ledger *l = map_ledger();
    set_memory("256MiB");
    size_t t = total_now();
    REQUIRE(t == 256 * MiB, "the raise applied: total %zu", t);
    char b = 0;
    REQUIRE(write(go[1], &b, 1) == 1, "go");
    int status;
    waitpid(c, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child (status %d)", status);
    CHECK(atomic_load(&l->dev[0].slot.limit) == 256 * MiB, "a child's claim took the limit back to %llu MiB",
          (unsigned long long)(atomic_load(&l->dev[0].slot.limit) / MiB));
}

static void case_execlow(void)
{
    holding(8);
    set_memory("64MiB");
    size_t t = total_now();
    REQUIRE(t == 64 * MiB, "the lowering applied: total %zu", t);
    fflush(NULL);
    execl("/proc/self/exe", "test_live_exact", "execlow-after", (char *)NULL);
    REQUIRE(0, "exec");
}

static void case_execlow_after(void)
{
    make_context(0);
    CUdeviceptr q;
    size_t t = total_now();
    CHECK(t == 64 * MiB, "the image after exec reads total %zu MiB, not the budget in force (64)", t / (size_t)MiB);
    CHECK(alloc(&q, 100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the image after exec was admitted 100 MiB under 64");
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].slot.limit) == 64 * MiB, "the ledger's limit is %llu MiB after the exec",
          (unsigned long long)(atomic_load(&l->dev[0].slot.limit) / MiB));
}

/* Runs this program as `mode` in a child (a later process of its own): a failure is this case's. */
static void later(const char *mode)
{
    int status = run_self("test_live_exact", mode);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (status %d)", mode, status);
}

static void case_raisegone(void)
{
    later("raisegone-first");
    later("raisegone-next");
    struct gpc_ledger *l = map_ledger();
    uint16_t n = atomic_load(&l->dev[0].limit_changes);
    for (int k = 0; k < n && k < GPC_LEDGER_CHANGES; k++) {
        const struct gpc_limit_change *c = &l->dev[0].changes[k];
        CHECK(atomic_load(&c->from) != atomic_load(&c->to), "a change recorded from %llu to %llu",
              (unsigned long long)atomic_load(&c->from), (unsigned long long)atomic_load(&c->to));
    }
}

static void case_raisegone_first(void)
{
    CUdeviceptr p = holding(8);
    set_memory("600MiB");
    CHECK(alloc(&p, 500 * MiB) == CUDA_SUCCESS, "the raise admits");
    /* Exits holding it: dead, not reaped yet, when the next run starts. */
}

static void case_raisegone_next(void)
{
    make_context(0);
    CUdeviceptr p;
    size_t t = total_now();
    CHECK(t == 256 * MiB, "the next run reads total %zu MiB, not its own 256", t / (size_t)MiB);
    CHECK(alloc(&p, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the next run was admitted 300 MiB of its 256");
}

/* ---- the driver's own limit ---- */

static void case_drvlimit(void)
{
    write_settings("memory_limit = 512MiB");
    holding(1);
    struct gpc_ledger *l = map_ledger();
    size_t f, t, total;
    struct {
        const char *ask;
        uint64_t want;
    } asks[] = {{"900MiB", 512 * MiB}, {"50%", 256 * MiB}, {"300MiB", 300 * MiB}};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        const char *args[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), asks[i].ask, NULL};
        char out[2048];
        int rc = cli_applying(out, sizeof out, args);
        cuMemGetInfo_v2(&f, &t);
        cuDeviceTotalMem_v2(&total, 0);
        CHECK(rc == 0 && t == asks[i].want && total == asks[i].want,
              "set-memory %s under a 512 MiB driver limit: rc %d, cuMemGetInfo total %zu MiB, cuDeviceTotalMem %zu MiB, "
              "want %llu MiB (%s)", asks[i].ask, rc, t / (size_t)MiB, total / (size_t)MiB,
              (unsigned long long)(asks[i].want / MiB), out);
        CHECK(atomic_load(&l->dev[0].slot.limit) == asks[i].want, "the ledger's limit after set-memory %s", asks[i].ask);
    }
    /* The file too resolves against the driver's figure, as at start-up. */
    write_settings("memory_limit = 75%");
    cuMemGetInfo_v2(&f, &t);
    CHECK(t == 384 * MiB, "the file at 75%% under a 512 MiB driver limit: total %zu MiB, want 384", t / (size_t)MiB);
    CUdeviceptr q;
    CHECK(alloc(&q, 384 * MiB) == CUDA_ERROR_OUT_OF_MEMORY && alloc(&q, 383 * MiB) == CUDA_SUCCESS,
          "75%% of the driver's 512 MiB admits 384 MiB in all");
}

/* ---- --device: a CUDA ordinal or a UUID ---- */

static int entry_of_phys(const struct gpc_ledger *l, int phys)
{
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        char uuid[GPC_UUID_TEXT];
        if (atomic_load(&l->dev[i].state) != 1)
            continue;
        gpc_uuid_format(l->dev[i].uuid, uuid);
        if (uuid[strlen(uuid) - 1] == '0' + phys)
            return i;
    }
    return -1;
}

static void case_device(void)
{
    /* This process sees GPU 1 as its device 0: GPU 1 is the ledger's entry 0. */
    REQUIRE(getenv("CUDA_VISIBLE_DEVICES") && strcmp(getenv("CUDA_VISIBLE_DEVICES"), "1,0") == 0, "1,0");
    write_settings("memory_limit = 256MiB");
    CUdeviceptr p;
    make_context(0);
    REQUIRE(alloc(&p, 1 * MiB) == CUDA_SUCCESS, "on GPU 1");
    make_context(1);
    REQUIRE(alloc(&p, 1 * MiB) == CUDA_SUCCESS, "on GPU 0");
    struct gpc_ledger *l = map_ledger();
    int g0 = entry_of_phys(l, 0), g1 = entry_of_phys(l, 1);
    REQUIRE(g1 == 0 && g0 == 1, "GPU 1 is entry %d, GPU 0 entry %d", g1, g0);
    char out[1024];
    /* set-memory's own CUDA ordinals: no CUDA_VISIBLE_DEVICES there, GPU 1 is ordinal 1. */
    unsetenv("CUDA_VISIBLE_DEVICES");
    const char *by_ordinal[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), "--device", "1", "64MiB", NULL};
    int rc = cli_applying(out, sizeof out, by_ordinal);
    CHECK(rc == 0 && atomic_load(&l->dev[g1].slot.limit) == 64 * MiB && atomic_load(&l->dev[g0].slot.limit) == 256 * MiB,
          "--device 1: rc %d, GPU 1 %llu MiB, GPU 0 %llu MiB (%s)", rc,
          (unsigned long long)(atomic_load(&l->dev[g1].slot.limit) / MiB),
          (unsigned long long)(atomic_load(&l->dev[g0].slot.limit) / MiB), out);
    /* With CUDA_VISIBLE_DEVICES=1 for the command, its ordinal 0 is GPU 1 again. */
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    const char *visible[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), "--device", "0", "48MiB", NULL};
    rc = cli_applying(out, sizeof out, visible);
    CHECK(rc == 0 && atomic_load(&l->dev[g1].slot.limit) == 48 * MiB && atomic_load(&l->dev[g0].slot.limit) == 256 * MiB,
          "--device 0 under CUDA_VISIBLE_DEVICES=1: rc %d (%s)", rc, out);
    unsetenv("CUDA_VISIBLE_DEVICES");
    char uuid[GPC_UUID_TEXT];
    gpc_uuid_format(l->dev[g0].uuid, uuid);
    const char *by_uuid[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), "--device", uuid, "32MiB", NULL};
    rc = cli_applying(out, sizeof out, by_uuid);
    CHECK(rc == 0 && atomic_load(&l->dev[g0].slot.limit) == 32 * MiB && atomic_load(&l->dev[g1].slot.limit) == 48 * MiB,
          "--device %s: rc %d (%s)", uuid, rc, out);
    const char *nowhere[] = {"set-memory", "--ledger", getenv("GPUCAP_LEDGER"), "--device", "7", "32MiB", NULL};
    CHECK(cli_applying(out, sizeof out, nowhere) == 1, "--device 7 of two cards");
}

/* ---- pools after a lowering ---- */

static void case_poolcache(void)
{
    write_settings("memory_limit = 256MiB");
    make_context(0);
    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    REQUIRE(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS, "pool");
    cuuint64_t keep = UINT64_MAX;
    REQUIRE(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS, "keep all");
    CUdeviceptr a;
    REQUIRE(cuMemAllocFromPoolAsync(&a, 100 * MiB, pool, 0) == CUDA_SUCCESS, "100 MiB from the pool");
    REQUIRE(cuMemFreeAsync(a, 0) == CUDA_SUCCESS && cuStreamSynchronize(0) == CUDA_SUCCESS, "freed into the pool");
    uint64_t card = fakecuda_outstanding(0);
    REQUIRE(card >= 100 * MiB, "the pool keeps %llu MiB", (unsigned long long)(card / MiB));
    write_settings("memory_limit = 64MiB");
    /* Served from what the pool keeps: no new byte, admitted above the lowered budget. */
    CHECK(cuMemAllocFromPoolAsync(&a, 50 * MiB, pool, 0) == CUDA_SUCCESS,
          "a request the pool serves from its cache was denied after a lowering");
    CHECK(fakecuda_outstanding(0) == card, "the card moved: %llu MiB", (unsigned long long)(fakecuda_outstanding(0) / MiB));
    /* More than it keeps: the pool is trimmed before the denial (what it holds unused goes back). */
    CUdeviceptr b;
    CHECK(cuMemAllocFromPoolAsync(&b, 200 * MiB, pool, 0) == CUDA_ERROR_OUT_OF_MEMORY, "200 MiB above 64");
    CHECK(fakecuda_outstanding(0) <= 52 * MiB, "the pool was not trimmed before the denial: the card holds %llu MiB",
          (unsigned long long)(fakecuda_outstanding(0) / MiB));
}

/* ---- who holds device memory ---- */

/* A process of its own on the same ledger: how many of `n` x `each` MiB it is admitted. */
static int other_admitted(int n, uint64_t each)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(fds[0]);
        char mode[32];
        snprintf(mode, sizeof mode, "other-%d-%llu", n, (unsigned long long)each);
        dup2(fds[1], 1);
        execl("/proc/self/exe", "test_live_exact", mode, (char *)NULL);
        _exit(3);
    }
    close(fds[1]);
    char buf[16] = "";
    ssize_t r = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return r > 0 ? atoi(buf) : -1;
}

static void other(int n, uint64_t each)
{
    make_context(0);
    int ok = 0;
    CUdeviceptr p;
    for (int i = 0; i < n; i++)
        ok += alloc(&p, each * MiB) == CUDA_SUCCESS;
    printf("%d\n", ok);
}

static void case_forkhold(void)
{
    int ready[2], go[2];
    pid_t parent = fork_piped(ready, go);
    if (parent == 0) {
        holding(200);
        if (fork() == 0) { /* a DataLoader worker: never calls CUDA, keeps the device files */
            await_go(go[0]);
            _exit(0);
        }
        _exit(0); /* without freeing */
    }
    close(ready[1]);
    waitpid(parent, NULL, 0);
    sleep_ms(50);
    CHECK(fakecuda_outstanding(0) == 200 * MiB, "the card holds %llu MiB while the worker lives",
          (unsigned long long)(fakecuda_outstanding(0) / MiB));
    CHECK(other_admitted(1, 100) == 0, "another process was admitted 100 MiB while the card holds 200 of 256");
    CHECK(fakecuda_peak(0) <= 256 * MiB, "the card held %llu MiB", (unsigned long long)(fakecuda_peak(0) / MiB));
    char b = 0;
    REQUIRE(write(go[1], &b, 1) == 1, "go");
    while (wait(NULL) > 0)
        ;
    for (int i = 0; fakecuda_outstanding(0) && i < 100; i++)
        sleep_ms(10);
    CHECK(other_admitted(1, 200) == 1, "once the worker exited, 200 MiB is admitted again");
}

static void case_rawexec(void)
{
    int ready[2];
    REQUIRE(pipe(ready) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        make_context(0);
        CUdeviceptr p;
        char b = alloc(&p, 200 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(ready[1], &b, 1) != 1)
            _exit(4);
        char *argv[] = {"sleep", "2", NULL};
        syscall(SYS_execve, "/bin/sleep", argv, environ); /* no hook sees it */
        _exit(3);
    }
    close(ready[1]);
    char b = 0;
    REQUIRE(read(ready[0], &b, 1) == 1 && b == 'y', "the image allocated 200 MiB");
    for (int i = 0; fakecuda_outstanding(0) != 0 && i < 200; i++)
        sleep_ms(10);
    CHECK(fakecuda_outstanding(0) == 0, "the image's memory is back on the card");
    CHECK(other_admitted(1, 200) == 1, "the budget kept the share of an image that a raw execve replaced");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void case_rawclone(void)
{
    int ready[2], go[2];
    pid_t parent = fork_piped(ready, go);
    if (parent == 0) {
        holding(8);
        long child = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        if (child == 0) {
            CUdeviceptr q;
            char b = alloc(&q, 100 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
            if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
                syscall(SYS_exit_group, 3);
            syscall(SYS_exit_group, 0);
        }
        char b;
        if (read(ready[0], &b, 1) != 1 || b != 'y')
            _exit(4);
        _exit(0); /* the parent leaves; the clone child keeps its device files */
    }
    close(ready[1]);
    int status;
    waitpid(parent, &status, 0);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the clone child allocated (status %d)", status);
    uint64_t card = fakecuda_outstanding(0);
    CHECK(card == 108 * MiB, "the card holds %llu MiB", (unsigned long long)(card / MiB));
    CHECK(other_admitted(1, 256 - 100) == 0, "another process was admitted past what the card holds for the clone child");
    char b = 0;
    REQUIRE(write(go[1], &b, 1) == 1, "go");
    sleep_ms(200);
    CHECK(fakecuda_outstanding(0) == 0, "the card holds %llu MiB after the clone child exited",
          (unsigned long long)(fakecuda_outstanding(0) / MiB));
    CHECK(other_admitted(1, 250) == 1, "the budget back once the clone child exited");
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_live_exact CASE");
    snprintf(settings, sizeof settings, "%s.ini", getenv("GPUCAP_LEDGER") && strcmp(getenv("GPUCAP_LEDGER"), "off")
                                                       ? getenv("GPUCAP_LEDGER")
                                                       : getenv("TEST_SETTINGS"));
    bool later_process = strstr(argv[1], "-after") || strstr(argv[1], "-first") || strstr(argv[1], "-next") ||
                         strncmp(argv[1], "other-", 6) == 0;
    if (!later_process) {
        unlink(settings);
        /* A file for the cases that rewrite it (the others keep their environment's limit). */
        if (getenv("TEST_FILE"))
            write_settings("memory_limit = 256MiB");
    }
    if (getenv("TEST_FILE")) {
        setenv("GPUCAP_CONFIG", settings, 1);
        unsetenv("GPUCAP_MEMORY_LIMIT");
    }
    int n;
    unsigned long long each;
    if (sscanf(argv[1], "other-%d-%llu", &n, &each) == 2) {
        other(n, each);
        return 0;
    }
    static const struct test_case cases[] = {
        {"lower", case_lower},         {"private", case_private},     {"burst", case_burst},
        {"busy", case_busy},           {"forkstale", case_forkstale}, {"forkraise", case_forkraise},
        {"execlow", case_execlow},
        {"execlow-after", case_execlow_after}, {"raisegone", case_raisegone},
        {"raisegone-first", case_raisegone_first}, {"raisegone-next", case_raisegone_next},
        {"drvlimit", case_drvlimit},   {"device", case_device},       {"poolcache", case_poolcache},
        {"forkhold", case_forkhold},   {"rawexec", case_rawexec},     {"rawclone", case_rawclone},
    };
    RUN_CASE(cases, argv[1]);
    return test_result();
}
