/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ledger.c CASE: one budget shared by processes through the ledger file.
 *
 * Cases (each run by ctest with its own GPUCAP_LEDGER, a 64 MiB budget and a fake card record
 * shared by all processes through FAKECUDA_RECORD):
 *   compete   4 processes x 4 threads allocate at random against one budget: the card's peak
 *             (all processes) never passes it, and every byte is back at the end;
 *   sigkill   200 SIGKILLs at random moments of busy processes; afterwards the whole budget can be
 *             allocated again, the ledger returns to exactly zero in use and its total to the
 *             sum of the leases. With TEST_CRASH_STEPS set (and the crash-test copy of the
 *             library), each process also dies by itself at step 1 + seed % 13 of the locked
 *             lease operations the first time it gets there (libgpucap/core/lease.c), so
 *             deaths inside the lock meet admissions and take-backs of the others;
 *   pidreuse  a ledger entry whose pid is alive but whose start time differs is a dead process:
 *             its share is reclaimed; a live one's is not;
 *   fork      a fork child (no exec) gets its own entry; its share goes when it dies;
 *   orders    two processes that see the two cards in opposite orders share one budget per card;
 *   disagree  two processes with different limits: the smaller applies, with a warning;
 *   mode      the ledger file is created owner-only (0600), or 0660 with GPUCAP_LEDGER_GROUP=1.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_test.h"

#define LIMIT (64 * MiB)

static CUcontext ctx;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    long iterations = (long)((uintptr_t)arg >> 16);
    cuCtxSetCurrent(ctx);
    CUdeviceptr held[8] = {0};
    for (long i = 0; iterations == 0 || i < iterations; i++) {
        int s = rand_r(&seed) % 8;
        if (held[s]) {
            CHECK_RC(cuMemFree_v2(held[s]), CUDA_SUCCESS);
            held[s] = 0;
        } else {
            CUresult rc = cuMemAlloc_v2(&held[s], 1 + (size_t)rand_r(&seed) % (8 * MiB));
            CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY, "rc %d", (int)rc);
            if (rc != CUDA_SUCCESS)
                held[s] = 0;
        }
    }
    for (int s = 0; s < 8; s++)
        if (held[s])
            cuMemFree_v2(held[s]);
    return NULL;
}

/* A child process that allocates until killed (iterations 0) or for a while. */
static pid_t spawn_churn(unsigned seed, long iterations, int threads)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (getenv("TEST_CRASH_STEPS")) {
        char n[16];
        snprintf(n, sizeof n, "%u", 1 + seed % 13);
        setenv("GPC_TEST_CRASH_AT", n, 1);
    }
    ctx = make_context(0);
    pthread_t t[8];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)((uint64_t)iterations << 16 | (seed + i)));
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    _exit(failures ? 1 : 0);
}

static int wait_ok(pid_t pid)
{
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* After everything: the whole budget is there again (reclaiming dead shares if needed), then 0. */
static void expect_whole_budget_back(void)
{
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, LIMIT), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    const struct gpc_ledger *l = map_ledger();
    uint64_t sum = leases_sum(l, 0);
    CHECK(sum == atomic_load(&l->dev[0].slot.leased), "the leases sum to %llu, the total says %llu",
          (unsigned long long)sum, (unsigned long long)atomic_load(&l->dev[0].slot.leased));
    munmap((void *)l, sizeof *l);
    CHECK(usage(0).used == 0, "ledger still holds %llu bytes", (unsigned long long)usage(0).used);
    CHECK(fakecuda_outstanding(0) == 0, "card still holds %llu", (unsigned long long)fakecuda_outstanding(0));
}

static void case_compete(void)
{
    pid_t kids[4];
    for (int i = 0; i < 4; i++)
        kids[i] = spawn_churn(100 + i * 10, 4000, 4);
    for (int i = 0; i < 4; i++)
        CHECK(wait_ok(kids[i]), "worker %d failed", i);
    ctx = make_context(0);
    printf("compete: card peak %llu of budget %llu\n", (unsigned long long)fakecuda_peak(0),
           (unsigned long long)LIMIT);
    CHECK(fakecuda_peak(0) <= LIMIT, "the card held %llu > budget", (unsigned long long)fakecuda_peak(0));
    CHECK(fakecuda_peak(0) > LIMIT / 2, "the processes never came near the budget: the test did not test");
    expect_whole_budget_back();
}

