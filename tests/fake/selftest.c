/* SPDX-License-Identifier: Apache-2.0 */
/*
 * selftest.c: checks the fake driver against the behaviour its sources describe: the record,
 * contexts, pools, VMM reference counts, arrays, graphs, cuGetProcAddress variants, CUDA_VISIBLE_DEVICES, cross-process sharing and crash recovery,
 * threads, stub mode and the fake NVML. Run without arguments it runs every case in a fresh
 * process with that case's environment (the fake reads its configuration once); with a case
 * name it runs that case here. Exit 0 pass, 1 fail, 77 skip.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"
#include "fakenvml.h"

#include "selftest.h"

void init_primary(CUdevice dev)
{
    CUcontext c;
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&c, dev));
    OK(cuCtxSetCurrent(c));
}

CUmemAllocationProp pinned_prop(int dev)
{
    CUmemAllocationProp prop = { 0 };
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

static uint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    OK(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

static uint64_t graph_attr(CUdevice d, CUgraphMem_attribute a)
{
    cuuint64_t v = 0;
    OK(cuDeviceGetGraphMemAttribute(d, a, &v));
    return v;
}

/* ---- cases ---- */

static void t_init(void)
{
    int n;
    IS(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuDriverGetVersion(&n));
    EQ(n, 13000);
    IS(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    EQ(n, 1);
    IS(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    CUdevice d;
    IS(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGet(&d, 0));
    char name[64], bus[32];
    OK(cuDeviceGetName(name, sizeof name, d));
    CHECK(strcmp(name, "Fake GPU 0") == 0);
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, d));
    CHECK(strcmp(bus, "00000000:00:00.0") == 0);
    CUuuid u, u2;
    OK(cuDeviceGetUuid(&u, d));
    OK(cuDeviceGetUuid_v2(&u2, d));
    static const unsigned char want[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    CHECK(memcmp(u.bytes, want, 16) == 0 && memcmp(u2.bytes, want, 16) == 0);
    size_t total;
    unsigned int total32;
    OK(cuDeviceTotalMem_v2(&total, d));
    EQ(total == 16 * GiB, 1);
    OK(cuDeviceTotalMem(&total32, d));
    EQ(total32, UINT_MAX);
    int v;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    EQ(v, 9);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
    EQ(v, 0);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
    CHECK(v > 0);
    IS(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d), CUDA_ERROR_INVALID_VALUE);
    EQ(fakecuda_physical_count(), 1);
    EQ(fakecuda_calls("cuInit"), 2);
    EQ(fakecuda_calls("cuDeviceGetCount"), 3);
    CHECK(fakecuda_calls("cuNoSuchCall") == UINT64_MAX);
}

static void t_memory(void)
{
    CUdeviceptr p, q;
    IS(cuMemAlloc_v2(&p, MiB), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    size_t f, t;
    IS(cuMemAlloc_v2(&p, MiB), CUDA_ERROR_INVALID_CONTEXT);
    IS(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    init_primary(0);
    EQ(fakecuda_capacity(0) == GiB, 1);
    OK(cuMemAlloc_v2(&p, 100 * MiB));
    EQ(p % 256, 0);
    EQ(fakecuda_outstanding(0) == 100 * MiB, 1);
    OK(cuMemGetInfo_v2(&f, &t));
    CHECK(t == GiB && f == GiB - 100 * MiB);
    IS(cuMemAlloc_v2(&q, GiB), CUDA_ERROR_OUT_OF_MEMORY);
    IS(cuMemAlloc_v2(&q, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAlloc_v2(NULL, MiB), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemFree_v2(p + 256), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(0));
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange_v2(&base, &size, p + 4096));
    CHECK(base == p && size == 100 * MiB);
    int ord = -1;
    OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 1));
    EQ(ord, 0);
    IS(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 12345), CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr_v1 p32;
    OK(cuMemAlloc(&p32, 10 * (unsigned)MiB));
    CHECK(p32 != 0);
    EQ(fakecuda_outstanding(0) == 110 * MiB, 1);
    unsigned int f32, t32;
    OK(cuMemGetInfo(&f32, &t32));
    CHECK(t32 == GiB && f32 == GiB - 110 * MiB);
    OK(cuMemFree(p32));

    size_t pitch;
    OK(cuMemAllocPitch_v2(&q, &pitch, 1000, 10, 4));
    EQ(pitch, 1024);
    EQ(fakecuda_outstanding(0), 100 * MiB + 10240);
    IS(cuMemAllocPitch_v2(&q, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(q));
    unsigned int pitch32;
    OK(cuMemAllocPitch(&p32, &pitch32, 513, 2, 8));
    EQ(pitch32, 1024);
    OK(cuMemFree(p32));

    OK(cuMemAllocManaged(&q, 5 * MiB, CU_MEM_ATTACH_GLOBAL));
    EQ(fakecuda_outstanding(0), 105 * MiB);
    unsigned int managed = 0;
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, q));
    EQ(managed, 1);
    OK(cuMemFree_v2(q));

    void *h;
    OK(cuMemAllocHost_v2(&h, 64 * MiB));
    memset(h, 1, 4096);
    OK(cuMemHostAlloc(&h, MiB, CU_MEMHOSTALLOC_PORTABLE));
    EQ(fakecuda_outstanding(0), 100 * MiB);
    OK(cuMemFreeHost(h));
    IS(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);

    EQ(fakecuda_peak(0), 110 * MiB);
    fakecuda_reset_peak(0);
    EQ(fakecuda_peak(0), 100 * MiB);
    EQ(fakecuda_calls("cuMemAlloc_v2"), 6);
    EQ(fakecuda_calls("cuMemAlloc"), 1);

    /* Releasing the last reference to the primary context frees what lived in it. */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EQ(fakecuda_outstanding(0), 0);
    IS(cuMemFree_v2(p), CUDA_ERROR_INVALID_CONTEXT);
    IS(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
}

