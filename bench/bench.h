/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.h: what the benchmark programs share: the clock, the primary context of device 0, and a
 * measurement of THREADS threads started together, repeated BENCH_RUNS times, summed up as the
 * median, lowest and highest of the runs' per-thread means.
 */
#ifndef GPUCAP_BENCH_H
#define GPUCAP_BENCH_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BENCH_RUNS 7
#define BENCH_MAX_THREADS 64

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The primary context of device 0, retained; exits 1 saying so where there is none. */
static inline CUcontext bench_context(void)
{
    CUdevice d;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d)) {
        fprintf(stderr, "no CUDA device\n");
        exit(1);
    }
    return ctx;
}

static pthread_barrier_t bench_barrier;

/* Called by a worker once it is warmed up: the threads of a run start timing together. */
static inline void bench_start(void)
{
    pthread_barrier_wait(&bench_barrier);
}

struct bench_stats {
    double median, min, max;
};

static inline int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs `worker` on `threads` threads (1 to BENCH_MAX_THREADS) at once, BENCH_RUNS times. Each worker
 * calls bench_start() before its timed part and writes its ns per operation to its argument, a
 * double. */
static inline struct bench_stats bench_run(int threads, void *(*worker)(void *))
{
    double runs[BENCH_RUNS];
    for (int r = 0; r < BENCH_RUNS; r++) {
        pthread_t t[BENCH_MAX_THREADS];
        double per[BENCH_MAX_THREADS];
        pthread_barrier_init(&bench_barrier, NULL, (unsigned)threads);
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, worker, &per[i]);
        double sum = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += per[i];
        }
        pthread_barrier_destroy(&bench_barrier);
        runs[r] = sum / threads;
    }
    qsort(runs, BENCH_RUNS, sizeof runs[0], bench_cmp);
    return (struct bench_stats){runs[BENCH_RUNS / 2], runs[0], runs[BENCH_RUNS - 1]};
}

#endif
