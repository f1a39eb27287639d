/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c: streams and events. Handles only: every operation completes at once, so a query says
 * "done", a synchronisation only settles the pools (fk_pools_sync, as a real one lets their release
 * threshold act), a host function runs at once on the calling thread, and an event pair measures
 * the host time between their records.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <time.h>

#include "fake_internal.h"

struct fk_stream {
    void *h;              /* its own address: the handle */
    unsigned flags;
    int priority;
    struct fk_ctx *ctx;
    unsigned long long id;
    UT_hash_handle hh;
};

struct fk_event {
    void *h;
    unsigned flags;
    uint64_t recorded_ns; /* CLOCK_MONOTONIC of the last record, 0: never recorded */
    UT_hash_handle hh;
};

static struct fk_stream *streams;
static struct fk_event *events;
static unsigned long long next_stream_id = 3; /* 0, 1, 2: the legacy, per-thread and NULL streams */

/* Stream priorities as the cards here have them: 0 (lowest) to -5 (greatest). */
#define FK_PRIO_LEAST 0
#define FK_PRIO_GREATEST (-5)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

FK_DEFINE_FIND(stream_find, struct fk_stream, streams)
FK_DEFINE_FIND(event_find, struct fk_event, events)

/* Defines `static CUresult fn(type h)`: takes the stream or event `h` out of `table` and frees it;
 * CUDA_ERROR_INVALID_HANDLE when it is not there. */
#define FK_DEFINE_DEL(fn, type, table, find)                                            \
    static CUresult fn(type h)                                                          \
    {                                                                                   \
        fk_lock();                                                                      \
        __typeof__(table) e_ = find(h);                                                 \
        if (e_)                                                                         \
            HASH_DEL(table, e_);                                                        \
        fk_unlock();                                                                    \
        free(e_);                                                                       \
        return e_ ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;                           \
    }

static bool special_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

bool fk_stream_ok(CUstream s)
{
    if (special_stream(s))
        return fk_current_ctx() != NULL;
    return stream_find(s) != NULL;
}

/* fk_stream_ok as the CUresult a stream operation answers. Under fk_mu. */
static CUresult stream_check(CUstream s)
{
    if (fk_stream_ok(s))
        return CUDA_SUCCESS;
    return special_stream(s) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_new(CUstream *out, unsigned flags, int priority)
{
    if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_stream, s, 0, c);
    s->h = s;
    s->flags = flags;
    /* Out of range is clamped, as the driver does. */
    s->priority = priority > FK_PRIO_LEAST ? FK_PRIO_LEAST : priority < FK_PRIO_GREATEST ? FK_PRIO_GREATEST : priority;
    s->ctx = c;
    s->id = next_stream_id++;
    HASH_ADD_PTR(streams, h, s);
    *out = (CUstream)s;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuStreamCreate, (CUstream *phStream, unsigned int Flags), stream_new(phStream, Flags, 0))
FK_FORWARD(cuStreamCreateWithPriority, (CUstream *phStream, unsigned int flags, int priority),
           stream_new(phStream, flags, priority))

FK_DEFINE_DEL(stream_del, CUstream, streams, stream_find)

FK_FORWARD(cuStreamDestroy, (CUstream hStream), stream_del(hStream))
FK_FORWARD(cuStreamDestroy_v2, (CUstream hStream), stream_del(hStream))

static CUresult stream_sync(CUstream s)
{
    fk_lock();
    CUresult rc = stream_check(s);
    if (rc == CUDA_SUCCESS)
        fk_pools_sync();
    fk_unlock();
    return rc;
}

FK_FORWARD(cuStreamSynchronize, (CUstream hStream), stream_sync(hStream))
FK_FORWARD(cuStreamSynchronize_ptsz, (CUstream hStream), stream_sync(hStream))

/* stream_check, taking fk_mu for it. */
static CUresult stream_query(CUstream s)
{
    fk_lock();
    CUresult rc = stream_check(s);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuStreamQuery, (CUstream hStream), stream_query(hStream))
FK_FORWARD(cuStreamQuery_ptsz, (CUstream hStream), stream_query(hStream))

