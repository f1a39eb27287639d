/* SPDX-License-Identifier: Apache-2.0 */
/*
 * selftest_rt.c: the fake driver's cases for what the CUDA runtime and the frameworks need: MD2
 * against RFC 1319's test suite, the private export tables slot by slot (the integrity check's
 * answer recomputed here from its documented inputs), context-local storage and its destructors,
 * the device profiles, module and library loads on the record, streams, events, copies, host
 * registration, IPC and shareable handles, error strings, the NVML additions, and the list of
 * exported names against the entry rows (case "rows", fed `nm -D` on stdin).
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

/* ---- MD2: RFC 1319, appendix A.5 ---- */

static void t_md2(void)
{
    static const struct {
        const char *msg, *hex;
    } suite[] = {
        { "", "8350e5a3e24c153df2275c9f80692773" },
        { "a", "32ec01ec4a6dac72c0ab96fb34c0b5d1" },
        { "abc", "da853b0d3f88d99b30283a69e6ded6bb" },
        { "message digest", "ab4f496bfb2a530b219ff33031fe06b0" },
        { "abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b" },
        { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "da33def2a42df13975352846c30338cd" },
        { "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
          "d5976f79d83d3a0dc9806c3c66f3efd8" },
    };
    for (size_t i = 0; i < sizeof suite / sizeof *suite; i++) {
        unsigned char d[16];
        char hex[33];
        fakecuda_md2(suite[i].msg, strlen(suite[i].msg), d);
        for (int j = 0; j < 16; j++)
            snprintf(hex + 2 * j, 3, "%02x", d[j]);
        if (strcmp(hex, suite[i].hex) != 0) {
            fprintf(stderr, "MD2(\"%s\") = %s, want %s\n", suite[i].msg, hex, suite[i].hex);
            exit(1);
        }
    }
}

/* ---- the export tables ---- */

static const void *const *table(const char *name, int *slots)
{
    unsigned char uuid[16];
    const void *t = fakecuda_table(name, uuid, slots);
    CHECK(t != NULL);
    CUuuid id;
    memcpy(id.bytes, uuid, 16);
    const void *got = NULL;
    OK(cuGetExportTable(&got, &id));
    CHECK(got == t);
    return (const void *const *)t;
}

