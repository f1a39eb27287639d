/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_routes.c: every budgeted call through every route to the driver.
 *
 * Usage: test_routes ROUTE CASE, with GPUCAP_MEMORY_LIMIT=64MiB and a 1 GiB fake card (ctest sets
 * both). ROUTE is direct, dlsym, dlvsym, procaddr, procaddr_ptsz or procaddr_legacy (common.h);
 * CASE names the call family. Each case checks the denial (the driver is not even called), the
 * recovery after a free, gpucap's figures and the fake driver's own record of what is allocated.
 */
#include "common.h"

#define LIMIT (64 * MiB)

/* The calls under test: X(field, base name asked of cuGetProcAddress, version asked). */
#define ROUTE_API(X)                                                              \
    X(cuMemAlloc_v2, cuMemAlloc, 13000) X(cuMemFree_v2, cuMemFree, 13000)        \
    X(cuMemAlloc, cuMemAlloc, 2000) X(cuMemFree, cuMemFree, 2000)                \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 13000) X(cuMemAllocPitch, cuMemAllocPitch, 2000) \
    X(cuMemAllocManaged, cuMemAllocManaged, 13000) X(cuMemAllocAsync, cuMemAllocAsync, 13000) \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 13000) X(cuMemFreeAsync, cuMemFreeAsync, 13000) \
    X(cuMemCreate, cuMemCreate, 13000) X(cuMemRelease, cuMemRelease, 13000)      \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 13000)           \
    X(cuMemMap, cuMemMap, 13000) X(cuMemUnmap, cuMemUnmap, 13000)                \
    X(cuMemGetInfo_v2, cuMemGetInfo, 13000) X(cuMemGetInfo, cuMemGetInfo, 2000) \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 13000) X(cuDeviceTotalMem, cuDeviceTotalMem, 2000)

struct api {
#define FIELD(f, base, ver) __typeof__(&f) f;
    ROUTE_API(FIELD)
#undef FIELD
};
DEFINE_FILL_API(fill_api, struct api, ROUTE_API)

static struct api api;

/* Driver calls of `name` and of its per-thread-stream variant, if it has one, so far. */
static uint64_t calls(const char *name)
{
    char ptsz[64];
    snprintf(ptsz, sizeof ptsz, "%s_ptsz", name);
    uint64_t n = fakecuda_calls(name), pt = fakecuda_calls(ptsz);
    return n + (pt == UINT64_MAX ? 0 : pt);
}

/* `call`, past the budget, is denied (CUDA_ERROR_OUT_OF_MEMORY) without reaching the driver's `entry`. */
#define EXPECT_DENIED(call, entry)                                                                 \
    do {                                                                                           \
        uint64_t before_ = calls(entry);                                                           \
        CHECK_RC(call, CUDA_ERROR_OUT_OF_MEMORY);                                                  \
        CHECK(calls(entry) == before_, "a denied %s reached the driver", entry);                   \
    } while (0)

static void expect_usage(uint64_t bytes, const char *when)
{
    CHECK(usage(0).used == bytes, "%s: gpucap says %llu in use, want %llu", when,
          (unsigned long long)usage(0).used, (unsigned long long)bytes);
    CHECK(fakecuda_outstanding(0) == bytes, "%s: the card holds %llu, want %llu", when,
          (unsigned long long)fakecuda_outstanding(0), (unsigned long long)bytes);
}

static void case_alloc(void)
{
    CUdeviceptr p[5];
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuMemAlloc_v2(&p[i], 16 * MiB), CUDA_SUCCESS);
    expect_usage(64 * MiB, "four 16 MiB");
    EXPECT_DENIED(api.cuMemAlloc_v2(&p[4], 1), "cuMemAlloc_v2");
    CHECK(usage(0).denials >= 1, "no denial counted");
    expect_usage(64 * MiB, "after the denial");
    CHECK_RC(api.cuMemFree_v2(p[0]), CUDA_SUCCESS);
    expect_usage(48 * MiB, "after one free");
    CHECK_RC(api.cuMemAlloc_v2(&p[0], 16 * MiB), CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuMemFree_v2(p[i]), CUDA_SUCCESS);
    expect_usage(0, "all freed");
    /* Unknown pointers are the driver's business: its own error comes back. */
    CHECK_RC(api.cuMemFree_v2((CUdeviceptr)0x1234500), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(api.cuMemAlloc_v2(&p[0], LIMIT + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(api.cuMemAlloc_v2(&p[0], LIMIT), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFree_v2(p[0]), CUDA_SUCCESS);
    /* A failing driver call gives its reservation back. */
    CHECK_RC(api.cuMemAlloc_v2(&p[0], 0), CUDA_ERROR_INVALID_VALUE);
    expect_usage(0, "end");
}

static void case_legacy(void)
{
    CUdeviceptr_v1 p[4];
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuMemAlloc(&p[i], 16 * MiB), CUDA_SUCCESS);
    expect_usage(64 * MiB, "four legacy 16 MiB");
    CUdeviceptr_v1 q;
    EXPECT_DENIED(api.cuMemAlloc(&q, 4096), "cuMemAlloc");
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuMemFree(p[i]), CUDA_SUCCESS);
    expect_usage(0, "legacy freed");
    unsigned int freeb = 0, total = 0, tot2 = 0;
    CHECK_RC(api.cuMemGetInfo(&freeb, &total), CUDA_SUCCESS);
    CHECK(total == LIMIT && freeb == LIMIT, "legacy cuMemGetInfo %u/%u", freeb, total);
    CHECK_RC(api.cuDeviceTotalMem(&tot2, 0), CUDA_SUCCESS);
    CHECK(tot2 == LIMIT, "legacy cuDeviceTotalMem %u", tot2);
}