static void case_sigkill(void)
{
    unsigned seed = 7;
    pid_t kids[3] = {0};
    int kills = 0;
    for (int i = 0; i < 3; i++)
        kids[i] = spawn_churn(1000 + i, 0, 2);
    while (kills < 200) {
        int k = rand_r(&seed) % 3;
        usleep(500 + rand_r(&seed) % 3000);
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
        kills++;
        kids[k] = spawn_churn(2000 + kills, 0, 2);
    }
    for (int i = 0; i < 3; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    ctx = make_context(0);
    printf("sigkill: %d processes killed; card peak %llu of %llu\n", kills, (unsigned long long)fakecuda_peak(0),
           (unsigned long long)LIMIT);
    CHECK(fakecuda_peak(0) <= LIMIT, "the card held %llu > budget", (unsigned long long)fakecuda_peak(0));
    expect_whole_budget_back();
}

/* Writes a fake process entry holding `bytes` of device entry 0 into the ledger. */
static void forge(struct gpc_ledger *l, int slot, int32_t pid, uint64_t start, uint64_t bytes)
{
    struct gpc_ledger_proc *p = &l->proc[slot];
    atomic_store(&p->start_time, start);
    atomic_store(&p->share[0].lease, bytes); /* all of it in use: no spare */
    atomic_store(&p->pid, pid);
    atomic_fetch_add(&l->dev[0].slot.leased, bytes);
    if (atomic_load(&l->procs_used) < (uint32_t)slot + 1)
        atomic_store(&l->procs_used, (uint32_t)slot + 1);
}

static uint64_t my_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    REQUIRE(f && fgets(buf, sizeof buf, f), "read %s", path);
    fclose(f);
    char *p = strrchr(buf, ')');
    for (int field = 2; field < 22; field++)
        p = strchr(p + 1, ' ');
    return strtoull(p + 1, NULL, 10);
}

