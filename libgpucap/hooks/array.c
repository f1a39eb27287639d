/* SPDX-License-Identifier: Apache-2.0 */
/*
 * array.c: CUDA arrays and mipmapped arrays (textures, surfaces).
 *
 * The size of an array is the driver's business (block-linear layout, alignment), and it tells it
 * only after creation, through cuArrayGetMemoryRequirements / cuMipmappedArrayGetMemoryRequirements.
 * So a creation first reserves an estimate computed from the descriptor the way the driver lays a
 * linear array out (width * max(height,1) * max(depth,1) * channels * element size per level, each
 * level rounded up to 512 bytes; a mipmapped array is the sum of its levels, each dimension halving
 * down to 1); unknown formats count 16 bytes per element. After the call the reservation is settled
 * to the true size: the surplus is given back, or the rest is reserved and, if it does not fit, the
 * array is destroyed again and the call answers CUDA_ERROR_OUT_OF_MEMORY. Admitted bytes never pass
 * the budget. Arrays are recorded by handle (GPC_MAP_ARRAY); handles we did not charge (created
 * before a budget applied) pass through on destroy. The legacy cuArrayCreate/cuArray3DCreate (v1:
 * descriptors with unsigned int sizes, still exported and reachable by cuGetProcAddress below 3020)
 * are charged the same way, each calling its own real function.
 * The requirement calls are documented for CUDA_ARRAY3D_DEFERRED_MAPPING arrays only (any other
 * array gets CUDA_ERROR_INVALID_VALUE): an ordinary array stays charged its estimate. Sparse and
 * deferred-mapping arrays own no memory (it comes from cuMemCreate allocations mapped into them,
 * charged there) and are not charged.
 */
#include "core/budget.h"
#include "core/track.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "hooks/init.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARRAY_ALIGN 512u
#define MAX_LEVELS 32u

static unsigned elem_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2:
        return 4;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4:
        return 8;
    default:
        return 16; /* compressed, planar and newer formats: never below the truth per element */
    }
}

static uint64_t dim_at(uint64_t d, unsigned level)
{
    d >>= level;
    return d ? d : 1;
}

/* Bytes of `levels` levels of an array described by `d` (a plain array: levels = 1); saturates. */
static uint64_t estimate(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t total = 0;
    if (levels == 0)
        levels = 1;
    if (levels > MAX_LEVELS)
        levels = MAX_LEVELS;
    for (unsigned l = 0; l < levels; l++) {
        uint64_t dims[3] = {dim_at(d->Width, l), d->Height ? dim_at(d->Height, l) : 1,
                            d->Depth ? dim_at(d->Depth, l) : 1};
        /* Layered arrays keep their layer count at every level. */
        if (d->Depth && (d->Flags & CUDA_ARRAY3D_LAYERED))
            dims[2] = d->Depth;
        uint64_t b = (uint64_t)(d->NumChannels ? d->NumChannels : 1) * elem_bytes(d->Format);
        for (int i = 0; i < 3; i++) {
            if (b > UINT64_MAX / dims[i])
                return UINT64_MAX;
            b *= dims[i];
        }
        if (b > UINT64_MAX - ARRAY_ALIGN - total)
            return UINT64_MAX;
        total += (b + ARRAY_ALIGN - 1) / ARRAY_ALIGN * ARRAY_ALIGN;
    }
    return total;
}

static uint64_t array_size(CUarray a, int device, uint64_t fallback)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
    if (gpc_real.cuArrayGetMemoryRequirements &&
        gpc_real.cuArrayGetMemoryRequirements(&req, a, device) == CUDA_SUCCESS && req.size)
        return req.size;
    return fallback;
}

/* Arrays whose memory is mapped into them later (charged where it is created). */
static bool owns_no_memory(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return d && (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING));
}

/* The four creation ABIs: a 2D or 3D descriptor, v2 (size_t sizes) or legacy v1 (unsigned int). */
enum array_abi { ARRAY_2D, ARRAY_3D, ARRAY_2D_V1, ARRAY_3D_V1 };

static CUresult create_real(enum array_abi abi, CUarray *pHandle, const void *desc)
{
    switch (abi) {
    case ARRAY_2D: return GPC_CALL_REAL(cuArrayCreate_v2, (pHandle, desc));
    case ARRAY_3D: return GPC_CALL_REAL(cuArray3DCreate_v2, (pHandle, desc));
    case ARRAY_2D_V1: return GPC_CALL_REAL(cuArrayCreate, (pHandle, desc));
    default: return GPC_CALL_REAL(cuArray3DCreate, (pHandle, desc));
    }
}

