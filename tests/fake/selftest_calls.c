/* SPDX-License-Identifier: Apache-2.0 */
/*
 * selftest_calls.c: the fake driver's cases for the calls the CUDA runtime and the frameworks make:
 * module and library loads on the record (and in NVML's per-process figure), streams, events,
 * copies, host registration, IPC and shareable handles, error strings, each remaining family once,
 * the NVML additions, every row resolving to itself, and the list of exported names against the
 * entry rows (case "rows", fed `nm -D` on stdin).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakecuda.h"
#include "fakenvml.h"
#include "selftest.h"

/* ---- module and library loads on the record ---- */

static uint64_t my_bytes(int phys)
{
    struct fakecuda_process p[8];
    int n = fakecuda_processes(phys, p, 8);
    for (int i = 0; i < n && i < 8; i++)
        if (p[i].pid == (unsigned)getpid())
            return p[i].bytes;
    return 0;
}

static void t_modules(void)
{
    const uint64_t M = 8 * MiB;
    static const char image[] = "an image of no form the fake reads: code for every architecture";
    CUmodule m, m2;
    OK(cuInit(0));
    IS(cuModuleLoadData(&m, image), CUDA_ERROR_INVALID_CONTEXT);
    /* A library needs no context: it is loaded into one when it is first used there. */
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    OK(cuLibraryGetKernel(&k, lib, "kernel_a"));
    EQ(fakecuda_outstanding(0), 0);
    init_primary(0);
    OK(cuModuleLoadData(&m, image));
    EQ(fakecuda_outstanding(0), M);
    EQ(my_bytes(0), M);
    OK(cuModuleLoadDataEx(&m2, image, 0, NULL, NULL));
    EQ(fakecuda_outstanding(0), 2 * M);
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "kernel_b"));
    int v = 0;
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    EQ(v, 1024);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    EQ(v, 90); /* the device's compute capability */
    OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    EQ(v, 100000);
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    IS(cuLaunchKernel((CUfunction)&v, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    IS(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)&v, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    EQ(fakecuda_calls("cuLaunchKernel"), 3);
    /* The library's first use in this context loads it here: charged once. */
    CUfunction kf;
    OK(cuKernelGetFunction(&kf, k));
    EQ(fakecuda_outstanding(0), 3 * M);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CUmodule lm;
    OK(cuLibraryGetModule(&lm, lib));
    EQ(fakecuda_outstanding(0), 3 * M);
    /* A __device__ variable: device memory of the load, copyable, not freeable. */
    CUdeviceptr g;
    size_t gsize;
    OK(cuModuleGetGlobal_v2(&g, &gsize, m, "counter"));
    CHECK(g != 0 && gsize >= 256);
    int host = 7;
    OK(cuMemcpyHtoD_v2(g, &host, sizeof host));
    OK(cuMemcpyDtoH_v2(&host, g, sizeof host));
    EQ(host, 0);
    IS(cuMemFree_v2(g), CUDA_ERROR_INVALID_VALUE);
    EQ(fakecuda_outstanding(0), 3 * M);
    /* The runtime's own registration (CUDART_INTERFACE slot 6) is a load like cuModuleLoadData. */
    unsigned char uuid[16];
    int slots;
    const void *const *rt = fakecuda_table("CUDART_INTERFACE", uuid, &slots);
    CUmodule rm;
    OK(((CUresult(*)(CUmodule *, const void *, void *, void *, unsigned))rt[6])(&rm, image, NULL, NULL, 0));
    EQ(fakecuda_outstanding(0), 4 * M);
    OK(cuModuleUnload(m2));
    EQ(fakecuda_outstanding(0), 3 * M);
    IS(cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
    /* What a context's modules took goes with it; a library is loaded again where used next. */
    OK(cuDevicePrimaryCtxReset_v2(0));
    EQ(fakecuda_outstanding(0), 0);
    init_primary(0);
    OK(cuKernelGetFunction(&kf, k));
    EQ(fakecuda_outstanding(0), M);
    OK(cuLibraryUnload(lib));
    EQ(fakecuda_outstanding(0), 0);
    IS(cuKernelGetFunction(&kf, k), CUDA_ERROR_INVALID_HANDLE);
    /* A load that does not fit is refused, as a full card refuses it. */
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 60 * MiB));
    IS(cuModuleLoadData(&m, image), CUDA_ERROR_OUT_OF_MEMORY);
    EQ(fakecuda_outstanding(0), 60 * MiB);
}

/* ---- what code an image holds, and which of it a device runs ---- */