/* A stream's flags, priority, context or id: `what` 0, 1, 2, 3. */
static CUresult stream_get(CUstream h, int what, void *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    CUresult rc = stream_check(h);
    struct fk_stream *s = stream_find(h);
    if (rc == CUDA_SUCCESS) {
        struct fk_ctx *c = s ? s->ctx : fk_current_ctx();
        switch (what) {
        case 0: *(unsigned *)out = s ? s->flags : 0; break;
        case 1: *(int *)out = s ? s->priority : 0; break;
        case 2: *(CUcontext *)out = (CUcontext)c; break;
        default:
            *(unsigned long long *)out = s ? s->id : h == CU_STREAM_LEGACY ? 1 : h == CU_STREAM_PER_THREAD ? 2 : 0;
            break;
        }
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuStreamGetFlags, (CUstream hStream, unsigned int *flags), stream_get(hStream, 0, flags))
FK_FORWARD(cuStreamGetFlags_ptsz, (CUstream hStream, unsigned int *flags), stream_get(hStream, 0, flags))
FK_FORWARD(cuStreamGetPriority, (CUstream hStream, int *priority), stream_get(hStream, 1, priority))
FK_FORWARD(cuStreamGetPriority_ptsz, (CUstream hStream, int *priority), stream_get(hStream, 1, priority))
FK_FORWARD(cuStreamGetCtx, (CUstream hStream, CUcontext *pctx), stream_get(hStream, 2, pctx))
FK_FORWARD(cuStreamGetCtx_ptsz, (CUstream hStream, CUcontext *pctx), stream_get(hStream, 2, pctx))
static CUresult stream_get_ctx_v2(CUstream h, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    if (!pCtx || !pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    *pGreenCtx = NULL;
    return stream_get(h, 2, pCtx);
}

FK_FORWARD(cuStreamGetCtx_v2, (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx),
           stream_get_ctx_v2(hStream, pCtx, pGreenCtx))
FK_FORWARD(cuStreamGetCtx_v2_ptsz, (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx),
           stream_get_ctx_v2(hStream, pCtx, pGreenCtx))
/* The green context of a stream: none (cuda.h: NULL for a stream not made in a context converted
 * from a green one; the fake's cuCtxFromGreenCtx and cuGreenCtxStreamCreate are not supported). */
static CUresult stream_green(CUstream h, CUgreenCtx *phCtx)
{
    if (!phCtx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = stream_query(h);
    if (rc == CUDA_SUCCESS)
        *phCtx = NULL;
    return rc;
}

FK_FORWARD(cuStreamGetGreenCtx, (CUstream hStream, CUgreenCtx *phCtx), stream_green(hStream, phCtx))

CUresult fk_stream_id(CUcontext ctx, CUstream h, unsigned long long *id)
{
    fk_lock();
    struct fk_ctx *c = fk_ctx_lookup(ctx);
    struct fk_stream *s = stream_find(h);
    CUresult rc = !c ? CUDA_ERROR_INVALID_CONTEXT : special_stream(h) || (s && s->ctx == c) ? CUDA_SUCCESS
                                                                                           : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && id)
        *id = s ? s->id : h == CU_STREAM_LEGACY ? 1 : h == CU_STREAM_PER_THREAD ? 2 : 0;
    fk_unlock();
    return rc;
}

FK_FORWARD(cuStreamGetId, (CUstream hStream, unsigned long long *streamId), stream_get(hStream, 3, streamId))
FK_FORWARD(cuStreamGetId_ptsz, (CUstream hStream, unsigned long long *streamId), stream_get(hStream, 3, streamId))

static CUresult priority_range(int *least, int *greatest)
{
    fk_lock();
    bool ctx = fk_current_ctx() != NULL;
    fk_unlock();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (least)
        *least = FK_PRIO_LEAST;
    if (greatest)
        *greatest = FK_PRIO_GREATEST;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuCtxGetStreamPriorityRange, (int *leastPriority, int *greatestPriority),
           priority_range(leastPriority, greatestPriority))

static CUresult stream_wait_event(CUstream s, CUevent ev)
{
    fk_lock();
    CUresult rc = stream_check(s);
    if (rc == CUDA_SUCCESS && !event_find(ev))
        rc = CUDA_ERROR_INVALID_HANDLE;
    fk_unlock();
    return rc;
}

FK_FORWARD(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags), stream_wait_event(hStream, hEvent))
FK_FORWARD(cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned int Flags),
           stream_wait_event(hStream, hEvent))

/* Host work on a stream: done at once, on this thread (the stream has nothing else pending). */
static CUresult host_func(CUstream s, CUhostFn fn, void *data)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = stream_query(s);
    if (rc == CUDA_SUCCESS)
        fn(data);
    return rc;
}

FK_FORWARD(cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData), host_func(hStream, fn, userData))
FK_FORWARD(cuLaunchHostFunc_ptsz, (CUstream hStream, CUhostFn fn, void *userData), host_func(hStream, fn, userData))

