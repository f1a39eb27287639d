/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probe_budget.c DEVICE BYTES: prints what a program sees on DEVICE under the current settings:
 * "total=<cuDeviceTotalMem_v2> info_total=<cuMemGetInfo_v2 total> free=<free> alloc=<CUresult of
 * allocating BYTES>". Used by the shell tests.
 */
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int dev = atoi(argv[1]);
    unsigned long long bytes = strtoull(argv[2], NULL, 10);
    make_context(dev);
    size_t total = 0, info_free = 0, info_total = 0;
    cuDeviceTotalMem_v2(&total, dev);
    cuMemGetInfo_v2(&info_free, &info_total);
    CUdeviceptr p = 0;
    CUresult rc = cuMemAlloc_v2(&p, bytes);
    printf("total=%zu info_total=%zu free=%zu alloc=%d\n", total, info_total, info_free, (int)rc);
    if (rc == CUDA_SUCCESS)
        cuMemFree_v2(p);
    return 0;
}