/* A fat binary of `n` entries (kind 1 PTX, 2 cubin; architecture), without payloads. */
static size_t make_fatbin(unsigned char *buf, int n, const int *kinds, const int *archs)
{
    memset(buf, 0, 16 + 64 * (size_t)n);
    uint32_t magic = 0xba55ed50u, arch, head = 64;
    uint16_t version = 1, hsize = 16, kind, ev = 0x101;
    uint64_t size = 64 * (uint64_t)n;
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &version, 2);
    memcpy(buf + 6, &hsize, 2);
    memcpy(buf + 8, &size, 8);
    for (int i = 0; i < n; i++) {
        unsigned char *e = buf + 16 + 64 * i;
        kind = (uint16_t)kinds[i];
        arch = (uint32_t)archs[i];
        memcpy(e, &kind, 2);
        memcpy(e + 2, &ev, 2);
        memcpy(e + 4, &head, 4);
        memcpy(e + 28, &arch, 4);
    }
    return 16 + 64 * (size_t)n;
}

/* A CUDA ELF header of ELF ABI version `abi` with e_flags `flags`. */
static void make_elf(unsigned char *buf, int abi, uint32_t flags)
{
    memset(buf, 0, 64);
    memcpy(buf, "\x7f" "ELF", 4);
    buf[4] = 2;
    buf[5] = 1;
    buf[7] = abi >= 8 ? 0x41 : 0x33;
    buf[8] = (unsigned char)abi;
    uint16_t machine = 190;
    memcpy(buf + 18, &machine, 2);
    memcpy(buf + 48, &flags, 4);
}

/* The binary and PTX versions the current context's device runs of `image`'s function "k" (a
 * module loaded there and unloaded), or the load's error. */
