/* SPDX-License-Identifier: Apache-2.0 */
/*
 * array.c: CUDA arrays and mipmapped arrays, charged to the current context's device. An array
 * takes width * max(height,1) * max(depth,1) * channels * bytes-per-element, rounded up to
 * 512; a mipmapped array the sum of that over its levels, each dimension halving down to 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "fake_internal.h"

#define FK_MAX_LEVELS 32

struct fk_array {
    void *key; /* own address: the CUarray / CUmipmappedArray handle */
    CUDA_ARRAY3D_DESCRIPTOR desc;
    uint64_t bytes;              /* layout size (whole pyramid for a mipmapped array) */
    uint64_t charged;            /* held on the record: 0 for sparse and deferred-mapping arrays */
    int ordinal, phys;
    struct fk_ctx *ctx;
    bool mipmapped;
    unsigned levels;
    struct fk_array *parent;     /* a level of a mipmapped array: not charged, not destroyable */
    struct fk_array *level[FK_MAX_LEVELS];
    UT_hash_handle hh;
};

static struct fk_array *arrays; /* arrays, levels and mipmapped arrays, by handle */

static unsigned elem_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X4:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X4:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

static uint64_t dim_at(uint64_t d, unsigned level)
{
    if (d == 0)
        return 0;
    d >>= level;
    return d ? d : 1;
}

/* Bytes of one level (0: the array itself); 0 when the size overflows. */
static uint64_t level_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned level)
{
    uint64_t dims[3] = { dim_at(d->Width, level), dim_at(d->Height, level), dim_at(d->Depth, level) };
    uint64_t b = (uint64_t)d->NumChannels * elem_bytes(d->Format);
    for (int i = 0; i < 3; i++) {
        uint64_t x = dims[i] ? dims[i] : 1;
        if (b > UINT64_MAX / x)
            return 0;
        b *= x;
    }
    return b > UINT64_MAX - 511 ? 0 : FK_ROUND_UP(b, 512);
}

static bool desc_ok(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return d->Width && elem_bytes(d->Format) &&
           (d->NumChannels == 1 || d->NumChannels == 2 || d->NumChannels == 4) &&
           !(d->Depth && !d->Height && !(d->Flags & CUDA_ARRAY3D_LAYERED));
}

static CUresult array_new(void **out, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, bool mip)
{
    if (!out || !d || !desc_ok(d))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t bytes = 0, maxdim = d->Width > d->Height ? d->Width : d->Height;
    maxdim = maxdim > d->Depth ? maxdim : d->Depth;
    unsigned possible = 1;
    while (possible < FK_MAX_LEVELS && (maxdim >> possible))
        possible++;
    if (levels == 0 || levels > possible)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned l = 0; l < levels; l++) {
        uint64_t b = level_bytes(d, l);
        if (b == 0 || bytes + b < bytes)
            return CUDA_ERROR_OUT_OF_MEMORY;
        bytes += b;
    }
    /* Sparse and deferred-mapping arrays own no memory: it comes from cuMemCreate allocations
     * mapped into them with cuMemMapArrayAsync. */
    uint64_t charge = d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING) ? 0 : bytes;
    FK_ENTRY_BEGIN(struct fk_array, a, charge, c);
    a->key = a;
    a->desc = *d;
    a->bytes = bytes;
    a->charged = charge;
    a->ordinal = c->ordinal;
    a->phys = c->phys;
    a->ctx = c;
    a->mipmapped = mip;
    a->levels = levels;
    HASH_ADD_PTR(arrays, key, a);
    *out = a;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_DEFINE_FIND(array_find, struct fk_array, arrays)

static void array_free(struct fk_array *a)
{
    for (unsigned l = 0; l < FK_MAX_LEVELS; l++) {
        if (a->level[l]) {
            HASH_DEL(arrays, a->level[l]);
            free(a->level[l]);
        }
    }
    fk_uncharge(a->phys, a->charged);
    HASH_DEL(arrays, a);
    free(a);
}

static CUresult array_destroy(const void *h, bool mip)
{
    fk_lock();
    struct fk_array *a = array_find(h);
    bool ok = a && !a->parent && a->mipmapped == mip;
    if (ok)
        array_free(a);
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUDA_ARRAY3D_DESCRIPTOR from2d(size_t w, size_t h, CUarray_format f, unsigned ch)
{
    return (CUDA_ARRAY3D_DESCRIPTOR){ .Width = w, .Height = h, .Format = f, .NumChannels = ch };
}

/* cuArrayCreate_v2 and the legacy cuArrayCreate: one body for either 2D descriptor. */
#define FK_ARRAY_CREATE_2D(sym, desc_type)                                                   \
    FK_EXPORT CUresult sym(CUarray *pHandle, const desc_type *pAllocateArray)                \
    {                                                                                        \
        FK_ENTER_INIT(sym);                                                                  \
        if (!pAllocateArray)                                                                 \
            return CUDA_ERROR_INVALID_VALUE;                                                 \
        const desc_type *d = pAllocateArray;                                                 \
        CUDA_ARRAY3D_DESCRIPTOR d3 = from2d(d->Width, d->Height, d->Format, d->NumChannels); \
        return array_new((void **)pHandle, &d3, 1, false);                                   \
    }
FK_ARRAY_CREATE_2D(cuArrayCreate_v2, CUDA_ARRAY_DESCRIPTOR)
FK_ARRAY_CREATE_2D(cuArrayCreate, CUDA_ARRAY_DESCRIPTOR_v1)
#undef FK_ARRAY_CREATE_2D

FK_FORWARD(cuArray3DCreate_v2,
           (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray),
           array_new((void **)pHandle, pAllocateArray, 1, false))

FK_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
    FK_ENTER_INIT(cuArray3DCreate);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR_v1 *d = pAllocateArray;
    CUDA_ARRAY3D_DESCRIPTOR d3 = { d->Width, d->Height, d->Depth, d->Format, d->NumChannels, d->Flags };
    return array_new((void **)pHandle, &d3, 1, false);
}

