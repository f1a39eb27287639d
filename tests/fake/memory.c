/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory.c: device allocations that are not VMM, arrays or graphs: linear (cuMemAlloc*, pitched,
 * managed, legacy 32-bit), stream-ordered pools, and the pointer queries (host memory is host.c's;
 * IPC mappings, extra.c's, and modules' variables, module.c's, are entries here that free nothing).
 *
 * Pools are modelled as the driver documents them: a pool's `reserved` is what it took from the
 * card and `used` what the application holds. An allocation that does not fit in reserved - used
 * grows reserved by the shortfall rounded up to 2 MiB (charging the record); cuMemFreeAsync
 * lowers used only; each synchronisation releases every pool down to max(used rounded up to
 * 2 MiB, release threshold).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdlib.h>

#include "fake_internal.h"

static struct fk_alloc *allocs; /* every live device allocation but VMM and arrays, by address */

struct fk_alloc *fk_alloc_find(CUdeviceptr p, bool interior)
{
    struct fk_alloc *a, *tmp;
    HASH_FIND(hh, allocs, &p, sizeof p, a);
    if (a || !interior)
        return a;
    HASH_ITER(hh, allocs, a, tmp)
        if (p >= a->ptr && p - a->ptr < a->size)
            return a;
    return NULL;
}

void fk_alloc_insert(struct fk_alloc *a)
{
    HASH_ADD(hh, allocs, ptr, sizeof a->ptr, a);
}

void fk_alloc_insert_in(struct fk_alloc *a, struct fk_ctx *c, enum fk_kind kind)
{
    a->ordinal = c->ordinal;
    a->phys = c->phys;
    a->kind = kind;
    a->ctx = c;
    fk_alloc_insert(a);
}

void fk_alloc_remove(struct fk_alloc *a)
{
    HASH_DEL(allocs, a);
    free(a);
}

/* ---- linear allocations ---- */

static CUresult linear_alloc(CUdeviceptr *out, uint64_t bytes, enum fk_kind kind)
{
    FK_ENTRY_BEGIN(struct fk_alloc, a, bytes, c);
    a->ptr = fk_addr_alloc(c->phys, bytes, kind == FK_LEGACY32);
    if (!a->ptr) {
        fk_entry_abort(a, c, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->size = a->charged = bytes;
    fk_alloc_insert_in(a, c, kind);
    *out = a->ptr;
    fk_unlock();
    return CUDA_SUCCESS;
}

/* Frees an allocation of any non-VMM kind, as cuMemFree and cuMemFreeAsync do. Under fk_mu. */
static void free_entry(struct fk_alloc *a, bool sync)
{
    switch (a->kind) {
    case FK_POOL:
        fk_pool_free(a);
        if (sync)
            fk_pools_sync();
        break;
    case FK_GRAPH:
        fk_graph_alloc_freed(a);
        break;
    default:
        fk_uncharge(a->phys, a->charged);
        fk_alloc_remove(a);
        break;
    }
}

static CUresult linear_free(CUdeviceptr p)
{
    if (p == 0)
        return CUDA_SUCCESS;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    struct fk_alloc *a = rc == CUDA_SUCCESS ? fk_alloc_find(p, false) : NULL;
    if (rc == CUDA_SUCCESS && (!a || a->kind >= FK_IPC)) /* an opened handle is closed, a variable unloaded */
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        free_entry(a, true); /* cuMemFree synchronises, so a pool pointer's pool trims too */
    fk_unlock();
    return rc;
}

FK_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FK_ENTER_INIT(cuMemAlloc_v2);
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return linear_alloc(dptr, bytesize, FK_LINEAR);
}

FK_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    FK_ENTER_INIT(cuMemAlloc);
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p;
    CUresult rc = linear_alloc(&p, bytesize, FK_LEGACY32);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return rc;
}

FK_FORWARD(cuMemFree_v2, (CUdeviceptr dptr), linear_free(dptr))
FK_FORWARD(cuMemFree, (CUdeviceptr_v1 dptr), linear_free(dptr))

/* Pitch is the width rounded up to 512 bytes (FAKECUDA_PITCH_ALIGN: another power of two, as
 * other cards have); the allocation is pitch * height. */
static uint64_t pitch_align(void)
{
    static uint64_t align;
    if (!align) {
        const char *e = getenv("FAKECUDA_PITCH_ALIGN");
        uint64_t a = e ? strtoull(e, NULL, 10) : 0;
        align = a && !(a & (a - 1)) ? a : 512;
    }
    return align;
}

static CUresult pitch_alloc(CUdeviceptr *dptr, uint64_t *pitch, uint64_t width, uint64_t height,
                            unsigned int elem, bool legacy)
{
    if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = FK_ROUND_UP(width, pitch_align());
    if (p < width || height > UINT64_MAX / p || (legacy && (p > UINT_MAX || p * height > UINT_MAX)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = linear_alloc(dptr, p * height, legacy ? FK_LEGACY32 : FK_LINEAR);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

FK_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    FK_ENTER_INIT(cuMemAllocPitch_v2);
    uint64_t pitch;
    CUresult rc = pitch_alloc(dptr, pPitch ? &pitch : NULL, WidthInBytes, Height, ElementSizeBytes, false);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

FK_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes)
{
    FK_ENTER_INIT(cuMemAllocPitch);
    CUdeviceptr p = 0;
    uint64_t pitch;
    CUresult rc = pitch_alloc(dptr ? &p : NULL, pPitch ? &pitch : NULL, WidthInBytes, Height, ElementSizeBytes, true);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return rc;
}

FK_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FK_ENTER_INIT(cuMemAllocManaged);
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    return linear_alloc(dptr, bytesize, FK_MANAGED);
}

/* free = capacity - what all live processes hold, total = capacity. In the driver-limited container
 * (FAKECUDA_DRIVER_LIMIT) total = the limit (never above the card) and free = what the container
 * has left, never above what the card has left: the assumption, from NVIDIA's MPS v3 memory
 * partitioning documentation, that memory reporting inside a limited cgroup is altered to the
 * limit (cuDeviceTotalMem still answers the card; tests/gpu/run.sh checks both on a real stack). */
static CUresult mem_info(uint64_t *free_b, uint64_t *total)
{
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    int phys = c ? c->phys : -1;
    fk_unlock();
    if (rc != CUDA_SUCCESS)
        return rc;
    *total = fakecuda_capacity(phys);
    uint64_t out = fakecuda_outstanding(phys);
    *free_b = out < *total ? *total - out : 0;
    uint64_t lim = fakecuda_driver_limit(phys);
    if (lim) {
        uint64_t used = fakecuda_container_used(phys);
        if (lim < *total)
            *total = lim;
        uint64_t left = used < *total ? *total - used : 0;
        if (left < *free_b)
            *free_b = left;
    }
    return CUDA_SUCCESS;
}

/* cuMemGetInfo_v2 and the legacy cuMemGetInfo: one body, answers clamped to the width of `type`. */
#define FK_MEM_GET_INFO(sym, type, max)                                                 \
    FK_EXPORT CUresult sym(type *free, type *total)                                     \
    {                                                                                   \
        FK_ENTER_INIT(sym);                                                             \
        if (!free || !total)                                                            \
            return CUDA_ERROR_INVALID_VALUE;                                            \
        uint64_t f, t;                                                                  \
        CUresult rc = mem_info(&f, &t);                                                 \
        if (rc == CUDA_SUCCESS) {                                                       \
            *free = (type)(f < (max) ? f : (max));                                      \
            *total = (type)(t < (max) ? t : (max));                                     \
        }                                                                               \
        return rc;                                                                      \
    }
FK_MEM_GET_INFO(cuMemGetInfo_v2, size_t, SIZE_MAX)
FK_MEM_GET_INFO(cuMemGetInfo, unsigned int, UINT_MAX)
#undef FK_MEM_GET_INFO

/* ---- pointer queries ---- */

/* What the fake knows of an address: a device allocation, a VMM mapping or host memory. */
struct fk_ptrinfo {
    CUdeviceptr base;
    uint64_t size;
    int ordinal; /* -1 for host memory */
    struct fk_alloc *alloc;
};

static bool ptr_info(CUdeviceptr p, struct fk_ptrinfo *pi)
{
    struct fk_alloc *a = fk_alloc_find(p, true);
    if (a) {
        *pi = (struct fk_ptrinfo){ a->ptr, a->size, a->ordinal, a };
        return true;
    }
    pi->alloc = NULL;
    if ((pi->ordinal = fk_vmm_ordinal(p, &pi->base, &pi->size)) >= 0)
        return true;
    uint64_t base, size;
    if (fk_host_range((uintptr_t)p, &base, &size)) {
        *pi = (struct fk_ptrinfo){ base, size, -1, NULL };
        return true;
    }
    return false;
}

int fk_ptr_kind(CUdeviceptr p)
{
    struct fk_ptrinfo pi;
    if (!ptr_info(p, &pi))
        return -1;
    return pi.ordinal >= 0 ? 1 : 0;
}

static CUresult address_range(CUdeviceptr *pbase, uint64_t *psize, CUdeviceptr dptr)
{
    fk_lock();
    struct fk_ptrinfo pi;
    bool found = ptr_info(dptr, &pi) && pi.ordinal >= 0;
    fk_unlock();
    if (!found)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = pi.base;
    if (psize)
        *psize = pi.size;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    FK_ENTER_INIT(cuMemGetAddressRange_v2);
    CUdeviceptr b;
    uint64_t s;
    CUresult rc = address_range(&b, &s, dptr);
    if (rc == CUDA_SUCCESS && pbase)
        *pbase = b;
    if (rc == CUDA_SUCCESS && psize)
        *psize = s;
    return rc;
}

FK_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    FK_ENTER_INIT(cuMemGetAddressRange);
    CUdeviceptr b;
    uint64_t s;
    CUresult rc = address_range(&b, &s, dptr);
    if (rc == CUDA_SUCCESS && (b > UINT_MAX || s > UINT_MAX))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && pbase)
        *pbase = (CUdeviceptr_v1)b;
    if (rc == CUDA_SUCCESS && psize)
        *psize = (unsigned int)s;
    return rc;
}

