/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_drvlimit.c: the two enforcers. The fake driver's driver-limited mode (FAKECUDA_DRIVER_LIMIT:
 * the process is in a container whose cgroup the driver limits) against its own record, and
 * gpucap over it: the budget is min(gpucap's own, the driver's), a percentage resolves against the
 * driver's figure, the ledger says whether the driver's limit is in force (driver_limit), a limit
 * only declared (NVIDIA_GPU_MEMORY_LIMIT) caps without being called the driver's, and a device set
 * up before any context looks again at the first call with one. Cases by name (CMakeLists.txt
 * gives each its environment: a card of 1 GiB, a driver limit of 256 MiB unless it says otherwise).
 */
#include "common.h"
#include "fakenvml.h"

#include "ledger_test.h"
#include "common/drvlimit.h"

static CUcontext ctx;

static void start(void)
{
    CHECK_RC(cuInit(0), CUDA_SUCCESS);
}

static void open_context(void)
{
    CHECK_RC(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

static void expect_info(uint64_t total, uint64_t used, const char *when)
{
    size_t f = 0, t = 0;
    CHECK_RC(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    CHECK(t == total && f == total - used, "%s: cuMemGetInfo free %zu total %zu, want %llu %llu", when, f, t,
          (unsigned long long)(total - used), (unsigned long long)total);
    nvmlDevice_t d;
    nvmlMemory_t m;
    CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS, "NVML");
    CHECK(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS, "nvmlDeviceGetMemoryInfo");
    CHECK(m.total == total && m.used == used && m.free == total - used,
          "%s: NVML total %llu used %llu free %llu, want %llu %llu", when, m.total, m.used, m.free,
          (unsigned long long)total, (unsigned long long)used);
}

/* The ledger entry of the only device: its budget and the driver's limit it recorded. */
static void expect_ledger(uint64_t budget, uint64_t driver)
{
    struct gpc_ledger *l = map_ledger();
    int found = -1;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++)
        if (atomic_load(&l->dev[i].state) == 1)
            found = i;
    REQUIRE(found >= 0, "no device entry in the ledger");
    uint64_t lim = atomic_load(&l->dev[found].slot.limit), drv = atomic_load(&l->dev[found].driver_limit);
    CHECK(lim == budget, "ledger budget %llu, want %llu", (unsigned long long)lim, (unsigned long long)budget);
    CHECK(drv == driver, "ledger driver_limit %llu, want %llu", (unsigned long long)drv, (unsigned long long)driver);
    CHECK(strcmp(gpc_enforced_by(drv), driver ? "driver + gpucap" : "gpucap") == 0, "enforced by %s",
          gpc_enforced_by(drv));
    munmap(l, sizeof *l);
}

/* Allocates `ok` then `over`, which must fail; `by_gpucap`: gpucap refused it (the driver never saw
 * the call). Frees what it got. */
static void expect_cap(uint64_t ok, uint64_t over, bool by_gpucap)
{
    CUdeviceptr a = 0, b = 0;
    CHECK_RC(cuMemAlloc_v2(&a, ok), CUDA_SUCCESS);
    uint64_t calls = fakecuda_calls("cuMemAlloc_v2");
    CHECK_RC(cuMemAlloc_v2(&b, over), CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t reached = fakecuda_calls("cuMemAlloc_v2") - calls;
    CHECK(reached == (by_gpucap ? 0u : 1u), "the refusal reached the driver %llu times, want %d",
          (unsigned long long)reached, by_gpucap ? 0 : 1);
    CHECK(fakecuda_outstanding(0) == ok, "the card holds %llu, want %llu",
          (unsigned long long)fakecuda_outstanding(0), (unsigned long long)ok);
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
}

/* The fake alone (no gpucap): a limited container sees the limit and is refused past it. */
static void case_fake(void)
{
    start();
    size_t card = 0;
    CHECK_RC(cuDeviceTotalMem_v2(&card, 0), CUDA_SUCCESS);
    CHECK(card == GiB, "cuDeviceTotalMem answers the card: %zu", card);
    open_context();
    expect_info(256 * MiB, 0, "empty");
    CUdeviceptr a = 0, b = 0;
    CHECK_RC(cuMemAlloc_v2(&a, 200 * MiB), CUDA_SUCCESS);
    expect_info(256 * MiB, 200 * MiB, "200 MiB held");
    CHECK_RC(cuMemAlloc_v2(&b, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_container_used(0) == 200 * MiB && fakecuda_outstanding(0) == 200 * MiB,
          "record: container %llu, card %llu", (unsigned long long)fakecuda_container_used(0),
          (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&b, 256 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(b), CUDA_SUCCESS);
}

/* A process outside the container (no FAKECUDA_DRIVER_LIMIT) is not held to the container's limit,
 * and what it holds is not the container's. */
static void case_fake_outside(void)
{
    start();
    open_context();
    size_t f = 0, t = 0;
    CHECK_RC(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    CHECK(t == GiB, "outside the container the card is whole: %zu", t);
    CUdeviceptr a = 0;
    CHECK_RC(cuMemAlloc_v2(&a, 300 * MiB), CUDA_SUCCESS);
    CHECK(fakecuda_container_used(0) == 0, "a neighbour's memory counted as the container's");
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
}

/* Set up before any context (the runtime reads cuDeviceTotalMem first, and keeps it as
 * totalGlobalMem): NVML's total, which needs no context, shows the driver's limit already, so the
 * figure is 50% of it from the start and stays so once a context exists. */
static void case_late(void)
{
    start();
    size_t total = 0;
    CHECK_RC(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK(total == 128 * MiB, "before any context: %zu, want 50%% of the driver's limit", total);
    open_context();
    expect_cap(100 * MiB, 60 * MiB, true);
    expect_info(128 * MiB, 0, "after the first allocation");
    CHECK_RC(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK(total == 128 * MiB, "after: cuDeviceTotalMem %zu, want 128 MiB", total);
    expect_ledger(128 * MiB, 256 * MiB);
}

/*
 * The cases of gpucap over the fake that differ only in figures: cuMemGetInfo and NVML before any
 * allocation (total; 0: not checked), an allocation that fits and one past it that gpucap refuses
 * (expect_cap), and the budget and driver limit the ledger records.
 */
struct budget_case {
    const char *name;
    uint64_t total, ok, over, budget, driver;
};

static const struct budget_case budget_cases[] = {
    /* gpucap without a limit of its own over a driver limit of 256 MiB: its budget is the driver's. */
    {"driver_only", 256 * MiB, 200 * MiB, 100 * MiB, 256 * MiB, 256 * MiB},
    /* gpucap's own 512 MiB above the driver's 256 MiB: the driver's applies, gpucap denies first. */
    {"larger_own", 256 * MiB, 200 * MiB, 100 * MiB, 256 * MiB, 256 * MiB},
    /* gpucap's own 64 MiB below the driver's 256 MiB: gpucap's applies. */
    {"smaller_own", 64 * MiB, 60 * MiB, 10 * MiB, 64 * MiB, 256 * MiB},
    /* 50% resolves against the driver's 256 MiB (128 MiB), not the card's 1 GiB. */
    {"percent", 128 * MiB, 100 * MiB, 60 * MiB, 128 * MiB, 256 * MiB},
    /* No driver limit: gpucap alone, and the ledger says so. */
    {"gpucap_only", 64 * MiB, 60 * MiB, 10 * MiB, 64 * MiB, 0},
    /* Declared for the toolkit (100 MiB) but not in force (the driver reports the whole card): the
     * budget is capped at it all the same (the safe direction), and it is not called the driver's. */
    {"declared_only", 0, 90 * MiB, 20 * MiB, 100 * MiB, 0},
    /* A declared limit that equals the card (so the reported total is not below it) is no evidence of
     * the driver's: the declaration is the container's environment, and a limit of the card's size
     * limits nothing (issue 30). The budget is the declared one; gpucap alone is said to enforce. */
    {"declared_whole_card", 0, 200 * MiB, 100 * MiB, 256 * MiB, 0},
};

static void run_budget_case(const struct budget_case *c)
{
    start();
    open_context();
    if (c->total)
        expect_info(c->total, 0, "empty");
    expect_cap(c->ok, c->over, true);
    expect_ledger(c->budget, c->driver);
}

static const struct test_case cases[] = {
    {"fake", case_fake},
    {"fake_outside", case_fake_outside},
    {"late", case_late},
};

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_drvlimit CASE");
    for (size_t i = 0; i < sizeof budget_cases / sizeof budget_cases[0]; i++)
        if (strcmp(budget_cases[i].name, argv[1]) == 0) {
            run_budget_case(&budget_cases[i]);
            return test_result();
        }
    RUN_CASE(cases, argv[1]);
    return test_result();
}
