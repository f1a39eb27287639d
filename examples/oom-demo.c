/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oom-demo: allocate device memory in 256 MiB steps until the driver says out of memory, the way
 * a job meets its cap. Run it under gpucap:
 *
 *   GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD=libgpucap.so oom-demo
 *
 * It prints what cuMemGetInfo reports (the budget, under gpucap), each allocation, the
 * CUDA_ERROR_OUT_OF_MEMORY that ends the loop, and the figures again after freeing everything.
 * Uses only the driver API; links libcuda.so.1 (the real driver, or the test suite's fake).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define STEP (256ULL << 20)
#define MAX_CHUNKS 4096

static void say_info(const char *when)
{
    size_t free_b = 0, total = 0;
    CUresult rc = cuMemGetInfo_v2(&free_b, &total);
    if (rc == CUDA_SUCCESS)
        printf("%-22s free %8.1f MiB of %8.1f MiB\n", when, free_b / 1048576.0, total / 1048576.0);
    else
        printf("%-22s cuMemGetInfo failed: %d\n", when, (int)rc);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    char name[128] = "";
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with gpucap's on stderr */
    CUresult rc = cuInit(0);
    if (rc == CUDA_SUCCESS)
        rc = cuDeviceGet(&dev, 0);
    if (rc == CUDA_SUCCESS)
        rc = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (rc == CUDA_SUCCESS)
        rc = cuCtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "oom-demo: no usable CUDA device (CUresult %d)\n", (int)rc);
        return 1;
    }
    cuDeviceGetName(name, sizeof name, dev);
    printf("device 0: %s\n", name);
    say_info("at start:");

    static CUdeviceptr chunks[MAX_CHUNKS];
    int n = 0;
    for (; n < MAX_CHUNKS; n++) {
        rc = cuMemAlloc_v2(&chunks[n], STEP);
        if (rc != CUDA_SUCCESS)
            break;
        printf("allocated %4d x 256 MiB = %6.2f GiB\n", n + 1, (n + 1) * 0.25);
    }
    printf("allocation %d answered %s (%d)\n", n + 1,
           rc == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "an error", (int)rc);
    say_info("at the limit:");
    for (int i = 0; i < n; i++)
        cuMemFree_v2(chunks[i]);
    say_info("after freeing:");
    cuDevicePrimaryCtxRelease_v2(dev);
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
