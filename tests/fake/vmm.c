/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm.c: the virtual memory management calls. cuMemCreate takes physical memory (from the record
 * only for a device location); cuMemAddressReserve/cuMemMap/cuMemUnmap move address space only.
 * A handle's memory goes back to the card when its references (create + retains - releases)
 * reach zero and it is no longer mapped anywhere, as with the driver.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_internal.h"

struct fk_handle {
    CUmemGenericAllocationHandle id;
    uint64_t size, charged; /* charged 0: imported, another process's memory */
    int phys;             /* -1: host memory */
    int refs, maps;
    CUmemAllocationProp prop;
    UT_hash_handle hh;
};

struct fk_range {         /* a reservation or a mapping */
    CUdeviceptr base;
    uint64_t size;
    struct fk_handle *h;  /* mappings only */
    UT_hash_handle hh;
};

static struct fk_handle *handles;
static struct fk_range *reservations, *mappings;
static CUmemGenericAllocationHandle next_id = 0x1000;
/* Reserved address space comes from [1 << 40, 1 << 48), apart from every device's range. */
static uint64_t va_bump = (uint64_t)1 << 40;

static struct fk_handle *handle_find(CUmemGenericAllocationHandle id)
{
    struct fk_handle *h;
    HASH_FIND(hh, handles, &id, sizeof id, h);
    return h;
}

static void handle_maybe_free(struct fk_handle *h)
{
    if (h->refs > 0 || h->maps > 0)
        return;
    if (h->phys >= 0)
        fk_uncharge(h->phys, h->charged);
    HASH_DEL(handles, h);
    free(h);
}

static struct fk_range *range_containing(struct fk_range *set, CUdeviceptr p, uint64_t size)
{
    struct fk_range *r, *tmp;
    HASH_ITER(hh, set, r, tmp)
        if (p >= r->base && p - r->base < r->size && size <= r->size - (p - r->base))
            return r;
    return NULL;
}

/* Records [base, base+size) in `set` (a mapping of `h`, or a reservation with h NULL); false when
 * there is no memory for it. Under fk_mu. */
static bool range_add(struct fk_range **set, CUdeviceptr base, uint64_t size, struct fk_handle *h)
{
    struct fk_range *r = calloc(1, sizeof *r);
    if (!r)
        return false;
    r->base = base;
    r->size = size;
    r->h = h;
    HASH_ADD(hh, *set, base, sizeof r->base, r);
    return true;
}

static bool overlaps_mapping(CUdeviceptr p, uint64_t size)
{
    struct fk_range *r, *tmp;
    HASH_ITER(hh, mappings, r, tmp)
        if (p < r->base + r->size && r->base < p + size)
            return true;
    return false;
}

int fk_vmm_ordinal(CUdeviceptr p, CUdeviceptr *base, uint64_t *size)
{
    struct fk_range *m = range_containing(mappings, p, 1);
    if (!m || m->h->phys < 0)
        return -1;
    *base = m->base;
    *size = m->size;
    return m->h->prop.location.id;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return fk_phys_of(prop->location.id) < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

FK_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option)
{
    FK_ENTER_INIT(cuMemGetAllocationGranularity);
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc == CUDA_SUCCESS)
        *granularity = FK_GRAN;
    return rc;
}

FK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    FK_ENTER_INIT(cuMemCreate);
    if (!handle || size == 0 || size % FK_GRAN || flags)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct fk_handle *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = size;
    h->prop = *prop;
    h->refs = 1;
    h->phys = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? fk_phys_of(prop->location.id) : -1;
    fk_lock();
    if (h->phys >= 0) {
        rc = fk_charge(h->phys, size);
        h->charged = size;
    }
    if (rc == CUDA_SUCCESS) {
        h->id = next_id++;
        HASH_ADD(hh, handles, id, sizeof h->id, h);
        *handle = h->id;
        h = NULL;
    }
    fk_unlock();
    free(h);
    return rc;
}