static CUresult versions(const void *image, int *binary, int *ptx)
{
    CUmodule m;
    CUresult rc = cuModuleLoadData(&m, image);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "k"));
    OK(cuFuncGetAttribute(binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    OK(cuFuncGetAttribute(ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    OK(cuModuleUnload(m));
    return CUDA_SUCCESS;
}

/* Device 0 is an L4 (8.9), device 1 a T4 (7.5). */
static void t_images(void)
{
    static unsigned char fat[16 + 64 * 8], hopper[16 + 64], ptx80[16 + 64], elf[64];
    static const int kinds[] = { 2, 2, 2, 2, 2, 2 }, archs[] = { 75, 80, 86, 90, 100, 120 };
    make_fatbin(fat, 6, kinds, archs);
    make_fatbin(hopper, 1, kinds, (const int[]){ 90 });
    make_fatbin(ptx80, 1, (const int[]){ 1 }, (const int[]){ 80 });
    int b = 0, p = 0;
    CUcontext t4;
    init_primary(0);
    /* The L4 runs a cubin of its major revision and the highest minor one below its own: sm_86. */
    OK(versions(fat, &b, &p));
    CHECK(b == 86 && p == 86);
    /* The runtime's wrapper (version 1) around the same fat binary. */
    struct {
        uint32_t magic, version;
        const void *data, *rest;
    } wrapper = { 0x466243b1u, 1, fat, NULL };
    OK(versions(&wrapper, &b, &p));
    CHECK(b == 86 && p == 86);
    /* PTX only: compiled for the device at the load. */
    OK(versions(ptx80, &b, &p));
    CHECK(b == 89 && p == 80);
    OK(versions(".version 9.0\n.target sm_75\n.address_size 64\n", &b, &p));
    CHECK(b == 89 && p == 75);
    IS(versions(".version 9.0\n.target sm_90\n", &b, &p), CUDA_ERROR_NO_BINARY_FOR_GPU);
    /* A Hopper-only fat binary, an sm_90 cubin: no code the L4 runs. */
    IS(versions(hopper, &b, &p), CUDA_ERROR_NO_BINARY_FOR_GPU);
    make_elf(elf, 8, 0x6005a04); /* what nvcc 13 writes for sm_90 */
    IS(versions(elf, &b, &p), CUDA_ERROR_NO_BINARY_FOR_GPU);
    make_elf(elf, 8, 0x6005904); /* sm_89 */
    OK(versions(elf, &b, &p));
    CHECK(b == 89 && p == 89);
    make_elf(elf, 7, 0x500550); /* ABI 7 (cuBLAS 13's cubins): sm_80 from compute_80 */
    OK(versions(elf, &b, &p));
    CHECK(b == 80 && p == 80);
    /* An image of no form the fake reads holds code for every architecture. */
    OK(versions("an image of no known form", &b, &p));
    CHECK(b == 89 && p == 89);
    EQ(fakecuda_outstanding(0), 0);
    /* A library with no code for the device loads (it needs no context) and is refused where used. */
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    OK(cuLibraryLoadData(&lib, hopper, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "k"));
    IS(cuKernelGetFunction(&f, k), CUDA_ERROR_NO_BINARY_FOR_GPU);
    IS(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CUmodule lm;
    IS(cuLibraryGetModule(&lm, lib), CUDA_ERROR_NO_BINARY_FOR_GPU);
    IS(cuKernelGetAttribute(&b, CU_FUNC_ATTRIBUTE_BINARY_VERSION, k, 0), CUDA_ERROR_NO_BINARY_FOR_GPU);
    OK(cuLibraryUnload(lib));
    /* Per device: the same library's kernel is sm_86 code on the L4, sm_75 on the T4. */
    OK(cuLibraryLoadData(&lib, fat, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "k"));
    OK(cuKernelGetAttribute(&b, CU_FUNC_ATTRIBUTE_BINARY_VERSION, k, 0));
    EQ(b, 86);
    OK(cuKernelGetAttribute(&b, CU_FUNC_ATTRIBUTE_BINARY_VERSION, k, 1));
    EQ(b, 75);
    OK(cuCtxCreate_v2(&t4, 0, 1));
    OK(cuKernelGetFunction(&f, k));
    OK(cuFuncGetAttribute(&p, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    EQ(p, 75);
    OK(cuLibraryUnload(lib));
    OK(cuCtxDestroy_v2(t4));
}

/* FAKECUDA_MODULE_BYTES's figure is the process's in the fake NVML. */
static void t_modules_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    CHECK(lib != NULL);
    nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(lib, "nvmlInit_v2");
    nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) = (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(lib,
                                                                        "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *) =
        (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *))dlsym(lib,
                                                                          "nvmlDeviceGetComputeRunningProcesses_v3");
    CHECK(init && get && procs);
    IS(init(), NVML_SUCCESS);
    nvmlDevice_t d;
    IS(get(0, &d), NVML_SUCCESS);
    init_primary(0);
    CUmodule m;
    OK(cuModuleLoadData(&m, "image"));
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, MiB));
    nvmlProcessInfo_t pi[4];
    unsigned n = 4;
    IS(procs(d, &n, pi), NVML_SUCCESS);
    CHECK(n == 1 && pi[0].pid == (unsigned)getpid());
    EQ(pi[0].usedGpuMemory, 32 * MiB + 5 * MiB + MiB); /* context, module, allocation */
    OK(cuModuleUnload(m));
    n = 4;
    IS(procs(d, &n, pi), NVML_SUCCESS);
    EQ(pi[0].usedGpuMemory, 32 * MiB + MiB);
}

/* ---- streams and events ---- */

static int host_fn_runs;
static void host_fn(void *arg)
{
    host_fn_runs += *(int *)arg;
}

static void t_streams(void)
{
    init_primary(0);
    int least, greatest;
    OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CHECK(least == 0 && greatest == -5);
    CUstream s;
    OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -10));
    int prio;
    unsigned flags;
    OK(cuStreamGetPriority(s, &prio));
    EQ(prio, -5); /* clamped, as the driver does */
    OK(cuStreamGetFlags(s, &flags));
    EQ(flags, CU_STREAM_NON_BLOCKING);
    CUcontext c, cur;
    OK(cuStreamGetCtx(s, &c));
    OK(cuCtxGetCurrent(&cur));
    CHECK(c == cur);
    CUdevice dev = -1;
    OK(cuStreamGetDevice(s, &dev));
    EQ(dev, 0);
    unsigned long long id1, id2;
    OK(cuStreamGetId(s, &id1));
    OK(cuStreamGetId(NULL, &id2));
    CHECK(id1 != id2);
    OK(cuStreamQuery(s));
    int add = 3;
    OK(cuLaunchHostFunc(s, host_fn, &add));
    EQ(host_fn_runs, 3);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(s, &st));
    EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CUevent a, b, nt;
    OK(cuEventCreate(&a, 0));
    OK(cuEventCreate(&b, 0));
    OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    float ms = -1;
    IS(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
    OK(cuEventRecord(a, s));
    usleep(2000);
    OK(cuEventRecordWithFlags(b, s, 0));
    OK(cuEventElapsedTime_v2(&ms, a, b));
    CHECK(ms >= 1.0f && ms < 10000.0f);
    OK(cuEventRecord(nt, s));
    IS(cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);
    OK(cuEventQuery(a));
    OK(cuStreamWaitEvent(s, a, 0));
    IS(cuStreamWaitEvent(s, (CUevent)&add, 0), CUDA_ERROR_INVALID_HANDLE);
    /* Stream memory operations write host memory the driver knows; waits are met at once. */
    uint32_t *flag;
    OK(cuMemAllocHost_v2((void **)&flag, 64));
    *flag = 0;
    OK(cuStreamWriteValue32_v2(s, (CUdeviceptr)(uintptr_t)flag, 42, 0));
    EQ(*flag, 42);
    OK(cuStreamWaitValue32_v2(s, (CUdeviceptr)(uintptr_t)flag, 42, CU_STREAM_WAIT_VALUE_EQ));
    IS(cuStreamWriteValue32_v2(s, 12345, 1, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy_v2(s));
    IS(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}

/* ---- copies and memsets ---- */

static void t_copies(void)
{
    unsigned char buf[64], src[64];
    CUdeviceptr p;
    OK(cuInit(0));
    IS(cuMemcpyHtoD_v2(1 << 20, src, 8), CUDA_ERROR_INVALID_CONTEXT);
    init_primary(0);
    OK(cuMemAlloc_v2(&p, 4096));
    memset(buf, 0xaa, sizeof buf);
    memset(src, 0x55, sizeof src);
    OK(cuMemcpyHtoD_v2(p, src, sizeof src));
    OK(cuMemcpyDtoH_v2(buf, p, 16));
    CHECK(buf[0] == 0 && buf[15] == 0 && buf[16] == 0xaa); /* device contents read as zeros */
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)buf, (CUdeviceptr)(uintptr_t)src, 32)); /* host to host: copied */
    CHECK(buf[0] == 0x55 && buf[31] == 0x55 && buf[32] == 0xaa);
    OK(cuMemcpyDtoD_v2(p + 1024, p, 1024));
    OK(cuMemcpyDtoHAsync_v2(buf, p, 4, NULL));
    EQ(buf[0], 0);
    IS(cuMemcpyHtoD_v2(p + 4000, src, 200), CUDA_ERROR_INVALID_VALUE); /* past the allocation */
    IS(cuMemcpyHtoD_v2(0x7777000000ull, src, 8), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemcpyHtoDAsync_v2(p, src, 8, (CUstream)buf), CUDA_ERROR_INVALID_HANDLE);
    /* 2D: each row of the host destination gets zeros, the pitch between them untouched. */
    memset(buf, 0xaa, sizeof buf);
    CUDA_MEMCPY2D c2 = { 0 };
    c2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.srcDevice = p;
    c2.srcPitch = 512;
    c2.dstMemoryType = CU_MEMORYTYPE_HOST;
    c2.dstHost = buf;
    c2.dstPitch = 16;
    c2.WidthInBytes = 8;
    c2.Height = 3;
    OK(cuMemcpy2D_v2(&c2));
    CHECK(buf[0] == 0 && buf[7] == 0 && buf[8] == 0xaa && buf[16] == 0 && buf[39] == 0 && buf[40] == 0xaa);
    c2.Height = 9; /* rows past the allocation */
    IS(cuMemcpy2D_v2(&c2), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD8_v2(p, 1, 4096));
    OK(cuMemsetD32Async(p, 1, 1024, NULL));
    IS(cuMemsetD32_v2(p, 1, 1025), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD2D8_v2(p, 512, 0, 256, 8));
    IS(cuMemsetD2D8_v2(p, 512, 0, 256, 9), CUDA_ERROR_INVALID_VALUE);
    EQ(fakecuda_outstanding(0), 4096);
}