static void case_pitch(void)
{
    CUdeviceptr p, q;
    size_t pitch = 0;
    CHECK_RC(api.cuMemAllocPitch_v2(&p, &pitch, 1000, 16384, 4), CUDA_SUCCESS);
    CHECK(pitch >= 1000, "pitch %zu", pitch);
    expect_usage(pitch * 16384, "pitched");
    EXPECT_DENIED(api.cuMemAllocPitch_v2(&q, &pitch, 4096, 16384, 4), "cuMemAllocPitch_v2");
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    expect_usage(0, "pitch freed");
    CUdeviceptr_v1 l;
    unsigned int lp = 0;
    CHECK_RC(api.cuMemAllocPitch(&l, &lp, 1000, 1024, 4), CUDA_SUCCESS);
    expect_usage((uint64_t)lp * 1024, "legacy pitched");
    CHECK_RC(api.cuMemFree(l), CUDA_SUCCESS);
    expect_usage(0, "legacy pitch freed");
}

/* With FAKECUDA_PITCH_ALIGN=2048 the pitch is known to be larger than gpucap's guess (512) only
 * after the call: the difference is reserved, or the allocation freed again and denied. */
static void case_pitchwide(void)
{
    CUdeviceptr p, q;
    size_t pitch = 0;
    CHECK_RC(api.cuMemAllocPitch_v2(&p, &pitch, 1000, 16384, 4), CUDA_SUCCESS);
    CHECK(pitch == 2048, "pitch %zu: run with FAKECUDA_PITCH_ALIGN=2048", pitch);
    expect_usage(32 * MiB, "pitched wider than guessed");
    /* The guessed 17 MiB fits beside the 32, the real 34 MiB does not: freed again and denied. */
    CHECK_RC(api.cuMemAllocPitch_v2(&q, &pitch, 1000, 17408, 4), CUDA_ERROR_OUT_OF_MEMORY);
    expect_usage(32 * MiB, "the one that did not fit is gone");
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    expect_usage(0, "freed");
}