static void t_tables(void)
{
    /* The first table the runtime asks for may be refused; so is any UUID the fake does not know. */
    static const unsigned char refused[16] = { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                               0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 };
    CUuuid id;
    memcpy(id.bytes, refused, 16);
    const void *t = (const void *)1;
    IS(cuGetExportTable(&t, &id), CUDA_ERROR_INVALID_VALUE);
    CHECK(t == NULL);
    IS(cuGetExportTable(NULL, &id), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_table("NO_SUCH_TABLE", NULL, NULL) == NULL && fakecuda_table_calls("NO_SUCH_TABLE") == UINT64_MAX);

    /* Slot 0: the table's size in bytes (all but context-local storage, whose slot 0 is a function). */
    const char *sized[] = { "CUDART_INTERFACE", "TOOLS_RUNTIME_CALLBACK_HOOKS", "TOOLS_TLS", "CONTEXT_CHECKS",
                            "INTEGRITY_CHECK" };
    int want_slots[] = { 13, 7, 4, 4, 3 };
    for (int i = 0; i < 5; i++) {
        int n;
        const void *const *tb = table(sized[i], &n);
        EQ(n, want_slots[i]);
        EQ((uintptr_t)tb[0], (uintptr_t)n * sizeof(void *));
    }
    int n;
    const void *const *tls = table("TOOLS_TLS", &n);
    CHECK(tls[1] == NULL && tls[2] == NULL && tls[3] == NULL);

    /* CUDART_INTERFACE: slot 2 names the primary context without retaining it. */
    const void *const *rt = table("CUDART_INTERFACE", &n);
    CUresult (*primary)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))rt[2];
    CUcontext pc = NULL, pc2 = NULL;
    IS(primary(&pc, 0), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    OK(primary(&pc, 0));
    CHECK(pc != NULL);
    IS(primary(&pc, 5), CUDA_ERROR_INVALID_DEVICE);
    IS(primary(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    unsigned flags;
    int active = 1;
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EQ(active, 0);
    OK(cuDevicePrimaryCtxRetain(&pc2, 0));
    CHECK(pc2 == pc);
    OK(((CUresult(*)(void))rt[12])());
    ((void (*)(size_t))rt[7])(0);
    CHECK(rt[1] == NULL && rt[3] == NULL && rt[6] != NULL && rt[8] != NULL);

    /* TOOLS_RUNTIME_CALLBACK_HOOKS: two scratch buffers and their sizes (in 32-bit words). */
    const void *const *hooks = table("TOOLS_RUNTIME_CALLBACK_HOOKS", &n);
    void *p = NULL;
    size_t size = 0;
    ((void (*)(void **, size_t *))hooks[2])(&p, &size);
    CHECK(p != NULL && size == 1024);
    memset(p, 0xff, size * 4);
    void *p2 = NULL;
    ((void (*)(void **, size_t *))hooks[6])(&p2, &size);
    CHECK(p2 != NULL && p2 != p && size == 14);

    /* CONTEXT_CHECKS: slot 2 answers 0 in its first out-word, slot 3 returns 0. */
    const void *const *checks = table("CONTEXT_CHECKS", &n);
    uint32_t r1 = 7;
    const void *r2 = NULL;
    OK(((CUresult(*)(CUcontext, uint32_t *, const void **))checks[2])(pc, &r1, &r2));
    EQ(r1, 0);
    EQ(((uint32_t(*)(void))checks[3])(), 0);

    EQ(fakecuda_table_calls("CUDART_INTERFACE"), 6);
    EQ(fakecuda_table_calls("TOOLS_RUNTIME_CALLBACK_HOOKS"), 2);
    EQ(fakecuda_table_calls("CONTEXT_CHECKS"), 2);
    EQ(fakecuda_table_calls("TOOLS_TLS"), 0);
    EQ(fakecuda_calls("cuGetExportTable"), 11);
}

/* ---- context-local storage ---- */

static int dtor_calls;
static CUcontext dtor_ctx;
static void *dtor_key, *dtor_value;

static void cls_dtor(CUcontext ctx, void *key, void *value)
{
    dtor_calls++;
    dtor_ctx = ctx;
    dtor_key = key;
    dtor_value = value;
    CUcontext cur;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS) /* a destructor may call the driver */
        exit(2);
}

static void t_cls(void)
{
    int n;
    const void *const *cls = table("CONTEXT_LOCAL_STORAGE_V0301", &n);
    typedef CUresult put_fn(CUcontext, void *, void *, void (*)(CUcontext, void *, void *));
    typedef CUresult del_fn(CUcontext, void *);
    typedef CUresult get_fn(void **, CUcontext, void *);
    put_fn *put = (put_fn *)cls[0];
    del_fn *del = (del_fn *)cls[1];
    get_fn *get = (get_fn *)cls[2];
    int k1, k2, v1, v2;
    OK(cuInit(0));
    IS(put(NULL, &k1, &v1, NULL), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
    init_primary(0);
    CUcontext pc;
    OK(cuCtxGetCurrent(&pc));
    OK(put(NULL, &k1, &v1, NULL));
    OK(put(pc, &k2, &v2, cls_dtor));
    void *v = NULL;
    OK(get(&v, NULL, &k1));
    CHECK(v == &v1);
    OK(get(&v, pc, &k2));
    CHECK(v == &v2);
    OK(del(NULL, &k1));
    IS(get(&v, NULL, &k1), CUDA_ERROR_INVALID_HANDLE);
    OK(put(NULL, &k1, &v2, NULL)); /* put again: replaces */
    OK(get(&v, NULL, &k1));
    CHECK(v == &v2);
    /* The reset of the primary context runs the destructors, once, with the context, key and value. */
    OK(cuDevicePrimaryCtxReset_v2(0));
    EQ(dtor_calls, 1);
    CHECK(dtor_ctx == pc && dtor_key == &k2 && dtor_value == &v2);
    IS(get(&v, pc, &k2), CUDA_ERROR_INVALID_CONTEXT);
    /* A retained-again primary context starts empty; the last release runs destructors too. */
    CUcontext again;
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(again == pc);
    IS(get(&v, pc, &k2), CUDA_ERROR_INVALID_HANDLE);
    OK(put(pc, &k2, &v1, cls_dtor));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EQ(dtor_calls, 2);
    CHECK(dtor_value == &v1);
    /* A created context: its destroy runs them. */
    CUcontext c;
    OK(cuCtxCreate_v2(&c, 0, 0));
    OK(put(c, &k1, &v2, cls_dtor));
    OK(cuCtxDestroy_v2(c));
    EQ(dtor_calls, 3);
    CHECK(dtor_ctx == c && dtor_key == &k1);
    EQ(fakecuda_table_calls("CONTEXT_LOCAL_STORAGE_V0301"), 13);
}

/* ---- the integrity check, recomputed here from its documented inputs ---- */

static void hmac_md2(const unsigned char key[16], const void *msg, size_t len, unsigned char mac[16])
{
    unsigned char buf[16 + 512], inner[16];
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x36;
    memcpy(buf + 16, msg, len);
    fakecuda_md2(buf, 16 + len, inner);
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x5c;
    memcpy(buf + 16, inner, 16);
    fakecuda_md2(buf, 32, mac);
}

static void t_integrity(void)
{
    int n;
    const void *const *ic = table("INTEGRITY_CHECK", &n);
    const void *const *rt = table("CUDART_INTERFACE", &n);
    CUresult (*check)(uint32_t, uint64_t, uint64_t *) = (CUresult(*)(uint32_t, uint64_t, uint64_t *))ic[1];
    uint64_t r[2];
    IS(check(13002, 1, r), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    IS(check(13002, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    /* Versions ending in 0 and 1 get fixed answers. */
    OK(check(13000, 12345, r));
    CHECK(r[0] == 0x3341181c03cb675cull && r[1] == 0x8ed383aa1f4cd1e8ull);
    OK(check(12081, 12345, r));
    CHECK(r[0] == 0x1841181c03cb675cull && r[1] == 0x8ed383aa1f4cd1e8ull);
    /* Others: HMAC-MD2 over driver version, version, pid, thread, the two tables, the function, the
     * time, then each device's UUID and PCI domain, bus and device. */
    static const unsigned char key[16] = { 0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                           0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f };
    unsigned char msg[512];
    size_t len = 0;
    int drv, count;
    OK(cuDriverGetVersion(&drv));
    OK(cuDeviceGetCount(&count));
    EQ(count, 2);
    uint32_t head[4] = { (uint32_t)drv, 13022, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self() };
    const void *ptrs[3] = { rt, ic, ic[1] };
    uint64_t secs = 0x682b9cee;
    memcpy(msg + len, head, sizeof head), len += sizeof head;
    memcpy(msg + len, ptrs, sizeof ptrs), len += sizeof ptrs;
    memcpy(msg + len, &secs, sizeof secs), len += sizeof secs;
    for (int d = 0; d < count; d++) {
        CUuuid u;
        int pci[3];
        OK(cuDeviceGetUuid_v2(&u, d));
        OK(cuDeviceGetAttribute(&pci[0], CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d));
        OK(cuDeviceGetAttribute(&pci[1], CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
        OK(cuDeviceGetAttribute(&pci[2], CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d));
        memcpy(msg + len, u.bytes, 16), len += 16;
        memcpy(msg + len, pci, sizeof pci), len += sizeof pci;
    }
    EQ(len, 48 + 2 * 28);
    unsigned char want[16];
    hmac_md2(key, msg, len, want);
    OK(check(13022, secs, r));
    CHECK(memcmp(r, want, 16) == 0);
    /* Any input changes the answer: another time. */
    uint64_t r2[2];
    OK(check(13022, secs + 1, r2));
    CHECK(memcmp(r, r2, 16) != 0);
    EQ(fakecuda_table_calls("INTEGRITY_CHECK"), 6);
}

/* ---- device profiles ---- */

struct want_profile {
    const char *key, *name;
    int major, minor, sms, l2_mib, clock_mhz, memclock_mhz, bus;
    uint64_t mem_mib;
    unsigned pci_device;
};

/* The figures as the profiles' sources give them (device.c names them). */
static const struct want_profile want_profiles[] = {
    { "h200", "NVIDIA H200", 9, 0, 132, 50, 1980, 3201, 6144, 143771, 0x2335 },
    { "a100-40gb", "NVIDIA A100-SXM4-40GB", 8, 0, 108, 40, 1410, 1215, 5120, 40960, 0x20b0 },
    { "l4", "NVIDIA L4", 8, 9, 58, 48, 2040, 6251, 192, 23034, 0x27b8 },
    { "t4", "Tesla T4", 7, 5, 40, 4, 1590, 5001, 256, 15360, 0x1eb8 },
};

static int attr(CUdevice_attribute a, int dev)
{
    int v = -1;
    OK(cuDeviceGetAttribute(&v, a, dev));
    return v;
}

static void check_profile(const struct want_profile *w, int ordinal, int phys, uint64_t mem)
{
    char name[64];
    OK(cuDeviceGetName(name, sizeof name, ordinal));
    if (strcmp(name, w->name) != 0) {
        fprintf(stderr, "name %s, want %s\n", name, w->name);
        exit(1);
    }
    int major, minor;
    OK(cuDeviceComputeCapability(&major, &minor, ordinal));
    CHECK(major == w->major && minor == w->minor);
    EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ordinal), w->major);
    EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ordinal), w->minor);
    EQ(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal), w->sms);
    EQ(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, ordinal), w->l2_mib << 20);
    EQ(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, ordinal), w->clock_mhz * 1000);
    EQ(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, ordinal), w->memclock_mhz * 1000);
    EQ(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, ordinal), w->bus);
    EQ(attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, ordinal), (int)(w->pci_device << 16 | 0x10de));
    CHECK(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, ordinal) >= 1024);
    CHECK(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ordinal) >= 65536);
    size_t total;
    OK(cuDeviceTotalMem_v2(&total, ordinal));
    EQ(total == mem, 1);
    struct fakecuda_device d;
    EQ(fakecuda_device_info(phys, &d), 0);
    CHECK(strcmp(d.name, w->name) == 0 && d.pci_device_id == (w->pci_device << 16 | 0x10de));
    CHECK(d.sm_count == w->sms && d.cc_major == w->major && d.bus_width == w->bus);
    /* The UUID is the same card's through the driver and as text. */
    CUuuid u;
    OK(cuDeviceGetUuid_v2(&u, ordinal));
    char text[48];
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    CHECK(strcmp(text, d.uuid) == 0);
    char bus[32];
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, ordinal));
    CHECK(strcmp(bus, d.pci_bus_id) == 0);
    CUdevice back;
    OK(cuDeviceGetByPCIBusId(&back, bus));
    EQ(back, ordinal);
    EQ(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, ordinal), (int)d.pci_bus);
}

