/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extra.c: the rest of what the CUDA runtime, CuPy and PyTorch call: context queries and settings,
 * error strings, pointer and range queries, memory advice and prefetch (accepted), stream
 * attributes, IPC memory and event handles, peer access, profiler switches and kernel parameter
 * queries. None of it takes or gives back memory except IPC: a handle opened in another process
 * maps the exporter's allocation there (charged to the exporter only, as on a card).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaProfiler.h>

#include "fake_internal.h"

/* ---- contexts ---- */

/* The named context (NULL: the current one) under fk_mu, or NULL with the lock released. */
static struct fk_ctx *ctx_locked(CUcontext h)
{
    fk_lock();
    struct fk_ctx *c = h ? fk_ctx_lookup(h) : fk_current_ctx();
    if (!c)
        fk_unlock();
    return c;
}

FK_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    FK_ENTER_INIT(cuCtxGetApiVersion);
    unsigned long long id; /* fk_ctx_id: only whether the context is alive */
    CUresult rc = version ? fk_ctx_id(ctx, &id) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *version = 3020; /* what every context made since CUDA 3.2 reports */
    return rc;
}

CUresult fk_ctx_id(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_ctx *c = ctx_locked(ctx);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctxId = c->id;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuCtxGetId, (CUcontext ctx, unsigned long long *ctxId), fk_ctx_id(ctx, ctxId))

/* Context flags and cache/shared-memory preferences: kept, with no effect. */
static CUresult ctx_setting(int which, bool set, unsigned *value)
{
    if (!set && !value)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_ctx *c = ctx_locked(NULL);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (set)
        c->settings[which] = *value;
    else
        *value = c->settings[which];
    fk_unlock();
    return CUDA_SUCCESS;
}

/* Defines the entry points `get` and `set` of setting `which`, kept as an unsigned and given back
 * as a `type`. */
#define CTX_SETTING(get, set, type, which)                                              \
    FK_EXPORT CUresult get(type *out)                                                   \
    {                                                                                   \
        FK_ENTER_INIT(get);                                                             \
        unsigned v = 0;                                                                 \
        CUresult rc = out ? ctx_setting(which, false, &v) : CUDA_ERROR_INVALID_VALUE;   \
        if (rc == CUDA_SUCCESS)                                                         \
            *out = (type)v;                                                             \
        return rc;                                                                      \
    }                                                                                   \
    FK_EXPORT CUresult set(type value)                                                  \
    {                                                                                   \
        FK_ENTER_INIT(set);                                                             \
        unsigned v = (unsigned)value;                                                   \
        return ctx_setting(which, true, &v);                                            \
    }

CTX_SETTING(cuCtxGetFlags, cuCtxSetFlags, unsigned int, 0)
CTX_SETTING(cuCtxGetCacheConfig, cuCtxSetCacheConfig, CUfunc_cache, 1)
CTX_SETTING(cuCtxGetSharedMemConfig, cuCtxSetSharedMemConfig, CUsharedconfig, 2)

FK_EXPORT CUresult cuCtxResetPersistingL2Cache(void)
{
    FK_ENTER_INIT(cuCtxResetPersistingL2Cache);
    struct fk_ctx *c = ctx_locked(NULL);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    fk_unlock();
    return CUDA_SUCCESS;
}

static CUresult peer_access(CUcontext peer)
{
    struct fk_ctx *c = ctx_locked(NULL);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fk_ctx *p = peer ? fk_ctx_lookup(peer) : NULL;
    fk_unlock();
    /* No two fake cards are peers (cuDeviceCanAccessPeer says 0). */
    return p ? CUDA_ERROR_PEER_ACCESS_UNSUPPORTED : CUDA_ERROR_INVALID_CONTEXT;
}

FK_FORWARD(cuCtxEnablePeerAccess, (CUcontext peerContext, unsigned int Flags), peer_access(peerContext))
FK_FORWARD(cuCtxDisablePeerAccess, (CUcontext peerContext),
           peer_access(peerContext) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED ? CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
                                                                          : CUDA_ERROR_INVALID_CONTEXT)

