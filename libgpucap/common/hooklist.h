/* SPDX-License-Identifier: Apache-2.0 */
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
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, PFN_cuGetProcAddress_v12000)                  \
    X(cuArrayCreate, cuArrayCreate, 2000, 0, PFN_cuArrayCreate_v2000)                                 \
    X(cuArrayCreate_v2, cuArrayCreate, 3020, 0, PFN_cuArrayCreate_v3020)                              \
    X(cuArray3DCreate, cuArray3DCreate, 2000, 0, PFN_cuArray3DCreate_v2000)                           \
    X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0, PFN_cuArray3DCreate_v3020)                        \
    X(cuArrayDestroy, cuArrayDestroy, 2000, 0, PFN_cuArrayDestroy_v2000)                              \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0, PFN_cuMipmappedArrayCreate_v5000)      \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0, PFN_cuMipmappedArrayDestroy_v5000)   \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0,                                 \
      PFN_cuDeviceGetDefaultMemPool_v11020)                                                           \
    X(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool, 13000, 0, PFN_cuMemGetDefaultMemPool_v13000)    \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0, PFN_cuDeviceGetMemPool_v11020)                \
    X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0, PFN_cuMemPoolCreate_v11020)                         \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0, PFN_cuMemPoolDestroy_v11020)                      \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0, PFN_cuMemPoolTrimTo_v11020)                         \
    X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0, PFN_cuStreamSynchronize_v2000)               \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, 1, PFN_cuStreamSynchronize_v7000_ptsz)     \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0, PFN_cuCtxSynchronize_v2000)                        \
    X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, 0, PFN_cuCtxSynchronize_v13000)                   \
    X(cuEventSynchronize, cuEventSynchronize, 2000, 0, PFN_cuEventSynchronize_v2000)                  \
    X(cuGraphInstantiate, cuGraphInstantiate, 10000, 0, PFN_cuGraphInstantiate_v10000)                \
    X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0, PFN_cuGraphInstantiate_v11000)             \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0,                             \
      PFN_cuGraphInstantiateWithFlags_v11040)                                                         \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0,                           \
      PFN_cuGraphInstantiateWithParams_v12000)                                                        \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 1,                      \
      PFN_cuGraphInstantiateWithParams_v12000_ptsz)                                                   \
    X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0, PFN_cuGraphExecDestroy_v10000)                \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0, PFN_cuGraphLaunch_v10000)                               \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1, PFN_cuGraphLaunch_v10000_ptsz)                     \
    X(cuGraphUpload, cuGraphUpload, 11010, 0, PFN_cuGraphUpload_v11010)                               \
    X(cuGraphUpload_ptsz, cuGraphUpload, 11010, 1, PFN_cuGraphUpload_v11010_ptsz)                     \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0, PFN_cuDeviceGraphMemTrim_v11040)          \
    X(cuCtxCreate, cuCtxCreate, 2000, 0, PFN_cuCtxCreate_v2000)                                       \
    X(cuCtxCreate_v2, cuCtxCreate, 3020, 0, PFN_cuCtxCreate_v3020)                                    \
    X(cuCtxCreate_v3, cuCtxCreate, 11040, 0, PFN_cuCtxCreate_v11040)                                  \
    X(cuCtxCreate_v4, cuCtxCreate, 12050, 0, PFN_cuCtxCreate_v12050)                                  \
    X(cuCtxDestroy, cuCtxDestroy, 2000, 0, PFN_cuCtxDestroy_v2000)                                    \
    X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0, PFN_cuCtxDestroy_v4000)                                 \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0, PFN_cuDevicePrimaryCtxRetain_v7000) \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0, PFN_cuDevicePrimaryCtxRelease_v7000) \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0,                              \
      PFN_cuDevicePrimaryCtxRelease_v11000)                                                           \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0, PFN_cuDevicePrimaryCtxReset_v7000)   \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0, PFN_cuDevicePrimaryCtxReset_v11000) \
    X(cuGreenCtxCreate, cuGreenCtxCreate, 12040, 0, PFN_cuGreenCtxCreate_v12040)                      \
    X(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, 0, PFN_cuGreenCtxDestroy_v12040)                  \
    X(cuCtxSetLimit, cuCtxSetLimit, 3010, 0, PFN_cuCtxSetLimit_v3010)

/* Entry points gpucap calls itself but does not interpose: X(export, pfn_type). */
#define GPC_REAL_ONLY(X)                                  \
    X(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000)           \
    X(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)         \
    X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)       \
    X(cuDeviceGetUuid_v2, PFN_cuDeviceGetUuid_v11040)     \
    X(cuInit, PFN_cuInit_v2000)                           \
    X(cuArrayGetMemoryRequirements, PFN_cuArrayGetMemoryRequirements_v11060) \
    X(cuMipmappedArrayGetMemoryRequirements, PFN_cuMipmappedArrayGetMemoryRequirements_v11060) \
    X(cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020) \
    X(cuDeviceGetGraphMemAttribute, PFN_cuDeviceGetGraphMemAttribute_v11040) \
    X(cuGraphGetNodes, PFN_cuGraphGetNodes_v10000)         \
    X(cuGraphNodeGetType, PFN_cuGraphNodeGetType_v10000)   \
    X(cuGraphMemAllocNodeGetParams, PFN_cuGraphMemAllocNodeGetParams_v11040)

/*
 * NVML entry points gpucap interposes, X(export, pfn_type). Exported and reached by the dlsym
 * redirect on a libnvidia-ml handle, never through cuGetProcAddress; the real functions are
 * looked up lazily in an already loaded libnvidia-ml.so.1 (driver/nvml.c).
 */
#define GPC_NVML_HOOKS(X)                                        \
    X(nvmlDeviceGetMemoryInfo, gpc_nvmlDeviceGetMemoryInfo_fn)   \
    X(nvmlDeviceGetMemoryInfo_v2, gpc_nvmlDeviceGetMemoryInfo_v2_fn)

#endif
