/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctxdevice.c: an allocation is charged to the device of its current context, which gpucap
 * asks the driver once per context (cuCtxGetDevice) and then remembers. Cases:
 *   twodev  (FAKECUDA_DEVICES=2, device 1 capped at 32 MiB) contexts on devices 0 and 1 take turns
 *           (cuCtxSetCurrent, push and pop): each allocation is charged to its context's device and
 *           device 1's cap applies there only; one cuCtxGetCurrent per allocation, and cuCtxGetDevice
 *           once per context, not per allocation;
 *   single  one device: no cuCtxGetDevice at all, one cuCtxGetCurrent per allocation;
 *   reuse   (FAKECUDA_CTX_REUSE=1) a context on device 0 is destroyed and the next one, made on
 *           device 1, gets its handle: what is allocated there is charged to device 1;
 *   unseen  the same, the new context made by a route gpucap does not see (a library's private
 *           entry into the driver): only the teardown of the old one tells;
 *   teardown (FAKECUDA_CTX_REUSE=1, FAKECUDA_CTX_DESTROY_DELAY_MS=300) while one thread's cuCtxDestroy
 *           of a context on device 0 has not returned yet, another makes a context on device 1, which
 *           gets the same handle, and allocates there: the teardown releases only what the old
 *           context held, and the new allocation stays charged to device 1;
 *   churn   (FAKECUDA_CTX_REUSE=1) 4 threads each make and destroy contexts on alternate devices
 *           (handles reused across threads) and allocate in them; the allocations left live at the
 *           end are charged to the right devices.
 * Figures are checked against the fake card's own record (ordinals are physical devices here).
 */
#include "common.h"

#include <pthread.h>
#include <time.h>

#define ROUNDS 20

static CUcontext create(int dev)
{
    CUcontext c;
    REQUIRE(cuCtxCreate_v2(&c, 0, dev) == CUDA_SUCCESS, "cuCtxCreate_v2 on device %d", dev);
    return c;
}

/* gpucap's figure for device `dev` and the card's record are both `want`. */
static void expect_used(int dev, uint64_t want, const char *when)
{
    uint64_t used = usage(dev).used, real = fakecuda_outstanding(dev);
    CHECK(used == want, "%s: gpucap counts %llu MiB on device %d, want %llu MiB", when,
          (unsigned long long)(used / MiB), dev, (unsigned long long)(want / MiB));
    CHECK(real == want, "%s: the card holds %llu MiB on device %d, want %llu MiB", when,
          (unsigned long long)(real / MiB), dev, (unsigned long long)(want / MiB));
}

static void case_twodev(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CUcontext c0 = create(0), c1 = create(1);
    CUdeviceptr p0[ROUNDS], p1[ROUNDS], x;
    uint64_t get_device = fakecuda_calls("cuCtxGetDevice"), get_current = fakecuda_calls("cuCtxGetCurrent");
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_RC(cuCtxSetCurrent(c0), CUDA_SUCCESS);
        CHECK_RC(cuMemAlloc_v2(&p0[i], 1 * MiB), CUDA_SUCCESS);
        CHECK_RC(cuCtxPushCurrent_v2(c1), CUDA_SUCCESS);
        CHECK_RC(cuMemAlloc_v2(&p1[i], 1 * MiB), CUDA_SUCCESS);
        CHECK_RC(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);
    }
    get_device = fakecuda_calls("cuCtxGetDevice") - get_device;
    get_current = fakecuda_calls("cuCtxGetCurrent") - get_current;
    CHECK(get_device <= 2, "%d allocations in 2 contexts asked cuCtxGetDevice %llu times, want at most 2",
          2 * ROUNDS, (unsigned long long)get_device);
    CHECK(get_current <= 2 * ROUNDS, "%d allocations asked cuCtxGetCurrent %llu times, want at most one each",
          2 * ROUNDS, (unsigned long long)get_current);
    expect_used(0, ROUNDS * MiB, "1 MiB per round in each context");
    expect_used(1, ROUNDS * MiB, "1 MiB per round in each context");
    /* Device 1 is capped at 32 MiB, device 0 at 64 MiB: 16 MiB more fits on 0 only. */
    CHECK_RC(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&x, 16 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&x, 16 * MiB), CUDA_SUCCESS);
    expect_used(0, (ROUNDS + 16) * MiB, "16 MiB more on device 0");
    expect_used(1, ROUNDS * MiB, "denied on device 1");
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_RC(cuMemFree_v2(p0[i]), CUDA_SUCCESS);
        CHECK_RC(cuMemFree_v2(p1[i]), CUDA_SUCCESS);
    }
    CHECK_RC(cuMemFree_v2(x), CUDA_SUCCESS);
    expect_used(0, 0, "all freed");
    expect_used(1, 0, "all freed");
}

