/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_nvml.c: NVML's memory figures under gpucap.
 *
 * Usage: test_nvml ROUTE CASE. ROUTE: direct (linked against the fake libnvidia-ml.so.1) or dlsym
 * (dlopen + dlsym on its handle, as pynvml does). CASE:
 *   figures   total = budget, used = the tenant's use, free = the rest, before and after
 *             allocations, for nvmlDeviceGetMemoryInfo and _v2 (whose version check stays NVML's);
 *   visible   FAKECUDA_DEVICES=2, CUDA_VISIBLE_DEVICES=1: NVML device 1 is CUDA ordinal 0 (matched by
 *             UUID), NVML device 0 has no budget in this process and is answered unchanged;
 *   nocuda    a process that never called CUDA (nvidia-smi) sees the budget and the tenant's use.
 */
#include "common.h"

#include "fakenvml.h"

#define LIMIT (64 * MiB)

static nvmlReturn_t (*init_v2)(void);
static nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
static nvmlReturn_t (*mem_info)(nvmlDevice_t, nvmlMemory_t *);
static nvmlReturn_t (*mem_info_v2)(nvmlDevice_t, nvmlMemory_v2_t *);

static void fill(const char *route)
{
    if (strcmp(route, "direct") == 0) {
        init_v2 = nvmlInit_v2;
        by_index = nvmlDeviceGetHandleByIndex_v2;
        mem_info = nvmlDeviceGetMemoryInfo;
        mem_info_v2 = nvmlDeviceGetMemoryInfo_v2;
        return;
    }
    REQUIRE(strcmp(route, "dlsym") == 0, "unknown route %s", route);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != NULL, "dlopen libnvidia-ml.so.1: %s", dlerror());
    init_v2 = (nvmlReturn_t(*)(void))dlsym(h, "nvmlInit_v2");
    by_index = (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    mem_info = (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    mem_info_v2 = (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    REQUIRE(init_v2 && by_index && mem_info && mem_info_v2, "dlsym on libnvidia-ml");
    /* The redirect answers with gpucap's function, not the library's own. */
    void *ours = dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo");
    CHECK((void *)mem_info == ours, "dlsym on the NVML handle was not redirected");
}

static void expect_figures(unsigned idx, uint64_t total, uint64_t used, const char *when)
{
    nvmlDevice_t d;
    REQUIRE(by_index(idx, &d) == NVML_SUCCESS, "handle %u", idx);
    nvmlMemory_t m;
    CHECK(mem_info(d, &m) == NVML_SUCCESS, "nvmlDeviceGetMemoryInfo");
    uint64_t free_b = used >= total ? 0 : total - used;
    CHECK(m.total == total && m.used == used && m.free == free_b,
          "%s: v1 total %llu used %llu free %llu, want %llu %llu %llu", when, m.total, m.used, m.free,
          (unsigned long long)total, (unsigned long long)used, (unsigned long long)free_b);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    CHECK(mem_info_v2(d, &m2) == NVML_SUCCESS, "nvmlDeviceGetMemoryInfo_v2");
    CHECK(m2.total == total && m2.used == used && m2.free == free_b && m2.reserved == 0,
          "%s: v2 total %llu used %llu free %llu reserved %llu", when, m2.total, m2.used, m2.free, m2.reserved);
    nvmlMemory_v2_t bad = {.version = 1};
    CHECK(mem_info_v2(d, &bad) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "a wrong version was accepted");
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 3, "usage: test_nvml ROUTE CASE");
    fill(argv[1]);
    const char *c = argv[2];
    REQUIRE(init_v2() == NVML_SUCCESS, "nvmlInit_v2");
    if (strcmp(c, "nocuda") == 0) {
        /* Nothing in this process called CUDA; another process may hold memory (none here). */
        expect_figures(0, LIMIT, 0, "no CUDA call yet");
        return test_result();
    }
    make_context(0);
    if (strcmp(c, "figures") == 0) {
        expect_figures(0, LIMIT, 0, "before");
        CUdeviceptr p, q;
        CHECK_RC(cuMemAlloc_v2(&p, 16 * MiB), CUDA_SUCCESS);
        expect_figures(0, LIMIT, 16 * MiB, "after 16 MiB");
        CHECK_RC(cuMemAlloc_v2(&q, 48 * MiB), CUDA_SUCCESS);
        expect_figures(0, LIMIT, LIMIT, "full");
        CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
        CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
        expect_figures(0, LIMIT, 0, "after the frees");
    } else if (strcmp(c, "visible") == 0) {
        CUdeviceptr p;
        CHECK_RC(cuMemAlloc_v2(&p, 24 * MiB), CUDA_SUCCESS);
        expect_figures(1, LIMIT, 24 * MiB, "NVML device 1 = CUDA ordinal 0");
        /* Card 0 is not visible to CUDA here: NVML's own figures. */
        expect_figures(0, fakecuda_capacity(0), fakecuda_outstanding(0), "NVML device 0");
        CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    } else {
        REQUIRE(0, "unknown case %s", c);
    }
    return test_result();
}