static CUresult add_callback(CUstream s, CUstreamCallback cb, void *data)
{
    if (!cb)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = stream_query(s);
    if (rc == CUDA_SUCCESS)
        cb(s, CUDA_SUCCESS, data);
    return rc;
}

FK_FORWARD(cuStreamAddCallback, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),
           add_callback(hStream, callback, userData))
FK_FORWARD(cuStreamAddCallback_ptsz, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),
           add_callback(hStream, callback, userData))

/* Capture state (graph.c owns capture): v3's edge data and dependencies are always empty here. */
static CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    CUresult rc = stream_check(s);
    if (rc == CUDA_SUCCESS) {
        bool on = fk_graph_capturing(s);
        *status = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
        if (id)
            *id = on ? (cuuint64_t)(uintptr_t)s : 0;
        if (graph)
            *graph = NULL;
        if (deps)
            *deps = NULL;
        if (edges)
            *edges = NULL;
        if (ndeps)
            *ndeps = 0;
    }
    fk_unlock();
    return rc;
}

#define FK_CAPTURE_INFO_PARAMS                                                                             \
    (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out,  \
     const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
FK_FORWARD(cuStreamGetCaptureInfo_v3, FK_CAPTURE_INFO_PARAMS,
           capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out))
FK_FORWARD(cuStreamGetCaptureInfo_v3_ptsz, FK_CAPTURE_INFO_PARAMS,
           capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out))
#undef FK_CAPTURE_INFO_PARAMS
#define FK_CAPTURE_INFO_V2_PARAMS                                                                          \
    (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out,  \
     const CUgraphNode **dependencies_out, size_t *numDependencies_out)
FK_FORWARD(cuStreamGetCaptureInfo_v2, FK_CAPTURE_INFO_V2_PARAMS,
           capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out))
FK_FORWARD(cuStreamGetCaptureInfo_v2_ptsz, FK_CAPTURE_INFO_V2_PARAMS,
           capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out))
#undef FK_CAPTURE_INFO_V2_PARAMS
FK_FORWARD(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
           capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL))
FK_FORWARD(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
           capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL))

/* ---- stream memory operations: writes land in host memory the driver knows; waits are met ---- */

static CUresult mem_op(CUstream s, CUdeviceptr addr, uint64_t value, int bytes, bool write)
{
    if (!addr || addr % (uint64_t)bytes)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    CUresult rc = stream_check(s);
    int kind = rc == CUDA_SUCCESS ? fk_ptr_kind(addr) : 0;
    if (rc == CUDA_SUCCESS && kind < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    fk_unlock();
    if (rc == CUDA_SUCCESS && write && kind == 0) {
        if (bytes == 4)
            *(volatile uint32_t *)(uintptr_t)addr = (uint32_t)value;
        else
            *(volatile uint64_t *)(uintptr_t)addr = value;
    }
    return rc;
}

#define FK_MEM_OP(sym, type, bytes, write)                                                                   \
    FK_FORWARD(sym, (CUstream stream, CUdeviceptr addr, type value, unsigned int flags),                     \
               mem_op(stream, addr, value, bytes, write))
/* The first ABI of each (8000/9000) takes the same arguments as the _v2 one (11070). */
FK_MEM_OP(cuStreamWriteValue32, cuuint32_t, 4, true)
FK_MEM_OP(cuStreamWriteValue32_ptsz, cuuint32_t, 4, true)
FK_MEM_OP(cuStreamWriteValue64, cuuint64_t, 8, true)
FK_MEM_OP(cuStreamWriteValue64_ptsz, cuuint64_t, 8, true)
FK_MEM_OP(cuStreamWaitValue32, cuuint32_t, 4, false)
FK_MEM_OP(cuStreamWaitValue32_ptsz, cuuint32_t, 4, false)
FK_MEM_OP(cuStreamWaitValue64, cuuint64_t, 8, false)
FK_MEM_OP(cuStreamWaitValue64_ptsz, cuuint64_t, 8, false)
FK_MEM_OP(cuStreamWriteValue32_v2, cuuint32_t, 4, true)
FK_MEM_OP(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 4, true)
FK_MEM_OP(cuStreamWriteValue64_v2, cuuint64_t, 8, true)
FK_MEM_OP(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 8, true)
FK_MEM_OP(cuStreamWaitValue32_v2, cuuint32_t, 4, false)
FK_MEM_OP(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 4, false)
FK_MEM_OP(cuStreamWaitValue64_v2, cuuint64_t, 8, false)
FK_MEM_OP(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 8, false)
#undef FK_MEM_OP

static CUresult batch_mem_op(CUstream s, unsigned count, CUstreamBatchMemOpParams *ops)
{
    if (count && !ops)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        CUstreamBatchMemOpParams *o = &ops[i];
        CUresult rc;
        switch (o->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            rc = mem_op(s, o->waitValue.address, 0, o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? 4 : 8, false);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            rc = mem_op(s, o->writeValue.address, o->writeValue.value64,
                        o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? 4 : 8, true);
            break;
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        case CU_STREAM_MEM_OP_BARRIER:
            rc = CUDA_SUCCESS;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

FK_FORWARD(cuStreamBatchMemOp, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                unsigned int flags), batch_mem_op(stream, count, paramArray))
FK_FORWARD(cuStreamBatchMemOp_ptsz, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                     unsigned int flags), batch_mem_op(stream, count, paramArray))
FK_FORWARD(cuStreamBatchMemOp_v2, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                   unsigned int flags), batch_mem_op(stream, count, paramArray))
FK_FORWARD(cuStreamBatchMemOp_v2_ptsz, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                        unsigned int flags), batch_mem_op(stream, count, paramArray))

