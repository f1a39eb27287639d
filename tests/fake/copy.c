/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy.c: copies and memsets. The fake's device memory has no contents, so a copy checks its
 * arguments (a current context; device addresses inside a live allocation or VMM mapping, host
 * ones anywhere) and then: host to host copies, device to host writes zeros (so that what a
 * program reads back, a count or a flag, is a small number rather than garbage), anything to the
 * device does nothing. Memsets check their device range only. Asynchronous forms complete at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "fake_internal.h"

/* One side of a copy: where it is and how its rows and slices are laid out. */
struct side {
    CUmemorytype type;
    uintptr_t host;     /* type HOST */
    CUdeviceptr device; /* type DEVICE */
    size_t x, y, z, pitch, height;
};

/* A side as the copy's memory types name it, UNIFIED resolved by the address (under fk_mu). */
static CUresult side_check(struct side *s, size_t width, size_t height, size_t depth)
{
    if (s->type == CU_MEMORYTYPE_UNIFIED) {
        int kind = fk_ptr_kind(s->device);
        s->type = kind > 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        s->host = (uintptr_t)s->device;
    }
    if (s->type == CU_MEMORYTYPE_ARRAY)
        return CUDA_SUCCESS;
    size_t pitch = s->pitch ? s->pitch : width, rows = s->height ? s->height : height;
    uint64_t first = s->x + (s->z * rows + s->y) * pitch;
    uint64_t last = first + ((depth - 1) * rows + (height - 1)) * pitch + width - 1;
    if (s->type == CU_MEMORYTYPE_DEVICE && fk_ptr_kind(s->device) == 0) {
        /* Pinned or registered host memory by its device address (the same address here). */
        s->type = CU_MEMORYTYPE_HOST;
        s->host = (uintptr_t)s->device;
    }
    if (s->type == CU_MEMORYTYPE_DEVICE)
        return fk_ptr_kind(s->device + first) > 0 && fk_ptr_kind(s->device + last) > 0 ? CUDA_SUCCESS
                                                                                       : CUDA_ERROR_INVALID_VALUE;
    return s->type == CU_MEMORYTYPE_HOST && s->host ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy(struct side dst, struct side src, size_t width, size_t height, size_t depth)
{
    if (width == 0 || height == 0 || depth == 0)
        return CUDA_SUCCESS;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    if (rc == CUDA_SUCCESS)
        rc = side_check(&dst, width, height, depth);
    if (rc == CUDA_SUCCESS)
        rc = side_check(&src, width, height, depth);
    fk_unlock();
    if (rc != CUDA_SUCCESS || dst.type != CU_MEMORYTYPE_HOST)
        return rc;
    size_t dp = dst.pitch ? dst.pitch : width, dh = dst.height ? dst.height : height;
    size_t sp = src.pitch ? src.pitch : width, sh = src.height ? src.height : height;
    for (size_t z = 0; z < depth; z++) {
        for (size_t y = 0; y < height; y++) {
            char *d = (char *)dst.host + dst.x + ((dst.z + z) * dh + dst.y + y) * dp;
            if (src.type == CU_MEMORYTYPE_HOST)
                memmove(d, (const char *)src.host + src.x + ((src.z + z) * sh + src.y + y) * sp, width);
            else
                memset(d, 0, width);
        }
    }
    return CUDA_SUCCESS;
}

static struct side host_side(const void *p)
{
    return (struct side){ .type = CU_MEMORYTYPE_HOST, .host = (uintptr_t)p };
}

static struct side device_side(CUdeviceptr p)
{
    return (struct side){ .type = CU_MEMORYTYPE_DEVICE, .device = p };
}

static struct side unified_side(CUdeviceptr p)
{
    return (struct side){ .type = CU_MEMORYTYPE_UNIFIED, .device = p };
}

static CUresult stream_checked(CUstream s, CUresult (*fn)(void *), void *arg)
{
    fk_lock();
    bool ok = fk_stream_ok(s);
    fk_unlock();
    return ok ? fn(arg) : CUDA_ERROR_INVALID_HANDLE;
}

struct copy_args {
    struct side dst, src;
    size_t w, h, d;
};

static CUresult copy_args(void *arg)
{
    struct copy_args *a = arg;
    return copy(a->dst, a->src, a->w, a->h, a->d);
}

/* A copy on stream `s` (async): the stream must be valid. */
static CUresult copy_on(CUstream s, struct side dst, struct side src, size_t w, size_t h, size_t d)
{
    struct copy_args a = { dst, src, w, h, d };
    return stream_checked(s, copy_args, &a);
}

/* ---- linear copies: each synchronous form, its per-thread variant, the async ones ---- */

#define FK_COPY(sym, params, dst, src, n) FK_FORWARD(sym, params, copy(dst, src, n, 1, 1))
#define FK_COPY_ASYNC(sym, params, dst, src, n, s) FK_FORWARD(sym, params, copy_on(s, dst, src, n, 1, 1))

FK_COPY(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), unified_side(dst), unified_side(src), n)
FK_COPY(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), unified_side(dst), unified_side(src), n)
FK_COPY_ASYNC(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), unified_side(dst),
              unified_side(src), n, s)