FK_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    FK_ENTER_INIT(cuPointerGetAttribute);
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_ptrinfo pi;
    CUresult rc = ptr_info(ptr, &pi) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        bool host = pi.ordinal < 0;
        switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *(CUcontext *)data = pi.alloc ? (CUcontext)pi.alloc->ctx : NULL;
            break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned int *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *(CUdeviceptr *)data = ptr;
            break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            if (host)
                *(void **)data = (void *)(uintptr_t)ptr;
            else
                rc = CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned int *)data = pi.alloc && pi.alloc->kind == FK_MANAGED;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            if (host) {
                struct fk_ctx *c = fk_current_ctx();
                *(int *)data = c ? c->ordinal : 0;
            } else {
                *(int *)data = pi.ordinal;
            }
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data = pi.base;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data = pi.size;
            break;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
            *(CUmemoryPool *)data = pi.alloc && pi.alloc->kind == FK_POOL ? (CUmemoryPool)pi.alloc->pool : NULL;
            break;
        default:
            rc = CUDA_ERROR_NOT_SUPPORTED;
            break;
        }
    }
    fk_unlock();
    return rc;
}

/* ---- stream-ordered pools ---- */

struct fk_pool {
    void *key; /* the pool's own address: the CUmemoryPool handle */
    int ordinal, phys;
    bool is_default, alive;
    uint64_t used, used_high, reserved, reserved_high, threshold, max_size, nallocs;
    int reuse[3]; /* the three CU_MEMPOOL_ATTR_REUSE_* switches */
    UT_hash_handle hh;
};

