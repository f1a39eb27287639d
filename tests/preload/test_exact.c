/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_exact.c CASE: exact accounting, round 2 (issue 22): no window in which the card holds more
 * than the budget, no share lost or kept for good, no second budget. Each case is one row of the
 * issue, checked against the fake card's own record (FAKECUDA_RECORD):
 *   limitdrop    A holds 101 MiB and 16 MiB of spare under 1 GiB; B arrives with 105 MiB: A's 16 MiB
 *                more are denied (its spare was taken back); B' with 90 MiB, under what A holds:
 *                nothing more is admitted, even from what A frees, until it fits; when they leave,
 *                A is admitted up to 1 GiB again;
 *   forklimit    P (100 MiB) sets the device up, forks C and exits; Q runs with 1 GiB: C's 500 MiB
 *                are denied (C carries P's limit), its 50 MiB admitted;
 *   zombie       a worker holding 200 of 256 MiB is SIGKILLed and not waited for: 200 MiB are
 *                admitted to the next (a zombie's memory is gone);
 *   exitlate     a process exits holding 200 MiB and a destructor after gpucap's runs for 1.5 s:
 *                200 MiB more are denied until it is gone;
 *   exitthread   the same, while another thread of the exiting process keeps asking for 100 MiB:
 *                denied to the end (the hooks still enforce after gpucap's destructor);
 *   exec, execvp a process holding 200 MiB execs a program that never calls CUDA (this one in a
 *                mode that does not; `sleep`): its 200 MiB are admitted to another at once;
 *   execfail     an exec that fails keeps the share: 100 MiB more are denied;
 *   privatefork  GPUCAP_LEDGER=off: the parent holds 200 of 256 MiB and forks: the child starts
 *                from its own use (0) and is admitted 200 MiB;
 *   recovered    A holds 101 MiB with 16 MiB spare; the file is shrunk: the first figures are the
 *                budget's (never 0/0), A is charged 101 MiB, and after freeing everything the whole
 *                budget is admitted again, not one byte more;
 *   removed      A holds 200 of 256 MiB, the file is removed: at A's next locked step it moves to
 *                the file at the path (a fresh one), and a new process is denied 200 MiB;
 *   replaced     the file is renamed away and another process makes a fresh one, holding 10 MiB:
 *                A moves its 200 MiB there at its next locked step, and a third is denied 30 MiB.
 * Helper modes (this program exec'd): hold, want, sleeper, exitlate_child.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_test.h"

static const char *self;

static int wait_status(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* This program again in `mode` (argv[2..]: args), with `env` ("K=V" or NULL) added. */
static pid_t spawn(const char *env, const char *mode, const char *a, const char *b)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        if (env)
            putenv((char *)env);
        execl(self, self, mode, a, b, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void put_byte(int fd)
{
    char c = 1;
    REQUIRE(write(fd, &c, 1) == 1, "write");
}

static void get_byte(int fd)
{
    char c;
    REQUIRE(read(fd, &c, 1) == 1, "read");
}

/* A co-tenant that sets the device up (and allocates `mib` if not 0), says so, and stays until told. */
struct holder {
    pid_t pid;
    int release;
};

static struct holder hold(const char *env, int mib)
{
    int ready[2], release[2];
    REQUIRE(pipe(ready) == 0 && pipe(release) == 0, "pipe");
    char a[64], b[16];
    snprintf(a, sizeof a, "%d,%d", ready[1], release[0]);
    snprintf(b, sizeof b, "%d", mib);
    struct holder h = {spawn(env, "hold", a, b), release[1]};
    close(ready[1]);
    close(release[0]);
    get_byte(ready[0]);
    close(ready[0]);
    return h;
}

static void let_go(struct holder h)
{
    put_byte(h.release);
    close(h.release);
    CHECK(wait_status(h.pid) == 0, "a holder failed");
}

static void mode_hold(const char *fds, const char *mib)
{
    int ready, release;
    REQUIRE(sscanf(fds, "%d,%d", &ready, &release) == 2, "hold fds");
    make_context(0);
    size_t f, t;
    REQUIRE(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS, "cuMemGetInfo"); /* sets the device up */
    CUdeviceptr p;
    if (atoi(mib) > 0)
        REQUIRE(cuMemAlloc_v2(&p, (uint64_t)atoi(mib) * MiB) == CUDA_SUCCESS, "hold %s MiB", mib);
    put_byte(ready);
    get_byte(release);
}

/* Another process asks for `mib`: true if admitted. */
static bool other_gets(int mib)
{
    char b[16];
    snprintf(b, sizeof b, "%d", mib);
    int st = wait_status(spawn(NULL, "want", b, NULL));
    REQUIRE(st == 0 || st == 1, "the asking process failed (%d)", st);
    return st == 0;
}

static void mode_want(const char *mib)
{
    make_context(0);
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, (uint64_t)atoi(mib) * MiB);
    exit(rc == CUDA_SUCCESS ? 0 : rc == CUDA_ERROR_OUT_OF_MEMORY ? 1 : 2);
}

/* The card never held more than the budget; what gpucap counts is what the card holds. */
static void card_within(uint64_t limit, const char *step)
{
    CHECK(fakecuda_peak(0) <= limit, "%s: the card reached %llu MiB under a %llu MiB budget", step,
          (unsigned long long)(fakecuda_peak(0) / MiB), (unsigned long long)(limit / MiB));
    uint64_t held = fakecuda_outstanding(0), used = usage(0).used;
    CHECK(used == held, "%s: gpucap counts %llu bytes in use, the card holds %llu", step, (unsigned long long)used,
          (unsigned long long)held);
}

/* make_context(0), then fork(): the child (0 returned) holds 200 MiB at *x, or exits 2 when they
 * are refused; the parent gets the child's pid. */
static pid_t fork_holding(CUdeviceptr *x)
{
    make_context(0);
    pid_t w = fork();
    REQUIRE(w >= 0, "fork");
    if (w == 0 && cuMemAlloc_v2(x, 200 * MiB) != CUDA_SUCCESS)
        _exit(2);
    return w;
}

/* make_context(0), then this program again in `mode` (argv[2]: `arg`, or none) with TEST_SLOW_FINI
 * preloaded after gpucap, so that its slow destructor runs after gpucap's; it writes on `started_fd`
 * (closed here) when it starts. */
static pid_t spawn_slow_fini(int started_fd, const char *mode, const char *arg)
{
    make_context(0);
    pid_t w = fork();
    REQUIRE(w >= 0, "fork");
    if (w == 0) {
        char env[64], pre[4096];
        snprintf(env, sizeof env, "%d", started_fd);
        setenv("TEST_SLOW_FINI_FD", env, 1);
        snprintf(pre, sizeof pre, "%s:%s", getenv("LD_PRELOAD"), getenv("TEST_SLOW_FINI"));
        setenv("LD_PRELOAD", pre, 1);
        execl(self, self, mode, arg, (char *)NULL);
        _exit(127);
    }
    close(started_fd);
    return w;
}

static void case_limitdrop(void)
{
    make_context(0);
    CUdeviceptr a, b, c, d, e;
    CHECK_RC(cuMemAlloc_v2(&a, 100 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&b, 1 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&c, 16 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(c), CUDA_SUCCESS);
    struct gpc_ledger *l = map_ledger();
    struct gpc_ledger_share *s = &l->proc[0].share[0];
    REQUIRE(atomic_load(&l->proc[0].pid) == getpid() && (atomic_load(&s->spare) & GPC_SPARE_MASK) >= 16 * MiB,
            "this process should hold entry 0 with 16 MiB of spare");
    fakecuda_reset_peak(0);
    struct holder h = hold("GPUCAP_MEMORY_LIMIT=105MiB", 0);
    CHECK(usage(0).limit == 105 * MiB, "the limit is %llu MiB, not 105", (unsigned long long)(usage(0).limit / MiB));
    CHECK_RC(cuMemAlloc_v2(&c, 16 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* 101 + 16 > 105 */
    CHECK_RC(cuMemAlloc_v2(&c, 4 * MiB), CUDA_SUCCESS);              /* 105 */
    CHECK_RC(cuMemAlloc_v2(&d, 1), CUDA_ERROR_OUT_OF_MEMORY);
    card_within(105 * MiB, "under 105 MiB");
    CHECK_RC(cuMemFree_v2(c), CUDA_SUCCESS);
    /* A lower one still, under what this process holds (101 MiB). */
    struct holder h2 = hold("GPUCAP_MEMORY_LIMIT=90MiB", 0);
    CHECK_RC(cuMemFree_v2(b), CUDA_SUCCESS);                        /* 100 MiB held */
    fakecuda_reset_peak(0);
    CHECK_RC(cuMemAlloc_v2(&b, 1 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* not from what was freed */
    CHECK_RC(cuMemAlloc_v2(&b, 64 * 1024), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_peak(0) <= 100 * MiB, "admitted above what was held over the limit");
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    fakecuda_reset_peak(0);
    CHECK_RC(cuMemAlloc_v2(&a, 90 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&d, 1), CUDA_ERROR_OUT_OF_MEMORY);
    card_within(90 * MiB, "under 90 MiB");
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    let_go(h2);
    let_go(h);
    /* Both gone: the limit rises back to this process's own at the reap before a denial. */
    CHECK_RC(cuMemAlloc_v2(&a, 500 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&e, 524 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&d, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(usage(0).limit == GiB, "the limit is %llu MiB, not 1 GiB", (unsigned long long)(usage(0).limit / MiB));
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(e), CUDA_SUCCESS);
    card_within(GiB, "at the end");
    munmap(l, sizeof *l);
}

static void case_forklimit(void)
{
    /* Orphans (C, once P exits) become this process's children, to be waited for. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int go[2], res[2];
    REQUIRE(pipe(go) == 0 && pipe(res) == 0, "pipe");
    pid_t p = fork();
    if (p == 0) {
        make_context(0);
        CUdeviceptr x;
        if (cuMemAlloc_v2(&x, MiB) != CUDA_SUCCESS || cuMemFree_v2(x) != CUDA_SUCCESS)
            _exit(2);
        if (fork() == 0) {
            get_byte(go[0]);
            char r[2];
            r[0] = cuMemAlloc_v2(&x, 500 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
            r[1] = cuMemAlloc_v2(&x, 50 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
            _exit(write(res[1], r, 2) == 2 ? 0 : 3);
        }
        exit(0);
    }
    CHECK(wait_status(p) == 0, "P failed");
    struct holder q = hold("GPUCAP_MEMORY_LIMIT=1GiB", 0);
    put_byte(go[1]);
    char r[2] = {0, 0};
    REQUIRE(read(res[0], r, 2) == 2, "C's answer");
    CHECK(r[0] == 'n', "C (limit 100 MiB) was admitted 500 MiB");
    CHECK(r[1] == 'y', "C was denied 50 MiB");
    let_go(q);
    while (wait(NULL) > 0)
        ;
    CHECK(fakecuda_peak(0) <= 100 * MiB, "the card reached %llu MiB", (unsigned long long)(fakecuda_peak(0) / MiB));
}

static void case_zombie(void)
{
    int ready[2];
    REQUIRE(pipe(ready) == 0, "pipe");
    CUdeviceptr x;
    pid_t w = fork_holding(&x);
    if (w == 0) {
        put_byte(ready[1]);
        pause();
        _exit(0);
    }
    get_byte(ready[0]);
    kill(w, SIGKILL);
    /* Not waited for: a zombie until the end of this case. */
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)w);
    for (int i = 0; i < 200; i++) {
        int fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = 0;
        char *rp = strrchr(buf, ')');
        if (rp && rp[2] == 'Z')
            break;
        usleep(5000);
    }
    CUdeviceptr y;
    CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_SUCCESS);
    card_within(256 * MiB, "a zombie's share");
    CHECK(wait_status(w) == 128 + SIGKILL, "the worker was not killed");
    CHECK_RC(cuMemFree_v2(y), CUDA_SUCCESS);
    card_within(256 * MiB, "at the end");
}

static void case_exitlate(void)
{
    int started[2];
    REQUIRE(pipe(started) == 0, "pipe");
    pid_t w = spawn_slow_fini(started[1], "exitlate_child", NULL);
    get_byte(started[0]); /* the child's slow destructor runs: it still holds its 200 MiB */
    CUdeviceptr y;
    CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    card_within(256 * MiB, "while a process ends");
    CHECK(wait_status(w) == 0, "the child failed");
    CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_SUCCESS);
    card_within(256 * MiB, "after it ended");
}

static int asker_fd = -1;

/* Asks for 100 MiB every 5 ms until the process ends, writing 'y' or 'n' for each answer. */
static void *asker(void *arg)
{
    (void)arg;
    CUcontext ctx = make_context(0);
    (void)ctx;
    for (;;) {
        CUdeviceptr p;
        char c = cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(asker_fd, &c, 1) != 1)
            break;
        usleep(5000);
    }
    return NULL;
}

static void mode_exitthread_child(const char *fd)
{
    make_context(0);
    CUdeviceptr x;
    if (cuMemAlloc_v2(&x, 200 * MiB) != CUDA_SUCCESS)
        exit(2);
    asker_fd = atoi(fd);
    pthread_t t;
    if (pthread_create(&t, NULL, asker, NULL) != 0)
        exit(3);
    usleep(20 * 1000);
    exit(0); /* the asker runs on through every destructor, the slow one included */
}

static void case_exitthread(void)
{
    int started[2], answers[2];
    REQUIRE(pipe(started) == 0 && pipe(answers) == 0, "pipe");
    char fd[16];
    snprintf(fd, sizeof fd, "%d", answers[1]);
    pid_t w = spawn_slow_fini(started[1], "exitthread_child", fd);
    close(answers[1]);
    get_byte(started[0]); /* gpucap's destructor ran; the slow one runs for 1.5 s */
    int yes = 0, no = 0;
    char c;
    while (read(answers[0], &c, 1) == 1)
        c == 'y' ? yes++ : no++;
    CHECK(yes == 0 && no > 0, "a thread of an exiting process was admitted %d times (denied %d)", yes, no);
    CHECK(wait_status(w) == 0, "the child failed");
    card_within(256 * MiB, "a thread asking while its process ends");
}

static void mode_exitlate_child(void)
{
    make_context(0);
    CUdeviceptr x;
    if (cuMemAlloc_v2(&x, 200 * MiB) != CUDA_SUCCESS)
        exit(2);
    exit(0); /* without freeing: destructors run, then the driver frees at the last close */
}

static void mode_sleeper(const char *fd)
{
    /* No CUDA call in this image. */
    put_byte(atoi(fd));
    pause();
}

static void exec_case(bool vp)
{
    int ready[2];
    REQUIRE(pipe(ready) == 0, "pipe");
    CUdeviceptr x;
    pid_t w = fork_holding(&x);
    if (w == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        if (vp) {
            put_byte(ready[1]);
            char *argv[] = {"sleep", "30", NULL};
            execvp("sleep", argv);
        } else {
            execl(self, self, "sleeper", fd, (char *)NULL);
        }
        _exit(127);
    }
    get_byte(ready[0]);
    if (vp)
        usleep(200 * 1000); /* sleep has no way to say it started */
    CUdeviceptr y;
    CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_SUCCESS);
    card_within(256 * MiB, "after the exec");
    kill(w, SIGKILL);
    wait_status(w);
    CHECK_RC(cuMemFree_v2(y), CUDA_SUCCESS);
}

static void case_exec(void)
{
    exec_case(false);
}

static void case_execvp(void)
{
    exec_case(true);
}

static void case_execfail(void)
{
    int ready[2], release[2];
    REQUIRE(pipe(ready) == 0 && pipe(release) == 0, "pipe");
    CUdeviceptr x;
    pid_t w = fork_holding(&x);
    if (w == 0) {
        char *argv[] = {"none", NULL};
        execv("/nonexistent/gpucap-test", argv);
        execvp("gpucap-test-no-such-program", argv);
        put_byte(ready[1]);
        get_byte(release[0]);
        _exit(cuMemFree_v2(x) == CUDA_SUCCESS ? 0 : 3);
    }
    get_byte(ready[0]);
    CUdeviceptr y;
    CHECK_RC(cuMemAlloc_v2(&y, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    struct gpc_ledger *l = map_ledger();
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) == w)
            CHECK(atomic_load(&l->proc[i].execing) == 0, "a failed exec left its mark");
    munmap(l, sizeof *l);
    card_within(256 * MiB, "after a failed exec");
    put_byte(release[1]);
    CHECK(wait_status(w) == 0, "the worker failed");
    CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_SUCCESS);
}

static void case_privatefork(void)
{
    context_holding(0, 200 * MiB);
    pid_t c = fork();
    if (c == 0) {
        CHECK(usage(0).used == 0, "the child starts charged %llu MiB", (unsigned long long)(usage(0).used / MiB));
        CUdeviceptr y;
        CHECK_RC(cuMemAlloc_v2(&y, 200 * MiB), CUDA_SUCCESS);
        CHECK(usage(0).used == 200 * MiB, "the child is charged %llu MiB", (unsigned long long)(usage(0).used / MiB));
        CHECK_RC(cuMemAlloc_v2(&y, 57 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
        _exit(failures ? 1 : 0);
    }
    CHECK(wait_status(c) == 0, "the fork child failed");
    CHECK(usage(0).used == 200 * MiB, "the parent is charged %llu MiB", (unsigned long long)(usage(0).used / MiB));
}

static void case_recovered(void)
{
    make_context(0);
    CUdeviceptr a, b, c;
    CHECK_RC(cuMemAlloc_v2(&a, 100 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&b, 1 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&c, 16 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(c), CUDA_SUCCESS);
    pid_t t = fork();
    if (t == 0)
        _exit(truncate(getenv("GPUCAP_LEDGER"), 0) == 0 ? 0 : 1);
    REQUIRE(wait_status(t) == 0, "truncate");
    size_t free_b = 0, total = 0;
    CHECK_RC(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK(total == GiB && free_b == GiB - 101 * MiB, "right after the shrink: free %zu total %zu", free_b, total);
    struct gpucap_usage u = usage(0);
    CHECK(u.limit == GiB && u.used == 101 * MiB, "usage: limit %llu used %llu", (unsigned long long)u.limit,
          (unsigned long long)u.used);
    CHECK_RC(cuMemAlloc_v2(&c, 16 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(b), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(c), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "%llu bytes stay charged", (unsigned long long)usage(0).used);
    CHECK_RC(cuMemAlloc_v2(&a, GiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
}

/* A holds 200 MiB; `move` takes the file away; A's next locked step finds the file at the path. */
static void moved_case(bool replaced)
{
    make_context(0);
    CUdeviceptr a, b;
    CHECK_RC(cuMemAlloc_v2(&a, 200 * MiB), CUDA_SUCCESS);
    const char *path = getenv("GPUCAP_LEDGER");
    struct holder h = {0, -1};
    if (replaced) {
        char old[600];
        snprintf(old, sizeof old, "%s.old", path);
        REQUIRE(rename(path, old) == 0, "rename");
        h = hold(NULL, 10); /* makes a fresh ledger at the path, holding 10 MiB there */
    } else {
        REQUIRE(unlink(path) == 0, "unlink");
    }
    /* Beyond this process's lease: a locked step. */
    CHECK_RC(cuMemAlloc_v2(&b, 30 * MiB), CUDA_SUCCESS);
    struct stat st;
    CHECK(stat(path, &st) == 0, "no ledger at the path after the move");
    CHECK(!other_gets(replaced ? 30 : 200), "a process on the file at the path was admitted past the budget");
    CHECK(other_gets(replaced ? 10 : 20), "a process on the file at the path was denied what fits");
    card_within(256 * MiB, "after the move");
    if (replaced)
        let_go(h);
}

static void case_removed(void)
{
    moved_case(false);
}

static void case_replaced(void)
{
    moved_case(true);
}

int main(int argc, char **argv)
{
    self = argv[0];
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "hold") == 0 && argc > 3)
        mode_hold(argv[2], argv[3]);
    else if (strcmp(c, "want") == 0 && argc > 2)
        mode_want(argv[2]);
    else if (strcmp(c, "sleeper") == 0 && argc > 2)
        mode_sleeper(argv[2]);
    else if (strcmp(c, "exitlate_child") == 0)
        mode_exitlate_child();
    else if (strcmp(c, "exitthread_child") == 0 && argc > 2)
        mode_exitthread_child(argv[2]);
    if (strcmp(c, "hold") == 0 || strcmp(c, "want") == 0 || strcmp(c, "sleeper") == 0)
        return test_result();
    static const struct test_case cases[] = {
        {"limitdrop", case_limitdrop}, {"forklimit", case_forklimit},   {"zombie", case_zombie},
        {"exitlate", case_exitlate},   {"exitthread", case_exitthread}, {"exec", case_exec},             {"execvp", case_execvp},
        {"execfail", case_execfail},   {"privatefork", case_privatefork}, {"recovered", case_recovered},
        {"removed", case_removed},     {"replaced", case_replaced},
    };
    RUN_CASE(cases, c);
    return test_result();
}
