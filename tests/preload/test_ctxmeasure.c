/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctxmeasure.c: what the card holds for a process's contexts beyond their reserve is charged
 * (charge/context.c, measured through NVML's per-process figure), so that the card, by the fake's
 * own record, never holds more for the process than its budget.
 *
 * Run with FAKECUDA_CTX_BYTES above GPUCAP_CONTEXT_RESERVE (a context bigger than its estimate, as
 * on a real H200). Cases:
 *   create    a context bigger than its reserve: allocating up to the budget leaves the card at or
 *             under it, and the difference is charged as soon as the context exists;
 *   lazy      a context that grows after it was made (modules loaded at launches): the growth is
 *             charged by the next locked admission; the card stays within the budget;
 *   private   the same with a private budget (GPUCAP_LEDGER=off), which has no locked steps;
 *   teardown  what was measured goes back when the context is destroyed (a new context starts from
 *             its reserve again);
 *   cap       growth beyond 4 reserves is charged up to 4 reserves only;
 *   hidden    NVML lists other PIDs (a PID namespace): nothing is measured, the reserve alone is
 *             charged, and the card holds exactly the unmeasured difference more (the control
 *             that shows the other cases can fail).
 */
#include "common.h"

#include <unistd.h>

static uint64_t budget, reserve, ctx_bytes;

static uint64_t env_size(const char *name)
{
    const char *v = getenv(name);
    REQUIRE(v, "%s is not set", name);
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (strcmp(end, "MiB") == 0)
        n *= MiB;
    else
        REQUIRE(*end == 0, "%s=%s: bytes or MiB", name, v);
    return n;
}

/* gpucap's figure of what is in use on the device: the budget less what cuMemGetInfo says is free. */
static uint64_t charged(void)
{
    size_t free_b = 0, total_b = 0;
    REQUIRE(cuMemGetInfo_v2(&free_b, &total_b) == CUDA_SUCCESS, "cuMemGetInfo");
    CHECK(total_b == budget, "cuMemGetInfo total %zu, want the budget %llu", total_b, (unsigned long long)budget);
    return total_b - free_b;
}

/* Allocates `chunk`s until denied; the card's record never passes the budget on the way. Returns
 * what was allocated. */
static uint64_t fill(uint64_t chunk, bool grow_midway, bool within)
{
    uint64_t got = 0;
    bool grown = false;
    for (int i = 0; i < 10000; i++) {
        CUdeviceptr p;
        CUresult rc = cuMemAlloc_v2(&p, chunk);
        if (rc != CUDA_SUCCESS) {
            CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2 returned %d", (int)rc);
            break;
        }
        got += chunk;
        CHECK(!within || fakecuda_outstanding(0) <= budget, "after %llu MiB allocated the card holds %llu MiB: above the budget %llu MiB",
              (unsigned long long)(got / MiB), (unsigned long long)(fakecuda_outstanding(0) / MiB),
              (unsigned long long)(budget / MiB));
        if (grow_midway && !grown && got >= budget / 4) {
            REQUIRE(fakecuda_ctx_grow(100 * MiB) == 0, "fakecuda_ctx_grow");
            grown = true;
        }
    }
    return got;
}

static CUcontext open_context(void)
{
    CUcontext ctx = NULL;
    CHECK_RC(cuInit(0), CUDA_SUCCESS);
    CHECK_RC(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    return ctx;
}

static void case_create(void)
{
    open_context();
    /* Measured as soon as the context exists: the whole context is charged, not the reserve. */
    CHECK(charged() == ctx_bytes, "after the context: %llu MiB charged, the card holds %llu MiB for it",
          (unsigned long long)(charged() / MiB), (unsigned long long)(ctx_bytes / MiB));
    uint64_t got = fill(8 * MiB, false, true);
    CHECK(got + ctx_bytes <= budget && got + ctx_bytes + 8 * MiB > budget,
          "allocated %llu MiB beside a %llu MiB context under %llu MiB", (unsigned long long)(got / MiB),
          (unsigned long long)(ctx_bytes / MiB), (unsigned long long)(budget / MiB));
}

static void case_lazy(void)
{
    open_context();
    uint64_t got = fill(8 * MiB, true, true);
    uint64_t card = fakecuda_outstanding(0);
    CHECK(card <= budget && card + 8 * MiB > budget, "the card holds %llu MiB at the denial (allocated %llu), budget %llu",
          (unsigned long long)(card / MiB), (unsigned long long)(got / MiB), (unsigned long long)(budget / MiB));
    CHECK(charged() == card, "gpucap counts %llu MiB, the card holds %llu MiB", (unsigned long long)(charged() / MiB),
          (unsigned long long)(card / MiB));
}

static void case_private(void)
{
    open_context();
    /* Small allocations: the batches of counted events are where a private budget measures. */
    uint64_t got = fill(1 * MiB, true, true);
    uint64_t card = fakecuda_outstanding(0);
    /* Growth between two measurements may pass the budget by what was allocated meanwhile: at
     * most one batch of events (64 x 1 MiB) by then; at the denial, it is charged. */
    CHECK(card <= budget, "the card holds %llu MiB at the denial (allocated %llu), budget %llu",
          (unsigned long long)(card / MiB), (unsigned long long)(got / MiB), (unsigned long long)(budget / MiB));
}

static void case_teardown(void)
{
    CUcontext ctx = open_context();
    REQUIRE(fakecuda_ctx_grow(100 * MiB) == 0, "fakecuda_ctx_grow");
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 64 * MiB), CUDA_SUCCESS);
    CHECK(charged() == fakecuda_outstanding(0), "with the grown context: gpucap %llu MiB, the card %llu MiB",
          (unsigned long long)(charged() / MiB), (unsigned long long)(fakecuda_outstanding(0) / MiB));
    (void)ctx;
    CHECK_RC(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    CHECK(fakecuda_outstanding(0) == 0, "the card holds %llu MiB after the reset",
          (unsigned long long)(fakecuda_outstanding(0) / MiB));
    /* A new context: charged its own size again, nothing left of the old one's growth. */
    open_context();
    CHECK(charged() == ctx_bytes, "a new context after the reset: %llu MiB charged, want %llu",
          (unsigned long long)(charged() / MiB), (unsigned long long)(ctx_bytes / MiB));
}

static void case_cap(void)
{
    open_context();
    REQUIRE(fakecuda_ctx_grow(8 * reserve) == 0, "fakecuda_ctx_grow");
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS);
    /* Charged: the reserve, 4 reserves measured at most, and the allocation. */
    CHECK(charged() == 5 * reserve + 4 * MiB, "charged %llu MiB, want %llu (reserve %llu MiB, measured at most 4x)",
          (unsigned long long)(charged() / MiB), (unsigned long long)((5 * reserve + 4 * MiB) / MiB),
          (unsigned long long)(reserve / MiB));
}

