/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_crowd.c [N]: N processes (default 500) start together on one ledger and each allocates
 * 1 MiB, holding it until all have tried: none may be denied (a contended ledger lock is retried,
 * never cached as a denial). With --bench, prints the time from the start signal to the first
 * successful allocation (median, 90th percentile, worst) instead of only checking.
 * The parent never touches CUDA: every child sets up its device entry itself, as 500 fresh
 * processes of one container would. Each child has its own fake card (no FAKECUDA_RECORD).
 */
#include "common.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool bench = false;
    int n = 500;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench") == 0)
            bench = true;
        else
            n = atoi(argv[i]);
    }
    REQUIRE(n > 0 && n <= 1000, "N from 1 to 1000");
    int go[2], done[2], hold[2];
    REQUIRE(pipe(go) == 0 && pipe(done) == 0 && pipe(hold) == 0, "pipe");
    pid_t *kids = calloc((size_t)n, sizeof *kids);
    for (int i = 0; i < n; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0, "fork: %s", strerror(errno));
        if (kids[i] == 0) {
            close(go[1]);
            close(hold[1]);
            char c;
            uint64_t t0;
            if (read(go[0], &t0, sizeof t0) != sizeof t0)
                _exit(2);
            int ok = cuInit(0) == CUDA_SUCCESS;
            CUdevice d = 0;
            CUcontext ctx;
            ok = ok && cuDeviceGet(&d, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, d) == CUDA_SUCCESS &&
                 cuCtxSetCurrent(ctx) == CUDA_SUCCESS;
            CUdeviceptr p = 0;
            CUresult rc = ok ? cuMemAlloc_v2(&p, 1 * MiB) : CUDA_ERROR_NOT_INITIALIZED;
            uint64_t took = now_ns() - t0;
            struct {
                int32_t rc;
                uint64_t ns;
            } msg = {(int32_t)rc, took};
            if (write(done[1], &msg, sizeof msg) != sizeof msg)
                _exit(3);
            /* Hold the allocation until every process has tried. */
            if (read(hold[0], &c, 1) < 0)
                _exit(4);
            _exit(rc == CUDA_SUCCESS ? 0 : 1);
        }
    }
    close(go[0]);
    close(hold[0]);
    close(done[1]);
    /* The start signal: one message per child, written at once. */
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++)
        REQUIRE(write(go[1], &t0, sizeof t0) == sizeof t0, "go");
    uint64_t *ns = calloc((size_t)n, sizeof *ns);
    int denied = 0, got = 0;
    for (; got < n; got++) {
        struct {
            int32_t rc;
            uint64_t ns;
        } msg;
        if (read(done[0], &msg, sizeof msg) != sizeof msg)
            break;
        ns[got] = msg.ns;
        if (msg.rc != CUDA_SUCCESS)
            denied++;
    }
    close(hold[1]);
    for (int i = 0; i < n; i++)
        waitpid(kids[i], NULL, 0);
    CHECK(got == n, "%d of %d processes reported", got, n);
    CHECK(denied == 0, "%d of %d processes were denied their first allocation", denied, n);
    if (bench && got > 0) {
        qsort(ns, (size_t)got, sizeof *ns, cmp_u64);
        printf("crowd of %d processes: time to first allocation median %.1f ms, p90 %.1f ms, worst %.1f ms; "
               "%d denied\n", n, ns[got / 2] / 1e6, ns[got * 9 / 10] / 1e6, ns[got - 1] / 1e6, denied);
    }
    free(ns);
    free(kids);
    return test_result();
}
