/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_coverage.c: the memory that no plain allocation call reports, through every route.
 *
 * Usage: test_coverage ROUTE CASE, with GPUCAP_MEMORY_LIMIT=64MiB on a 1 GiB fake card (ctest).
 * ROUTE as in test_routes (direct, dlsym, dlvsym, procaddr, procaddr_ptsz, procaddr_legacy).
 *   array     cuArrayCreate_v2 / cuArray3DCreate_v2 / cuArrayDestroy at their real size
 *   mipmap    cuMipmappedArrayCreate / cuMipmappedArrayDestroy: the sum of the levels
 *   poolkeep  a pool that keeps memory after cuMemFreeAsync still counts; trimmed on a denial
 *   poolnew   cuMemPoolCreate pools, destroyed with live allocations
 *   pool13    cuMemGetDefaultMemPool (CUDA 13)
 *   graph     allocation nodes, launches, cuDeviceGraphMemTrim
 *   graphcapture  allocation nodes made by stream capture, cuGraphInstantiateWithParams (with
 *             an upload) and cuGraphUpload
 *   context   created, primary and green contexts charged GPUCAP_CONTEXT_RESERVE (ctest: 8 MiB)
 *   ctxdefault  the default reserve by device class (256 MiB for a 1 GiB card)
 *   twodev    one process on two cards (FAKECUDA_DEVICES=2): charged on each card
 * Every case checks gpucap's figure against the fake card's own record, and that the card never
 * held more than the budget (its peak).
 */
#include "common.h"

#define LIMIT (64 * MiB)

struct capi {
    PFN_cuArrayCreate_v3020 cuArrayCreate_v2;
    PFN_cuArray3DCreate_v3020 cuArray3DCreate_v2;
    PFN_cuArrayDestroy_v2000 cuArrayDestroy;
    PFN_cuMipmappedArrayCreate_v5000 cuMipmappedArrayCreate;
    PFN_cuMipmappedArrayDestroy_v5000 cuMipmappedArrayDestroy;
    PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
    PFN_cuMemAllocFromPoolAsync_v11020 cuMemAllocFromPoolAsync;
    PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
    PFN_cuMemPoolCreate_v11020 cuMemPoolCreate;
    PFN_cuMemPoolDestroy_v11020 cuMemPoolDestroy;
    PFN_cuMemPoolTrimTo_v11020 cuMemPoolTrimTo;
    PFN_cuMemGetDefaultMemPool_v13000 cuMemGetDefaultMemPool;
    PFN_cuDeviceGetDefaultMemPool_v11020 cuDeviceGetDefaultMemPool;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
    PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags;
    PFN_cuGraphLaunch_v10000 cuGraphLaunch;
    PFN_cuGraphInstantiateWithParams_v12000 cuGraphInstantiateWithParams;
    PFN_cuGraphUpload_v11010 cuGraphUpload;
    PFN_cuDeviceGraphMemTrim_v11040 cuDeviceGraphMemTrim;
    PFN_cuCtxCreate_v3020 cuCtxCreate_v2;
    PFN_cuCtxCreate_v12050 cuCtxCreate_v4;
    PFN_cuCtxDestroy_v4000 cuCtxDestroy_v2;
    PFN_cuGreenCtxCreate_v12040 cuGreenCtxCreate;
    PFN_cuGreenCtxDestroy_v12040 cuGreenCtxDestroy;
    PFN_cuMemAlloc_v3020 cuMemAlloc_v2;
    PFN_cuMemFree_v3020 cuMemFree_v2;
};

static struct capi api;
static int route;

