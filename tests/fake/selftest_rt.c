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
                            "INTEGRITY_CHECK", "TOOLS_CONTEXT", "UNKNOWN_1734DC26" };
    int want_slots[] = { 13, 7, 4, 4, 3, 95, 14 };
    for (int i = 0; i < 7; i++) {
        int n;
        const void *const *tb = table(sized[i], &n);
        EQ(n, want_slots[i]);
        EQ((uintptr_t)tb[0], (uintptr_t)n * sizeof(void *));
    }
    int n;
    const void *const *tls = table("TOOLS_TLS", &n);
    CHECK(tls[1] == NULL && tls[2] != NULL && tls[3] == NULL);

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
    EQ(fakecuda_calls("cuGetExportTable"), 13);
}

/* ---- TOOLS_TLS slot 2 and TOOLS_CONTEXT: the thread's context, context and stream numbers ---- */

typedef CUresult tls_ctx_fn(CUcontext *);
typedef CUresult ctx_number_fn(CUcontext, unsigned long long *);
typedef CUresult ctx_stream_fn(CUcontext, CUstream, CUstream *, int);
typedef CUresult stream_number_fn(CUcontext, CUstream, unsigned long long *);

/* The number TOOLS_CONTEXT gives stream `s` of context `c` through slots 51 and 39 (what cuBLAS asks). */
static unsigned long long stream_number(const void *const *tc, CUcontext c, CUstream s)
{
    CUstream object = (CUstream)(uintptr_t)0x5a5a;
    unsigned long long number = 77;
    OK(((ctx_stream_fn *)tc[51])(c, s, &object, s == CU_STREAM_PER_THREAD));
    OK(((stream_number_fn *)tc[39])(c, object, &number));
    unsigned long long id = 99;
    OK(cuStreamGetId(s, &id));
    EQ(number, id);
    return number;
}