static void case_pidreuse(void)
{
    ctx = make_context(0);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, MiB), CUDA_SUCCESS); /* registers the device and this process */
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    struct gpc_ledger *l = map_ledger();
    /* The parent (alive) with a start time that is not its own: a reused pid, i.e. dead. */
    forge(l, GPC_LEDGER_PROCS - 1, getppid(), my_start_time(getppid()) + 12345, 40 * MiB);
    /* (usage() would reap it already: figures leave dead processes out.) */
    CHECK(atomic_load(&l->proc[GPC_LEDGER_PROCS - 1].share[0].lease) == 40 * MiB, "forged share not in the ledger");
    CHECK_RC(cuMemAlloc_v2(&p, LIMIT), CUDA_SUCCESS);
    CHECK(atomic_load(&l->proc[GPC_LEDGER_PROCS - 1].pid) == 0, "the stale entry was not reclaimed");
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "used %llu after reclaim", (unsigned long long)usage(0).used);

    /* The parent with its real start time is alive: its share stays and the budget is smaller. */
    forge(l, GPC_LEDGER_PROCS - 2, getppid(), my_start_time(getppid()), 40 * MiB);
    CHECK_RC(cuMemAlloc_v2(&p, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemAlloc_v2(&p, 24 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK(atomic_load(&l->proc[GPC_LEDGER_PROCS - 2].pid) == getppid(), "a live process was reclaimed");
    /* Clean up the forged live entry by hand. */
    atomic_fetch_sub(&l->dev[0].slot.leased, 40 * MiB);
    atomic_store(&l->proc[GPC_LEDGER_PROCS - 2].share[0].lease, 0);
    atomic_store(&l->proc[GPC_LEDGER_PROCS - 2].pid, 0);
}

static void case_fork(void)
{
    ctx = make_context(0);
    CUdeviceptr p, q;
    CHECK_RC(cuMemAlloc_v2(&p, 16 * MiB), CUDA_SUCCESS);
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        /* The child charges 32 MiB to its own entry and dies without freeing it. */
        CUdeviceptr c;
        char ok = cuMemAlloc_v2(&c, 32 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(pipefd[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    CHECK(read(pipefd[0], &ok, 1) == 1 && ok == 'y', "the child could not allocate");
    CHECK(usage(0).used == 48 * MiB, "ledger holds %llu, want 48 MiB", (unsigned long long)usage(0).used);
    CHECK_RC(cuMemAlloc_v2(&q, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* The child is gone: its 32 MiB come back at the next allocation that needs them. */
    CHECK_RC(cuMemAlloc_v2(&q, 48 * MiB), CUDA_SUCCESS);
    CHECK(usage(0).used == 64 * MiB, "ledger holds %llu", (unsigned long long)usage(0).used);
    CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "used %llu", (unsigned long long)usage(0).used);
}

/* A child that sees the cards as `visible`, allocates `bytes` on its ordinal `ord`, reports the
 * result through the pipe and waits to be killed. */
static pid_t hold_on(const char *visible, int ord, uint64_t bytes, int fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    ctx = make_context(ord);
    CUdeviceptr p;
    char r = cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS ? 'y' : 'n';
    if (write(fd, &r, 1) != 1)
        _exit(2);
    pause();
    _exit(0);
}

static void case_orders(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    char r;
    /* A sees 0,1 and takes 40 MiB of its ordinal 1 = card 1. */
    pid_t a = hold_on("0,1", 1, 40 * MiB, fds[1]);
    CHECK(read(fds[0], &r, 1) == 1 && r == 'y', "A could not allocate");
    /* B sees 1,0: its ordinal 0 is card 1 (40 of 64 MiB taken), its ordinal 1 is card 0 (free). */
    pid_t b = hold_on("GPU-fa4ec0da-0000-4000-8000-000000000001,0", 0, 32 * MiB, fds[1]);
    CHECK(read(fds[0], &r, 1) == 1 && r == 'n', "B got 32 MiB more on card 1: budgets not shared by UUID");
    pid_t c = hold_on("1,0", 1, 60 * MiB, fds[1]);
    CHECK(read(fds[0], &r, 1) == 1 && r == 'y', "C could not use card 0's own budget");
    CHECK(fakecuda_outstanding(1) == 40 * MiB, "card 1 holds %llu", (unsigned long long)fakecuda_outstanding(1));
    CHECK(fakecuda_outstanding(0) == 60 * MiB, "card 0 holds %llu", (unsigned long long)fakecuda_outstanding(0));
    kill(a, SIGKILL), kill(b, SIGKILL), kill(c, SIGKILL);
    waitpid(a, NULL, 0), waitpid(b, NULL, 0), waitpid(c, NULL, 0);
}

static void case_disagree(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    char r;
    pid_t a = fork();
    if (a == 0) {
        setenv("GPUCAP_MEMORY_LIMIT", "32MiB", 1);
        ctx = make_context(0);
        CUdeviceptr p;
        r = cuMemAlloc_v2(&p, 16 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(fds[1], &r, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    CHECK(read(fds[0], &r, 1) == 1 && r == 'y', "A could not allocate");
    /* This process asks for 64 MiB; A, alive, asked for 32 MiB: 32 MiB applies to both. */
    ctx = make_context(0);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 24 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemAlloc_v2(&p, 16 * MiB), CUDA_SUCCESS);
    CHECK(usage(0).limit == 32 * MiB, "limit %llu", (unsigned long long)usage(0).limit);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
}

static void case_mode(void)
{
    ctx = make_context(0);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    struct stat st;
    REQUIRE(stat(getenv("GPUCAP_LEDGER"), &st) == 0, "no ledger file");
    const char *group = getenv("GPUCAP_LEDGER_GROUP");
    unsigned want = group && strcmp(group, "1") == 0 ? 0660 : 0600;
    CHECK((st.st_mode & 0777) == want, "mode %o, want %o", st.st_mode & 0777, want);
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_ledger CASE");
    REQUIRE(getenv("GPUCAP_LEDGER") && getenv("FAKECUDA_RECORD"), "GPUCAP_LEDGER and FAKECUDA_RECORD must be set");
    unlink(getenv("GPUCAP_LEDGER"));
    unlink(getenv("FAKECUDA_RECORD"));
    const char *c = argv[1];
    static const struct test_case cases[] = {
        {"compete", case_compete},
        {"sigkill", case_sigkill},
        {"pidreuse", case_pidreuse},
        {"fork", case_fork},
        {"orders", case_orders},
        {"disagree", case_disagree},
        {"mode", case_mode},
    };
    RUN_CASE(cases, c);
    return test_result();
}
