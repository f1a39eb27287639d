/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctor_user.c: a library that uses the driver from its constructor and from an atexit handler, as
 * some libraries do: gpucap's hooks must work before its own constructor has run and after its
 * destructor. The results are left in ctor_result for the test program to read.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

int ctor_result[3] = {-1, -1, -1};

static void at_exit(void)
{
    /* After every destructor: whatever happens, no crash, and the driver's answer. */
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, 1 << 20);
    if (rc == CUDA_SUCCESS)
        rc = cuMemFree_v2(p);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY)
        fprintf(stderr, "ctor_user: cuMemAlloc_v2 at exit returned %d\n", (int)rc);
}

__attribute__((constructor)) static void early(void)
{
    CUdevice d;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
        return;
    /* GPUCAP_MEMORY_LIMIT is 64MiB in this test: 32 MiB fits, 128 MiB does not. */
    ctor_result[0] = cuMemAlloc_v2(&p, 32 << 20);
    ctor_result[1] = cuMemAlloc_v2(&p, 128 << 20);
    size_t free_b = 0, total = 0;
    cuMemGetInfo_v2(&free_b, &total);
    ctor_result[2] = (int)(total >> 20);
    atexit(at_exit);
}