/* (field, exported name, base name, version asked of cuGetProcAddress) */
#define CAPI(X)                                                                     \
    X(cuArrayCreate_v2, cuArrayCreate, 13000)                                       \
    X(cuArray3DCreate_v2, cuArray3DCreate, 13000)                                   \
    X(cuArrayDestroy, cuArrayDestroy, 13000)                                        \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 13000)                        \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 13000)                      \
    X(cuMemAllocAsync, cuMemAllocAsync, 13000)                                      \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 13000)                      \
    X(cuMemFreeAsync, cuMemFreeAsync, 13000)                                        \
    X(cuMemPoolCreate, cuMemPoolCreate, 13000)                                      \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 13000)                                    \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 13000)                                      \
    X(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool, 13000)                        \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 13000)                  \
    X(cuStreamSynchronize, cuStreamSynchronize, 13000)                              \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 13000)              \
    X(cuGraphLaunch, cuGraphLaunch, 13000)                                          \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 13000)            \
    X(cuGraphUpload, cuGraphUpload, 13000)                                          \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 13000)                            \
    X(cuCtxCreate_v2, cuCtxCreate, 3020)                                            \
    X(cuCtxCreate_v4, cuCtxCreate, 13000)                                           \
    X(cuCtxDestroy_v2, cuCtxDestroy, 13000)                                         \
    X(cuGreenCtxCreate, cuGreenCtxCreate, 13000)                                    \
    X(cuGreenCtxDestroy, cuGreenCtxDestroy, 13000)                                  \
    X(cuMemAlloc_v2, cuMemAlloc, 13000)                                             \
    X(cuMemFree_v2, cuMemFree, 13000)

DEFINE_FILL_API(fill, struct capi, CAPI)

static uint64_t calls(const char *a, const char *b)
{
    return fakecuda_calls(a) + (b ? fakecuda_calls(b) : 0);
}

/* gpucap's figure for ordinal `dev` equals the card's (physical `phys`) and is `bytes`. */
static void expect_on(int dev, int phys, uint64_t bytes, const char *when)
{
    CHECK(usage(dev).used == bytes, "%s: gpucap says %llu in use on %d, want %llu", when,
          (unsigned long long)usage(dev).used, dev, (unsigned long long)bytes);
    CHECK(fakecuda_outstanding(phys) == bytes, "%s: card %d holds %llu, want %llu", when, phys,
          (unsigned long long)fakecuda_outstanding(phys), (unsigned long long)bytes);
}
#define expect(bytes, when) expect_on(0, 0, bytes, when)

static void card_within_budget(void)
{
    CHECK(fakecuda_peak(0) <= LIMIT, "the card held %llu at its peak, above the %llu budget",
          (unsigned long long)fakecuda_peak(0), (unsigned long long)LIMIT);
}

