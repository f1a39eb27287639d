/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_crowd_kill.c [N [SEED]]: N processes (default 150) of 1 or 2 threads each allocate and free
 * at random (64 KiB to 8 MiB) against one 256 MiB budget, up to 32 at a time: a third are SIGKILLed
 * at a random moment, a sixth run the crash-test copy of the library (TEST_PRELOAD_CRASH) with a
 * random crash step (GPC_TEST_CRASH_AT), a third exit without freeing (with two threads, while the
 * second still allocates and frees), the rest free everything first. The fake card's own record
 * must never have held more than the budget (its peak), and the end state must be exact: the whole
 * budget is admitted to one process, one byte more is denied, and once it is freed every figure is
 * 0. Prints the card's peak. Run with FAKECUDA_EAGER_REAP=1
 * (the card's peak then never counts the memory of a process that is already dead).
 */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_test.h"

#define LIMIT (256 * MiB)
#define AT_ONCE 32
#define HELD_MAX 64

enum kind { KILLED, CRASHED, EXITS_HOLDING, FREES };

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct worker_thread {
    uint64_t seed;
    bool free_at_end;
    CUcontext ctx;
};

static void *work(void *arg)
{
    struct worker_thread *w = arg;
    if (cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS)
        _exit(13);
    CUdeviceptr held[HELD_MAX];
    int n = 0;
    uint64_t end = now_ms() + 30 + rng(&w->seed) % 220;
    while (now_ms() < end) {
        if (n < HELD_MAX && (n == 0 || rng(&w->seed) % 10 < 6)) {
            uint64_t bytes = 64 * 1024 + rng(&w->seed) % (8 * MiB - 64 * 1024);
            CUresult rc = cuMemAlloc_v2(&held[n], bytes);
            if (rc == CUDA_SUCCESS)
                n++;
            else if (rc != CUDA_ERROR_OUT_OF_MEMORY)
                _exit(10);
        } else {
            int i = (int)(rng(&w->seed) % (uint64_t)n);
            if (cuMemFree_v2(held[i]) != CUDA_SUCCESS)
                _exit(11);
            held[i] = held[--n];
        }
    }
    if (w->free_at_end)
        while (n > 0)
            if (cuMemFree_v2(held[--n]) != CUDA_SUCCESS)
                _exit(12);
    return NULL;
}

static int worker(uint64_t seed, enum kind kind)
{
    CUcontext ctx;
    CUdevice d;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 9;
    int threads = 1 + (int)(rng(&seed) % 2);
    struct worker_thread w[2] = {{seed * 3 + 1, kind == FREES, ctx}, {seed * 7 + 5, kind == FREES, ctx}};
    pthread_t t;
    bool two = threads == 2 && pthread_create(&t, NULL, work, &w[1]) == 0;
    work(&w[0]);
    /* One that exits holding its memory does not wait for its other thread: that one may be
     * allocating or freeing while the process exits (a release landing after the share was given
     * back is the race the ledger must not have). */
    if (two && kind == EXITS_HOLDING) {
        pthread_detach(t);
        exit(0);
    }
    if (two)
        pthread_join(t, NULL);
    if (kind == KILLED)
        pause(); /* the parent kills it, at a random moment in its work or here */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 3 && strcmp(argv[1], "worker") == 0)
        return worker(strtoull(argv[2], NULL, 10), (enum kind)atoi(argv[3]));
    int n = argc > 1 ? atoi(argv[1]) : 150;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
    REQUIRE(n > 0 && n <= 1000, "N from 1 to 1000");
    const char *crash = getenv("TEST_PRELOAD_CRASH"), *plain = getenv("LD_PRELOAD");
    REQUIRE(crash && plain, "TEST_PRELOAD_CRASH and LD_PRELOAD must be set");
    printf("seed %llu\n", (unsigned long long)seed);
    pid_t pids[1000];
    uint64_t kill_at[1000];
    int running = 0, spawned = 0, bad = 0, crashed = 0;
    while (spawned < n || running > 0) {
        while (spawned < n && running < AT_ONCE) {
            uint64_t r = rng(&seed);
            enum kind k = r % 6 < 2 ? KILLED : r % 6 == 2 ? CRASHED : r % 6 < 5 ? EXITS_HOLDING : FREES;
            char s[32], kk[8], at[8];
            snprintf(s, sizeof s, "%llu", (unsigned long long)(rng(&seed) | 1));
            snprintf(kk, sizeof kk, "%d", (int)k);
            snprintf(at, sizeof at, "%d", 1 + (int)(rng(&seed) % 13));
            pid_t pid = fork();
            REQUIRE(pid >= 0, "fork: %s", strerror(errno));
            if (pid == 0) {
                if (k == CRASHED) {
                    setenv("LD_PRELOAD", crash, 1);
                    setenv("GPC_TEST_CRASH_AT", at, 1);
                }
                execl(argv[0], argv[0], "worker", s, kk, (char *)NULL);
                _exit(127);
            }
            pids[spawned] = pid;
            kill_at[spawned] = k == KILLED ? now_ms() + 10 + rng(&seed) % 300 : 0;
            spawned++;
            running++;
        }
        uint64_t now = now_ms();
        for (int i = 0; i < spawned; i++)
            if (pids[i] > 0 && kill_at[i] && now >= kill_at[i]) {
                kill(pids[i], SIGKILL);
                kill_at[i] = 0;
            }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            running--;
            for (int i = 0; i < spawned; i++)
                if (pids[i] == pid)
                    pids[i] = -pids[i];
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
                crashed++;
            else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                bad++, fprintf(stderr, "worker %d ended with status %#x\n", (int)pid, st);
        }
        usleep(2000);
    }
    CHECK(bad == 0, "%d workers failed", bad);
    uint64_t peak = fakecuda_peak(0);
    printf("workers %d, killed or crashed %d, card peak %llu bytes (%.2f MiB) of a %llu MiB budget\n", n, crashed,
           (unsigned long long)peak, (double)peak / MiB, LIMIT / MiB);
    CHECK(peak <= LIMIT, "the card held %llu bytes under a %llu byte budget", (unsigned long long)peak, LIMIT);
    /* The end state: the whole budget, not one byte more, then every figure 0. */
    make_context(0);
    CUdeviceptr all, more;
    CHECK_RC(cuMemAlloc_v2(&all, LIMIT), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&more, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(usage(0).used == LIMIT && fakecuda_outstanding(0) == LIMIT, "used %llu, the card holds %llu",
          (unsigned long long)usage(0).used, (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(cuMemFree_v2(all), CUDA_SUCCESS);
    size_t free_b = 0, total = 0;
    CHECK_RC(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK(free_b == LIMIT && total == LIMIT, "cuMemGetInfo: free %zu total %zu", free_b, total);
    CHECK(usage(0).used == 0 && fakecuda_outstanding(0) == 0, "at the end: used %llu, the card holds %llu",
          (unsigned long long)usage(0).used, (unsigned long long)fakecuda_outstanding(0));
    struct gpc_ledger *l = map_ledger();
    CHECK(leases_sum(l, 0) == atomic_load(&l->dev[0].slot.leased), "the leases sum to %llu, the total says %llu",
          (unsigned long long)leases_sum(l, 0), (unsigned long long)atomic_load(&l->dev[0].slot.leased));
    CHECK(fakecuda_peak(0) <= LIMIT, "the card held more than the budget");
    return test_result();
}
