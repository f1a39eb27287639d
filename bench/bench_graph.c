/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_graph.c THREADS LAUNCHES [plain|alloc]: median nanoseconds per cuGraphLaunch.
 *
 * Each thread instantiates a graph of its own and launches it LAUNCHES times: `plain` (default) a
 * graph of one kernel node, `alloc` a graph with a 2 MiB allocation node and its free node (the
 * memory stays reserved for graphs between launches). The run repeats RUNS times and prints the
 * median, min and max ns per launch (per thread). Run it with and without libgpucap.so preloaded
 * (bench/graph.sh) to see what the library adds; against the fake driver the figures are the
 * library's own cost plus the fake's (which takes one process-wide lock per launch).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7

static long launches = 1000000;
static bool with_alloc;
static CUcontext ctx;
static pthread_barrier_t start;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static CUgraphExec make_graph(void)
{
    CUgraph g;
    CUgraphNode n, f;
    CUgraphExec e;
    if (cuGraphCreate(&g, 0) != CUDA_SUCCESS)
        return NULL;
    if (with_alloc) {
        CUDA_MEM_ALLOC_NODE_PARAMS ap = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                       .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}},
                                         .bytesize = 2 << 20};
        if (cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap) != CUDA_SUCCESS ||
            cuGraphAddMemFreeNode(&f, g, &n, 1, ap.dptr) != CUDA_SUCCESS)
            return NULL;
    } else {
        CUDA_KERNEL_NODE_PARAMS kp;
        memset(&kp, 0, sizeof kp);
        if (cuGraphAddKernelNode_v2(&n, g, NULL, 0, &kp) != CUDA_SUCCESS)
            return NULL;
    }
    return cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS ? e : NULL;
}

static void *worker(void *arg)
{
    double *out = arg;
    cuCtxSetCurrent(ctx);
    CUgraphExec e = make_graph();
    if (!e) {
        fprintf(stderr, "cannot build a graph\n");
        exit(1);
    }
    for (long i = 0; i < 1000; i++) /* warm-up */
        cuGraphLaunch(e, NULL);
    pthread_barrier_wait(&start);
    double t0 = now_ns();
    for (long i = 0; i < launches; i++) {
        if (cuGraphLaunch(e, NULL) != CUDA_SUCCESS) {
            fprintf(stderr, "launch failed\n");
            exit(1);
        }
    }
    *out = (now_ns() - t0) / launches;
    cuGraphExecDestroy(e);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        launches = atol(argv[2]);
    with_alloc = argc > 3 && strcmp(argv[3], "alloc") == 0;
    if (threads < 1 || threads > 64 || launches < 1) {
        fprintf(stderr, "usage: bench_graph THREADS(1-64) LAUNCHES [plain|alloc]\n");
        return 1;
    }
    CUdevice d;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d)) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    double runs[RUNS];
    for (int r = 0; r < RUNS; r++) {
        pthread_t t[64];
        double per[64];
        pthread_barrier_init(&start, NULL, (unsigned)threads);
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, worker, &per[i]);
        double sum = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += per[i];
        }
        pthread_barrier_destroy(&start);
        runs[r] = sum / threads;
    }
    qsort(runs, RUNS, sizeof runs[0], cmp);
    printf("threads=%d launches=%ld graph=%s median_ns=%.1f min_ns=%.1f max_ns=%.1f\n", threads, launches,
           with_alloc ? "alloc" : "plain", runs[RUNS / 2], runs[0], runs[RUNS - 1]);
    return 0;
}