/* ---- error strings (cuda.h's names; the descriptions shortened) ---- */

static const struct {
    CUresult rc;
    const char *name, *text;
} errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported "
      "between these two devices" },
    { CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the "
      "requested memory range is already mapped" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond "
      "to a registered memory region" },
    { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on "
      "this OS" },
    { CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
    { CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when "
      "stream is capturing" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult error_text(CUresult error, const char **p, bool name)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
        if (errors[i].rc == error) {
            *p = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *p = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* Both work before cuInit, as the driver's do. */
FK_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FK_ENTER(cuGetErrorString);
    return error_text(error, pStr, false);
}

FK_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FK_ENTER(cuGetErrorName);
    return error_text(error, pStr, true);
}

/* ---- pointers and ranges ---- */

FK_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                          CUdeviceptr ptr)
{
    FK_ENTER_INIT(cuPointerGetAttributes);
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    /* Unlike cuPointerGetAttribute, an address the driver does not know is not an error: each
     * answer is the "not a CUDA pointer" one (cuda.h: memory type 0, NULL, false). */
    fk_lock();
    int kind = fk_ptr_kind(ptr);
    fk_unlock();
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        if (kind < 0) {
            switch (attributes[i]) {
            case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = -2; break;
            case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data[i] = 0; break;
            default: *(void **)data[i] = NULL; break;
            }
            continue;
        }
        if (attributes[i] == CU_POINTER_ATTRIBUTE_MAPPED) {
            *(unsigned *)data[i] = 1;
            continue;
        }
        if (attributes[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID) {
            *(unsigned long long *)data[i] = (unsigned long long)ptr;
            continue;
        }
        CUresult rc = cuPointerGetAttribute(data[i], attributes[i], ptr);
        if (rc == CUDA_ERROR_NOT_SUPPORTED || (rc != CUDA_SUCCESS && kind == 0))
            *(void **)data[i] = NULL;
        else if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult range_ok(CUdeviceptr p, size_t count)
{
    fk_lock();
    bool ok = count && fk_ptr_kind(p) > 0 && fk_ptr_kind(p + count - 1) > 0;
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_FORWARD(cuMemAdvise, (CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device),
           range_ok(devPtr, count))
FK_FORWARD(cuMemAdvise_v2, (CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location),
           range_ok(devPtr, count))
FK_FORWARD(cuMemPrefetchAsync, (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream),
           range_ok(devPtr, count))
FK_FORWARD(cuMemPrefetchAsync_ptsz, (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream),
           range_ok(devPtr, count))
FK_FORWARD(cuMemPrefetchAsync_v2,
           (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream),
           range_ok(devPtr, count))
FK_FORWARD(cuMemPrefetchAsync_v2_ptsz,
           (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream),
           range_ok(devPtr, count))

FK_EXPORT CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                          CUdeviceptr devPtr, size_t count)
{
    FK_ENTER_INIT(cuMemRangeGetAttribute);
    if (!data || dataSize < 4)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = range_ok(devPtr, count);
    if (rc == CUDA_SUCCESS)
        memset(data, attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION ? 0xff : 0, dataSize); /* -1: none */
    return rc;
}

/* ---- stream attributes (kept per value, no effect) and a stream's device ---- */

static CUresult stream_attr(CUstream s, CUstreamAttrID attr, CUstreamAttrValue *value, bool set)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    bool ok = fk_stream_ok(s);
    fk_unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!set)
        memset(value, 0, sizeof *value);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuStreamGetAttribute, (CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out),
           stream_attr(hStream, attr, value_out, false))
FK_FORWARD(cuStreamGetAttribute_ptsz, (CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out),
           stream_attr(hStream, attr, value_out, false))
FK_FORWARD(cuStreamSetAttribute, (CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value),
           stream_attr(hStream, attr, (CUstreamAttrValue *)value, true))
FK_FORWARD(cuStreamSetAttribute_ptsz, (CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value),
           stream_attr(hStream, attr, (CUstreamAttrValue *)value, true))

static CUresult stream_device(CUstream s, CUdevice *device)
{
    CUcontext ctx = NULL;
    CUresult rc = device ? cuStreamGetCtx(s, &ctx) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = cuCtxGetDevice_v2(device, ctx);
    return rc;
}