static const struct want_profile *want_of(const char *key)
{
    for (size_t i = 0; i < sizeof want_profiles / sizeof *want_profiles; i++)
        if (strcmp(want_profiles[i].key, key) == 0)
            return &want_profiles[i];
    exit(1);
}

/* FAKECUDA_PROFILE=<one>: every figure of that card. */
static void t_profile(void)
{
    OK(cuInit(0));
    const struct want_profile *w = want_of(getenv("FAKECUDA_PROFILE"));
    check_profile(w, 0, 0, w->mem_mib << 20);
    EQ(fakecuda_capacity(0) == w->mem_mib << 20, 1);
}

/* One profile per device, a memory override, the ordinals renumbered by CUDA_VISIBLE_DEVICES. */
static void t_profile_list(void)
{
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    EQ(n, 2);
    check_profile(want_of("t4"), 0, 1, (uint64_t)3 << 30);
    check_profile(want_of("h200"), 1, 0, (uint64_t)2 << 30);
    char a[64], b[64];
    struct fakecuda_device d0, d1;
    EQ(fakecuda_device_info(0, &d0), 0);
    EQ(fakecuda_device_info(1, &d1), 0);
    snprintf(a, sizeof a, "%s", d0.uuid);
    snprintf(b, sizeof b, "%s", d1.uuid);
    CHECK(strcmp(a, b) != 0);
    EQ(fakecuda_device_info(2, &d0), -1);
}

