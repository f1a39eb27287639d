/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host.c: host memory the driver knows: pinned memory it allocates (cuMemAllocHost, cuMemHostAlloc:
 * real, page-backed, never charged to a device) and memory the program registers
 * (cuMemHostRegister). Both read as host memory in the pointer queries (memory.c) and are the
 * host side of the copies (copy.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <sys/mman.h>

#include "fake_internal.h"

struct fk_host {
    void *p;
    size_t size;
    bool registered; /* the program's memory (cuMemHostRegister), not ours to unmap */
    unsigned flags;
    UT_hash_handle hh;
};

static struct fk_host *hosts;

/* Fills entry `h` (from FK_ENTRY_BEGIN: fk_mu held) for the range [p, p + bytes), adds it and
 * unlocks: CUDA_SUCCESS. */
static CUresult host_add(struct fk_host *h, void *p, size_t bytes, unsigned flags, bool registered)
{
    h->p = p;
    h->size = bytes;
    h->registered = registered;
    h->flags = flags;
    HASH_ADD_PTR(hosts, p, h);
    fk_unlock();
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytes, unsigned flags)
{
    if (!pp || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* host memory: no device charge */
    FK_ENTRY_BEGIN(struct fk_host, h, 0, c);
    /* mmap rather than malloc: a failed huge request is an error code, also under sanitizers. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fk_entry_abort(h, c, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return host_add(h, p, bytes, flags, false);
}

FK_FORWARD(cuMemAllocHost_v2, (void **pp, size_t bytesize), host_alloc(pp, bytesize, 0))
FK_FORWARD(cuMemAllocHost, (void **pp, unsigned int bytesize), host_alloc(pp, bytesize, 0))

FK_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FK_ENTER_INIT(cuMemHostAlloc);
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytesize, Flags);
}

/* Takes the entry of `p` (exactly its start) out of the table: NULL when there is none, or when it is
 * not of the kind asked (`registered`). */
static struct fk_host *host_take(void *p, bool registered)
{
    fk_lock();
    struct fk_host *h = NULL;
    if (p)
        HASH_FIND_PTR(hosts, &p, h);
    if (h && h->registered == registered)
        HASH_DEL(hosts, h);
    else
        h = NULL;
    fk_unlock();
    return h;
}

FK_EXPORT CUresult cuMemFreeHost(void *p)
{
    FK_ENTER_INIT(cuMemFreeHost);
    struct fk_host *h = host_take(p, false);
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(h->p, h->size);
    free(h);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t bytes, unsigned flags)
{
    if (!p || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_host, h, 0, c);
    uint64_t base, size;
    if (fk_host_range((uintptr_t)p, &base, &size) || fk_host_range((uintptr_t)p + bytes - 1, &base, &size)) {
        fk_entry_abort(h, c, 0);
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    return host_add(h, p, bytes, flags, true);
}

FK_FORWARD(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags), host_register(p, bytesize, Flags))

FK_EXPORT CUresult cuMemHostUnregister(void *p)
{
    FK_ENTER_INIT(cuMemHostUnregister);
    struct fk_host *h = host_take(p, true);
    free(h);
    return h ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static struct fk_host *host_find(uintptr_t p)
{
    struct fk_host *h, *tmp;
    HASH_ITER(hh, hosts, h, tmp)
        if (p >= (uintptr_t)h->p && p - (uintptr_t)h->p < h->size)
            return h;
    return NULL;
}

bool fk_host_range(uintptr_t p, uint64_t *base, uint64_t *size)
{
    struct fk_host *h = host_find(p);
    if (h) {
        *base = (uint64_t)(uintptr_t)h->p;
        *size = h->size;
    }
    return h != NULL;
}

/* Unified addressing: a pinned or registered buffer's device address is its host address. */
static CUresult host_device_pointer(CUdeviceptr *pdptr, void *p, unsigned flags)
{
    if (!pdptr || flags)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    bool known = host_find((uintptr_t)p) != NULL;
    fk_unlock();
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuMemHostGetDevicePointer_v2, (CUdeviceptr *pdptr, void *p, unsigned int Flags),
           host_device_pointer(pdptr, p, Flags))

FK_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    FK_ENTER_INIT(cuMemHostGetFlags);
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_host *h = host_find((uintptr_t)p);
    if (h)
        *pFlags = h->flags;
    fk_unlock();
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