static void t_tools_context(void)
{
    int n;
    tls_ctx_fn *tls_ctx = (tls_ctx_fn *)table("TOOLS_TLS", &n)[2];
    const void *const *tc = table("TOOLS_CONTEXT", &n);
    ctx_number_fn *number = (ctx_number_fn *)tc[4];
    /* No slot is NULL (a caller of a real driver's table never finds one). */
    for (int i = 1; i < n; i++)
        CHECK(tc[i] != NULL);
    CUcontext cur = (CUcontext)1;
    unsigned long long id = 0, id2 = 0;
    IS(tls_ctx(&cur), CUDA_ERROR_NOT_INITIALIZED);
    IS(number(NULL, &id), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    /* No context current: slot 2 answers NULL, as cuCtxGetCurrent, and slot 4 refuses it. */
    OK(tls_ctx(&cur));
    CHECK(cur == NULL);
    IS(tls_ctx(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(number(NULL, &id), CUDA_ERROR_INVALID_CONTEXT);
    /* The primary context: slot 2 is cuCtxGetCurrent, slot 4 cuCtxGetId. */
    init_primary(0);
    CUcontext pc;
    OK(cuCtxGetCurrent(&pc));
    OK(tls_ctx(&cur));
    CHECK(cur == pc);
    OK(number(cur, &id));
    OK(cuCtxGetId(pc, &id2));
    CHECK(id == id2 && id != 0);
    IS(number(cur, NULL), CUDA_ERROR_INVALID_VALUE);
    /* A created context is current and has a number of its own; once destroyed it has none. */
    CUcontext c;
    OK(cuCtxCreate_v2(&c, 0, 0));
    OK(tls_ctx(&cur));
    CHECK(cur == c);
    unsigned long long idc = 0;
    OK(number(c, &idc));
    CHECK(idc != id);
    /* Streams: the special handles and a created stream, each its cuStreamGetId number. */
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    unsigned long long sn = stream_number(tc, c, s);
    CHECK(sn != stream_number(tc, c, NULL) && sn != stream_number(tc, c, CU_STREAM_LEGACY) &&
          sn != stream_number(tc, c, CU_STREAM_PER_THREAD));
    CUstream object = NULL;
    IS(((ctx_stream_fn *)tc[51])(pc, s, &object, 0), CUDA_ERROR_INVALID_HANDLE); /* not pc's stream */
    IS(((ctx_stream_fn *)tc[51])(NULL, s, &object, 0), CUDA_ERROR_INVALID_CONTEXT);
    IS(((ctx_stream_fn *)tc[51])(c, (CUstream)&object, &object, 0), CUDA_ERROR_INVALID_HANDLE);
    IS(((ctx_stream_fn *)tc[51])(c, s, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(((stream_number_fn *)tc[39])(c, s, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy_v2(s));
    IS(((stream_number_fn *)tc[39])(c, s, &sn), CUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxDestroy_v2(c));
    IS(number(c, &idc), CUDA_ERROR_INVALID_CONTEXT);
    OK(tls_ctx(&cur));
    CHECK(cur == pc);
    /* A context made again at the same handle (FAKECUDA_CTX_REUSE=1) is a new context: a new number. */
    CUcontext again;
    OK(cuCtxCreate_v2(&again, 0, 0));
    CHECK(again == c);
    unsigned long long ida = 0;
    OK(number(again, &ida));
    CHECK(ida != idc && ida != id);
    OK(cuCtxDestroy_v2(again));
    /* Every other slot is a stub: counted, NOT_SUPPORTED. */
    EQ(fakecuda_table_unmodelled_calls(), 0);
    IS(((CUresult(*)(void))tc[3])(), CUDA_ERROR_NOT_SUPPORTED);
    IS(((CUresult(*)(void))tc[94])(), CUDA_ERROR_NOT_SUPPORTED);
    EQ(fakecuda_table_unmodelled_calls(), 2);
    EQ(fakecuda_table_calls("TOOLS_TLS"), 6);
    EQ(fakecuda_table_calls("TOOLS_CONTEXT"), 23);
    /* UNKNOWN_1734DC26: a stub in every slot (cuBLASLt takes its other path on slot 4's error). */
    const void *const *u = table("UNKNOWN_1734DC26", &n);
    void *array = NULL, *handle = NULL;
    for (int i = 1; i < n; i++)
        CHECK(u[i] != NULL);
    IS(((CUresult(*)(void **, void **))u[4])(&array, &handle), CUDA_ERROR_NOT_SUPPORTED);
    IS(((CUresult(*)(void *, void *))u[13])(NULL, handle), CUDA_ERROR_NOT_SUPPORTED);
    EQ(fakecuda_table_unmodelled_calls(), 4);
    EQ(fakecuda_table_calls("UNKNOWN_1734DC26"), 2);
}

/* ---- context limits ---- */

static void t_limits(void)
{
    size_t v = 1;
    OK(cuInit(0));
    IS(cuCtxGetLimit(&v, CU_LIMIT_CIG_ENABLED), CUDA_ERROR_INVALID_CONTEXT);
    init_primary(0);
    /* Not a CIG context (the fake makes none); the limit can only be queried. */
    OK(cuCtxGetLimit(&v, CU_LIMIT_CIG_ENABLED));
    EQ(v, 0);
    IS(cuCtxSetLimit(CU_LIMIT_CIG_ENABLED, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
    IS(cuCtxGetLimit(NULL, CU_LIMIT_CIG_ENABLED), CUDA_ERROR_INVALID_VALUE);
    IS(cuCtxGetLimit(&v, CU_LIMIT_SHMEM_SIZE), CUDA_ERROR_UNSUPPORTED_LIMIT);
    IS(cuCtxGetLimit(&v, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT);
    /* The defaults, and the heaps on the record beyond them. */
    OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    EQ(v, 1024);
    OK(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
    EQ(v, MiB);
    OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
    EQ(v, 8 * MiB);
    uint64_t before = fakecuda_outstanding(0);
    OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 72 * MiB));
    EQ(fakecuda_outstanding(0) - before, 64 * MiB);
    OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
    EQ(v, 72 * MiB);
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    EQ(fakecuda_outstanding(0) - before, 64 * MiB);
    OK(cuDevicePrimaryCtxReset_v2(0));
    EQ(fakecuda_outstanding(0), before);
    EQ(fakecuda_calls("cuCtxGetLimit"), 9);
    EQ(fakecuda_calls("cuCtxSetLimit"), 3);
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

const struct tcase selftest_rt_cases[] = {
    { "md2", t_md2, { 0 } },
    { "tables", t_tables, { 0 } },
    { "cls", t_cls, { 0 } },
    { "tools_context", t_tools_context, { "FAKECUDA_CTX_REUSE=1" } },
    { "limits", t_limits, { 0 } },
    { "integrity", t_integrity, { "FAKECUDA_DEVICES=2" } },
    { "profile_h200", t_profile, { "FAKECUDA_PROFILE=h200" } },
    { "profile_a100", t_profile, { "FAKECUDA_PROFILE=a100-40gb" } },
    { "profile_l4", t_profile, { "FAKECUDA_PROFILE=l4" } },
    { "profile_t4", t_profile, { "FAKECUDA_PROFILE=t4" } },
    { "profile_list", t_profile_list, { "FAKECUDA_DEVICES=2", "FAKECUDA_PROFILE=h200,t4", "FAKECUDA_MEM=2GiB,3GiB",
                                        "CUDA_VISIBLE_DEVICES=1,0" } },
    { "profile_bad", t_profile_bad, { "FAKECUDA_PROFILE=h100" } },
};
const size_t selftest_rt_ncases = sizeof selftest_rt_cases / sizeof *selftest_rt_cases;
