/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_loan.c ROUNDS SOCKET: the loan round trip of burstable memory (issue 35), under the library
 * with a settings file (GPUCAP_CONFIG) of request 128 MiB, limit 512 MiB and a test arbiter that
 * lends (tests/lib/test_arbiter.c, grant mode, at SOCKET; bench/loan.sh starts it). 128 MiB held;
 * each round times one cuMemAlloc_v2 of 64 MiB past the request: denied by the budget in force,
 * the datagram to the arbiter, its rewrite of the settings file and answer, the library's re-read
 * and the admission retried. Then the block is freed and the arbiter asked to take the grant back
 * (`reset`), which the program waits to see in force. Prints the round trip's p50, p99 and max, and
 * an allocation within the request for comparison.
 */
#include "bench.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MiB (1024ull * 1024)

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t total_now(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo_v2(&f, &t);
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_loan ROUNDS SOCKET\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    if (rounds < 1)
        rounds = 1;
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un to = {.sun_family = AF_UNIX};
    snprintf(to.sun_path, sizeof to.sun_path, "%s", argv[2]);
    CUcontext ctx = bench_context();
    cuCtxSetCurrent(ctx);
    CUdeviceptr held, p, q;
    if (cuMemAlloc_v2(&held, 128 * MiB) != CUDA_SUCCESS) {
        fprintf(stderr, "the request (128 MiB) was denied\n");
        return 1;
    }
    double *loan = calloc((size_t)rounds, sizeof *loan), *within = calloc((size_t)rounds, sizeof *within);
    int failed = 0;
    for (int i = 0; i < rounds; i++) {
        double t0 = bench_now_ns();
        CUresult rc = cuMemAlloc_v2(&p, 64 * MiB);
        loan[i] = (bench_now_ns() - t0) / 1e6;
        if (rc != CUDA_SUCCESS) {
            failed++;
            continue;
        }
        cuMemFree_v2(p);
        /* Within the budget in force (the grant still there): the ordinary path, for comparison. */
        t0 = bench_now_ns();
        rc = cuMemAlloc_v2(&q, 4096);
        within[i] = (bench_now_ns() - t0) / 1e6;
        if (rc == CUDA_SUCCESS)
            cuMemFree_v2(q);
        sendto(s, "reset", 5, 0, (struct sockaddr *)&to, sizeof to);
        for (int w = 0; w < 2000 && total_now() != 128 * MiB; w++)
            usleep(500);
    }
    qsort(loan, (size_t)rounds, sizeof *loan, cmp);
    qsort(within, (size_t)rounds, sizeof *within, cmp);
    int p99 = (int)(rounds * 0.99);
    if (p99 >= rounds)
        p99 = rounds - 1;
    printf("%-34s %10s %10s %10s\n", "ms", "p50", "p99", "max");
    printf("%-34s %10.3f %10.3f %10.3f\n", "loan round trip (denial to admitted)", loan[rounds / 2], loan[p99],
           loan[rounds - 1]);
    printf("%-34s %10.3f %10.3f %10.3f\n", "allocation within the budget", within[rounds / 2], within[p99],
           within[rounds - 1]);
    printf("rounds %d, loans not admitted %d (target: p99 <= 5 ms)\n", rounds, failed);
    return failed ? 1 : 0;
}