static CUresult array_create(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d3, const void *desc,
                             enum array_abi abi, const char *call)
{
    if (owns_no_memory(d3))
        return create_real(abi, pHandle, desc);
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, -1, d3 ? estimate(d3, 1) : 0, call);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = create_real(abi, pHandle, desc);
    if (rc != CUDA_SUCCESS) {
        gpc_charge_end(&c, rc, GPC_MAP_ARRAY, 0);
        return rc;
    }
    uint64_t actual = c.budget == GPC_BUDGET_NONE ? c.bytes : array_size(*pHandle, c.device, c.bytes);
    if (gpc_charge_settle(&c, actual, GPC_MAP_ARRAY, (uint64_t)(uintptr_t)*pHandle, call) != CUDA_SUCCESS) {
        GPC_CALL_REAL(cuArrayDestroy, (*pHandle));
        *pHandle = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* The 2D creations, v2 and legacy v1: the descriptor as a 3D one of depth 0. */
#define ARRAY_CREATE_2D(name, desc_type, abi)                                                                   \
    GPC_EXPORT CUresult name(CUarray *pHandle, const desc_type *pAllocateArray)                                 \
    {                                                                                                           \
        gpc_init();                                                                                             \
        if (!pHandle || !pAllocateArray)                                                                        \
            return GPC_CALL_REAL(name, (pHandle, pAllocateArray));                                              \
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width, .Height = pAllocateArray->Height, .Depth = 0, \
                                     .Format = pAllocateArray->Format, .NumChannels = pAllocateArray->NumChannels}; \
        return array_create(pHandle, &d, pAllocateArray, abi, #name);                                           \
    }
ARRAY_CREATE_2D(cuArrayCreate_v2, CUDA_ARRAY_DESCRIPTOR, ARRAY_2D)
ARRAY_CREATE_2D(cuArrayCreate, CUDA_ARRAY_DESCRIPTOR_v1, ARRAY_2D_V1)

GPC_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    gpc_init();
    if (!pHandle || !pAllocateArray)
        return GPC_CALL_REAL(cuArray3DCreate_v2, (pHandle, pAllocateArray));
    return array_create(pHandle, pAllocateArray, pAllocateArray, ARRAY_3D, "cuArray3DCreate_v2");
}

GPC_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
    gpc_init();
    if (!pHandle || !pAllocateArray)
        return GPC_CALL_REAL(cuArray3DCreate, (pHandle, pAllocateArray));
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width, .Height = pAllocateArray->Height,
                                 .Depth = pAllocateArray->Depth, .Format = pAllocateArray->Format,
                                 .NumChannels = pAllocateArray->NumChannels, .Flags = pAllocateArray->Flags};
    return array_create(pHandle, &d, pAllocateArray, ARRAY_3D_V1, "cuArray3DCreate");
}

/* The destroys of both kinds of array: the record leaves the map before the driver call. */
#define ARRAY_DESTROY(name, type)                                                    \
    GPC_EXPORT CUresult name(type handle)                                            \
    {                                                                                \
        gpc_init();                                                                  \
        uint64_t key = (uint64_t)(uintptr_t)handle;                                  \
        struct gpc_track t;                                                          \
        bool known = gpc_free_begin(GPC_MAP_ARRAY, key, &t);                         \
        CUresult rc = GPC_CALL_REAL(name, (handle));                                 \
        gpc_free_end(known, GPC_MAP_ARRAY, key, &t, rc);                             \
        return rc;                                                                   \
    }
ARRAY_DESTROY(cuArrayDestroy, CUarray)
ARRAY_DESTROY(cuMipmappedArrayDestroy, CUmipmappedArray)

GPC_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                           unsigned int numMipmapLevels)
{
    gpc_init();
    if (!pHandle || !pMipmappedArrayDesc)
        return GPC_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
    if (owns_no_memory(pMipmappedArrayDesc))
        return GPC_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
    const char *call = "cuMipmappedArrayCreate";
    struct gpc_charge c;
    CUresult rc = gpc_charge_begin(&c, -1, estimate(pMipmappedArrayDesc, numMipmapLevels), call);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = GPC_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
    if (rc != CUDA_SUCCESS) {
        gpc_charge_end(&c, rc, GPC_MAP_ARRAY, 0);
        return rc;
    }
    CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
    uint64_t actual = c.bytes;
    if (c.budget != GPC_BUDGET_NONE && gpc_real.cuMipmappedArrayGetMemoryRequirements &&
        gpc_real.cuMipmappedArrayGetMemoryRequirements(&req, *pHandle, c.device) == CUDA_SUCCESS && req.size)
        actual = req.size;
    if (gpc_charge_settle(&c, actual, GPC_MAP_ARRAY, (uint64_t)(uintptr_t)*pHandle, call) != CUDA_SUCCESS) {
        GPC_CALL_REAL(cuMipmappedArrayDestroy, (*pHandle));
        *pHandle = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}
