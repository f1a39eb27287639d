/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.c: the allocation calls that return a device pointer, and their frees.
 *
 * Each hook is thin: charge (charge.c), call the driver, commit. The legacy unversioned exports
 * keep their 32-bit ABI (unsigned int sizes and pointers) and are budgeted like the _v2 ones.
 * Stream-ordered allocations are counted by the pools they come from (charge/pool.c).
 */
#include "hooks/init.h"

#include "charge/charge.h"
#include "charge/loan.h"
#include "charge/pool.h"
#include "driver/resolve.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The exports per ABI (size_t, and the legacy unsigned int): charge, the driver's call, commit. A
 * refusal by the driver within the request: the node arbiter is asked to take loans back and the
 * call is made again until it succeeds or the grace passed (charge/loan.c; out of line). */
#define MEM_ALLOC(name, ptr_type, size_type)                                  \
    __attribute__((noinline, cold)) static CUresult retry_##name(struct gpc_charge *c, CUresult rc, \
                                                                 ptr_type *dptr, size_type bytesize) \
    {                                                                         \
        struct gpc_loan_need n = {0};                                         \
        while (rc == CUDA_ERROR_OUT_OF_MEMORY && gpc_charge_need(c, &n))      \
            rc = GPC_CALL_REAL(name, (dptr, bytesize));                       \
        return rc;                                                            \
    }                                                                         \
    GPC_EXPORT CUresult name(ptr_type *dptr, size_type bytesize)               \
    {                                                                         \
        gpc_init();                                                           \
        struct gpc_charge c;                                                  \
        CUresult rc = gpc_charge_begin(&c, -1, bytesize, #name);              \
        if (rc != CUDA_SUCCESS)                                               \
            return rc;                                                        \
        rc = GPC_CALL_REAL(name, (dptr, bytesize));                           \
        if (gpc_unlikely(rc == CUDA_ERROR_OUT_OF_MEMORY))                     \
            rc = retry_##name(&c, rc, dptr, bytesize);                        \
        gpc_charge_end(&c, rc, GPC_MAP_PTR, rc == CUDA_SUCCESS ? *dptr : 0);  \
        return rc;                                                            \
    }
MEM_ALLOC(cuMemAlloc_v2, CUdeviceptr, size_t)
MEM_ALLOC(cuMemAlloc, CUdeviceptr_v1, unsigned int)

/* The frees per ABI. cuMemFree of a stream-ordered allocation is legal: its pool settles as after
 * cuMemFreeAsync. */
#define MEM_FREE(name, ptr_type)                                                          \
    GPC_EXPORT CUresult name(ptr_type dptr)                                               \
    {                                                                                     \
        gpc_init();                                                                       \
        struct gpc_track t;                                                               \
        bool known = gpc_free_begin(GPC_MAP_PTR, dptr, &t);                               \
        bool pooled = !known && gpc_counting() && gpc_pools_free_begin(dptr, &t);         \
        CUresult rc = GPC_CALL_REAL(name, (dptr));                                        \
        gpc_free_end(known, GPC_MAP_PTR, dptr, &t, rc);                                   \
        if (pooled)                                                                       \
            gpc_pools_free_end(dptr, &t, rc);                                             \
        return rc;                                                                        \
    }
MEM_FREE(cuMemFree_v2, CUdeviceptr)
MEM_FREE(cuMemFree, CUdeviceptr_v1)

/*
 * The pitch is known only after the call. We reserve for the usual 512-byte pitch alignment first,
 * then settle: give back what was over-reserved, or reserve the rest, and if the rest does not fit
 * free the allocation again and deny it. Admitted bytes never exceed the budget in between.
 */
#define PITCH_GUESS 512u

static uint64_t pitch_guess(uint64_t width, uint64_t height)
{
    return ((width + PITCH_GUESS - 1) / PITCH_GUESS) * PITCH_GUESS * height;
}

/* The exports per ABI (size_t, and the legacy unsigned int with its own free); a refusal by the
 * driver within the request is retried as for cuMemAlloc. */
#define ALLOC_PITCH(name, ptr_type, size_type, free_name)                                                   \
    __attribute__((noinline, cold)) static CUresult retry_##name(struct gpc_charge *c, CUresult rc, ptr_type *dptr, \
                                                                 size_type *pPitch, size_type w, size_type h,   \
                                                                 unsigned int e)                               \
    {                                                                                                       \
        struct gpc_loan_need n = {0};                                                                       \
        while (rc == CUDA_ERROR_OUT_OF_MEMORY && gpc_charge_need(c, &n))                                    \
            rc = GPC_CALL_REAL(name, (dptr, pPitch, w, h, e));                                              \
        return rc;                                                                                          \
    }                                                                                                       \
    GPC_EXPORT CUresult name(ptr_type *dptr, size_type *pPitch, size_type WidthInBytes, size_type Height,     \
                             unsigned int ElementSizeBytes)                                                 \
    {                                                                                                       \
        gpc_init();                                                                                         \
        struct gpc_charge c;                                                                                \
        CUresult rc = gpc_charge_begin(&c, -1, pitch_guess(WidthInBytes, Height), #name);                   \
        if (rc != CUDA_SUCCESS)                                                                             \
            return rc;                                                                                      \
        rc = GPC_CALL_REAL(name, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));                   \
        if (gpc_unlikely(rc == CUDA_ERROR_OUT_OF_MEMORY))                                                   \
            rc = retry_##name(&c, rc, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);                \
        if (rc != CUDA_SUCCESS) {                                                                           \
            gpc_charge_end(&c, rc, GPC_MAP_PTR, 0);                                                         \
            return rc;                                                                                      \
        }                                                                                                   \
        if (gpc_charge_settle(&c, (uint64_t)*pPitch * Height, GPC_MAP_PTR, *dptr, #name) != CUDA_SUCCESS) { \
            GPC_CALL_REAL(free_name, (*dptr));                                                              \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                                \
        }                                                                                                   \
        return CUDA_SUCCESS;                                                                                \
    }
ALLOC_PITCH(cuMemAllocPitch_v2, CUdeviceptr, size_t, cuMemFree_v2)
ALLOC_PITCH(cuMemAllocPitch, CUdeviceptr_v1, unsigned int, cuMemFree)

/* Managed memory can migrate and oversubscribe; we count it in full on the current device. */
GPC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    gpc_init();
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, -1, bytesize, "cuMemAllocManaged");
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = GPC_CALL_REAL(cuMemAllocManaged, (dptr, bytesize, flags));
    gpc_charge_end(&c, rc, GPC_MAP_PTR, rc == CUDA_SUCCESS ? *dptr : 0);
    return rc;
}

/* Stream-ordered allocations (cuMemAllocAsync and friends): hooks/pool.c. */
