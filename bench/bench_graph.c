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
#include <stdbool.h>
#include <string.h>

#include "bench.h"

static long launches = 1000000;
static bool with_alloc;
static CUcontext ctx;

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
    bench_start();
    double t0 = bench_now_ns();
    for (long i = 0; i < launches; i++) {
        if (cuGraphLaunch(e, NULL) != CUDA_SUCCESS) {
            fprintf(stderr, "launch failed\n");
            exit(1);
        }
    }
    *out = (bench_now_ns() - t0) / launches;
    cuGraphExecDestroy(e);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        launches = atol(argv[2]);
    with_alloc = argc > 3 && strcmp(argv[3], "alloc") == 0;
    if (threads < 1 || threads > BENCH_MAX_THREADS || launches < 1) {
        fprintf(stderr, "usage: bench_graph THREADS(1-64) LAUNCHES [plain|alloc]\n");
        return 1;
    }
    ctx = bench_context();
    struct bench_stats s = bench_run(threads, worker);
    printf("threads=%d launches=%ld graph=%s median_ns=%.1f min_ns=%.1f max_ns=%.1f\n", threads, launches,
           with_alloc ? "alloc" : "plain", s.median, s.min, s.max);
    return 0;
}