FK_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FK_ENTER_INIT(cuMemRelease);
    fk_lock();
    struct fk_handle *h = handle_find(handle);
    bool ok = h && h->refs > 0;
    if (ok) {
        h->refs--;
        handle_maybe_free(h);
    }
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    FK_ENTER_INIT(cuMemRetainAllocationHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_range *m = range_containing(mappings, (CUdeviceptr)(uintptr_t)addr, 1);
    if (m) {
        m->h->refs++;
        *handle = m->h->id;
    }
    fk_unlock();
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/*
 * Shareable handles (POSIX file descriptors only): the descriptor is a memfd holding what the
 * importer needs to know (the exporter, the device, the size). An imported handle maps the
 * exporter's memory and charges nothing: the memory stays the exporter's, as on a card.
 */
#define FK_SHARE_MAGIC 0x4552414853464b31ull /* "1KFSHARE" */

struct share_info {
    uint64_t magic;
    int32_t pid, phys;
    uint64_t size;
    CUmemAllocationProp prop;
};

FK_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType handleType, unsigned long long flags)
{
    FK_ENTER_INIT(cuMemExportToShareableHandle);
    if (!shareableHandle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    fk_lock();
    struct fk_handle *h = handle_find(handle);
    struct share_info si = { FK_SHARE_MAGIC, (int32_t)getpid(), h ? h->phys : -1, h ? h->size : 0, { 0 } };
    if (h)
        si.prop = h->prop;
    fk_unlock();
    if (!h || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("fakecuda-share", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if (pwrite(fd, &si, sizeof si, 0) != (ssize_t)sizeof si) {
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int *)shareableHandle = fd;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    FK_ENTER_INIT(cuMemImportFromShareableHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct share_info si;
    int fd = (int)(intptr_t)osHandle;
    if (pread(fd, &si, sizeof si, 0) != (ssize_t)sizeof si || si.magic != FK_SHARE_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_handle *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = si.size;
    h->prop = si.prop;
    h->refs = 1;
    h->phys = si.phys;
    fk_lock();
    h->id = next_id++;
    HASH_ADD(hh, handles, id, sizeof h->id, h);
    *handle = h->id;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    FK_ENTER_INIT(cuMemGetAllocationPropertiesFromHandle);
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_handle *h = handle_find(handle);
    if (h)
        *prop = h->prop;
    fk_unlock();
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags)
{
    FK_ENTER_INIT(cuMemAddressReserve);
    if (!ptr || size == 0 || size % FK_GRAN || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > FK_GRAN ? alignment : FK_GRAN;
    fk_lock();
    uint64_t base = FK_ROUND_UP(va_bump, align);
    bool ok = base + size > base && base + size <= ((uint64_t)1 << 48) &&
              range_add(&reservations, base, size, NULL);
    if (ok) {
        /* One granule of gap keeps neighbouring reservations from looking contiguous. */
        va_bump = base + size + FK_GRAN;
        *ptr = base;
    }
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FK_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FK_ENTER_INIT(cuMemAddressFree);
    fk_lock();
    struct fk_range *r;
    HASH_FIND(hh, reservations, &ptr, sizeof ptr, r);
    bool ok = r && r->size == size && !overlaps_mapping(ptr, size);
    if (ok)
        HASH_DEL(reservations, r);
    fk_unlock();
    if (ok)
        free(r);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags)
{
    FK_ENTER_INIT(cuMemMap);
    if (size == 0 || size % FK_GRAN || ptr % FK_GRAN || offset % FK_GRAN || flags)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_handle *h = handle_find(handle);
    bool ok = h && h->refs > 0 && offset <= h->size && size <= h->size - offset &&
              range_containing(reservations, ptr, size) && !overlaps_mapping(ptr, size);
    CUresult rc = !ok                                  ? CUDA_ERROR_INVALID_VALUE
                  : range_add(&mappings, ptr, size, h) ? CUDA_SUCCESS
                                                       : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        h->maps++;
    fk_unlock();
    return rc;
}

/* Unmaps every mapping inside [ptr, ptr+size); one that sticks out of the range is an error. */
FK_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FK_ENTER_INIT(cuMemUnmap);
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_range *m, *tmp;
    int inside = 0;
    bool partial = false;
    HASH_ITER(hh, mappings, m, tmp) {
        if (m->base < ptr + size && ptr < m->base + m->size) {
            if (m->base < ptr || m->base + m->size > ptr + size)
                partial = true;
            inside++;
        }
    }
    bool ok = inside > 0 && !partial;
    if (ok) {
        HASH_ITER(hh, mappings, m, tmp) {
            if (m->base >= ptr && m->base < ptr + size) {
                struct fk_handle *h = m->h;
                HASH_DEL(mappings, m);
                free(m);
                h->maps--;
                handle_maybe_free(h);
            }
        }
    }
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FK_ENTER_INIT(cuMemSetAccess);
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && fk_phys_of(desc[i].location.id) < 0)
            return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    bool ok = range_containing(reservations, ptr, size) != NULL;
    for (CUdeviceptr p = ptr; ok && p < ptr + size;) {
        struct fk_range *m = range_containing(mappings, p, 1);
        ok = m != NULL;
        if (m)
            p = m->base + m->size;
    }
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void fk_vmm_forget(void)
{
    struct fk_range *r, *rt;
    HASH_ITER(hh, mappings, r, rt) {
        HASH_DEL(mappings, r);
        free(r);
    }
    HASH_ITER(hh, reservations, r, rt) {
        HASH_DEL(reservations, r);
        free(r);
    }
    struct fk_handle *h, *ht;
    HASH_ITER(hh, handles, h, ht) {
        HASH_DEL(handles, h);
        free(h);
    }
}