FK_COPY_ASYNC(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), unified_side(dst),
              unified_side(src), n, s)
FK_COPY(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n), device_side(dst),
        device_side(src), n)
FK_COPY(cuMemcpyPeer_ptds, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
        device_side(dst), device_side(src), n)
FK_COPY_ASYNC(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
              device_side(dst), device_side(src), n, s)
FK_COPY_ASYNC(cuMemcpyPeerAsync_ptsz,
              (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s), device_side(dst),
              device_side(src), n, s)
FK_COPY(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), device_side(dst), host_side(src), n)
FK_COPY(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n), device_side(dst), host_side(src), n)
FK_COPY_ASYNC(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s), device_side(dst),
              host_side(src), n, s)
FK_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void *src, size_t n, CUstream s), device_side(dst),
              host_side(src), n, s)
FK_COPY(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), host_side(dst), device_side(src), n)
FK_COPY(cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n), host_side(dst), device_side(src), n)
FK_COPY_ASYNC(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s), host_side(dst),
              device_side(src), n, s)
FK_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, (void *dst, CUdeviceptr src, size_t n, CUstream s), host_side(dst),
              device_side(src), n, s)
FK_COPY(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), device_side(dst), device_side(src), n)
FK_COPY(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), device_side(dst), device_side(src), n)
FK_COPY_ASYNC(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), device_side(dst),
              device_side(src), n, s)
FK_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), device_side(dst),
              device_side(src), n, s)

/* ---- 2D and 3D copies ---- */

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream s, bool async)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct side dst = { p->dstMemoryType, (uintptr_t)p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
                        p->dstPitch, 0 };
    struct side src = { p->srcMemoryType, (uintptr_t)p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0,
                        p->srcPitch, 0 };
    return async ? copy_on(s, dst, src, p->WidthInBytes, p->Height, 1) : copy(dst, src, p->WidthInBytes, p->Height, 1);
}

FK_FORWARD(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, false))
FK_FORWARD(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, false))
FK_FORWARD(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, false))
FK_FORWARD(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, false))
FK_FORWARD(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream s), copy2d(p, s, true))
FK_FORWARD(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *p, CUstream s), copy2d(p, s, true))

/* Defines `static CUresult fn(const type *p, CUstream s, bool async)`, the copy that 3D parameters of
 * `type` (CUDA_MEMCPY3D, CUDA_MEMCPY3D_PEER: the same fields) describe, on stream s when async. */