static void case_single(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    create(0);
    uint64_t get_device = fakecuda_calls("cuCtxGetDevice"), get_current = fakecuda_calls("cuCtxGetCurrent");
    for (int i = 0; i < ROUNDS; i++) {
        CUdeviceptr p;
        CHECK_RC(cuMemAlloc_v2(&p, 1 * MiB), CUDA_SUCCESS);
        CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    }
    get_device = fakecuda_calls("cuCtxGetDevice") - get_device;
    get_current = fakecuda_calls("cuCtxGetCurrent") - get_current;
    CHECK(get_device == 0, "one device: cuCtxGetDevice asked %llu times", (unsigned long long)get_device);
    CHECK(get_current <= ROUNDS, "%d allocations asked cuCtxGetCurrent %llu times, want at most one each", ROUNDS,
          (unsigned long long)get_current);
}

/* A context on device 0 is seen, destroyed, and its handle comes back for one on device 1. */
static void reuse(bool seen)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CUcontext a = create(0);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS);
    expect_used(0, 4 * MiB, "in the context on device 0");
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_RC(cuCtxDestroy_v2(a), CUDA_SUCCESS);
    CUcontext b = seen ? create(1) : (CUcontext)fakecuda_ctx_create(1);
    REQUIRE(b == a, "FAKECUDA_CTX_REUSE=1 gives the destroyed handle %p again, not %p", (void *)a, (void *)b);
    CHECK_RC(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS);
    expect_used(1, 4 * MiB, "in the context on device 1 with the same handle");
    expect_used(0, 0, "in the context on device 1 with the same handle");
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
}

static void case_reuse(void) { reuse(true); }
static void case_unseen(void) { reuse(false); }

static CUcontext doomed;

static void *destroy_doomed(void *arg)
{
    (void)arg;
    CHECK_RC(cuCtxDestroy_v2(doomed), CUDA_SUCCESS);
    return NULL;
}

static void case_teardown(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    doomed = create(0);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS); /* freed by the teardown */
    CHECK_RC(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, destroy_doomed, NULL) == 0, "pthread_create");
    /* Until the driver has destroyed it; its cuCtxDestroy returns 300 ms later. */
    for (int ms = 0; fakecuda_outstanding(0) != 0; ms++) {
        REQUIRE(ms < 10000, "the context on device 0 was not destroyed in 10 s");
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    CUcontext b = create(1);
    REQUIRE(b == doomed, "FAKECUDA_CTX_REUSE=1 gives the destroyed handle %p again, not %p", (void *)doomed, (void *)b);
    CHECK_RC(cuMemAlloc_v2(&p, 8 * MiB), CUDA_SUCCESS);
    pthread_join(th, NULL);
    expect_used(1, 8 * MiB, "after the teardown of the handle's earlier context");
    expect_used(0, 0, "after the teardown of the handle's earlier context");
}

#define THREADS 4
#define ITERATIONS 1000

/* Contexts made and destroyed on alternate devices; the last one keeps 1 MiB + 64 KiB * thread. */
static void *churn(void *arg)
{
    int t = (int)(intptr_t)arg;
    CUcontext c = NULL;
    for (int i = 0; i < ITERATIONS; i++) {
        if (c)
            CHECK_RC(cuCtxDestroy_v2(c), CUDA_SUCCESS);
        c = create((t + i) % 2);
        CUdeviceptr p;
        CHECK_RC(cuMemAlloc_v2(&p, 1 * MiB + 64 * 1024 * (uint64_t)t), CUDA_SUCCESS);
    }
    return NULL;
}

static void case_churn(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        REQUIRE(pthread_create(&th[t], NULL, churn, (void *)(intptr_t)t) == 0, "pthread_create");
    uint64_t want[2] = {0, 0};
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        want[(t + ITERATIONS - 1) % 2] += 1 * MiB + 64 * 1024 * (uint64_t)t;
    }
    expect_used(0, want[0], "the last context of each thread");
    expect_used(1, want[1], "the last context of each thread");
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"twodev", case_twodev}, {"single", case_single}, {"reuse", case_reuse},
        {"unseen", case_unseen}, {"teardown", case_teardown}, {"churn", case_churn},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: test_ctxdevice CASE\n");
        return 1;
    }
    RUN_CASE(cases, argv[1]);
    return test_result();
}
