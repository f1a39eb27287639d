/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_alloc.c THREADS PAIRS: median nanoseconds per cuMemAlloc_v2 + cuMemFree_v2 pair.
 *
 * Each thread allocates and frees 4 KiB PAIRS times; the run repeats RUNS times and prints the
 * median, min and max ns per pair (per thread). Run it with and without libgpucap.so preloaded
 * (bench/run.sh) to see what the library adds. Against the fake driver the figures measure the
 * library's own cost plus a small, fixed cost of the fake.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RUNS 7

static long pairs = 200000;
static CUcontext ctx;
static pthread_barrier_t start;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *worker(void *arg)
{
    double *out = arg;
    cuCtxSetCurrent(ctx);
    CUdeviceptr p;
    for (long i = 0; i < 1000; i++) { /* warm-up */
        cuMemAlloc_v2(&p, 4096);
        cuMemFree_v2(p);
    }
    pthread_barrier_wait(&start);
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        if (cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS) {
            fprintf(stderr, "allocation failed\n");
            exit(1);
        }
    }
    *out = (now_ns() - t0) / pairs;
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
        pairs = atol(argv[2]);
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
    printf("threads=%d pairs=%ld runs=%d median_ns=%.1f min_ns=%.1f max_ns=%.1f\n", threads, pairs, RUNS,
           runs[RUNS / 2], runs[0], runs[RUNS - 1]);
    return 0;
}