static void t_profile_bad(void)
{
    IS(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

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
    static const char image[] = "any image: the fake parses none";
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
    CUmemAllocationProp prop = { 0 };
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
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

const struct tcase selftest_rt_cases[] = {
    { "md2", t_md2, { 0 } },
    { "resolve", t_resolve, { 0 } },
    { "tables", t_tables, { 0 } },
    { "cls", t_cls, { 0 } },
    { "integrity", t_integrity, { "FAKECUDA_DEVICES=2" } },
    { "profile_h200", t_profile, { "FAKECUDA_PROFILE=h200" } },
    { "profile_a100", t_profile, { "FAKECUDA_PROFILE=a100-40gb" } },
    { "profile_l4", t_profile, { "FAKECUDA_PROFILE=l4" } },
    { "profile_t4", t_profile, { "FAKECUDA_PROFILE=t4" } },
    { "profile_list", t_profile_list, { "FAKECUDA_DEVICES=2", "FAKECUDA_PROFILE=h200,t4", "FAKECUDA_MEM=2GiB,3GiB",
                                        "CUDA_VISIBLE_DEVICES=1,0" } },
    { "profile_bad", t_profile_bad, { "FAKECUDA_PROFILE=h100" } },
    { "modules", t_modules, { "FAKECUDA_MEM=64MiB", "FAKECUDA_MODULE_BYTES=8MiB", "FAKECUDA_RECORD=@" } },
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
const size_t selftest_rt_ncases = sizeof selftest_rt_cases / sizeof *selftest_rt_cases;