static struct fk_pool *pools; /* every pool not yet gone, by handle */
static struct fk_pool *default_pool[FK_MAX_DEV], *current_pool[FK_MAX_DEV]; /* by ordinal */

static struct fk_pool *pool_new(int ordinal, uint64_t max_size)
{
    struct fk_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->key = p;
    p->ordinal = ordinal;
    p->phys = fk_phys_of(ordinal);
    p->alive = true;
    p->max_size = max_size;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    HASH_ADD_PTR(pools, key, p);
    return p;
}

static struct fk_pool *pool_find(CUmemoryPool h)
{
    struct fk_pool *p = NULL;
    if (h)
        HASH_FIND_PTR(pools, &h, p);
    return p && p->alive ? p : NULL;
}

/* The default pool of an ordinal, made on first use; NULL for a bad ordinal. Under fk_mu. */
static struct fk_pool *pool_default(CUdevice ordinal)
{
    if (fk_phys_of(ordinal) < 0)
        return NULL;
    if (!default_pool[ordinal]) {
        default_pool[ordinal] = pool_new(ordinal, 0);
        if (default_pool[ordinal])
            default_pool[ordinal]->is_default = true;
    }
    if (!current_pool[ordinal])
        current_pool[ordinal] = default_pool[ordinal];
    return default_pool[ordinal];
}

