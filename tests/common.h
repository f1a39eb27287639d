/*
 * common.h: what the test programs share: the exit-code convention, checks, and a table of driver
 * entry points filled through one of the three routes a program can take to the driver.
 *
 * Tests link the fake libcuda.so.1 (tests/fake) and run with libgpucap.so preloaded by ctest.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#ifndef GPUCAP_TESTS_COMMON_H
#define GPUCAP_TESTS_COMMON_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"
#include "gpucap.h"

#define MiB (1024ULL * 1024)
#define GiB (1024ULL * MiB)

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)
#define CHECK_RC(call, want)                                                                      \
    do {                                                                                          \
        CUresult rc_ = (call);                                                                    \
        CHECK(rc_ == (want), "%s returned %d, want %d", #call, (int)rc_, (int)(want));            \
    } while (0)
#define REQUIRE(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static inline int test_result(void)
{
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}

/* The driver entry points the tests use, filled through a route. */
struct api {
    PFN_cuMemAlloc_v3020 cuMemAlloc_v2;
    PFN_cuMemFree_v3020 cuMemFree_v2;
    PFN_cuMemAlloc_v2000 cuMemAlloc;
    PFN_cuMemFree_v2000 cuMemFree;
    PFN_cuMemAllocPitch_v3020 cuMemAllocPitch_v2;
    PFN_cuMemAllocPitch_v2000 cuMemAllocPitch;
    PFN_cuMemAllocManaged_v6000 cuMemAllocManaged;
    PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
    PFN_cuMemAllocFromPoolAsync_v11020 cuMemAllocFromPoolAsync;
    PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemRelease_v10020 cuMemRelease;
    PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle;
    PFN_cuMemMap_v10020 cuMemMap;
    PFN_cuMemUnmap_v10020 cuMemUnmap;
    PFN_cuMemGetInfo_v3020 cuMemGetInfo_v2;
    PFN_cuMemGetInfo_v2000 cuMemGetInfo;
    PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem_v2;
    PFN_cuDeviceTotalMem_v2000 cuDeviceTotalMem;
};

enum route { ROUTE_DIRECT, ROUTE_DLSYM, ROUTE_DLVSYM, ROUTE_PROCADDR, ROUTE_PROCADDR_PTSZ, ROUTE_PROCADDR_LEGACY };