static void case_array(void)
{
    /* 1024 x 1024 x 4 channels x 4 bytes = 16 MiB each. */
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUarray a[5];
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuArrayCreate_v2(&a[i], &d), CUDA_SUCCESS);
    expect(64 * MiB, "four 16 MiB arrays");
    uint64_t before = calls("cuArrayCreate_v2", NULL);
    CUDA_ARRAY_DESCRIPTOR tiny = {.Width = 1, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CHECK_RC(api.cuArrayCreate_v2(&a[4], &tiny), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuArrayCreate_v2", NULL) == before, "a denied array reached the driver");
    CHECK_RC(api.cuArrayDestroy(a[0]), CUDA_SUCCESS);
    expect(48 * MiB, "one destroyed");
    /* 3D: 256 x 256 x 64 floats = 16 MiB. */
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 256, .Height = 256, .Depth = 64, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 1};
    CHECK_RC(api.cuArray3DCreate_v2(&a[0], &d3), CUDA_SUCCESS);
    expect(64 * MiB, "a 3D array");
    before = calls("cuArray3DCreate_v2", NULL);
    CHECK_RC(api.cuArray3DCreate_v2(&a[4], &d3), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuArray3DCreate_v2", NULL) == before, "a denied 3D array reached the driver");
    for (int i = 0; i < 4; i++)
        CHECK_RC(api.cuArrayDestroy(a[i]), CUDA_SUCCESS);
    expect(0, "all destroyed");
    /* A 1-element array is charged its real (512-byte) size, not 1 byte. */
    CHECK_RC(api.cuArrayCreate_v2(&a[0], &tiny), CUDA_SUCCESS);
    expect(512, "a tiny array");
    CHECK_RC(api.cuArrayDestroy(a[0]), CUDA_SUCCESS);
    /* Driver errors stay the driver's and cost nothing. */
    CUDA_ARRAY_DESCRIPTOR bad = {.Width = 0, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CHECK_RC(api.cuArrayCreate_v2(&a[0], &bad), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(api.cuArrayDestroy((CUarray)0x1234), CUDA_ERROR_INVALID_HANDLE);
    expect(0, "end");
    card_within_budget();
}

static void case_mipmap(void)
{
    /* 2048 x 2048 floats, 12 levels: 16 MiB + 4 MiB + 1 MiB + ... */
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 2048, .Height = 2048, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUmipmappedArray m[4];
    CHECK_RC(api.cuMipmappedArrayCreate(&m[0], &d, 12), CUDA_SUCCESS);
    uint64_t one = usage(0).used;
    CHECK(one > 21 * MiB && one < 22 * MiB, "a 12-level pyramid charged %llu", (unsigned long long)one);
    expect(one, "one pyramid");
    CHECK_RC(api.cuMipmappedArrayCreate(&m[1], &d, 12), CUDA_SUCCESS);
    expect(2 * one, "two pyramids");
    /* A third would pass 64 MiB by a few KiB. */
    uint64_t before = calls("cuMipmappedArrayCreate", NULL);
    CHECK_RC(api.cuMipmappedArrayCreate(&m[2], &d, 12), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuMipmappedArrayCreate", NULL) == before, "a denied pyramid reached the driver");
    d.Width = d.Height = 1024;
    CHECK_RC(api.cuMipmappedArrayCreate(&m[2], &d, 11), CUDA_SUCCESS);
    expect(2 * one + usage(0).used - 2 * one, "a smaller one");
    CHECK(usage(0).used - 2 * one > 5 * MiB && usage(0).used - 2 * one < 6 * MiB, "a 1024^2 pyramid");
    for (int i = 0; i < 3; i++)
        CHECK_RC(api.cuMipmappedArrayDestroy(m[i]), CUDA_SUCCESS);
    expect(0, "destroyed");
    card_within_budget();
}

static CUstream stream(void)
{
    CUstream s;
    REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "cuStreamCreate");
    return s;
}

static void case_poolkeep(void)
{
    CUstream s = stream();
    CUmemoryPool pool;
    CHECK_RC(api.cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    /* The pool keeps everything at synchronisations, as PyTorch and CuPy configure it. */
    cuuint64_t keep_all = UINT64_MAX;
    CHECK_RC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all), CUDA_SUCCESS);
    CUdeviceptr p, q, r;
    CHECK_RC(api.cuMemAllocAsync(&p, 40 * MiB, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_RC(api.cuStreamSynchronize(s), CUDA_SUCCESS);
    expect(40 * MiB, "freed and synchronised: the pool keeps 40 MiB");
    /* Plain allocations see the pool's footprint: 32 MiB does not fit beside the pool's 40, so the
     * pool is trimmed to what it uses (nothing) and the allocation admitted on the retry. */
    CHECK_RC(api.cuMemAlloc_v2(&q, 32 * MiB), CUDA_SUCCESS);
    expect(32 * MiB, "the pool was trimmed for a plain allocation");
    CHECK_RC(api.cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAllocAsync(&p, 40 * MiB, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_RC(api.cuStreamSynchronize(s), CUDA_SUCCESS);
    expect(40 * MiB, "the pool keeps 40 MiB again");
    /* Reuse from the pool costs nothing more. */
    CHECK_RC(api.cuMemAllocAsync(&p, 32 * MiB, s), CUDA_SUCCESS);
    expect(40 * MiB, "reused from the pool");
    /* A second pool needs room: the first is trimmed to what it uses (32 MiB) and the rest fits. */
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool mine;
    CHECK_RC(api.cuMemPoolCreate(&mine, &props), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAllocFromPoolAsync(&r, 32 * MiB, mine, s), CUDA_SUCCESS);
    expect(64 * MiB, "two pools, full");
    uint64_t before = calls("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz");
    CHECK_RC(api.cuMemAllocFromPoolAsync(&q, 2 * MiB, mine, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz") == before,
          "a denied pool allocation reached the driver");
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFreeAsync(r, s), CUDA_SUCCESS);
    CHECK_RC(api.cuStreamSynchronize(s), CUDA_SUCCESS);
    /* The created pool (threshold 0) gave its memory back; the default one keeps its 32 MiB. */
    expect(32 * MiB, "after the frees");
    CHECK_RC(api.cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    expect(0, "default pool trimmed");
    CHECK_RC(api.cuMemPoolDestroy(mine), CUDA_SUCCESS);
    expect(0, "end");
    card_within_budget();
    cuStreamDestroy_v2(s);
}

static void case_poolnew(void)
{
    CUstream s = stream();
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool a, b;
    CHECK_RC(api.cuMemPoolCreate(&a, &props), CUDA_SUCCESS);
    CHECK_RC(api.cuMemPoolCreate(&b, &props), CUDA_SUCCESS);
    CUdeviceptr p, q, r;
    /* 1 byte takes a 2 MiB granule of the pool. */
    CHECK_RC(api.cuMemAllocFromPoolAsync(&p, 1, a, s), CUDA_SUCCESS);
    expect(2 * MiB, "one byte from a pool");
    CHECK_RC(api.cuMemAllocFromPoolAsync(&q, 30 * MiB, a, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAllocFromPoolAsync(&r, 30 * MiB, b, s), CUDA_SUCCESS);
    expect(62 * MiB, "two pools");
    /* Destroyed with live allocations: the pool keeps what they hold until they are freed. */
    CHECK_RC(api.cuMemPoolDestroy(a), CUDA_SUCCESS);
    CHECK(usage(0).used >= fakecuda_outstanding(0), "gpucap %llu below the card %llu",
          (unsigned long long)usage(0).used, (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFreeAsync(q, s), CUDA_SUCCESS);
    expect(30 * MiB, "destroyed pool gone");
    CHECK_RC(api.cuMemFreeAsync(r, s), CUDA_SUCCESS);
    CHECK_RC(api.cuStreamSynchronize(s), CUDA_SUCCESS);
    expect(0, "all freed");
    CHECK_RC(api.cuMemPoolDestroy(b), CUDA_SUCCESS);
    /* Host pools are not device memory. */
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CHECK_RC(api.cuMemPoolCreate(&a, &props), CUDA_ERROR_NOT_SUPPORTED);
    card_within_budget();
    cuStreamDestroy_v2(s);
}

static void case_pool13(void)
{
    CUstream s = stream();
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUmemoryPool pool;
    CHECK_RC(api.cuMemGetDefaultMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    CUdeviceptr p, q;
    CHECK_RC(api.cuMemAllocFromPoolAsync(&p, 48 * MiB, pool, s), CUDA_SUCCESS);
    expect(48 * MiB, "default pool");
    CHECK_RC(api.cuMemAllocFromPoolAsync(&q, 32 * MiB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(api.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAllocFromPoolAsync(&q, 32 * MiB, pool, s), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFreeAsync(q, s), CUDA_SUCCESS);
    CHECK_RC(api.cuStreamSynchronize(s), CUDA_SUCCESS);
    expect(0, "synchronised");
    card_within_budget();
    cuStreamDestroy_v2(s);
}

static CUgraphExec graph_with_alloc(size_t bytes, bool generic, CUdeviceptr *out)
{
    CUgraph g;
    REQUIRE(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
    CUgraphNode n;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    if (generic) {
        CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
        np.alloc.poolProps = props;
        np.alloc.bytesize = bytes;
        CHECK_RC(cuGraphAddNode_v2(&n, g, NULL, NULL, 0, &np), CUDA_SUCCESS);
        *out = np.alloc.dptr;
    } else {
        CUDA_MEM_ALLOC_NODE_PARAMS ap = {.poolProps = props, .bytesize = bytes};
        CHECK_RC(cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap), CUDA_SUCCESS);
        *out = ap.dptr;
    }
    CUgraphExec e;
    CHECK_RC(api.cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    return e;
}

static void case_graph(void)
{
    CUstream s = stream();
    CUdeviceptr p1, p2;
    CUgraphExec e1 = graph_with_alloc(48 * MiB, false, &p1);
    CUgraphExec e2 = graph_with_alloc(32 * MiB, true, &p2);
    expect(0, "nothing is taken before a launch");
    CHECK_RC(api.cuGraphLaunch(e1, s), CUDA_SUCCESS);
    expect(48 * MiB, "graph 1 launched");
    uint64_t before = calls("cuGraphLaunch", "cuGraphLaunch_ptsz");
    CHECK_RC(api.cuGraphLaunch(e2, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuGraphLaunch", "cuGraphLaunch_ptsz") == before, "a denied launch reached the driver");
    /* Freed, the memory stays reserved for graphs: graph 2 fits in it. */
    CHECK_RC(api.cuMemFreeAsync(p1, s), CUDA_SUCCESS);
    expect(48 * MiB, "graph memory stays reserved after the free");
    CHECK_RC(api.cuGraphLaunch(e2, s), CUDA_SUCCESS);
    expect(48 * MiB, "graph 2 in the reserved memory");
    CHECK_RC(api.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    expect(32 * MiB, "trimmed to what graph 2 uses");
    CHECK_RC(api.cuMemFreeAsync(p2, s), CUDA_SUCCESS);
    CHECK_RC(api.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    expect(0, "all trimmed");
    cuGraphExecDestroy(e1);
    cuGraphExecDestroy(e2);
    card_within_budget();
    cuStreamDestroy_v2(s);
}

/* A graph captured on `s`: cuMemAllocAsync of `bytes` (freed again inside when `inner_free`). */
static CUgraph captured(CUstream s, size_t bytes, bool inner_free, CUdeviceptr *out)
{
    CUgraph g;
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "cuStreamBeginCapture_v2");
    CHECK_RC(api.cuMemAllocAsync(out, bytes, s), CUDA_SUCCESS);
    if (inner_free)
        CHECK_RC(api.cuMemFreeAsync(*out, s), CUDA_SUCCESS);
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS, "cuStreamEndCapture");
    return g;
}

static void case_graphcapture(void)
{
    CUstream s = stream();
    CUdeviceptr p1, p2, p;
    CUgraph g1 = captured(s, 40 * MiB, true, &p1), g2 = captured(s, 48 * MiB, true, &p2);
    expect(0, "capturing takes nothing");
    /* Instantiated with an upload: the upload reserves the graph's memory at once. */
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = s};
    CUgraphExec e1, e2;
    CHECK_RC(api.cuGraphInstantiateWithParams(&e1, g1, &ip), CUDA_SUCCESS);
    expect(40 * MiB, "instantiated with an upload");
    CHECK_RC(api.cuGraphLaunch(e1, s), CUDA_SUCCESS);
    expect(40 * MiB, "launched in what the upload reserved");
    CHECK_RC(api.cuMemAlloc_v2(&p, 20 * MiB), CUDA_SUCCESS);
    ip.flags = 0;
    CHECK_RC(api.cuGraphInstantiateWithParams(&e2, g2, &ip), CUDA_SUCCESS);
    /* 48 MiB in 40 reserved: 8 more would make 68 MiB on the card. */
    uint64_t before = calls("cuGraphUpload", "cuGraphUpload_ptsz") + calls("cuGraphLaunch", "cuGraphLaunch_ptsz");
    CHECK_RC(api.cuGraphUpload(e2, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(api.cuGraphLaunch(e2, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuGraphUpload", "cuGraphUpload_ptsz") + calls("cuGraphLaunch", "cuGraphLaunch_ptsz") == before,
          "a denied upload or launch of a captured graph reached the driver");
    expect(60 * MiB, "denied");
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_RC(api.cuGraphUpload(e2, s), CUDA_SUCCESS);
    expect(48 * MiB, "uploaded: the reserve grew");
    CHECK_RC(api.cuGraphLaunch(e2, s), CUDA_SUCCESS);
    expect(48 * MiB, "launched in it");
    CHECK_RC(api.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    expect(0, "trimmed: nothing live");
    CHECK_RC(cuGraphExecDestroy(e1), CUDA_SUCCESS);
    CHECK_RC(cuGraphExecDestroy(e2), CUDA_SUCCESS);
    cuGraphDestroy(g1);
    cuGraphDestroy(g2);
    card_within_budget();
    cuStreamDestroy_v2(s);
}

static void case_context(void)
{
    /* ctest: GPUCAP_CONTEXT_RESERVE=8MiB and FAKECUDA_CTX_BYTES=8MiB; main retained the primary. */
    expect(8 * MiB, "the primary context");
    CUcontext primary, c2, c4;
    CHECK_RC(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    CHECK_RC(api.cuCtxCreate_v2(&c2, 0, 0), CUDA_SUCCESS);
    CHECK_RC(api.cuCtxCreate_v4(&c4, NULL, 0, 0), CUDA_SUCCESS);
    CUgreenCtx g;
    CUdevResourceDesc desc = NULL;
    CHECK_RC(api.cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    expect(32 * MiB, "primary, two created and a green context");
    CUdeviceptr p;
    CHECK_RC(api.cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    /* A context that does not fit is denied before the driver makes it. */
    CHECK_RC(api.cuMemAlloc_v2(&p, 32 * MiB), CUDA_SUCCESS);
    uint64_t before = calls("cuCtxCreate_v2", "cuCtxCreate_v4");
    CUcontext c5;
    CHECK_RC(api.cuCtxCreate_v4(&c5, NULL, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(calls("cuCtxCreate_v2", "cuCtxCreate_v4") == before, "a denied context reached the driver");
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_RC(api.cuCtxDestroy_v2(c4), CUDA_SUCCESS);
    CHECK_RC(api.cuCtxDestroy_v2(c2), CUDA_SUCCESS);
    CHECK_RC(api.cuGreenCtxDestroy(g), CUDA_SUCCESS);
    expect(8 * MiB, "created contexts gone");
    CHECK_RC(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    CHECK_RC(api.cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
    CHECK_RC(api.cuMemFree_v2(p), CUDA_SUCCESS);
    /* Retained again: charged once per device; released when the count drops to 0. */
    CUcontext again;
    CHECK_RC(cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
    expect(8 * MiB, "a second retain");
    CHECK_RC(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    CHECK_RC(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    expect(0, "primary released");
    card_within_budget();
}

/* Ordinal 0 is card 1 and ordinal 1 card 0 (ctest: CUDA_VISIBLE_DEVICES=1,0). */
static void case_twodev(void)
{
    CUcontext c1 = make_context(1);
    (void)c1;
    CUdeviceptr a, b;
    CHECK_RC(api.cuMemAlloc_v2(&a, 40 * MiB), CUDA_SUCCESS);
    CUstream s = stream();
    CUdeviceptr q;
    CHECK_RC(api.cuMemAllocAsync(&q, 16 * MiB, s), CUDA_SUCCESS);
    make_context(0);
    CHECK_RC(api.cuMemAlloc_v2(&b, 24 * MiB), CUDA_SUCCESS);
    expect_on(1, 0, 56 * MiB, "ordinal 1 = card 0");
    expect_on(0, 1, 24 * MiB, "ordinal 0 = card 1");
    CHECK_RC(api.cuMemAlloc_v2(&b, 48 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_coverage ROUTE CASE\n");
        return 1;
    }
    route = parse_route(argv[1]);
    REQUIRE(route >= 0, "unknown route %s", argv[1]);
    const char *c = argv[2];
    if (strcmp(c, "ctxdefault") == 0) {
        /* Settings are read at the first CUDA call: the default applies. */
        unsetenv("GPUCAP_CONTEXT_RESERVE");
        make_context(0);
        CHECK(usage(0).used == 256 * MiB, "a 1 GiB card's context charged %llu, want 256 MiB",
              (unsigned long long)usage(0).used);
        return test_result();
    }
    make_context(0);
    fill(&api, route);
    static const struct test_case cases[] = {
        {"array", case_array},
        {"mipmap", case_mipmap},
        {"poolkeep", case_poolkeep},
        {"poolnew", case_poolnew},
        {"pool13", case_pool13},
        {"graph", case_graph},
        {"graphcapture", case_graphcapture},
        {"context", case_context},
        {"twodev", case_twodev},
    };
    RUN_CASE(cases, c);
    return test_result();
}