static void case_hidden(void)
{
    open_context();
    CHECK(charged() == reserve, "NVML does not list this process: %llu MiB charged, want the reserve %llu MiB",
          (unsigned long long)(charged() / MiB), (unsigned long long)(reserve / MiB));
    uint64_t got = fill(8 * MiB, false, false);
    uint64_t card = fakecuda_outstanding(0);
    /* The control: unmeasured, the card holds the context's excess over its reserve beyond the budget. */
    CHECK(got + reserve <= budget && card == got + ctx_bytes,
          "allocated %llu MiB, the card holds %llu MiB (context %llu, reserve %llu)", (unsigned long long)(got / MiB),
          (unsigned long long)(card / MiB), (unsigned long long)(ctx_bytes / MiB), (unsigned long long)(reserve / MiB));
    CHECK(card > budget, "the control holds no more than the budget: the other cases prove nothing");
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_ctxmeasure CASE");
    budget = env_size("GPUCAP_MEMORY_LIMIT");
    reserve = env_size("GPUCAP_CONTEXT_RESERVE");
    ctx_bytes = env_size("FAKECUDA_CTX_BYTES");
    static const struct test_case cases[] = {
        {"create", case_create}, {"lazy", case_lazy}, {"private", case_private},
        {"teardown", case_teardown}, {"cap", case_cap}, {"hidden", case_hidden},
    };
    RUN_CASE(cases, argv[1]);
    return test_result();
}
