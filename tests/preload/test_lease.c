/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease.c: budget leases survive a process killed at every step of every locked lease
 * operation (libgpucap/core/lease.c), run with the crash-test copy of the library.
 *
 * This process holds 1 MiB of a 64 MiB budget and some spare. For each step N, a child (this
 * program again, exec'd with GPC_TEST_CRASH_AT=N) asks for 63 MiB, which takes this process's
 * spare back (steps 5-9: the victim is another, live process) and grows its own lease (1-4); for
 * steps 10-13 a grandchild first holds 7 MiB with 3 MiB spare and exits, and the child takes its
 * share back (a reap, at a cuMemGetInfo) before it asks. The child dies at step N. Then the budget must be exact again: the
 * whole rest of it can be allocated, one byte more is denied, every figure equals what the fake
 * card holds, and the ledger's total equals the sum of the leases.
 */
#include "common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger_test.h"

#define LIMIT (64 * MiB)
#define STEPS 13

/* The child: 63 MiB (for the reap steps after a grandchild that exited holding 7 MiB and 3 MiB
 * spare, reaped by a figure), then a normal exit (its share is taken back once it is dead). */
static int child(void)
{
    const char *at = getenv("GPC_TEST_CRASH_AT");
    if (at && atoi(at) >= 10 && atoi(at) <= STEPS) {
        pid_t g = fork();
        if (g == 0) {
            /* 7 MiB held and 3 MiB spare (its lease grew a chunk ahead; 1 MiB freed), so that a
             * reap killed half-way leaves spare in a dead entry whose lease is already 0. */
            make_context(0);
            CUdeviceptr q, r;
            _exit(cuMemAlloc_v2(&q, 7 * MiB) == CUDA_SUCCESS && cuMemAlloc_v2(&r, 1 * MiB) == CUDA_SUCCESS &&
                          cuMemFree_v2(r) == CUDA_SUCCESS
                      ? 0
                      : 3);
        }
        int st;
        if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 4;
        /* A figure reaps first (no spare was taken back before it, as before a denial). */
        make_context(0);
        size_t free_b, total;
        cuMemGetInfo_v2(&free_b, &total);
    }
    make_context(0);
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, LIMIT - MiB);
    return rc == CUDA_SUCCESS ? 0 : 3;
}

/* Every figure against the card; the total against the leases. */
static void exact(const struct gpc_ledger *l, int step, const char *when)
{
    uint64_t held = fakecuda_outstanding(0);
    CHECK(usage(0).used == held, "step %d, %s: gpucap counts %llu, the card holds %llu", step, when,
          (unsigned long long)usage(0).used, (unsigned long long)held);
    size_t free_b = 0, total = 0;
    CHECK_RC(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK(free_b == LIMIT - held, "step %d, %s: cuMemGetInfo free %zu, want %llu", step, when, free_b,
          (unsigned long long)(LIMIT - held));
    uint64_t sum = leases_sum(l, 0);
    CHECK(sum == atomic_load(&l->dev[0].slot.leased), "step %d, %s: the leases sum to %llu, the total says %llu",
          step, when, (unsigned long long)sum, (unsigned long long)atomic_load(&l->dev[0].slot.leased));
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        uint64_t w = atomic_load(&l->proc[i].share[0].spare);
        CHECK(!((w >> GPC_SPARE_BITS) & 1), "step %d, %s: entry %d left with an odd generation", step, when, i);
    }
}

static void round_at(const char *self, const struct gpc_ledger *l, int step)
{
    pid_t pid = fork();
    if (pid == 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", step);
        setenv("GPC_TEST_CRASH_AT", n, 1);
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid, "wait");
    if (step <= STEPS)
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "step %d was not reached: status %#x", step, st);
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a child without a crash step failed: status %#x", st);
    /* The rest of the budget is there once the dead child is reaped, and not one byte more. */
    CUdeviceptr rest, more;
    CHECK_RC(cuMemAlloc_v2(&rest, LIMIT - MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&more, 1), CUDA_ERROR_OUT_OF_MEMORY);
    exact(l, step, "the whole budget allocated");
    CHECK_RC(cuMemFree_v2(rest), CUDA_SUCCESS);
    exact(l, step, "back to this process's 1 MiB");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child();
    make_context(0);
    CUdeviceptr mine, more;
    CHECK_RC(cuMemAlloc_v2(&mine, MiB), CUDA_SUCCESS);
    /* A second allocation grows the lease with spare ahead; freed, it leaves more spare. */
    CHECK_RC(cuMemAlloc_v2(&more, 2 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(more), CUDA_SUCCESS);
    struct gpc_ledger *l = map_ledger();
    uint64_t w = atomic_load(&l->proc[0].share[0].spare);
    REQUIRE(atomic_load(&l->proc[0].pid) == getpid() && (w & GPC_SPARE_MASK) > 0,
            "this process should hold entry 0 with some spare");
    for (int step = 1; step <= STEPS + 1; step++)
        round_at(argv[0], l, step);
    CHECK_RC(cuMemFree_v2(mine), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "%llu in use at the end", (unsigned long long)usage(0).used);
    munmap(l, sizeof *l);
    return test_result();
}