static void t_ctx(void)
{
    OK(cuInit(0));
    CUcontext c, c3, cur;
    CUdevice d;
    IS(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxCreate_v4(&c, NULL, 0, 1));
    EQ(fakecuda_outstanding(1), 64 * MiB);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == c);
    OK(cuCtxGetDevice(&d));
    EQ(d, 1);
    OK(cuCtxCreate_v3(&c3, NULL, 0, 0, 0));
    EQ(fakecuda_outstanding(0), 64 * MiB);
    OK(cuCtxPopCurrent_v2(&cur));
    CHECK(cur == c3);
    OK(cuCtxGetDevice(&d));
    EQ(d, 1);
    OK(cuCtxPushCurrent_v2(c3));
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, MiB));
    EQ(fakecuda_outstanding(0), 65 * MiB);
    OK(cuCtxDestroy_v2(c3));
    EQ(fakecuda_outstanding(0), 0);
    IS(cuCtxDestroy_v2(c3), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxGetDevice(&d));
    EQ(d, 1);
    OK(cuCtxDestroy_v2(c));
    IS(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    EQ(fakecuda_outstanding(1), 0);

    CUcontext pc, pc2;
    OK(cuDevicePrimaryCtxRetain(&pc, 0));
    OK(cuDevicePrimaryCtxRetain(&pc2, 0));
    CHECK(pc == pc2);
    unsigned int flags;
    int active;
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EQ(active, 1);
    IS(cuCtxDestroy_v2(pc), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EQ(fakecuda_outstanding(0), 64 * MiB);
    OK(cuDevicePrimaryCtxRelease(0));
    EQ(fakecuda_outstanding(0), 0);
    OK(cuDevicePrimaryCtxRetain(&pc, 0));
    OK(cuDevicePrimaryCtxReset_v2(0));
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EQ(active, 0);

    CUgreenCtx g;
    OK(cuGreenCtxCreate(&g, NULL, 1, 0));
    EQ(fakecuda_outstanding(1), 64 * MiB);
    OK(cuGreenCtxDestroy(g));
    EQ(fakecuda_outstanding(1), 0);
    IS(cuGreenCtxDestroy(g), CUDA_ERROR_INVALID_CONTEXT);
    IS(cuCtxCreate_v2(&c, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    OK(cuCtxCreate(&c, 0, 0));
    OK(cuCtxSynchronize());
    OK(cuCtxDestroy(c));
}

static void t_pools(void)
{
    init_primary(0);
    CUmemoryPool dp, cp, p;
    OK(cuDeviceGetDefaultMemPool(&dp, 0));
    OK(cuDeviceGetMemPool(&cp, 0));
    CHECK(dp == cp);
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    OK(cuMemGetDefaultMemPool(&p, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
    CHECK(p == dp);
    CUstream s;
    OK(cuStreamCreate(&s, 0));

    CUdeviceptr a, b;
    OK(cuMemAllocAsync(&a, MiB, s));
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), MiB);
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
    EQ(fakecuda_outstanding(0), 2 * MiB);
    OK(cuMemAllocAsync_ptsz(&b, 3 * MiB, s));
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    OK(cuMemFreeAsync(a, s));
    OK(cuMemFreeAsync_ptsz(b, s));
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    EQ(fakecuda_outstanding(0), 4 * MiB);
    IS(cuMemFreeAsync(b, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s));
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    EQ(fakecuda_outstanding(0), 0);
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MiB);
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 4 * MiB);
    cuuint64_t zero = 0, thr = 8 * MiB;
    OK(cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    EQ(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);

    /* A release threshold keeps memory across synchronisations; TrimTo gives it back. */
    OK(cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    OK(cuMemAllocAsync(&a, 5 * MiB, NULL));
    OK(cuMemFreeAsync(a, NULL));
    OK(cuCtxSynchronize());
    EQ(fakecuda_outstanding(0), 6 * MiB);
    OK(cuMemPoolTrimTo(dp, 0));
    EQ(fakecuda_outstanding(0), 0);

    /* cuMemFree on a pool pointer frees it and synchronises. */
    OK(cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    OK(cuMemAllocAsync(&a, 3 * MiB, s));
    OK(cuMemFree_v2(a));
    EQ(fakecuda_outstanding(0), 0);

    /* maxSize bounds reserved. */
    CUmemPoolProps props = { 0 };
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location = loc;
    props.maxSize = 4 * MiB;
    CUmemoryPool mp;
    OK(cuMemPoolCreate(&mp, &props));
    OK(cuMemAllocFromPoolAsync(&a, 3 * MiB, mp, s));
    IS(cuMemAllocFromPoolAsync_ptsz(&b, 2 * MiB, mp, s), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAllocFromPoolAsync(&b, MiB, mp, s));
    EQ(fakecuda_outstanding(0), 4 * MiB);
    CUmemoryPool got = NULL;
    OK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
    CHECK(got == mp);
    OK(cuDeviceSetMemPool(0, mp));
    OK(cuDeviceGetMemPool(&cp, 0));
    CHECK(cp == mp);
    /* Destroying a pool with live allocations keeps exactly what is used until they are freed. */
    OK(cuMemPoolDestroy(mp));
    OK(cuDeviceGetMemPool(&cp, 0));
    CHECK(cp == dp);
    EQ(fakecuda_outstanding(0), 4 * MiB);
    OK(cuMemFreeAsync(a, s));
    EQ(fakecuda_outstanding(0), MiB);
    OK(cuMemFreeAsync(b, s));
    EQ(fakecuda_outstanding(0), 0);
    IS(cuMemPoolDestroy(mp), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemPoolDestroy(dp), CUDA_ERROR_INVALID_VALUE);

    /* The card being full fails a pool that must grow. */
    OK(cuMemAllocAsync(&a, GiB - MiB, s));
    IS(cuMemAllocAsync(&b, 2 * MiB, s), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAllocAsync(&b, MiB, s));
    OK(cuMemFreeAsync(a, s));
    OK(cuMemFreeAsync(b, s));
    CUevent ev;
    OK(cuEventCreate(&ev, 0));
    OK(cuEventRecord(ev, s));
    OK(cuEventSynchronize(ev));
    EQ(fakecuda_outstanding(0), 0);
    OK(cuEventDestroy_v2(ev));
    OK(cuStreamDestroy_v2(s));
    IS(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
}

static void t_vmm(void)
{
    init_primary(0);
    CUmemAllocationProp prop = pinned_prop(0);
    size_t gran;
    OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EQ(gran, 2 * MiB);
    CUmemGenericAllocationHandle h, h2, hh;
    IS(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemCreate(&h, 4 * MiB, &prop, 0));
    EQ(fakecuda_outstanding(0), 4 * MiB);
    CUmemAllocationProp host = prop;
    host.location.type = CU_MEM_LOCATION_TYPE_HOST;
    OK(cuMemCreate(&hh, 2 * MiB, &host, 0));
    EQ(fakecuda_outstanding(0), 4 * MiB);
    OK(cuMemRelease(hh));
    IS(cuMemRelease(hh), CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr va;
    OK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    OK(cuMemMap(va, 4 * MiB, 0, h, 0));
    IS(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemSetAccess(va, 4 * MiB, &acc, 1));
    IS(cuMemSetAccess(va, 8 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + MiB)));
    CHECK(h2 == h);
    int ord = -1;
    OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + MiB));
    EQ(ord, 0);
    CUmemAllocationProp back;
    OK(cuMemGetAllocationPropertiesFromHandle(&back, h));
    EQ(back.location.id, 0);
    OK(cuMemRelease(h));
    EQ(fakecuda_outstanding(0), 4 * MiB);
    OK(cuMemRelease(h));
    EQ(fakecuda_outstanding(0), 4 * MiB); /* no references left, still mapped */
    IS(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(va, 4 * MiB));
    EQ(fakecuda_outstanding(0), 0);
    IS(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(va, 8 * MiB));
    IS(cuMemRelease(0xdeadbeef), CUDA_ERROR_INVALID_VALUE);
}

static void t_arrays(void)
{
    init_primary(0);
    CUDA_ARRAY_DESCRIPTOR d = { 100, 10, CU_AD_FORMAT_FLOAT, 4 };
    CUarray a;
    OK(cuArrayCreate_v2(&a, &d));
    EQ(fakecuda_outstanding(0), 16384);
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    /* Documented for CUDA_ARRAY3D_DEFERRED_MAPPING arrays only. */
    IS(cuArrayGetMemoryRequirements(&req, a, 0), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY_DESCRIPTOR back;
    OK(cuArrayGetDescriptor_v2(&back, a));
    CHECK(back.Width == 100 && back.Height == 10 && back.NumChannels == 4);
    OK(cuArrayDestroy(a));
    EQ(fakecuda_outstanding(0), 0);
    /* A deferred-mapping array owns no memory and reports what it needs. */
    CUDA_ARRAY3D_DESCRIPTOR dd = {.Width = 100, .Height = 10, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4,
                                  .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING};
    OK(cuArray3DCreate_v2(&a, &dd));
    EQ(fakecuda_outstanding(0), 0);
    OK(cuArrayGetMemoryRequirements(&req, a, 0));
    EQ(req.size, 16384);
    OK(cuArrayDestroy(a));
    IS(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    d.NumChannels = 3;
    IS(cuArrayCreate_v2(&a, &d), CUDA_ERROR_INVALID_VALUE);

    CUDA_ARRAY3D_DESCRIPTOR d3 = { 10, 10, 10, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0 };
    OK(cuArray3DCreate_v2(&a, &d3));
    EQ(fakecuda_outstanding(0), 1024);
    CUDA_ARRAY_DESCRIPTOR_v1 d1 = { 1000, 0, CU_AD_FORMAT_HALF, 2 };
    CUarray a1;
    OK(cuArrayCreate(&a1, &d1));
    EQ(fakecuda_outstanding(0), 1024 + 4096);
    OK(cuArrayDestroy(a1));
    OK(cuArrayDestroy(a));

    CUDA_ARRAY3D_DESCRIPTOR md = { 64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0 };
    CUmipmappedArray m;
    IS(cuMipmappedArrayCreate(&m, &md, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuMipmappedArrayCreate(&m, &md, 7));
    EQ(fakecuda_outstanding(0), 16384 + 4096 + 1024 + 4 * 512);
    IS(cuMipmappedArrayGetMemoryRequirements(&req, m, 0), CUDA_ERROR_INVALID_VALUE);
    CUarray lvl;
    OK(cuMipmappedArrayGetLevel(&lvl, m, 2));
    CUDA_ARRAY3D_DESCRIPTOR ld;
    OK(cuArray3DGetDescriptor_v2(&ld, lvl));
    CHECK(ld.Width == 16 && ld.Height == 16);
    IS(cuArrayDestroy(lvl), CUDA_ERROR_INVALID_HANDLE);
    IS(cuMipmappedArrayGetLevel(&lvl, m, 7), CUDA_ERROR_INVALID_VALUE);
    OK(cuMipmappedArrayDestroy(m));
    EQ(fakecuda_outstanding(0), 0);
}

static void t_graphs(void)
{
    init_primary(0);
    CUgraph g;
    CUgraphNode an, fn;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap = { 0 };
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = 3 * MiB;
    OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
    CHECK(ap.dptr != 0);
    IS(cuGraphAddMemFreeNode(&fn, g, &an, 1, 0x1234), CUDA_ERROR_INVALID_VALUE);
    CUgraphExec e, e2;
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    IS(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);
    EQ(fakecuda_outstanding(0), 0);
    OK(cuGraphLaunch(e, NULL));
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 3 * MiB);
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    EQ(fakecuda_outstanding(0), 4 * MiB);
    IS(cuGraphLaunch(e, NULL), CUDA_ERROR_INVALID_VALUE); /* its allocation is still live */
    int ord = -1;
    OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ap.dptr));
    EQ(ord, 0);
    OK(cuMemFreeAsync(ap.dptr, NULL));
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    EQ(fakecuda_outstanding(0), 4 * MiB); /* reserved until trimmed */
    OK(cuDeviceGraphMemTrim(0));
    EQ(fakecuda_outstanding(0), 0);
    OK(cuGraphExecDestroy(e));
    OK(cuGraphDestroy(g));

    /* Through cuGraphAddNode_v2, with a free node: nothing stays used after the launch. */
    OK(cuGraphCreate(&g, 0));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np.alloc.poolProps = ap.poolProps;
    np.alloc.bytesize = 5 * MiB;
    OK(cuGraphAddNode_v2(&an, g, NULL, NULL, 0, &np));
    CHECK(np.alloc.dptr != 0);
    CUdeviceptr dptr = np.alloc.dptr;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np.free.dptr = dptr;
    OK(cuGraphAddNode_v2(&fn, g, &an, NULL, 1, &np));
    OK(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    OK(cuGraphLaunch_ptsz(e, NULL));
    OK(cuGraphLaunch(e, NULL));
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 5 * MiB);
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
    EQ(fakecuda_outstanding(0), 6 * MiB);
    cuuint64_t zero = 0;
    OK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 0);
    OK(cuDeviceGraphMemTrim(0));
    EQ(fakecuda_outstanding(0), 0);
    EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 6 * MiB);

    /* A launch the card cannot hold fails and takes nothing. */
    CUgraph big;
    OK(cuGraphCreate(&big, 0));
    ap.bytesize = 2 * GiB;
    OK(cuGraphAddMemAllocNode(&an, big, NULL, 0, &ap));
    CUgraphExec be;
    OK(cuGraphInstantiate_v2(&be, big, NULL, NULL, 0));
    IS(cuGraphLaunch(be, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    EQ(fakecuda_outstanding(0), 0);
    OK(cuGraphExecDestroy(be));
    OK(cuGraphDestroy(big));
    OK(cuGraphExecDestroy(e));
    OK(cuGraphDestroy(g));
}

static void *proc(const char *name, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult got = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc = cuGetProcAddress_v2(name, &p, ver, flags, &got);
    /* A name the driver lacks is CUDA_ERROR_NOT_FOUND; any other answer is CUDA_SUCCESS. */
    IS(rc, got == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS);
    if (st)
        *st = got;
    return p;
}

static void t_procaddr(void)
{
    CUdriverProcAddressQueryResult st;
    /* Works before cuInit, as the runtime relies on. */
    CHECK(proc("cuInit", 12000, 0, &st) == (void *)cuInit && st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(proc("cuMemAlloc", 3010, 0, &st) == (void *)cuMemAlloc);
    CHECK(proc("cuMemAlloc", 3020, 0, &st) == (void *)cuMemAlloc_v2);
    CHECK(proc("cuMemAlloc", 13000, 0, &st) == (void *)cuMemAlloc_v2);
    CHECK(proc("cuCtxCreate", 3020, 0, &st) == (void *)cuCtxCreate_v2);
    CHECK(proc("cuCtxCreate", 11040, 0, &st) == (void *)cuCtxCreate_v3);
    CHECK(proc("cuCtxCreate", 12050, 0, &st) == (void *)cuCtxCreate_v4);
    CHECK(proc("cuDeviceGetUuid", 9020, 0, &st) == (void *)cuDeviceGetUuid);
    CHECK(proc("cuDeviceGetUuid", 11040, 0, &st) == (void *)cuDeviceGetUuid_v2);
    CHECK(proc("cuGetProcAddress", 11030, 0, &st) == (void *)cuGetProcAddress);
    CHECK(proc("cuGetProcAddress", 12000, 0, &st) == (void *)cuGetProcAddress_v2);
    CHECK(proc("cuMemAllocAsync", 12000, 0, &st) == (void *)cuMemAllocAsync);
    CHECK(proc("cuMemAllocAsync", 12000, 1, &st) == (void *)cuMemAllocAsync);
    CHECK(proc("cuMemAllocAsync", 12000, 2, &st) == (void *)cuMemAllocAsync_ptsz);
    CHECK(proc("cuMemFreeAsync", 12000, 2, &st) == (void *)cuMemFreeAsync_ptsz);
    CHECK(proc("cuStreamSynchronize", 6050, 2, &st) == (void *)cuStreamSynchronize);
    CHECK(proc("cuStreamSynchronize", 7000, 2, &st) == (void *)cuStreamSynchronize_ptsz);
    CHECK(proc("cuMemGetInfo", 2000, 0, &st) == (void *)cuMemGetInfo);
    CHECK(proc("cuMemGetInfo", 3020, 0, &st) == (void *)cuMemGetInfo_v2);
    CHECK(proc("cuMemCreate", 12000, 2, &st) == (void *)cuMemCreate); /* no _ptsz: the plain one */
    CHECK(proc("cuNoSuchThing", 12000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(proc("", 12000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(proc("cuMemCreate", 10010, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    void *p;
    IS(cuGetProcAddress_v2("cuMemAlloc", &p, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
    IS(cuGetProcAddress_v2(NULL, &p, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, NULL));
    p = (void *)1;
    IS(cuGetProcAddress_v2("cuNoSuchThing", &p, 12000, 0, NULL), CUDA_ERROR_NOT_FOUND);
    CHECK(p == NULL);
    IS(cuGetProcAddress("cuNoSuchThing", &p, 11030, 0), CUDA_ERROR_NOT_FOUND);
    OK(cuGetProcAddress("cuMemFree", &p, 11030, 0));
    CHECK(p == (void *)cuMemFree_v2);
    /* Calls through a resolved pointer count as calls of that export. */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))proc("cuInit", 12000, 0, &st);
    OK(init(0));
    EQ(fakecuda_calls("cuInit"), 1);
    EQ(fakecuda_calls("cuGetProcAddress_v2"), 28);
    EQ(fakecuda_calls("cuGetProcAddress"), 2);
}

static void t_visible(void)
{
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    EQ(n, 3); /* "2,GPU-...03,0,7,1": 7 does not exist and ends the list */
    int want[3] = { 2, 3, 0 };
    for (int d = 0; d < 3; d++) {
        char name[64];
        CUuuid u;
        int bus;
        OK(cuDeviceGetName(name, sizeof name, d));
        char w[64];
        snprintf(w, sizeof w, "Fake GPU %d", want[d]);
        CHECK(strcmp(name, w) == 0);
        OK(cuDeviceGetUuid_v2(&u, d));
        EQ((unsigned char)u.bytes[15], want[d]);
        OK(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
        EQ(bus, want[d]);
    }
    EQ(fakecuda_physical_count(), 4);
    init_primary(1);
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 7 * MiB));
    EQ(fakecuda_outstanding(3), 7 * MiB);
    EQ(fakecuda_outstanding(1), 0);
}

static void t_visible_none(void)
{
    IS(cuInit(0), CUDA_ERROR_NO_DEVICE); /* an ambiguous UUID prefix ends the list at once */
}

static void t_visible_dup(void)
{
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    EQ(n, 1);
}

int wait_child(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static void t_fork(void)
{
    init_primary(0);
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 100 * MiB));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char c;
        /* The child holds nothing of its parent's: it cannot free the parent's pointer. */
        CUdeviceptr q;
        if (cuMemFree_v2(p) != CUDA_ERROR_INVALID_VALUE || cuMemAlloc_v2(&q, 200 * MiB) != CUDA_SUCCESS)
            _exit(3);
        if (write(up[1], "x", 1) != 1 || read(down[0], &c, 1) != 1)
            _exit(4);
        pause();
        _exit(0);
    }
    char c;
    CHECK(read(up[0], &c, 1) == 1);
    EQ(fakecuda_outstanding(0), 300 * MiB);
    struct fakecuda_process procs[8];
    EQ(fakecuda_processes(0, procs, 8), 2);
    IS(cuMemAlloc_v2(&p, 800 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(pid, SIGKILL);
    /* Reaped as soon as it is dead, zombie or not. */
    for (int i = 0; i < 200 && fakecuda_outstanding(0) != 100 * MiB; i++)
        usleep(10000);
    EQ(fakecuda_outstanding(0), 100 * MiB);
    int st = wait_child(pid);
    CHECK(WIFSIGNALED(st));
    OK(cuMemAlloc_v2(&p, 800 * MiB));
    EQ(fakecuda_peak(0), 900 * MiB);
}

/* The crash-recovery path of the robust mutex: children killed while allocating. */
static void t_robust(void)
{
    init_primary(0);
    for (int round = 0; round < 20; round++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            for (;;) {
                CUdeviceptr q;
                if (cuMemAlloc_v2(&q, MiB) == CUDA_SUCCESS)
                    cuMemFree_v2(q);
            }
        }
        usleep(2000 + round * 500);
        kill(pid, SIGKILL);
        wait_child(pid);
        CUdeviceptr p;
        OK(cuMemAlloc_v2(&p, 3 * MiB));
        EQ(fakecuda_outstanding(0), 3 * MiB);
        OK(cuMemFree_v2(p));
    }
    EQ(fakecuda_outstanding(0), 0);
}

struct hammer {
    CUcontext ctx;
    int iters;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    if (cuCtxSetCurrent(h->ctx) != CUDA_SUCCESS)
        return (void *)1;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    for (int i = 0; i < h->iters; i++) {
        CUdeviceptr p, q;
        size_t sz = 256 + (rand_r(&seed) % 4096) * 256;
        if (cuMemAlloc_v2(&p, sz) != CUDA_SUCCESS || cuMemAllocAsync(&q, sz, NULL) != CUDA_SUCCESS)
            return (void *)1;
        if (cuMemFreeAsync(q, NULL) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS)
            return (void *)1;
        if (i % 1000 == 0 && cuStreamSynchronize(NULL) != CUDA_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

static void t_threads(void)
{
    init_primary(0);
    struct hammer h = { NULL, 5000 };
    OK(cuCtxGetCurrent(&h.ctx));
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, hammer_thread, &h) == 0);
    for (int i = 0; i < 8; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        CHECK(rv == NULL);
    }
    OK(cuCtxSynchronize());
    EQ(fakecuda_outstanding(0), 0);
    EQ(fakecuda_calls("cuMemAlloc_v2"), 8 * 5000);
    EQ(fakecuda_calls("cuMemFreeAsync"), 8 * 5000);
}

static void t_stub(void)
{
    IS(cuInit(0), CUDA_ERROR_STUB_LIBRARY);
    int v;
    IS(cuDriverGetVersion(&v), CUDA_ERROR_STUB_LIBRARY);
    void *p;
    CUdriverProcAddressQueryResult st;
    IS(cuGetProcAddress_v2("", &p, 12000, 0, &st), CUDA_ERROR_STUB_LIBRARY);
    IS(cuGetProcAddress("cuInit", &p, 12000, 0), CUDA_ERROR_STUB_LIBRARY);
    EQ(fakecuda_calls("cuInit"), 1);
}

static void t_badcfg(void)
{
    IS(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

static void t_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "skip: %s\n", dlerror());
        exit(77);
    }
#define NV(name) __typeof__(name) *p_##name = (__typeof__(name) *)dlsym(lib, #name); CHECK(p_##name)
    NV(nvmlInit_v2);
    NV(nvmlShutdown);
    NV(nvmlDeviceGetCount_v2);
    NV(nvmlDeviceGetHandleByIndex_v2);
    NV(nvmlDeviceGetHandleByUUID);
    NV(nvmlDeviceGetUUID);
    NV(nvmlDeviceGetMemoryInfo);
    NV(nvmlDeviceGetMemoryInfo_v2);
    NV(nvmlDeviceGetComputeRunningProcesses_v3);
    NV(nvmlDeviceGetMigMode);
    NV(nvmlSystemGetCudaDriverVersion_v2);
    unsigned n;
    IS(p_nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    IS(p_nvmlInit_v2(), NVML_SUCCESS);
    IS(p_nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    EQ(n, 2); /* CUDA_VISIBLE_DEVICES=1 does not apply to NVML */
    nvmlDevice_t d, d2;
    IS(p_nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_ERROR_INVALID_ARGUMENT);
    IS(p_nvmlDeviceGetHandleByIndex_v2(1, &d), NVML_SUCCESS);
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    IS(p_nvmlDeviceGetUUID(d, uuid, 10), NVML_ERROR_INSUFFICIENT_SIZE);
    IS(p_nvmlDeviceGetUUID(d, uuid, sizeof uuid), NVML_SUCCESS);
    CHECK(strcmp(uuid, "GPU-fa4ec0da-0000-4000-8000-000000000001") == 0);
    IS(p_nvmlDeviceGetHandleByUUID(uuid, &d2), NVML_SUCCESS);
    CHECK(d == d2);

    init_primary(0); /* physical device 1 */
    CUuuid cu;
    OK(cuDeviceGetUuid_v2(&cu, 0));
    EQ((unsigned char)cu.bytes[15], 1);
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, GiB));
    nvmlMemory_t m;
    IS(p_nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    CHECK(m.total == 4 * GiB && m.used == GiB && m.free == 3 * GiB);
    nvmlMemory_v2_t m2 = { .version = 1 };
    IS(p_nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = nvmlMemory_v2;
    EQ(m2.version, 0x02000028);
    IS(p_nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
    CHECK(m2.total == 4 * GiB && m2.used == GiB && m2.reserved == 0);
    unsigned cnt = 0;
    IS(p_nvmlDeviceGetComputeRunningProcesses_v3(d, &cnt, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    EQ(cnt, 1);
    nvmlProcessInfo_t pi[4];
    cnt = 4;
    IS(p_nvmlDeviceGetComputeRunningProcesses_v3(d, &cnt, pi), NVML_SUCCESS);
    CHECK(cnt == 1 && pi[0].pid == (unsigned)getpid() && pi[0].usedGpuMemory == GiB);
    IS(p_nvmlDeviceGetHandleByIndex_v2(0, &d2), NVML_SUCCESS);
    IS(p_nvmlDeviceGetComputeRunningProcesses_v3(d2, &cnt, pi), NVML_SUCCESS);
    EQ(cnt, 0);
    unsigned cur, pend;
    IS(p_nvmlDeviceGetMigMode(d, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    int v;
    IS(p_nvmlSystemGetCudaDriverVersion_v2(&v), NVML_SUCCESS);
    EQ(v, 13000);
    IS(p_nvmlShutdown(), NVML_SUCCESS);
    IS(p_nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

static void t_bench(void)
{
    init_primary(0);
    const int n = 200000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        OK(cuMemAlloc_v2(&p, 4096));
        OK(cuMemFree_v2(p));
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
    printf("alloc+free pair: %.0f ns\n", ns);
    CHECK(ns < 50000); /* a gross-regression guard only: sanitizer builds are slower */
}

/* ---- runner ---- */

static const struct tcase cases[] = {
    { "init", t_init, { 0 } },
    { "memory", t_memory, { "FAKECUDA_MEM=1GiB" } },
    { "ctx", t_ctx, { "FAKECUDA_DEVICES=2", "FAKECUDA_CTX_BYTES=64MiB" } },
    { "pools", t_pools, { "FAKECUDA_MEM=1GiB" } },
    { "vmm", t_vmm, { 0 } },
    { "arrays", t_arrays, { 0 } },
    { "graphs", t_graphs, { "FAKECUDA_MEM=1GiB" } },
    { "procaddr", t_procaddr, { 0 } },
    { "visible", t_visible, { "FAKECUDA_DEVICES=4", "CUDA_VISIBLE_DEVICES=2, GPU-fa4ec0da-0000-4000-8000-000000000003,0,7,1" } },
    { "visible_none", t_visible_none, { "FAKECUDA_DEVICES=4", "CUDA_VISIBLE_DEVICES=GPU-fa4ec0da-0000-4000-8000-00000000000" } },
    { "visible_dup", t_visible_dup, { "FAKECUDA_DEVICES=2", "CUDA_VISIBLE_DEVICES=1,1,0" } },
    { "fork_file", t_fork, { "FAKECUDA_MEM=1GiB", "FAKECUDA_RECORD=@" } },
    { "fork_anon", t_fork, { "FAKECUDA_MEM=1GiB" } },
    { "robust", t_robust, { "FAKECUDA_RECORD=@" } },
    { "threads", t_threads, { 0 } },
    { "stub", t_stub, { "FAKECUDA_STUB=1" } },
    { "badcfg", t_badcfg, { "FAKECUDA_DEVICES=2", "FAKECUDA_MEM=1GiB,2GiB,3GiB" } },
    { "nvml", t_nvml, { "FAKECUDA_DEVICES=2", "FAKECUDA_MEM=8GiB,4GiB", "CUDA_VISIBLE_DEVICES=1", "FAKECUDA_RECORD=@" } },
    { "bench", t_bench, { 0 } },
};

static const char *const cleared[] = { "FAKECUDA_DEVICES", "FAKECUDA_MEM", "FAKECUDA_RECORD", "FAKECUDA_CTX_BYTES",
                                       "FAKECUDA_DRIVER_VERSION", "FAKECUDA_STUB", "FAKECUDA_MIG", "CUDA_VISIBLE_DEVICES",
                                       "FAKECUDA_PROFILE", "FAKECUDA_MODULE_BYTES", "FAKECUDA_TRACE" };

static int run_case(const struct tcase *c, const char *self)
{
    char record[] = "/tmp/fakecuda-selftest-XXXXXX";
    int fd = mkstemp(record);
    if (fd < 0)
        return 1;
    close(fd);
    unlink(record); /* a fresh name: the fake creates the file */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (size_t i = 0; i < sizeof cleared / sizeof *cleared; i++)
            unsetenv(cleared[i]);
        for (int i = 0; c->env[i]; i++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", c->env[i]);
            char *eq = strchr(kv, '=');
            *eq = 0;
            setenv(kv, strcmp(eq + 1, "@") == 0 ? record : eq + 1, 1);
        }
        execl(self, self, c->name, (char *)NULL);
        _exit(127);
    }
    int st = wait_child(pid);
    unlink(record);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    printf("%-14s %s\n", c->name, rc == 0 ? "ok" : rc == 77 ? "skip" : "FAIL");
    if (WIFSIGNALED(st))
        printf("  killed by signal %d\n", WTERMSIG(st));
    fflush(stdout);
    return rc;
}

int main(int argc, char **argv)
{
    size_t ncases = sizeof cases / sizeof *cases;
    const struct tcase *groups[] = { cases, selftest_rt_cases, selftest_calls_cases };
    size_t counts[] = { ncases, selftest_rt_ncases, selftest_calls_ncases };
    if (argc > 1 && strcmp(argv[1], "rows") == 0) {
        selftest_rows();
        return 0;
    }
    if (argc > 1) {
        for (size_t g = 0; g < 3; g++) {
            for (size_t i = 0; i < counts[g]; i++) {
                if (strcmp(groups[g][i].name, argv[1]) == 0) {
                    groups[g][i].fn();
                    return 0;
                }
            }
        }
        fprintf(stderr, "no case %s\n", argv[1]);
        return 1;
    }
    int failed = 0, passed = 0;
    for (size_t g = 0; g < 3; g++) {
        for (size_t i = 0; i < counts[g]; i++) {
            int rc = run_case(&groups[g][i], "/proc/self/exe");
            failed += rc != 0 && rc != 77;
            passed += rc == 0;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : passed ? 0 : 77;
}