FK_FORWARD(cuStreamGetDevice, (CUstream hStream, CUdevice *device), stream_device(hStream, device))
FK_FORWARD(cuStreamGetDevice_ptsz, (CUstream hStream, CUdevice *device), stream_device(hStream, device))

/* ---- IPC: a handle names the exporter, its allocation and its device ---- */

#define FK_IPC_MAGIC 0x4350494b41465f31ull /* "1_FAKIPC" */

struct ipc_handle {
    uint64_t magic;
    int32_t pid, phys;
    uint64_t ptr, size;
};

static CUresult ipc_get(CUipcMemHandle *h, CUdeviceptr dptr)
{
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    struct fk_alloc *a = rc == CUDA_SUCCESS ? fk_alloc_find(dptr, false) : NULL;
    if (rc == CUDA_SUCCESS && (!a || a->kind == FK_IPC || a->kind == FK_LEGACY32))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        struct ipc_handle ih = { FK_IPC_MAGIC, (int32_t)getpid(), a->phys, a->ptr, a->size };
        memset(h, 0, sizeof *h);
        memcpy(h->reserved, &ih, sizeof ih);
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuIpcGetMemHandle, (CUipcMemHandle *pHandle, CUdeviceptr dptr), ipc_get(pHandle, dptr))

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle)
{
    struct ipc_handle ih;
    memcpy(&ih, handle.reserved, sizeof ih);
    if (!pdptr || ih.magic != FK_IPC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    /* The exporting process opens nothing of its own, and a gone one has nothing left to map. */
    if (ih.pid == getpid() || (kill(ih.pid, 0) != 0 && errno == ESRCH))
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_alloc, a, 0, c);
    if (c->phys != ih.phys || !(a->ptr = fk_addr_alloc(c->phys, ih.size, false))) {
        fk_entry_abort(a, c, 0);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    a->size = ih.size;
    fk_alloc_insert_in(a, c, FK_IPC);
    *pdptr = a->ptr;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuIpcOpenMemHandle_v2, (CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags),
           ipc_open(pdptr, handle))

static CUresult ipc_close(CUdeviceptr p)
{
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    struct fk_alloc *a = rc == CUDA_SUCCESS ? fk_alloc_find(p, false) : NULL;
    if (rc == CUDA_SUCCESS && (!a || a->kind != FK_IPC))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        fk_alloc_remove(a);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuIpcCloseMemHandle, (CUdeviceptr dptr), ipc_close(dptr))

/* Events: a handle carries no state the fake could share, only its validity. */
static CUresult ipc_event_get(CUipcEventHandle *h, CUevent ev)
{
    if (!h || !ev)
        return CUDA_ERROR_INVALID_VALUE;
    memset(h, 0, sizeof *h);
    uint64_t magic = FK_IPC_MAGIC + 1;
    memcpy(h->reserved, &magic, sizeof magic);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuIpcGetEventHandle, (CUipcEventHandle *pHandle, CUevent event), ipc_event_get(pHandle, event))

static CUresult ipc_event_open(CUevent *ev, CUipcEventHandle h)
{
    uint64_t magic;
    memcpy(&magic, h.reserved, sizeof magic);
    if (!ev || magic != FK_IPC_MAGIC + 1)
        return CUDA_ERROR_INVALID_VALUE;
    return cuEventCreate(ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS);
}

FK_FORWARD(cuIpcOpenEventHandle, (CUevent *phEvent, CUipcEventHandle handle), ipc_event_open(phEvent, handle))

/* ---- profiler switches and kernel parameters ---- */

FK_EXPORT CUresult cuProfilerStart(void)
{
    FK_ENTER_INIT(cuProfilerStart);
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuProfilerStop(void)
{
    FK_ENTER_INIT(cuProfilerStop);
    return CUDA_SUCCESS;
}

/* The fake parses no image, so it knows no kernel's parameters: "no such parameter". */
FK_FORWARD(cuFuncGetParamInfo, (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize),
           func ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE)
FK_FORWARD(cuKernelGetParamInfo, (CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize),
           kernel ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE)

/* ---- multicast objects: no fake card supports them (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED 0) ---- */

FK_FORWARD(cuMulticastCreate, (CUmemGenericAllocationHandle *mcHandle, const CUmulticastObjectProp *prop),
           mcHandle && prop ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuMulticastAddDevice, (CUmemGenericAllocationHandle mcHandle, CUdevice dev), CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuMulticastBindMem, (CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,
                                unsigned long long flags), CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuMulticastBindAddr, (CUmemGenericAllocationHandle mcHandle, size_t mcOffset, CUdeviceptr memptr,
                                 size_t size, unsigned long long flags), CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuMulticastUnbind, (CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, size_t size),
           CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuMulticastGetGranularity, (size_t *granularity, const CUmulticastObjectProp *prop,
                                       CUmulticastGranularity_flags option),
           granularity && prop ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)

/* ---- device resources for green contexts: a device's SMs, not partitioned by the fake ---- */

/* A device's SMs as one resource (the fake partitions nothing). */
static CUresult sm_resource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
{
    if (!resource || type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_VALUE;
    int sms;
    CUresult rc = cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(resource, 0, sizeof *resource);
    resource->type = CU_DEV_RESOURCE_TYPE_SM;
    resource->sm.smCount = (unsigned)sms;
    resource->sm.minSmPartitionSize = 2;
    resource->sm.smCoscheduledAlignment = 2;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDeviceGetDevResource, (CUdevice device, CUdevResource *resource, CUdevResourceType type),
           sm_resource(device, resource, type))

/* A green context's resources: its device's SMs, all of them (cuGreenCtxCreate's description is not
 * applied). cuBLASLt 13.10 binds it (and cuStreamGetGreenCtx) by dlsym at start and fails its
 * cublasLtCtxInit ("Driver API initialization failed") when either is missing. */
static CUresult green_resource(CUgreenCtx h, CUdevResource *resource, CUdevResourceType type)
{
    int ordinal = fk_green_ordinal(h);
    return ordinal < 0 ? CUDA_ERROR_INVALID_CONTEXT : sm_resource(ordinal, resource, type);
}

FK_FORWARD(cuGreenCtxGetDevResource, (CUgreenCtx hCtx, CUdevResource *resource, CUdevResourceType type),
           green_resource(hCtx, resource, type))

/* A context's resources (NULL: the current one): its device's SMs. cuSOLVER 12.4 (JAX's) asks it of
 * a stream's context in cusolverDnSetStream and fails ("cuSolver internal error") without it. */
static CUresult ctx_resource(CUcontext h, CUdevResource *resource, CUdevResourceType type)
{
    struct fk_ctx *c = ctx_locked(h);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    int ordinal = c->ordinal;
    fk_unlock();
    return sm_resource(ordinal, resource, type);
}

FK_FORWARD(cuCtxGetDevResource, (CUcontext hCtx, CUdevResource *resource, CUdevResourceType type),
           ctx_resource(hCtx, resource, type))

FK_FORWARD(cuDevSmResourceSplitByCount, (CUdevResource *result, unsigned int *nbGroups, const CUdevResource *input,
                                         CUdevResource *remaining, unsigned int useFlags, unsigned int minCount),
           nbGroups && input ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuDevResourceGenerateDesc, (CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned int nbResources),
           phDesc && resources ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuCtxFromGreenCtx, (CUcontext *pContext, CUgreenCtx hCtx),
           pContext && hCtx ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuGreenCtxStreamCreate, (CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority),
           phStream && greenCtx ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE)

/* ---- the driver's log callbacks: registered, never called (the fake logs nothing) ---- */

FK_EXPORT CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData, CUlogsCallbackHandle *callback_out)
{
    FK_ENTER(cuLogsRegisterCallback);
    static char handles;
    if (!callbackFunc || !callback_out)
        return CUDA_ERROR_INVALID_VALUE;
    *callback_out = (CUlogsCallbackHandle)&handles;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuLogsUnregisterCallback, (CUlogsCallbackHandle callback),
           callback ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)
