/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_stress.c: many threads allocating and freeing random sizes against one budget.
 *
 * Usage: test_stress [THREADS] [ITERATIONS]. The fake driver's own peak for the card must never pass
 * the budget (no over-admission under any interleaving), denials must happen (the test pushes past
 * the budget), and at the end every byte is back, on the card and in gpucap's figures.
 */
#include "common.h"

#include <pthread.h>

#define LIMIT (64 * MiB)
#define HELD 8

static int iterations = 20000;
static CUcontext ctx;
static _Atomic unsigned long long denied, admitted;
/* All workers start together: on a loaded machine threads created one by one can otherwise run
 * one after another and never meet the budget. */
static pthread_barrier_t start;

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    CHECK_RC(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    pthread_barrier_wait(&start);
    CUdeviceptr held[HELD] = {0};
    /* Past the iterations while no thread has met the budget yet (bounded): a fast path can let
     * each thread finish its share inside one time slice of a loaded machine. */
    for (int i = 0; i < iterations || (denied == 0 && i < 50 * iterations); i++) {
        int slot = rand_r(&seed) % HELD;
        if (held[slot]) {
            CHECK_RC(cuMemFree_v2(held[slot]), CUDA_SUCCESS);
            held[slot] = 0;
            continue;
        }
        /* 1 byte .. 8 MiB, one in four small: 64 slots of them cannot all fit in the budget. */
        size_t bytes = 1 + (size_t)rand_r(&seed) % (rand_r(&seed) % 4 ? 8 * MiB : 4096);
        CUresult rc = cuMemAlloc_v2(&held[slot], bytes);
        if (rc == CUDA_SUCCESS) {
            admitted++;
        } else {
            CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2 returned %d", (int)rc);
            held[slot] = 0;
            denied++;
        }
    }
    for (int i = 0; i < HELD; i++)
        if (held[i])
            CHECK_RC(cuMemFree_v2(held[i]), CUDA_SUCCESS);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2)
        iterations = atoi(argv[2]);
    ctx = make_context(0);
    fakecuda_reset_peak(0);
    pthread_t t[64];
    if (threads > 64)
        threads = 64;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("threads %d, admitted %llu, denied %llu, card peak %llu of %llu\n", threads,
           (unsigned long long)admitted, (unsigned long long)denied, (unsigned long long)fakecuda_peak(0),
           (unsigned long long)LIMIT);
    CHECK(fakecuda_peak(0) <= LIMIT, "card peak %llu above the budget", (unsigned long long)fakecuda_peak(0));
    CHECK(usage(0).peak <= LIMIT, "gpucap peak above the budget");
    CHECK(denied > 0, "the budget was never reached: the test did not test");
    CHECK(fakecuda_outstanding(0) == 0, "%llu bytes left on the card", (unsigned long long)fakecuda_outstanding(0));
    CHECK(usage(0).used == 0, "gpucap still counts %llu bytes", (unsigned long long)usage(0).used);
    return test_result();
}