/* Context-wide event record and wait: every stream's work is done, so only the handles matter. */
static CUresult ctx_event(CUcontext ctx, CUevent ev, bool record)
{
    fk_lock();
    struct fk_ctx *c = ctx ? fk_ctx_lookup(ctx) : fk_current_ctx();
    struct fk_event *e = event_find(ev);
    if (c && e && record)
        e->recorded_ns = now_ns();
    fk_unlock();
    return !c ? CUDA_ERROR_INVALID_CONTEXT : !e ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

FK_FORWARD(cuCtxRecordEvent, (CUcontext hCtx, CUevent hEvent), ctx_event(hCtx, hEvent, true))
FK_FORWARD(cuCtxWaitEvent, (CUcontext hCtx, CUevent hEvent), ctx_event(hCtx, hEvent, false))

static __thread CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

FK_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FK_ENTER_INIT(cuThreadExchangeStreamCaptureMode);
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---- events ---- */

static CUresult event_new(CUevent *out, unsigned flags)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_event, e, 0, c);
    e->h = e;
    e->flags = flags;
    HASH_ADD_PTR(events, h, e);
    *out = (CUevent)e;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuEventCreate, (CUevent *phEvent, unsigned int Flags), event_new(phEvent, Flags))

static CUresult event_record(CUevent ev, CUstream s)
{
    fk_lock();
    struct fk_event *e = event_find(ev);
    bool ok = e && fk_stream_ok(s);
    if (ok)
        e->recorded_ns = now_ns();
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuEventRecord, (CUevent hEvent, CUstream hStream), event_record(hEvent, hStream))
FK_FORWARD(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), event_record(hEvent, hStream))
FK_FORWARD(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags),
           event_record(hEvent, hStream))
FK_FORWARD(cuEventRecordWithFlags_ptsz, (CUevent hEvent, CUstream hStream, unsigned int flags),
           event_record(hEvent, hStream))

static CUresult event_sync(CUevent ev, bool sync)
{
    fk_lock();
    bool ok = event_find(ev) != NULL;
    if (ok && sync)
        fk_pools_sync();
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuEventSynchronize, (CUevent hEvent), event_sync(hEvent, true))
FK_FORWARD(cuEventQuery, (CUevent hEvent), event_sync(hEvent, false))

static CUresult elapsed(float *ms, CUevent start, CUevent end)
{
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_event *a = event_find(start), *b = event_find(end);
    CUresult rc = !a || !b ? CUDA_ERROR_INVALID_HANDLE
                  : (a->flags | b->flags) & CU_EVENT_DISABLE_TIMING ? CUDA_ERROR_INVALID_HANDLE
                  : !a->recorded_ns || !b->recorded_ns ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        *ms = (float)((double)((int64_t)(b->recorded_ns - a->recorded_ns)) / 1e6);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd), elapsed(pMilliseconds, hStart, hEnd))
FK_FORWARD(cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd),
           elapsed(pMilliseconds, hStart, hEnd))

FK_DEFINE_DEL(event_del, CUevent, events, event_find)

FK_FORWARD(cuEventDestroy, (CUevent hEvent), event_del(hEvent))
FK_FORWARD(cuEventDestroy_v2, (CUevent hEvent), event_del(hEvent))