static void case_managed(void)
{
    CUdeviceptr p, q;
    CHECK_RC(api.cuMemAllocManaged(&p, 40 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    expect_usage(40 * MiB, "managed");
    CHECK_RC(api.cuMemAllocManaged(&q, 32 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAllocManaged(&q, 32 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFree_v2(q), CUDA_SUCCESS);
    expect_usage(0, "managed freed");
}

static void case_async(bool from_pool)
{
    CUstream s;
    CHECK_RC(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUmemoryPool pool = NULL;
    if (from_pool)
        CHECK_RC(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CUdeviceptr p, q;
#define ALLOC(ptr, n) (from_pool ? api.cuMemAllocFromPoolAsync(ptr, n, pool, s) : api.cuMemAllocAsync(ptr, n, s))
    CHECK_RC(ALLOC(&p, 48 * MiB), CUDA_SUCCESS);
    CHECK(usage(0).used == 48 * MiB, "used %llu", (unsigned long long)usage(0).used);
    EXPECT_DENIED(ALLOC(&q, 32 * MiB), from_pool ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync");
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    /* The pool keeps freed memory until a synchronisation or a trim: it still counts (hooks/pool.c). */
    expect_usage(48 * MiB, "after cuMemFreeAsync, the pool keeps it");
    /* Served from what the pool keeps: nothing more is charged. */
    CHECK_RC(ALLOC(&q, 32 * MiB), CUDA_SUCCESS);
    expect_usage(48 * MiB, "reused from the pool");
    CHECK_RC(api.cuMemFreeAsync(q, s), CUDA_SUCCESS);
    CHECK_RC(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_RC(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    expect_usage(0, "async freed and synchronised");
#undef ALLOC
}

static void case_vmm(void)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h, h2, h3;
    CHECK_RC(api.cuMemCreate(&h, 32 * MiB, &prop, 0), CUDA_SUCCESS);
    expect_usage(32 * MiB, "created");
    EXPECT_DENIED(api.cuMemCreate(&h2, 40 * MiB, &prop, 0), "cuMemCreate");

    /* create, map, release: the memory lives until the unmap. */
    CUdeviceptr va;
    CHECK_RC(cuMemAddressReserve(&va, 64 * MiB, 0, 0, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemMap(va, 32 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemRelease(h), CUDA_SUCCESS);
    expect_usage(32 * MiB, "released while mapped");
    /* A retained handle is one more reference. */
    CHECK_RC(api.cuMemRetainAllocationHandle(&h3, (void *)va), CUDA_SUCCESS);
    CHECK(h3 == h, "retain gave another handle");
    CHECK_RC(api.cuMemUnmap(va, 32 * MiB), CUDA_SUCCESS);
    expect_usage(32 * MiB, "unmapped, still retained");
    CHECK_RC(api.cuMemRelease(h3), CUDA_SUCCESS);
    expect_usage(0, "last reference gone");

    /* Two mappings laid end to end, unmapped in one call. */
    CHECK_RC(api.cuMemCreate(&h, 16 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemCreate(&h2, 16 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemMap(va, 16 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemMap(va + 16 * MiB, 16 * MiB, 0, h2, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuMemRelease(h), CUDA_SUCCESS);
    CHECK_RC(api.cuMemRelease(h2), CUDA_SUCCESS);
    expect_usage(32 * MiB, "two mapped");
    CHECK_RC(api.cuMemUnmap(va, 32 * MiB), CUDA_SUCCESS);
    expect_usage(0, "both unmapped");
    CHECK_RC(cuMemAddressFree(va, 64 * MiB), CUDA_SUCCESS);

    /* Host memory is not device memory. */
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CHECK_RC(api.cuMemCreate(&h, 128 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "host memory charged");
    CHECK_RC(api.cuMemRelease(h), CUDA_SUCCESS);
    /* Unknown handles pass through with the driver's answer. */
    CHECK_RC(api.cuMemRelease((CUmemGenericAllocationHandle)0x7777777), CUDA_ERROR_INVALID_VALUE);
}

static void case_getinfo(void)
{
    size_t freeb = 0, total = 0, dt = 0;
    CHECK_RC(api.cuMemGetInfo_v2(&freeb, &total), CUDA_SUCCESS);
    CHECK(total == LIMIT && freeb == LIMIT, "cuMemGetInfo_v2 %zu/%zu", freeb, total);
    CUdeviceptr p;
    CHECK_RC(api.cuMemAlloc_v2(&p, 24 * MiB), CUDA_SUCCESS);
    CHECK_RC(api.cuMemGetInfo_v2(&freeb, &total), CUDA_SUCCESS);
    CHECK(total == LIMIT && freeb == LIMIT - 24 * MiB, "cuMemGetInfo_v2 %zu/%zu after 24 MiB", freeb, total);
    CHECK_RC(api.cuDeviceTotalMem_v2(&dt, 0), CUDA_SUCCESS);
    CHECK(dt == LIMIT, "cuDeviceTotalMem_v2 %zu", dt);
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    /* Errors stay the driver's: no context, no figures. */
    CHECK_RC(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_RC(api.cuMemGetInfo_v2(&freeb, &total), CUDA_ERROR_INVALID_CONTEXT);
}

static void case_async_stream(void) { case_async(false); }
static void case_async_pool(void) { case_async(true); }

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_routes ROUTE CASE\n");
        return 1;
    }
    int route = parse_route(argv[1]);
    REQUIRE(route >= 0, "unknown route %s", argv[1]);
    make_context(0);
    fill_api(&api, route);
    const char *c = argv[2];
    static const struct test_case cases[] = {
        {"alloc", case_alloc},         {"legacy", case_legacy},   {"pitch", case_pitch},
        {"pitchwide", case_pitchwide}, {"managed", case_managed}, {"async", case_async_stream},
        {"pool", case_async_pool},     {"vmm", case_vmm},         {"getinfo", case_getinfo},
    };
    RUN_CASE(cases, c);
    return test_result();
}
