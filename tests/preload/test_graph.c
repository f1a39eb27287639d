/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_graph.c: graph memory and graph launches, against the fake card's record.
 *
 * Usage: test_graph CASE, with GPUCAP_MEMORY_LIMIT=64MiB on a 1 GiB fake card (ctest).
 *   nodriver  launches of graphs without allocation nodes (built by hand, by stream capture, and
 *             instantiated before any graph with such nodes exists or after) make no driver call
 *             but the launch itself
 *   teardown  graph memory of explicit and captured allocation nodes in a created context (also
 *             through cuGraphInstantiate and _v2): the figures follow the card through launches,
 *             trims, denials and cuCtxDestroy, back to zero
 *   threads   8 threads launch their own graphs (4 without allocation nodes, 4 with, some keeping
 *             their memory live) while another allocates and frees: the card never holds more
 *             than the budget, and every byte is settled after the trims and the teardown
 * Every step compares gpucap's figure with the card's; the card's peak stays within the budget.
 */
#include "common.h"

#include <pthread.h>

#define LIMIT (64 * MiB)

static CUcontext ctx;

static void expect(uint64_t bytes, const char *when)
{
    CHECK(usage(0).used == bytes, "%s: gpucap says %llu in use, want %llu", when, (unsigned long long)usage(0).used,
          (unsigned long long)bytes);
    CHECK(fakecuda_outstanding(0) == bytes, "%s: the card holds %llu, want %llu", when,
          (unsigned long long)fakecuda_outstanding(0), (unsigned long long)bytes);
}

static void card_within_budget(void)
{
    CHECK(fakecuda_peak(0) <= LIMIT, "the card held %llu at its peak, above the %llu budget",
          (unsigned long long)fakecuda_peak(0), (unsigned long long)LIMIT);
}

static CUstream stream(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "cuStreamCreate");
    return s;
}

/* A graph of one kernel node: no memory. */
static CUgraph plain_graph(void)
{
    CUgraph g;
    CUgraphNode n;
    CUDA_KERNEL_NODE_PARAMS kp = {0};
    REQUIRE(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
    REQUIRE(cuGraphAddKernelNode_v2(&n, g, NULL, 0, &kp) == CUDA_SUCCESS, "cuGraphAddKernelNode_v2");
    return g;
}

/* A graph with one allocation node of `bytes` on device 0 (and a free node when `inner_free`). */
static CUgraph alloc_graph(size_t bytes, bool inner_free)
{
    CUgraph g;
    CUgraphNode a, f;
    REQUIRE(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
    CUDA_MEM_ALLOC_NODE_PARAMS ap = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                   .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}},
                                     .bytesize = bytes};
    REQUIRE(cuGraphAddMemAllocNode(&a, g, NULL, 0, &ap) == CUDA_SUCCESS, "cuGraphAddMemAllocNode");
    if (inner_free)
        REQUIRE(cuGraphAddMemFreeNode(&f, g, &a, 1, ap.dptr) == CUDA_SUCCESS, "cuGraphAddMemFreeNode");
    return g;
}

/* A graph captured on `s`: cuMemAllocAsync of `bytes` (0: none), freed inside when `inner_free`. */
static CUgraph captured(CUstream s, size_t bytes, bool inner_free)
{
    CUgraph g;
    CUdeviceptr p;
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "cuStreamBeginCapture_v2");
    if (bytes)
        REQUIRE(cuMemAllocAsync(&p, bytes, s) == CUDA_SUCCESS, "cuMemAllocAsync while capturing");
    if (bytes && inner_free)
        REQUIRE(cuMemFreeAsync(p, s) == CUDA_SUCCESS, "cuMemFreeAsync while capturing");
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS, "cuStreamEndCapture");
    return g;
}

static CUgraphExec instantiate(CUgraph g, unsigned long long flags)
{
    CUgraphExec e;
    REQUIRE(cuGraphInstantiateWithFlags(&e, g, flags) == CUDA_SUCCESS, "cuGraphInstantiateWithFlags");
    return e;
}

/* Driver calls a launch might add: the graph memory figure and the current device. */
static uint64_t queries(void)
{
    return fakecuda_calls("cuDeviceGetGraphMemAttribute") + fakecuda_calls("cuCtxGetDevice") +
           fakecuda_calls("cuCtxGetDevice_v2") + fakecuda_calls("cuDeviceGetCount") +
           fakecuda_calls("cuCtxGetCurrent");
}