#define COPY3D(fn, type)                                                                                     \
    static CUresult fn(const type *p, CUstream s, bool async)                                                \
    {                                                                                                        \
        if (!p)                                                                                              \
            return CUDA_ERROR_INVALID_VALUE;                                                                 \
        struct side dst = { p->dstMemoryType, (uintptr_t)p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, \
                            p->dstZ,          p->dstPitch,           p->dstHeight };                         \
        struct side src = { p->srcMemoryType, (uintptr_t)p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, \
                            p->srcZ,          p->srcPitch,           p->srcHeight };                         \
        return async ? copy_on(s, dst, src, p->WidthInBytes, p->Height, p->Depth)                            \
                     : copy(dst, src, p->WidthInBytes, p->Height, p->Depth);                                 \
    }

COPY3D(copy3d, CUDA_MEMCPY3D)

FK_FORWARD(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p), copy3d(p, NULL, false))
FK_FORWARD(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *p), copy3d(p, NULL, false))
FK_FORWARD(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream s), copy3d(p, s, true))
FK_FORWARD(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *p, CUstream s), copy3d(p, s, true))

COPY3D(copy3d_peer, CUDA_MEMCPY3D_PEER)

FK_FORWARD(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *p), copy3d_peer(p, NULL, false))
FK_FORWARD(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *p), copy3d_peer(p, NULL, false))
FK_FORWARD(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *p, CUstream s), copy3d_peer(p, s, true))
FK_FORWARD(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *p, CUstream s), copy3d_peer(p, s, true))

/* ---- memsets: `n` elements of `size` bytes, `height` rows `pitch` apart ---- */

static CUresult memset_range(CUdeviceptr p, size_t pitch, size_t size, size_t n, size_t height)
{
    struct side d = device_side(p);
    d.pitch = pitch;
    if (n == 0 || height == 0)
        return CUDA_SUCCESS;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    if (rc == CUDA_SUCCESS)
        rc = side_check(&d, n * size, height, 1);
    fk_unlock();
    return rc;
}

struct memset_args {
    CUdeviceptr p;
    size_t pitch, size, n, height;
};

static CUresult memset_args(void *arg)
{
    struct memset_args *a = arg;
    return memset_range(a->p, a->pitch, a->size, a->n, a->height);
}

static CUresult memset_on(CUstream s, CUdeviceptr p, size_t pitch, size_t size, size_t n, size_t height)
{
    struct memset_args a = { p, pitch, size, n, height };
    return stream_checked(s, memset_args, &a);
}

FK_FORWARD(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), memset_range(d, 0, 1, n, 1))
FK_FORWARD(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), memset_range(d, 0, 1, n, 1))
FK_FORWARD(cuMemsetD16_v2, (CUdeviceptr d, unsigned short v, size_t n), memset_range(d, 0, 2, n, 1))
FK_FORWARD(cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n), memset_range(d, 0, 2, n, 1))
FK_FORWARD(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), memset_range(d, 0, 4, n, 1))
FK_FORWARD(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), memset_range(d, 0, 4, n, 1))
FK_FORWARD(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), memset_on(s, d, 0, 1, n, 1))
FK_FORWARD(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), memset_on(s, d, 0, 1, n, 1))
FK_FORWARD(cuMemsetD16Async, (CUdeviceptr d, unsigned short v, size_t n, CUstream s), memset_on(s, d, 0, 2, n, 1))
FK_FORWARD(cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream s), memset_on(s, d, 0, 2, n, 1))
FK_FORWARD(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream s), memset_on(s, d, 0, 4, n, 1))
FK_FORWARD(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream s), memset_on(s, d, 0, 4, n, 1))
FK_FORWARD(cuMemsetD2D8_v2, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
           memset_range(d, pitch, 1, w, h))
FK_FORWARD(cuMemsetD2D8_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
           memset_range(d, pitch, 1, w, h))
FK_FORWARD(cuMemsetD2D8Async, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
           memset_on(s, d, pitch, 1, w, h))
FK_FORWARD(cuMemsetD2D8Async_ptsz, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
           memset_on(s, d, pitch, 1, w, h))
