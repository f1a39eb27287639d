/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_procaddr.c: cuGetProcAddress answers as the driver would, with our hooks in place of the
 * driver's functions for the names we budget.
 *
 * Checks: version selection (legacy 32-bit below 3020), per-thread variants with flag 2 and the
 * legacy ones otherwise, "cuGetProcAddress" itself at 11030 and 12000, names we do not hook (the
 * driver's own function), unknown and empty names, a version above the driver's, symbolStatus,
 * and the stub-library answer the CUDA runtime probes for.
 */
#include "common.h"

static void *ours(const char *export)
{
    /* With the library preloaded, the default scope finds our hook first. */
    void *p = dlsym(RTLD_DEFAULT, export);
    REQUIRE(p != NULL, "%s not found", export);
    return p;
}

int main(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    REQUIRE(h, "dlopen");
    PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    CHECK(gpa == ours("cuGetProcAddress_v2"), "dlsym(libcuda, cuGetProcAddress_v2) is not our resolver");

    void *p;
    CUdriverProcAddressQueryResult st;
    struct {
        const char *base;
        int version;
        cuuint64_t flags;
        const char *want;
    } cases[] = {
        {"cuMemAlloc", 2000, 0, "cuMemAlloc"},
        {"cuMemAlloc", 3010, 0, "cuMemAlloc"},
        {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
        {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
        {"cuMemFree", 12000, 0, "cuMemFree_v2"},
        {"cuMemGetInfo", 2000, 0, "cuMemGetInfo"},
        {"cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2"},
        {"cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2"},
        {"cuMemAllocPitch", 2000, 0, "cuMemAllocPitch"},
        {"cuMemAllocAsync", 12000, 0, "cuMemAllocAsync"},
        {"cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAllocAsync"},
        {"cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz"},
        {"cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemFreeAsync_ptsz"},
        {"cuMemAllocFromPoolAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         "cuMemAllocFromPoolAsync_ptsz"},
        /* No per-thread variant: the per-thread flag still gives the one function there is. */
        {"cuMemCreate", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemCreate"},
        {"cuMemRelease", 12000, 0, "cuMemRelease"},
        {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
        {"cuGetProcAddress", 11080, 0, "cuGetProcAddress"},
        {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
        {"cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p = NULL;
        st = (CUdriverProcAddressQueryResult)-1;
        CHECK_RC(gpa(cases[i].base, &p, cases[i].version, cases[i].flags, &st), CUDA_SUCCESS);
        CHECK(p == ours(cases[i].want), "%s@%d flags %llu: not our %s", cases[i].base, cases[i].version,
              (unsigned long long)cases[i].flags, cases[i].want);
        CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS, "%s: status %d", cases[i].base, (int)st);
    }

    /* A name we do not hook: the driver's own function, exactly. */
    CHECK_RC(gpa("cuInit", &p, 12000, 0, &st), CUDA_SUCCESS);
    CHECK(p == (void *)cuInit && st == CU_GET_PROC_ADDRESS_SUCCESS, "cuInit is not the driver's");
    CHECK_RC(gpa("cuCtxCreate", &p, 12050, 0, &st), CUDA_SUCCESS);
    CHECK(p == (void *)cuCtxCreate_v4, "cuCtxCreate@12050 is not the driver's _v4");

    /* Unknown and empty names (the driver's answer, CUDA_ERROR_NOT_FOUND, passed on unchanged), a
     * version that is not sufficient, a version above the driver's. */
    p = (void *)1;
    CHECK_RC(gpa("cuNoSuchFunction", &p, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "unknown name: %p status %d", p, (int)st);
    p = (void *)1;
    CHECK_RC(gpa("", &p, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "empty name: %p status %d", p, (int)st);
    p = (void *)1;
    CHECK_RC(gpa("cuMemAllocAsync", &p, 11000, 0, &st), CUDA_SUCCESS);
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "cuMemAllocAsync@11000: %p status %d", p,
          (int)st);
    CHECK_RC(gpa("cuMemAlloc", &p, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE);

    /* The 4-argument resolver from the 5-argument one, and its answers. */
    PFN_cuGetProcAddress_v11030 gpa1 = NULL;
    CHECK_RC(gpa("cuGetProcAddress", (void **)&gpa1, 11030, 0, &st), CUDA_SUCCESS);
    REQUIRE(gpa1 != NULL, "no legacy resolver");
    CHECK_RC(gpa1("cuMemAlloc", &p, 11030, 0), CUDA_SUCCESS);
    CHECK(p == ours("cuMemAlloc_v2"), "legacy resolver: cuMemAlloc@11030 is not our _v2");
    CHECK_RC(gpa1("cuMemFreeAsync", &p, 11030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), CUDA_SUCCESS);
    CHECK(p == ours("cuMemFreeAsync_ptsz"), "legacy resolver: per-thread cuMemFreeAsync");
    CHECK_RC(gpa1("cuInit", &p, 11030, 0), CUDA_SUCCESS);
    CHECK(p == (void *)cuInit, "legacy resolver: cuInit");
    return test_result();
}