static void case_nodriver(void)
{
    CUstream s = stream();
    CUgraphExec plain = instantiate(plain_graph(), 0), cap = instantiate(captured(s, 0, false), 0);
    /* Then a graph with allocation nodes: the others must stay on the fast path. */
    CUgraphExec mem = instantiate(alloc_graph(8 * MiB, true), 0);
    CHECK_RC(cuGraphLaunch(mem, s), CUDA_SUCCESS);
    CUgraphExec late = instantiate(plain_graph(), 0);
    uint64_t before = queries(), launches = fakecuda_calls("cuGraphLaunch") + fakecuda_calls("cuGraphLaunch_ptsz");
    for (int i = 0; i < 1000; i++) {
        CHECK_RC(cuGraphLaunch(plain, s), CUDA_SUCCESS);
        CHECK_RC(cuGraphLaunch_ptsz(cap, s), CUDA_SUCCESS);
        CHECK_RC(cuGraphLaunch(late, s), CUDA_SUCCESS);
        CHECK_RC(cuGraphUpload(late, s), CUDA_SUCCESS);
    }
    CHECK(queries() == before, "launches of graphs without allocation nodes made %llu driver queries",
          (unsigned long long)(queries() - before));
    CHECK(fakecuda_calls("cuGraphLaunch") + fakecuda_calls("cuGraphLaunch_ptsz") == launches + 3000,
          "every launch reached the driver");
    expect(8 * MiB, "the graph with an allocation node keeps its reserve");
    CHECK_RC(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    expect(0, "trimmed");
    card_within_budget();
}

static void case_teardown(void)
{
    CUcontext c;
    REQUIRE(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate_v2");
    CUstream s = stream();
    CUgraphExec keep = instantiate(alloc_graph(24 * MiB, false), CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    /* Through the CUDA 10 and 11 entry points: they count allocation nodes too. */
    CUgraphExec cap, plain;
    CHECK_RC(cuGraphInstantiate(&cap, captured(s, 30 * MiB, true), NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_RC(cuGraphInstantiate_v2(&plain, plain_graph(), NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_RC(cuGraphLaunch(keep, s), CUDA_SUCCESS);
    expect(24 * MiB, "an allocation node's memory, live");
    CHECK_RC(cuGraphLaunch(keep, s), CUDA_SUCCESS);
    expect(24 * MiB, "launched again: freed on launch, the same reserve");
    CHECK_RC(cuGraphLaunch(cap, s), CUDA_SUCCESS);
    expect(54 * MiB, "a captured allocation beside it");
    CHECK_RC(cuGraphLaunch(plain, s), CUDA_SUCCESS);
    expect(54 * MiB, "a graph without allocation nodes adds nothing");
    /* Before a denial the unused reserve is trimmed: 40 MiB fit beside the live 24. */
    CUdeviceptr p, q;
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
    expect(64 * MiB, "trimmed before a denial");
    CHECK_RC(cuMemAlloc_v2(&q, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuGraphLaunch(cap, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    expect(24 * MiB, "freed");
    CHECK_RC(cuGraphLaunch(cap, s), CUDA_SUCCESS);
    expect(54 * MiB, "reserved again");
    CHECK_RC(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    expect(24 * MiB, "trimmed to the live allocation");
    CHECK_RC(cuGraphLaunch(keep, s), CUDA_SUCCESS);
    expect(24 * MiB, "relaunched");
    /* The context goes: its executable graphs and graph memory with it. */
    CHECK_RC(cuCtxDestroy_v2(c), CUDA_SUCCESS);
    expect(0, "context destroyed");
    CHECK_RC(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 64 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    card_within_budget();
}

#define THREADS 8
#define ROUNDS 400

static pthread_barrier_t go;
static _Atomic int denied_launches;

static void *launcher(void *arg)
{
    long id = (long)arg;
    cuCtxSetCurrent(ctx);
    CUstream s = stream();
    CUgraphExec e;
    if (id < 4)
        e = instantiate(id % 2 ? plain_graph() : captured(s, 0, false), 0);
    else if (id < 6)
        e = instantiate(captured(s, 10 * MiB, true), 0);
    else
        e = instantiate(alloc_graph(10 * MiB, false), CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    pthread_barrier_wait(&go);
    for (int i = 0; i < ROUNDS * (id < 4 ? 10 : 1); i++) {
        CUresult rc = cuGraphLaunch(e, s);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY)
            denied_launches++;
        else
            CHECK_RC(rc, CUDA_SUCCESS);
        if (id >= 4 && i % 50 == 0)
            cuDeviceGraphMemTrim(0);
    }
    CHECK_RC(cuGraphExecDestroy(e), CUDA_SUCCESS);
    return NULL;
}

static void *allocator(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&go);
    for (int i = 0; i < ROUNDS; i++) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, 36 * MiB) == CUDA_SUCCESS)
            cuMemFree_v2(p);
    }
    return NULL;
}

static void case_threads(void)
{
    CUcontext c;
    REQUIRE(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate_v2");
    CUcontext primary = ctx;
    ctx = c;
    pthread_t t[THREADS + 1];
    pthread_barrier_init(&go, NULL, THREADS + 1);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, launcher, (void *)i);
    pthread_create(&t[THREADS], NULL, allocator, NULL);
    for (int i = 0; i <= THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    card_within_budget();
    CHECK_RC(cuCtxSetCurrent(c), CUDA_SUCCESS);
    CHECK_RC(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    CHECK(usage(0).used == fakecuda_outstanding(0), "after the trim gpucap says %llu, the card holds %llu",
          (unsigned long long)usage(0).used, (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(cuCtxDestroy_v2(c), CUDA_SUCCESS);
    expect(0, "context destroyed");
    ctx = primary;
    fprintf(stderr, "%d launches denied\n", (int)denied_launches);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_graph CASE\n");
        return 1;
    }
    ctx = make_context(0);
    static const struct test_case cases[] = {
        {"nodriver", case_nodriver},
        {"teardown", case_teardown},
        {"threads", case_threads},
    };
    RUN_CASE(cases, argv[1]);
    return test_result();
}