FK_FORWARD(cuArrayDestroy, (CUarray hArray), array_destroy(hArray, false))

static CUresult get_desc(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray h)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_array *a = array_find(h);
    bool ok = a && !a->mipmapped;
    if (ok)
        *out = a->desc;
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* cuArrayGetDescriptor_v2 and the legacy cuArrayGetDescriptor: one body for either 2D descriptor. */
#define FK_ARRAY_GET_DESCRIPTOR_2D(sym, desc_type, dim_type)                                \
    FK_EXPORT CUresult sym(desc_type *pArrayDescriptor, CUarray hArray)                     \
    {                                                                                       \
        FK_ENTER_INIT(sym);                                                                 \
        CUDA_ARRAY3D_DESCRIPTOR d;                                                          \
        CUresult rc = get_desc(pArrayDescriptor ? &d : NULL, hArray);                       \
        if (rc == CUDA_SUCCESS)                                                             \
            *pArrayDescriptor = (desc_type){ (dim_type)d.Width, (dim_type)d.Height,         \
                                             d.Format, d.NumChannels };                     \
        return rc;                                                                          \
    }
FK_ARRAY_GET_DESCRIPTOR_2D(cuArrayGetDescriptor_v2, CUDA_ARRAY_DESCRIPTOR, size_t)
FK_ARRAY_GET_DESCRIPTOR_2D(cuArrayGetDescriptor, CUDA_ARRAY_DESCRIPTOR_v1, unsigned)
#undef FK_ARRAY_GET_DESCRIPTOR_2D

FK_FORWARD(cuArray3DGetDescriptor_v2,
           (CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray),
           get_desc(pArrayDescriptor, hArray))

FK_EXPORT CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1 *pArrayDescriptor, CUarray hArray)
{
    FK_ENTER_INIT(cuArray3DGetDescriptor);
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult rc = get_desc(pArrayDescriptor ? &d : NULL, hArray);
    if (rc == CUDA_SUCCESS)
        *pArrayDescriptor = (CUDA_ARRAY3D_DESCRIPTOR_v1){ (unsigned)d.Width, (unsigned)d.Height, (unsigned)d.Depth,
                                                          d.Format, d.NumChannels, d.Flags };
    return rc;
}

static CUresult requirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, const void *h, CUdevice dev, bool mip)
{
    if (!req)
        return CUDA_ERROR_INVALID_VALUE;
    if (fk_phys_of(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    struct fk_array *a = array_find(h);
    bool ok = a && a->mipmapped == mip;
    /* The documentation: "If the CUDA array is not allocated with flag
     * CUDA_ARRAY3D_DEFERRED_MAPPING, CUDA_ERROR_INVALID_VALUE will be returned." */
    if (ok && !((a->parent ? a->parent : a)->desc.Flags & CUDA_ARRAY3D_DEFERRED_MAPPING)) {
        fk_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ok)
        *req = (CUDA_ARRAY_MEMORY_REQUIREMENTS){ .size = a->parent ? level_bytes(&a->desc, 0) : a->bytes,
                                                 .alignment = 512 };
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuArrayGetMemoryRequirements,
           (CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUarray array, CUdevice device),
           requirements(memoryRequirements, array, device, false))

FK_FORWARD(cuMipmappedArrayCreate,
           (CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
            unsigned int numMipmapLevels),
           array_new((void **)pHandle, pMipmappedArrayDesc, numMipmapLevels, true))

FK_FORWARD(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray), array_destroy(hMipmappedArray, true))

FK_FORWARD(cuMipmappedArrayGetMemoryRequirements,
           (CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUmipmappedArray mipmap, CUdevice device),
           requirements(memoryRequirements, mipmap, device, true))

/* A level is an array handle owned by its mipmapped array: made on first request, freed with it. */
FK_EXPORT CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level)
{
    FK_ENTER_INIT(cuMipmappedArrayGetLevel);
    if (!pLevelArray)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_array *m = array_find(hMipmappedArray);
    CUresult rc = m && m->mipmapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && level >= m->levels)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !m->level[level]) {
        struct fk_array *a = calloc(1, sizeof *a);
        if (!a) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            a->key = a;
            a->desc = m->desc;
            a->desc.Width = dim_at(m->desc.Width, level);
            a->desc.Height = dim_at(m->desc.Height, level);
            a->desc.Depth = dim_at(m->desc.Depth, level);
            a->ordinal = m->ordinal;
            a->phys = m->phys;
            a->ctx = m->ctx;
            a->levels = 1;
            a->parent = m;
            HASH_ADD_PTR(arrays, key, a);
            m->level[level] = a;
        }
    }
    if (rc == CUDA_SUCCESS)
        *pLevelArray = (CUarray)m->level[level];
    fk_unlock();
    return rc;
}

void fk_array_free_ctx(struct fk_ctx *c)
{
    struct fk_array *a, *tmp;
    bool again = true;
    /* array_free also removes level entries, which may be the iterator's next: restart. */
    while (again) {
        again = false;
        HASH_ITER(hh, arrays, a, tmp) {
            if (a->ctx == c && !a->parent) {
                array_free(a);
                again = true;
                break;
            }
        }
    }
}

void fk_array_forget(void)
{
    struct fk_array *a, *tmp;
    HASH_ITER(hh, arrays, a, tmp) {
        HASH_DEL(arrays, a);
        free(a);
    }
}
