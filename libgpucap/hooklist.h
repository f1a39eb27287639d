/*
 * hooklist.h: the one table of driver entry points that gpucap interposes.
 *
 * Every other place that needs "the hooked names" expands this list: the table of real entry
 * points (resolve.c), the dlsym redirect and the cuGetProcAddress mapping (procaddr.c). The version
 * script (libgpucap.map) must list the same exports; a test compares `nm -D` with both.
 *
 * X(export, base, version, per_thread, pfn_type)
 *   export      exact exported ABI name, also the C name of our hook
 *   base        the name cuGetProcAddress is asked for
 *   version     the CUDA version (1000*major + 10*minor) that introduced this variant
 *   per_thread  1 for the _ptsz/_ptds variant picked by CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 *   pfn_type    the cudaTypedefs.h pointer type of that variant
 */
#ifndef GPUCAP_HOOKLIST_H
#define GPUCAP_HOOKLIST_H

#define GPC_HOOKS(X)                                                                                  \
    X(cuMemAlloc, cuMemAlloc, 2000, 0, PFN_cuMemAlloc_v2000)                                          \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, 0, PFN_cuMemAlloc_v3020)                                       \
    X(cuMemFree, cuMemFree, 2000, 0, PFN_cuMemFree_v2000)                                             \
    X(cuMemFree_v2, cuMemFree, 3020, 0, PFN_cuMemFree_v3020)                                          \
    X(cuMemAllocPitch, cuMemAllocPitch, 2000, 0, PFN_cuMemAllocPitch_v2000)                           \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0, PFN_cuMemAllocPitch_v3020)                        \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0, PFN_cuMemAllocManaged_v6000)                     \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0, PFN_cuMemAllocAsync_v11020)                         \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1, PFN_cuMemAllocAsync_v11020_ptsz)               \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0, PFN_cuMemAllocFromPoolAsync_v11020) \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1,                                \
      PFN_cuMemAllocFromPoolAsync_v11020_ptsz)                                                        \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0, PFN_cuMemFreeAsync_v11020)                            \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1, PFN_cuMemFreeAsync_v11020_ptsz)                  \
    X(cuMemCreate, cuMemCreate, 10020, 0, PFN_cuMemCreate_v10020)                                     \
    X(cuMemRelease, cuMemRelease, 10020, 0, PFN_cuMemRelease_v10020)                                  \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0,                             \
      PFN_cuMemRetainAllocationHandle_v11000)                                                         \
    X(cuMemMap, cuMemMap, 10020, 0, PFN_cuMemMap_v10020)                                              \
    X(cuMemUnmap, cuMemUnmap, 10020, 0, PFN_cuMemUnmap_v10020)                                        \
    X(cuMemGetInfo, cuMemGetInfo, 2000, 0, PFN_cuMemGetInfo_v2000)                                    \
    X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, PFN_cuMemGetInfo_v3020)                                 \
    X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0, PFN_cuDeviceTotalMem_v2000)                        \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0, PFN_cuDeviceTotalMem_v3020)                     \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0, PFN_cuGetProcAddress_v11030)                      \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, PFN_cuGetProcAddress_v12000)

/* Entry points gpucap calls itself but does not interpose: X(export, pfn_type). */
#define GPC_REAL_ONLY(X)                                  \
    X(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000)           \
    X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)       \
    X(cuDeviceGetUuid_v2, PFN_cuDeviceGetUuid_v11040)

#endif