/* ---- host memory the program registers ---- */

static void t_host(void)
{
    init_primary(0);
    size_t n = 1 << 20;
    char *mem = malloc(n);
    CHECK(mem != NULL);
    unsigned type = 0;
    IS(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)mem),
       CUDA_ERROR_INVALID_VALUE);
    OK(cuMemHostRegister_v2(mem, n, CU_MEMHOSTREGISTER_PORTABLE));
    IS(cuMemHostRegister_v2(mem + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)(mem + 100)));
    EQ(type, CU_MEMORYTYPE_HOST);
    CUdeviceptr dp;
    OK(cuMemHostGetDevicePointer_v2(&dp, mem, 0));
    EQ(dp == (CUdeviceptr)(uintptr_t)mem, 1);
    unsigned flags = 0;
    OK(cuMemHostGetFlags(&flags, mem));
    EQ(flags, CU_MEMHOSTREGISTER_PORTABLE);
    /* Several attributes at once: a pointer the driver does not know is no error there. */
    CUpointer_attribute attrs[2] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
    unsigned mt = 9;
    int ord = 9;
    void *data[2] = { &mt, &ord };
    OK(cuPointerGetAttributes(2, attrs, data, 12345));
    CHECK(mt == 0 && ord == -2);
    OK(cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)mem));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    OK(cuMemcpyDtoH_v2(mem, dp, 16)); /* a registered buffer by its device address: host to host */
    EQ(fakecuda_outstanding(0), 0);    /* host memory is never on the card */
    OK(cuMemHostUnregister(mem));
    IS(cuMemHostUnregister(mem), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    IS(cuMemFreeHost(mem), CUDA_ERROR_INVALID_VALUE);
    free(mem);
}

/* ---- IPC and shareable handles: the importer holds nothing on the record ---- */

