/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_alloc.c THREADS PAIRS: median nanoseconds per cuMemAlloc_v2 + cuMemFree_v2 pair.
 *
 * Each thread allocates and frees 4 KiB PAIRS times; the run repeats RUNS times and prints the
 * median, min and max ns per pair (per thread). Run it with and without libgpucap.so preloaded
 * (bench/run.sh) to see what the library adds. Against the fake driver the figures measure the
 * library's own cost plus a small, fixed cost of the fake.
 */
#include "bench.h"

static long pairs = 200000;
static CUcontext ctx;

static void *worker(void *arg)
{
    double *out = arg;
    cuCtxSetCurrent(ctx);
    CUdeviceptr p;
    for (long i = 0; i < 1000; i++) { /* warm-up */
        cuMemAlloc_v2(&p, 4096);
        cuMemFree_v2(p);
    }
    bench_start();
    double t0 = bench_now_ns();
    for (long i = 0; i < pairs; i++) {
        if (cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS) {
            fprintf(stderr, "allocation failed\n");
            exit(1);
        }
    }
    *out = (bench_now_ns() - t0) / pairs;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        pairs = atol(argv[2]);
    if (threads < 1 || threads > BENCH_MAX_THREADS || pairs < 1) {
        fprintf(stderr, "usage: bench_alloc THREADS(1-64) PAIRS\n");
        return 1;
    }
    ctx = bench_context();
    struct bench_stats s = bench_run(threads, worker);
    printf("threads=%d pairs=%ld runs=%d median_ns=%.1f min_ns=%.1f max_ns=%.1f\n", threads, pairs, BENCH_RUNS,
           s.median, s.min, s.max);
    return 0;
}