static void pool_release_to(struct fk_pool *p, uint64_t target)
{
    if (p->reserved > target) {
        fk_uncharge(p->phys, p->reserved - target);
        p->reserved = target;
    }
}

static void pool_gone_check(struct fk_pool *p)
{
    if (!p->alive && p->nallocs == 0) {
        pool_release_to(p, 0);
        HASH_DEL(pools, p);
        free(p);
    }
}

void fk_pools_sync(void)
{
    struct fk_pool *p, *tmp;
    HASH_ITER(hh, pools, p, tmp) {
        uint64_t keep = FK_ROUND_UP(p->used, FK_GRAN);
        pool_release_to(p, keep > p->threshold ? keep : p->threshold);
    }
}

void fk_pool_free(struct fk_alloc *a)
{
    struct fk_pool *p = a->pool;
    p->used -= a->size < p->used ? a->size : p->used;
    p->nallocs--;
    fk_alloc_remove(a);
    if (!p->alive) {
        pool_release_to(p, p->used);
        pool_gone_check(p);
    }
}

static CUresult pool_alloc(CUdeviceptr *dptr, uint64_t bytes, struct fk_pool *p, struct fk_ctx *c)
{
    uint64_t need = p->used + bytes;
    if (need < bytes || (p->max_size && need > p->max_size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fk_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (need > p->reserved) {
        uint64_t grow = FK_ROUND_UP(need - p->reserved, FK_GRAN);
        if (p->max_size && p->reserved + grow > p->max_size)
            grow = p->max_size - p->reserved;
        CUresult rc = fk_charge(p->phys, grow);
        if (rc != CUDA_SUCCESS) {
            free(a);
            return rc;
        }
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    a->ptr = fk_addr_alloc(p->phys, bytes, false);
    if (!a->ptr) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->size = bytes;
    a->ordinal = p->ordinal;
    a->phys = p->phys;
    a->kind = FK_POOL;
    a->pool = p;
    a->ctx = c; /* freed with it: see fk_free_ctx_allocs */
    fk_alloc_insert(a);
    p->used = need;
    p->nallocs++;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *dptr = a->ptr;
    return CUDA_SUCCESS;
}

/* cuMemAllocAsync (pool NULL: the current pool of the current context's device) and
 * cuMemAllocFromPoolAsync. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUmemoryPool hpool, bool from_pool, CUstream s)
{
    if (!dptr || bytes == 0 || (from_pool && !hpool))
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    struct fk_pool *p = NULL;
    if (rc == CUDA_SUCCESS && !fk_stream_ok(s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && fk_graph_capturing(s)) {
        rc = fk_graph_capture_alloc(s, c->ordinal, bytes, dptr); /* a node of the captured graph */
        fk_unlock();
        return rc;
    }
    if (rc == CUDA_SUCCESS) {
        p = from_pool ? pool_find(hpool) : (pool_default(c->ordinal), current_pool[c->ordinal]);
        rc = p ? pool_alloc(dptr, bytes, p, c) : CUDA_ERROR_INVALID_VALUE;
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuMemAllocAsync,
           (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
           alloc_async(dptr, bytesize, NULL, false, hStream))
FK_FORWARD(cuMemAllocAsync_ptsz,
           (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
           alloc_async(dptr, bytesize, NULL, false, hStream))
FK_FORWARD(cuMemAllocFromPoolAsync,
           (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
           alloc_async(dptr, bytesize, pool, true, hStream))
FK_FORWARD(cuMemAllocFromPoolAsync_ptsz,
           (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
           alloc_async(dptr, bytesize, pool, true, hStream))

static CUresult free_async(CUdeviceptr p, CUstream s)
{
    if (p == 0)
        return CUDA_SUCCESS;
    fk_lock();
    CUresult rc = fk_stream_ok(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && fk_graph_capturing(s)) {
        rc = fk_graph_capture_free(s, p); /* a node of the captured graph */
        fk_unlock();
        return rc;
    }
    struct fk_alloc *a = rc == CUDA_SUCCESS ? fk_alloc_find(p, false) : NULL;
    if (rc == CUDA_SUCCESS && (!a || a->kind >= FK_IPC))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        free_entry(a, false);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), free_async(dptr, hStream))
FK_FORWARD(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), free_async(dptr, hStream))

/* The default pool of ordinal `dev` (cuDeviceGetDefaultMemPool, cuMemGetDefaultMemPool) or, with
 * `current`, its current pool (cuDeviceGetMemPool). */
static CUresult device_pool(CUmemoryPool *pool_out, CUdevice dev, bool current)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_pool *p = pool_default(dev);
    if (p)
        *pool_out = (CUmemoryPool)(current ? current_pool[dev] : p);
    fk_unlock();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FK_FORWARD(cuDeviceGetDefaultMemPool, (CUmemoryPool *pool_out, CUdevice dev), device_pool(pool_out, dev, false))

FK_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
    FK_ENTER_INIT(cuMemGetDefaultMemPool);
    if (!pool_out || !location || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return location->type == CU_MEM_LOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    return device_pool(pool_out, location->id, false);
}

FK_FORWARD(cuDeviceGetMemPool, (CUmemoryPool *pool, CUdevice dev), device_pool(pool, dev, true))

FK_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    FK_ENTER_INIT(cuDeviceSetMemPool);
    if (fk_phys_of(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    pool_default(dev);
    struct fk_pool *p = pool_find(pool);
    bool ok = p && p->ordinal == dev;
    if (ok)
        current_pool[dev] = p;
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* CUDA 13's location-addressed forms of cuDeviceGetMemPool / cuDeviceSetMemPool (devices only). */
static CUresult location_device(const CUmemLocation *location, CUmemAllocationType type, CUdevice *dev)
{
    if (!location || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return location->type == CU_MEM_LOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    *dev = location->id;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    FK_ENTER_INIT(cuMemGetMemPool);
    CUdevice dev;
    CUresult rc = location_device(location, type, &dev);
    return rc == CUDA_SUCCESS ? device_pool(pool, dev, true) : rc;
}

FK_EXPORT CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    FK_ENTER_INIT(cuMemSetMemPool);
    CUdevice dev;
    CUresult rc = location_device(location, type, &dev);
    return rc == CUDA_SUCCESS ? cuDeviceSetMemPool(dev, pool) : rc;
}

/* Access from other devices: the pool's own device always has it; no fake card is a peer. */
FK_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    FK_ENTER_INIT(cuMemPoolSetAccess);
    if (!map && count)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_pool *p = pool_find(pool);
    CUresult rc = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; p && i < count; i++)
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || map[i].location.id != p->ordinal)
            rc = CUDA_ERROR_INVALID_DEVICE;
    fk_unlock();
    return rc;
}

FK_EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    FK_ENTER_INIT(cuMemPoolGetAccess);
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_pool *p = pool_find(memPool);
    if (p)
        *flags = location->type == CU_MEM_LOCATION_TYPE_DEVICE && location->id == p->ordinal
                     ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    fk_unlock();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    FK_ENTER_INIT(cuMemPoolCreate);
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (fk_phys_of(poolProps->location.id) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    struct fk_pool *p = pool_new(poolProps->location.id, poolProps->maxSize);
    if (p)
        *pool = (CUmemoryPool)p;
    fk_unlock();
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* As the driver: the destroy completes when the pool's last allocation is freed; until then it
 * keeps exactly what is in use. A pool that was current hands that role back to the default. */
FK_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    FK_ENTER_INIT(cuMemPoolDestroy);
    fk_lock();
    struct fk_pool *p = pool_find(pool);
    bool ok = p && !p->is_default;
    if (ok) {
        p->alive = false;
        if (current_pool[p->ordinal] == p)
            current_pool[p->ordinal] = default_pool[p->ordinal];
        pool_release_to(p, p->used);
        pool_gone_check(p);
    }
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    FK_ENTER_INIT(cuMemPoolTrimTo);
    fk_lock();
    struct fk_pool *p = pool_find(pool);
    if (p)
        pool_release_to(p, p->used > minBytesToKeep ? p->used : minBytesToKeep);
    fk_unlock();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The switch behind one of the three CU_MEMPOOL_ATTR_REUSE_* attributes; NULL for another attribute. */
static int *pool_reuse(struct fk_pool *p, CUmemPool_attribute attr)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        return &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
    default:
        return NULL;
    }
}

static CUresult pool_attr_set(struct fk_pool *p, CUmemPool_attribute attr, const void *value)
{
    int *reuse = pool_reuse(p, attr);
    if (reuse) {
        *reuse = *(const int *)value != 0;
        return CUDA_SUCCESS;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->threshold = *(const cuuint64_t *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* Only a reset to the current value is allowed, by writing 0. */
        if (*(const cuuint64_t *)value != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            p->reserved_high = p->reserved;
        else
            p->used_high = p->used;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult pool_attr_get(struct fk_pool *p, CUmemPool_attribute attr, void *value)
{
    int *reuse = pool_reuse(p, attr);
    if (reuse) {
        *(int *)value = *reuse;
        return CUDA_SUCCESS;
    }
    cuuint64_t *out = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p->used_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* cuMemPoolSetAttribute (set) and cuMemPoolGetAttribute. */
static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, bool set)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_pool *p = pool_find(pool);
    CUresult rc = !p  ? CUDA_ERROR_INVALID_VALUE
                  : set ? pool_attr_set(p, attr, value)
                        : pool_attr_get(p, attr, value);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
           pool_attr(pool, attr, value, true))
FK_FORWARD(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
           pool_attr(pool, attr, value, false))

/* ---- contexts going away, fork() ---- */

/*
 * cuCtxDestroy "destroys and cleans up all resources associated with the context", and
 * cuDevicePrimaryCtxReset "destroys all allocations" of the primary context: every allocation
 * made in it goes, stream-ordered ones back to their pools. Destroying a context synchronises the
 * device, and its pools then give the card everything above what remains in use (as
 * cudaDeviceReset leaves nothing behind), whatever their release threshold.
 */
void fk_free_ctx_allocs(struct fk_ctx *c)
{
    struct fk_alloc *a, *tmp;
    HASH_ITER(hh, allocs, a, tmp) {
        if (a->ctx != c)
            continue;
        if (a->kind == FK_POOL) {
            fk_pool_free(a);
        } else {
            fk_uncharge(a->phys, a->charged);
            fk_alloc_remove(a);
        }
    }
    struct fk_pool *p, *ptmp;
    HASH_ITER(hh, pools, p, ptmp) {
        if (p->phys == c->phys)
            pool_release_to(p, FK_ROUND_UP(p->used, FK_GRAN));
    }
}

void fk_memory_forget(void)
{
    struct fk_alloc *a, *atmp;
    HASH_ITER(hh, allocs, a, atmp)
        fk_alloc_remove(a);
    struct fk_pool *p, *ptmp;
    HASH_ITER(hh, pools, p, ptmp) {
        p->used = p->used_high = p->reserved = p->reserved_high = p->nallocs = 0;
        pool_gone_check(p);
    }
}