static void t_ipc(void)
{
    init_primary(0);
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 16 * MiB));
    CUipcMemHandle h;
    OK(cuIpcGetMemHandle(&h, p));
    IS(cuIpcGetMemHandle(&h, 12345), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr q;
    IS(cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE); /* same process */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CUdeviceptr r;
        unsigned char b[8];
        if (cuIpcOpenMemHandle_v2(&r, h, 0) != CUDA_SUCCESS || cuMemcpyDtoH_v2(b, r, 8) != CUDA_SUCCESS)
            _exit(3);
        if (my_bytes(0) != 0 || fakecuda_outstanding(0) != 16 * MiB)
            _exit(4);
        if (cuMemFree_v2(r) != CUDA_ERROR_INVALID_VALUE || cuIpcCloseMemHandle(r) != CUDA_SUCCESS ||
            cuIpcCloseMemHandle(r) != CUDA_ERROR_INVALID_VALUE)
            _exit(5);
        _exit(0);
    }
    int st = wait_child(pid);
    CHECK(WIFEXITED(st));
    EQ(WEXITSTATUS(st), 0);
    EQ(fakecuda_outstanding(0), 16 * MiB);
}

static void t_share(void)
{
    init_primary(0);
    CUmemAllocationProp prop = pinned_prop(0);
    CUmemGenericAllocationHandle h, plain;
    OK(cuMemCreate(&plain, 4 * MiB, &prop, 0));
    int fd = -1;
    IS(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       CUDA_ERROR_INVALID_VALUE); /* not made shareable */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(cuMemCreate(&h, 8 * MiB, &prop, 0));
    IS(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0);
    EQ(fakecuda_outstanding(0), 12 * MiB);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CUmemGenericAllocationHandle imp;
        CUdeviceptr va;
        CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        if (cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
            cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0) || cuMemMap(va, 8 * MiB, 0, imp, 0) ||
            cuMemSetAccess(va, 8 * MiB, &acc, 1))
            _exit(3);
        if (my_bytes(0) != 0 || fakecuda_outstanding(0) != 12 * MiB)
            _exit(4);
        if (cuMemUnmap(va, 8 * MiB) || cuMemRelease(imp) || my_bytes(0) != 0)
            _exit(5);
        _exit(0);
    }
    int st = wait_child(pid);
    CHECK(WIFEXITED(st));
    EQ(WEXITSTATUS(st), 0);
    int bad = open("/dev/null", 0);
    CUmemGenericAllocationHandle x;
    IS(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)bad, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       CUDA_ERROR_INVALID_VALUE);
    close(bad);
    close(fd);
}

/* ---- error strings: before cuInit too ---- */