static inline int parse_route(const char *s)
{
    static const char *const names[] = {"direct", "dlsym", "dlvsym", "procaddr", "procaddr_ptsz", "procaddr_legacy"};
    for (int i = 0; i < 6; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/*
 * direct: the linked symbols (LD_PRELOAD interposition); dlsym/dlvsym: lookups on a dlopen'ed
 * libcuda handle; procaddr*: cuGetProcAddress_v2 (flags 0 or per-thread) or the legacy
 * cuGetProcAddress, itself obtained the way the CUDA runtime does it.
 */
static inline void fill_api(struct api *a, int route)
{
    memset(a, 0, sizeof *a);
    if (route == ROUTE_DIRECT) {
#define D(n) a->n = n;
        D(cuMemAlloc_v2) D(cuMemFree_v2) D(cuMemAlloc) D(cuMemFree) D(cuMemAllocPitch_v2) D(cuMemAllocPitch)
        D(cuMemAllocManaged) D(cuMemAllocAsync) D(cuMemAllocFromPoolAsync) D(cuMemFreeAsync) D(cuMemCreate)
        D(cuMemRelease) D(cuMemRetainAllocationHandle) D(cuMemMap) D(cuMemUnmap) D(cuMemGetInfo_v2)
        D(cuMemGetInfo) D(cuDeviceTotalMem_v2) D(cuDeviceTotalMem)
#undef D
        return;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "dlopen libcuda.so.1: %s", dlerror());
    if (route == ROUTE_DLSYM || route == ROUTE_DLVSYM) {
#define L(n) a->n = (void *)(route == ROUTE_DLSYM ? dlsym(h, #n) : dlvsym(h, #n, "")); \
             REQUIRE(a->n != NULL, "lookup of %s failed", #n);
        L(cuMemAlloc_v2) L(cuMemFree_v2) L(cuMemAlloc) L(cuMemFree) L(cuMemAllocPitch_v2) L(cuMemAllocPitch)
        L(cuMemAllocManaged) L(cuMemAllocAsync) L(cuMemAllocFromPoolAsync) L(cuMemFreeAsync) L(cuMemCreate)
        L(cuMemRelease) L(cuMemRetainAllocationHandle) L(cuMemMap) L(cuMemUnmap) L(cuMemGetInfo_v2)
        L(cuMemGetInfo) L(cuDeviceTotalMem_v2) L(cuDeviceTotalMem)
#undef L
        return;
    }
    /* As libcudart: dlsym "cuGetProcAddress_v2", then ask it for "cuGetProcAddress" itself. */
    PFN_cuGetProcAddress_v12000 gpa2 = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    REQUIRE(gpa2 != NULL, "no cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult st;
    void *p = NULL;
    if (route == ROUTE_PROCADDR_LEGACY) {
        REQUIRE(gpa2("cuGetProcAddress", &p, 11030, 0, &st) == CUDA_SUCCESS && p, "cuGetProcAddress@11030");
        PFN_cuGetProcAddress_v11030 gpa = (PFN_cuGetProcAddress_v11030)p;
#define G(field, base, ver)                                                               \
    REQUIRE(gpa(#base, (void **)&a->field, ver, 0) == CUDA_SUCCESS && a->field, "%s@%d", #base, ver);
        G(cuMemAlloc_v2, cuMemAlloc, 11030) G(cuMemFree_v2, cuMemFree, 11030) G(cuMemAlloc, cuMemAlloc, 2000)
        G(cuMemFree, cuMemFree, 2000) G(cuMemAllocPitch_v2, cuMemAllocPitch, 11030)
        G(cuMemAllocPitch, cuMemAllocPitch, 2000) G(cuMemAllocManaged, cuMemAllocManaged, 11030)
        G(cuMemAllocAsync, cuMemAllocAsync, 11030) G(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11030)
        G(cuMemFreeAsync, cuMemFreeAsync, 11030) G(cuMemCreate, cuMemCreate, 11030)
        G(cuMemRelease, cuMemRelease, 11030) G(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11030)
        G(cuMemMap, cuMemMap, 11030) G(cuMemUnmap, cuMemUnmap, 11030) G(cuMemGetInfo_v2, cuMemGetInfo, 11030)
        G(cuMemGetInfo, cuMemGetInfo, 2000) G(cuDeviceTotalMem_v2, cuDeviceTotalMem, 11030)
        G(cuDeviceTotalMem, cuDeviceTotalMem, 2000)
#undef G
        return;
    }
    REQUIRE(gpa2("cuGetProcAddress", &p, 12000, 0, &st) == CUDA_SUCCESS && p, "cuGetProcAddress@12000");
    gpa2 = (PFN_cuGetProcAddress_v12000)p;
    cuuint64_t flags = route == ROUTE_PROCADDR_PTSZ ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
#define G(field, base, ver)                                                                         \
    REQUIRE(gpa2(#base, (void **)&a->field, ver, flags, &st) == CUDA_SUCCESS && a->field &&         \
                st == CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d", #base, ver);
    G(cuMemAlloc_v2, cuMemAlloc, 13000) G(cuMemFree_v2, cuMemFree, 13000) G(cuMemAlloc, cuMemAlloc, 2000)
    G(cuMemFree, cuMemFree, 2000) G(cuMemAllocPitch_v2, cuMemAllocPitch, 13000)
    G(cuMemAllocPitch, cuMemAllocPitch, 2000) G(cuMemAllocManaged, cuMemAllocManaged, 13000)
    G(cuMemAllocAsync, cuMemAllocAsync, 13000) G(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 13000)
    G(cuMemFreeAsync, cuMemFreeAsync, 13000) G(cuMemCreate, cuMemCreate, 13000)
    G(cuMemRelease, cuMemRelease, 13000) G(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 13000)
    G(cuMemMap, cuMemMap, 13000) G(cuMemUnmap, cuMemUnmap, 13000) G(cuMemGetInfo_v2, cuMemGetInfo, 13000)
    G(cuMemGetInfo, cuMemGetInfo, 2000) G(cuDeviceTotalMem_v2, cuDeviceTotalMem, 13000)
    G(cuDeviceTotalMem, cuDeviceTotalMem, 2000)
#undef G
}

/* cuInit and a context on device `dev`, made current. */
static inline CUcontext make_context(int dev)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CUdevice d;
    REQUIRE(cuDeviceGet(&d, dev) == CUDA_SUCCESS, "cuDeviceGet(%d)", dev);
    CUcontext ctx;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, d) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
    return ctx;
}

/* gpucap's own figures for a device, or all zero. */
static inline struct gpucap_usage usage(int dev)
{
    /* Looked up at run time: the tests do not link the library, they run with it preloaded. */
    int (*get)(int, struct gpucap_usage *) = (int (*)(int, struct gpucap_usage *))dlsym(RTLD_DEFAULT, "gpucap_device_usage");
    REQUIRE(get != NULL, "libgpucap.so is not preloaded");
    struct gpucap_usage u = {0};
    get(dev, &u);
    return u;
}

#endif