static void t_errors(void)
{
    const char *s = NULL;
    OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "out of memory") == 0);
    OK(cuGetErrorName(CUDA_ERROR_NOT_FOUND, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_NOT_FOUND") == 0);
    IS(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(s == NULL);
    IS(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
    EQ(fakecuda_calls("cuGetErrorString"), 2);
}

/* ---- NVML: the profiles' identities, PCI bus ids, the first ABI of the process list ---- */

static void t_nvml_rt(void)
{
    OK(cuInit(0));
    IS(nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t d0, d1, d;
    IS(nvmlDeviceGetHandleByIndex_v2(0, &d0), NVML_SUCCESS);
    IS(nvmlDeviceGetHandleByIndex_v2(1, &d1), NVML_SUCCESS);
    char name[NVML_DEVICE_NAME_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    IS(nvmlDeviceGetName(d0, name, sizeof name), NVML_SUCCESS);
    CHECK(strcmp(name, "NVIDIA H200") == 0);
    IS(nvmlDeviceGetName(d1, name, sizeof name), NVML_SUCCESS);
    CHECK(strcmp(name, "NVIDIA L4") == 0);
    struct fakecuda_device fd1;
    EQ(fakecuda_device_info(1, &fd1), 0);
    IS(nvmlDeviceGetUUID(d1, uuid, sizeof uuid), NVML_SUCCESS);
    CHECK(strcmp(uuid, fd1.uuid) == 0);
    IS(nvmlDeviceGetHandleByPciBusId_v2(fd1.pci_bus_id, &d), NVML_SUCCESS);
    CHECK(d == d1);
    char lower[32];
    snprintf(lower, sizeof lower, "0000:%02x:00.0", fd1.pci_bus);
    IS(nvmlDeviceGetHandleByPciBusId_v2(lower, &d), NVML_SUCCESS);
    CHECK(d == d1);
    IS(nvmlDeviceGetHandleByPciBusId_v2("0000:99:00.0", &d), NVML_ERROR_NOT_FOUND);
    IS(nvmlDeviceGetHandleByPciBusId_v2("bogus", &d), NVML_ERROR_INVALID_ARGUMENT);
    nvmlPciInfo_t pci;
    IS(nvmlDeviceGetPciInfo_v3(d1, &pci), NVML_SUCCESS);
    CHECK(pci.bus == fd1.pci_bus && pci.pciDeviceId == 0x27b810de && strcmp(pci.busId, fd1.pci_bus_id) == 0);
    int status = -1;
    IS(nvmlDeviceGetP2PStatus(d0, d1, 0, &status), NVML_SUCCESS);
    CHECK(status != 0);
    int type;
    IS(nvmlDeviceGetNvLinkRemoteDeviceType(d0, 0, &type), NVML_ERROR_NOT_SUPPORTED);
    IS(nvmlDeviceGetNvLinkRemotePciInfo_v2(d0, 0, &pci), NVML_ERROR_NOT_SUPPORTED);
    IS(nvmlDeviceGetNvLinkState(d0, 0, &type), NVML_ERROR_NOT_SUPPORTED);
    IS(nvmlDeviceGetGpuFabricInfoV(d0, &pci), NVML_ERROR_NOT_SUPPORTED);
    init_primary(1);
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 3 * MiB));
    nvmlProcessInfo_v1_t v1[4];
    unsigned n = 4;
    IS(nvmlDeviceGetComputeRunningProcesses(d1, &n, v1), NVML_SUCCESS);
    CHECK(n == 1 && v1[0].pid == (unsigned)getpid() && v1[0].usedGpuMemory == 3 * MiB);
    EQ(fakenvml_calls("nvmlDeviceGetHandleByPciBusId_v2"), 4);
    EQ(fakenvml_calls("nvmlDeviceGetComputeRunningProcesses"), 1);
    CHECK(fakenvml_calls("nvmlNoSuchCall") == ~0ull);
}

/* ---- the rest of what the runtime and the frameworks call: each family once, answers checked ---- */

static void log_cb(void *data, CUlogLevel level, char *message, size_t length)
{
    exit(3); /* the fake logs nothing */
}

static void t_misc(void)
{
    init_primary(0);
    CUcontext ctx;
    OK(cuCtxGetCurrent(&ctx));
    /* Context queries and settings. */
    unsigned v = 0;
    unsigned long long id1 = 0, id2 = 0;
    OK(cuCtxGetApiVersion(NULL, &v));
    EQ(v, 3020);
    OK(cuCtxGetId(ctx, &id1));
    OK(cuCtxGetId(NULL, &id2));
    CHECK(id1 == id2 && id1 != 0);
    OK(cuCtxSetFlags(CU_CTX_SCHED_SPIN));
    OK(cuCtxGetFlags(&v));
    EQ(v, CU_CTX_SCHED_SPIN);
    CUfunc_cache cc;
    OK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1));
    OK(cuCtxGetCacheConfig(&cc));
    EQ(cc, CU_FUNC_CACHE_PREFER_L1);
    CUsharedconfig sc;
    OK(cuCtxGetSharedMemConfig(&sc));
    OK(cuCtxResetPersistingL2Cache());
    OK(cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_SCHED_BLOCKING_SYNC));
    int active;
    OK(cuDevicePrimaryCtxGetState(0, &v, &active));
    CHECK(v == CU_CTX_SCHED_BLOCKING_SYNC && active == 1);
    IS(cuDevicePrimaryCtxSetFlags_v2(0, 1u << 30), CUDA_ERROR_INVALID_VALUE);
    /* No peers. */
    int can = 1, p2p = 1;
    OK(cuDeviceCanAccessPeer(&can, 0, 0));
    EQ(can, 0);
    IS(cuDeviceGetP2PAttribute(&p2p, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0), CUDA_ERROR_INVALID_DEVICE);
    IS(cuCtxEnablePeerAccess(ctx, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    IS(cuCtxDisablePeerAccess(ctx), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    OK(cuDeviceGetExecAffinitySupport(&can, CU_EXEC_AFFINITY_TYPE_SM_COUNT, 0));
    EQ(can, 0);
    /* Memory advice, prefetch and range attributes: checked ranges, no effect. */
    CUdeviceptr p;
    OK(cuMemAllocManaged(&p, MiB, CU_MEM_ATTACH_GLOBAL));
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    OK(cuMemAdvise_v2(p, MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, loc));
    OK(cuMemPrefetchAsync_v2(p, MiB, loc, 0, NULL));
    IS(cuMemPrefetchAsync_v2(p, 2 * MiB, loc, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    int where = 7;
    OK(cuMemRangeGetAttribute(&where, sizeof where, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, MiB));
    EQ(where, -1);
    /* Stream attributes and memory operations in a batch. */
    CUstreamAttrValue av;
    OK(cuStreamGetAttribute(NULL, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    OK(cuStreamSetAttribute(NULL, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    uint64_t *word;
    OK(cuMemAllocHost_v2((void **)&word, 64));
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[0].writeValue.address = (CUdeviceptr)(uintptr_t)word;
    ops[0].writeValue.value64 = 99;
    ops[1].operation = CU_STREAM_MEM_OP_BARRIER;
    OK(cuStreamBatchMemOp_v2(NULL, 2, ops, 0));
    EQ(*word, 99);
    OK(cuStreamWriteValue64(NULL, (CUdeviceptr)(uintptr_t)word, 5, 0));
    EQ(*word, 5);
    CUstreamCaptureStatus cs;
    OK(cuStreamGetCaptureInfo_v2(NULL, &cs, NULL, NULL, NULL, NULL));
    EQ(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    /* Pools by location and their access. */
    CUmemoryPool pool, dflt;
    OK(cuMemGetMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
    OK(cuDeviceGetDefaultMemPool(&dflt, 0));
    CHECK(pool == dflt);
    OK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, dflt));
    CUmemAccessDesc acc = { loc, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    OK(cuMemPoolSetAccess(pool, &acc, 1));
    CUmemAccess_flags af;
    OK(cuMemPoolGetAccess(&af, pool, &loc));
    EQ(af, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* JIT linking, tensor maps, occupancy and thread-block clusters. */
    CUlinkState ls;
    void *cubin;
    size_t cubin_size;
    OK(cuLinkCreate_v2(0, NULL, NULL, &ls));
    IS(cuLinkComplete(ls, &cubin, &cubin_size), CUDA_ERROR_INVALID_IMAGE);
    OK(cuLinkAddData_v2(ls, CU_JIT_INPUT_PTX, "ptx", 3, "a.ptx", 0, NULL, NULL));
    OK(cuLinkComplete(ls, &cubin, &cubin_size));
    CUmodule m;
    OK(cuModuleLoadData(&m, cubin));
    OK(cuLinkDestroy(ls));
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "k"));
    int blocks, grid, bs;
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    EQ(blocks, 8);
    OK(cuOccupancyMaxPotentialBlockSize(&grid, &bs, f, NULL, 0, 0));
    CHECK(bs == 1024 && grid > 0);
    CUlaunchAttribute cl;
    memset(&cl, 0, sizeof cl);
    cl.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cl.value.clusterDim.x = 4;
    cl.value.clusterDim.y = cl.value.clusterDim.z = 1;
    CUlaunchConfig cfg = { 4, 1, 1, 128, 1, 1, 0, NULL, &cl, 1 };
    OK(cuOccupancyMaxActiveClusters(&blocks, f, &cfg));
    EQ(blocks, 132 / 4);
    OK(cuOccupancyMaxPotentialClusterSize(&blocks, f, &cfg));
    EQ(blocks, 8);
    OK(cuLaunchKernelEx(&cfg, f, NULL, NULL));
    CUtensorMap tm;
    cuuint64_t dims[2] = { 64, 64 }, strides[1] = { 256 };
    cuuint32_t box[2] = { 16, 16 }, es[2] = { 1, 1 };
    OK(cuTensorMapEncodeTiled(&tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)p, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    OK(cuTensorMapReplaceAddress(&tm, (void *)(uintptr_t)(p + 256)));
    IS(cuTensorMapReplaceAddress(&tm, (void *)(uintptr_t)(p + 1)), CUDA_ERROR_INVALID_VALUE);
    /* What the fake has no hardware for: multicast, SM partitions. Logs: registered, never called. */
    CUmulticastObjectProp mp = { 0 };
    CUmemGenericAllocationHandle mc;
    IS(cuMulticastCreate(&mc, &mp), CUDA_ERROR_NOT_SUPPORTED);
    CUdevResource res;
    OK(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM));
    EQ(res.sm.smCount, 132);
    unsigned groups = 1;
    IS(cuDevSmResourceSplitByCount(NULL, &groups, &res, NULL, 0, 2), CUDA_ERROR_NOT_SUPPORTED);
    /* A context, and a green context, hold their device's SMs (not partitioned); no stream is a green
     * context's. */
    memset(&res, 0, sizeof res);
    OK(cuCtxGetDevResource(NULL, &res, CU_DEV_RESOURCE_TYPE_SM));
    CHECK(res.type == CU_DEV_RESOURCE_TYPE_SM && res.sm.smCount == 132);
    OK(cuCtxGetDevResource(ctx, &res, CU_DEV_RESOURCE_TYPE_SM));
    IS(cuCtxGetDevResource(ctx, &res, (CUdevResourceType)99), CUDA_ERROR_INVALID_VALUE);
    IS(cuCtxGetDevResource((CUcontext)&res, &res, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_CONTEXT);
    CUgreenCtx gc, none = (CUgreenCtx)&res;
    OK(cuGreenCtxCreate(&gc, NULL, 0, 0));
    memset(&res, 0, sizeof res);
    OK(cuGreenCtxGetDevResource(gc, &res, CU_DEV_RESOURCE_TYPE_SM));
    CHECK(res.type == CU_DEV_RESOURCE_TYPE_SM && res.sm.smCount == 132);
    IS(cuGreenCtxGetDevResource(gc, NULL, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_VALUE);
    IS(cuGreenCtxGetDevResource((CUgreenCtx)ctx, &res, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuGreenCtxDestroy(gc));
    IS(cuGreenCtxGetDevResource(gc, &res, CU_DEV_RESOURCE_TYPE_SM), CUDA_ERROR_INVALID_CONTEXT);
    CUstream gs;
    OK(cuStreamCreate(&gs, 0));
    OK(cuStreamGetGreenCtx(gs, &none));
    CHECK(none == NULL);
    none = (CUgreenCtx)&res;
    OK(cuStreamGetGreenCtx(NULL, &none));
    CHECK(none == NULL);
    IS(cuStreamGetGreenCtx(gs, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuStreamGetGreenCtx((CUstream)&res, &none), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy_v2(gs));
    CUlogsCallbackHandle lh;
    OK(cuLogsRegisterCallback(log_cb, NULL, &lh));
    OK(cuLogsUnregisterCallback(lh));
    OK(cuProfilerStart());
    OK(cuProfilerStop());
    size_t off, size;
    IS(cuFuncGetParamInfo(f, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);
    /* An event shared by IPC opens as an event. */
    CUevent ev, ev2;
    CUipcEventHandle eh;
    OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS));
    OK(cuIpcGetEventHandle(&eh, ev));
    OK(cuIpcOpenEventHandle(&ev2, eh));
    OK(cuEventSynchronize(ev2));
    EQ(fakecuda_outstanding(0), MiB);
}

/* ---- every exported cu* name is an entry row (names from `nm -D` on stdin) ---- */

/* Every row resolves to itself: asked of cuGetProcAddress at its own version (per-thread rows with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), the answer is that very export. */
static void t_resolve(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL);
    const char *sym, *base;
    int version, pt, n = 0;
    for (int i = 0; fakecuda_row(i, &sym, &base, &version, &pt) == 0; i++, n++) {
        void *want = dlsym(lib, sym), *got = NULL;
        CUdriverProcAddressQueryResult st;
        CUresult rc = cuGetProcAddress_v2(base, &got, version, pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0,
                                          &st);
        if (!want || rc != CUDA_SUCCESS || got != want || st != CU_GET_PROC_ADDRESS_SUCCESS) {
            fprintf(stderr, "row %s (%s at %d%s): resolves to %p, exported %p, rc %d\n", sym, base, version,
                    pt ? ", per-thread" : "", got, want, (int)rc);
            exit(1);
        }
    }
    CHECK(n > 300);
}

void selftest_rows(void)
{
    char line[256];
    int names = 0, bad = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strncmp(line, "cu", 2) != 0 || line[2] < 'A' || line[2] > 'Z')
            continue;
        names++;
        if (fakecuda_calls(line) == UINT64_MAX) {
            fprintf(stderr, "exported but no entry row: %s\n", line);
            bad++;
        }
    }
    CHECK(names > 300);
    EQ(bad, 0);
}

const struct tcase selftest_calls_cases[] = {
    { "resolve", t_resolve, { 0 } },
    { "modules", t_modules, { "FAKECUDA_MEM=64MiB", "FAKECUDA_MODULE_BYTES=8MiB", "FAKECUDA_RECORD=@" } },
    { "images", t_images, { "FAKECUDA_DEVICES=2", "FAKECUDA_PROFILE=l4,t4" } },
    { "modules_nvml", t_modules_nvml, { "FAKECUDA_CTX_BYTES=32MiB", "FAKECUDA_MODULE_BYTES=5MiB", "FAKECUDA_RECORD=@" } },
    { "streams", t_streams, { 0 } },
    { "copies", t_copies, { 0 } },
    { "host", t_host, { 0 } },
    { "ipc", t_ipc, { "FAKECUDA_RECORD=@" } },
    { "share", t_share, { "FAKECUDA_RECORD=@" } },
    { "errors", t_errors, { 0 } },
    { "misc", t_misc, { 0 } },
    { "nvml_rt", t_nvml_rt, { "FAKECUDA_DEVICES=2", "FAKECUDA_PROFILE=h200,l4", "FAKECUDA_MEM=1GiB", "FAKECUDA_RECORD=@" } },
};
const size_t selftest_calls_ncases = sizeof selftest_calls_cases / sizeof *selftest_calls_cases;
