/* SPDX-License-Identifier: Apache-2.0 */
/*
 * export.c: cuGetExportTable, the driver's private function tables that the CUDA runtime
 * (libcudart, static or shared) asks for at its first call and stops without.
 *
 * Facts from ZLUDA (vosen/ZLUDA, dark_api/src/lib.rs and zluda/src/impl/driver.rs), which
 * documents each table's UUID, length and the slots the runtime calls; slot 0 of most tables holds
 * the table's size in bytes. Runtimes 13.0 and 13.2 ask for seven tables; the first one,
 * f8cff951-2146-8b4e-b9e2-fb469e7c0dd9, may be refused (CUDA_ERROR_INVALID_VALUE, as for any UUID
 * the fake does not know), the other six are required (all below but TOOLS_CONTEXT and
 * UNKNOWN_1734DC26, which cuBLAS and cuBLASLt need, and the runtime 13.5 requires TOOLS_CONTEXT):
 *  - CUDART_INTERFACE (13 slots): 1, 6, 8 load a module from a fat binary (the runtime's own
 *    registration of the kernels linked into the program), 2 the primary context of a device
 *    without retaining it, 7 a no-op, 12 "load the compilers" (success);
 *  - TOOLS_RUNTIME_CALLBACK_HOOKS (7): 2 and 6 hand out scratch buffers and their sizes;
 *  - TOOLS_TLS (4): 2 the calling thread's current context (what cuCtxGetCurrent answers);
 *  - TOOLS_CONTEXT (95, 21318c60-9714-3248-8ca6-41ff7324c8f2): 4 the context's number, what
 *    cuCtxGetId answers for it; 51 a stream of the context as an object and 39 that object's
 *    number (cuStreamGetId's); every other slot is a stub that says it is not modelled
 *    (FAKECUDA_TRACE=1) and answers CUDA_ERROR_NOT_SUPPORTED;
 *  - CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 (4, no size word): 0 put (context, key, value,
 *    destructor), 1 delete, 2 get (CUDA_ERROR_INVALID_HANDLE when absent); a NULL context means the
 *    current one; the destructors run when the context is destroyed or the primary context reset
 *    (fk_cls_run, called by driver.c);
 *  - CONTEXT_CHECKS (4): 2 answers 0 in its first out-word, 3 returns 0;
 *  - UNKNOWN_1734DC26 (14, 1734dc26-800d-4745-8726-c0f1e7dd8bca): all stubs (below);
 *  - INTEGRITY_CHECK (3): 1 computes a 16-byte answer that the runtime compares with its own; a
 *    wrong one is cudaErrorSoftwareValidityNotEstablished (103). For a version asked ending in 0
 *    or 1 the answer is a fixed pair; otherwise it is HMAC-MD2 (md2.c), keyed with a 16-byte
 *    constant, over: the driver version, the version asked, pid, thread (the low 32 bits of
 *    pthread_self), the addresses of the CUDART_INTERFACE and INTEGRITY_CHECK tables and of the
 *    function in slot 1, the time the runtime passed, then per device (in ordinal order) its UUID
 *    and PCI domain, bus and device numbers.
 * Every call of a slot counts under the table's row in the call counters (fakecuda_table_calls).
 *
 * TOOLS_TLS slot 2 and TOOLS_CONTEXT are what cuBLASLt (13.1 in the toolkit, 13.4 in PyTorch's
 * wheels) and cuDNN through it need for any GEMM: cublasLtMatmulAlgoGetHeuristic (and so every
 * cuBLAS GEMM, and XLA's cuDNN handle) asks TOOLS_TLS slot 2 for the thread's context with one
 * out-pointer, then TOOLS_CONTEXT slot 4 for that context's number (context, unsigned long long *),
 * and keys its per-context set-up by the number; without them every GEMM is refused
 * (CUBLAS_STATUS_NOT_SUPPORTED, or ARCH_MISMATCH through cublasGemmEx). Where the facts come from:
 * the call sites seen under gdb in cuBLASLt (the arguments, and that a failed call makes the
 * lookup fail); a public survey of the driver's tables that names TOOLS_TLS's entry at byte 0x10
 * cuexp_get_thread_context and calls 21318c60 CUEXP_CONTEXT (CU_ETID_ToolsContext) with
 * cuexpContext_getContextNumber at byte 0x20; a published probe on a real driver that found slot
 * 2 equal to cuCtxGetCurrent and slot 4 equal to cuCtxGetId, and driver 595 serving TOOLS_CONTEXT
 * with a size word and 94 slots, none NULL (hence the stubs: a caller never finds a NULL there).
 * Slots 39 and 51 are the call sites' facts alone (below); the survey lists 39 unnamed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_internal.h"

/* ---- the tables' rows: name, UUID, length (slots) ---- */

#define FK_TABLES(X)                                                                                   \
    X(CUDART_INTERFACE, 13, 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9) \
    X(TOOLS_RUNTIME_CALLBACK_HOOKS, 7, 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66) \
    X(TOOLS_TLS, 4, 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc) \
    X(TOOLS_CONTEXT, 95, 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2) \
    X(CONTEXT_LOCAL_STORAGE_V0301, 4, 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93) \
    X(CONTEXT_CHECKS, 4, 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e) \
    X(INTEGRITY_CHECK, 3, 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2) \
    X(UNKNOWN_1734DC26, 14, 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca)

enum fk_table {
#define FK_TABLE_ENUM(name, len, ...) FK_T_##name,
    FK_TABLES(FK_TABLE_ENUM)
#undef FK_TABLE_ENUM
    FK_NTABLES
};

static _Atomic uint64_t table_calls[FK_NTABLES];
#define TABLE_CALL(t)                                                                   \
    do {                                                                                \
        atomic_fetch_add_explicit(&table_calls[FK_T_##t], 1, memory_order_relaxed);     \
        if (fk_config()->trace > 1)                                                     \
            fk_trace_call(__func__);                                             \
    } while (0)

/* ---- CUDART_INTERFACE ---- */

/* Slots 1, 6 and 8: a module from the fat binary the runtime registers (fk_module_load_image). */
static CUresult rt_module_from_fatbin(CUmodule *mod, const void *wrapper)
{
    TABLE_CALL(CUDART_INTERFACE);
    if (!mod || !wrapper)
        return CUDA_ERROR_INVALID_VALUE;
    return fk_module_load_image(mod, wrapper);
}

static CUresult rt_module_from_fatbin_ext1(CUmodule *mod, const void *wrapper, void *a3, void *a4, unsigned a5)
{
    return rt_module_from_fatbin(mod, wrapper);
}

static CUresult rt_module_from_fatbin_ext2(const void *header, CUmodule *mod, void *a3, void *a4, unsigned a5)
{
    return rt_module_from_fatbin(mod, header);
}

static CUresult rt_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    TABLE_CALL(CUDART_INTERFACE);
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    return fk_primary_handle(dev, pctx);
}

static void rt_nothing(size_t arg)
{
    TABLE_CALL(CUDART_INTERFACE);
}

static CUresult rt_load_compilers(void)
{
    TABLE_CALL(CUDART_INTERFACE);
    return CUDA_SUCCESS;
}

static const void *cudart_interface[13] = {
    (void *)(13 * sizeof(void *)), NULL, (void *)rt_primary_ctx, NULL, NULL, NULL, (void *)rt_module_from_fatbin_ext1,
    (void *)rt_nothing, (void *)rt_module_from_fatbin_ext2, NULL, NULL, NULL, (void *)rt_load_compilers,
};

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS and TOOLS_TLS ---- */

static uint32_t scratch1[1024], scratch2[14];

static void hooks_buffer1(void **ptr, size_t *size)
{
    TABLE_CALL(TOOLS_RUNTIME_CALLBACK_HOOKS);
    *ptr = scratch1;
    *size = sizeof scratch1 / sizeof *scratch1;
}

static void hooks_buffer2(void **ptr, size_t *size)
{
    TABLE_CALL(TOOLS_RUNTIME_CALLBACK_HOOKS);
    *ptr = scratch2;
    *size = sizeof scratch2 / sizeof *scratch2;
}

static const void *tools_runtime_callback_hooks[7] = {
    (void *)(7 * sizeof(void *)), NULL, (void *)hooks_buffer1, NULL, NULL, NULL, (void *)hooks_buffer2,
};

/* Slot 2: the calling thread's current context, as cuCtxGetCurrent (NULL when there is none). */
static CUresult tls_current_ctx(CUcontext *pctx)
{
    TABLE_CALL(TOOLS_TLS);
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = fk_current_handle();
    return CUDA_SUCCESS;
}

static const void *tools_tls[4] = { (void *)(4 * sizeof(void *)), NULL, (void *)tls_current_ctx };

/* ---- TOOLS_CONTEXT ---- */

/* Slot 4: the context's number (cuCtxGetId's id); CUDA_ERROR_INVALID_CONTEXT for NULL or a dead one. */
static CUresult tctx_number(CUcontext ctx, unsigned long long *number)
{
    TABLE_CALL(TOOLS_CONTEXT);
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    return ctx ? fk_ctx_id(ctx, number) : CUDA_ERROR_INVALID_CONTEXT;
}

/*
 * Slots 51 and 39: a stream of a context as the driver's own stream object, and that object's
 * number. cuBLAS 13 (its per-stream workspace pool, used where a kernel needs workspace and the
 * handle has none of its own, e.g. an SGEMM on compute capability 8.9) calls 51 with (context,
 * stream, out, stream == CU_STREAM_PER_THREAD), then 39 with (context, what 51 gave, out) and keys
 * its pool by the number (and by the thread for the per-thread stream); the runtime 13.5 calls the
 * same pair for its API callbacks. The object is the stream's handle itself and the number
 * cuStreamGetId's id (the fake's 0, 1 and 2 for the NULL, legacy and per-thread streams).
 */
static CUresult tctx_stream(CUcontext ctx, CUstream stream, CUstream *object, int per_thread)
{
    TABLE_CALL(TOOLS_CONTEXT);
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!object)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = ctx ? fk_stream_id(ctx, stream, NULL) : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        *object = stream;
    return rc;
}

static CUresult tctx_stream_number(CUcontext ctx, CUstream object, unsigned long long *number)
{
    TABLE_CALL(TOOLS_CONTEXT);
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!number)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx ? fk_stream_id(ctx, object, number) : CUDA_ERROR_INVALID_CONTEXT;
}

static _Atomic uint64_t unmodelled_calls;
static const char *const table_names[FK_NTABLES];

/* A slot whose meaning no source gives: counted (under its table and as unmodelled), said under
 * FAKECUDA_TRACE=1, refused. */
static CUresult unmodelled(enum fk_table t, int slot)
{
    atomic_fetch_add_explicit(&table_calls[t], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&unmodelled_calls, 1, memory_order_relaxed);
    if (fk_config()->trace)
        fprintf(stderr, "fakecuda: %s slot %d is not modelled: CUDA_ERROR_NOT_SUPPORTED\n", table_names[t], slot);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define FK_STUB(t, n)                                                                                  \
    static CUresult t##_slot##n(void)                                                                  \
    {                                                                                                  \
        return unmodelled(FK_T_##t, n);                                                                \
    }
#define FK_STUB_ENTRY(t, n) [n] = (void *)t##_slot##n,

#define TCTX_UNMODELLED(X, t)                                                                          \
    X(t, 1) X(t, 2) X(t, 3) X(t, 5) X(t, 6) X(t, 7) X(t, 8) X(t, 9) X(t, 10) X(t, 11) X(t, 12) X(t, 13)  \
    X(t, 14) X(t, 15) X(t, 16) X(t, 17) X(t, 18) X(t, 19) X(t, 20) X(t, 21) X(t, 22) X(t, 23) X(t, 24)  \
    X(t, 25) X(t, 26) X(t, 27) X(t, 28) X(t, 29) X(t, 30) X(t, 31) X(t, 32) X(t, 33) X(t, 34) X(t, 35)  \
    X(t, 36) X(t, 37) X(t, 38) X(t, 40) X(t, 41) X(t, 42) X(t, 43) X(t, 44) X(t, 45) X(t, 46) X(t, 47)  \
    X(t, 48) X(t, 49) X(t, 50) X(t, 52) X(t, 53) X(t, 54) X(t, 55) X(t, 56) X(t, 57) X(t, 58) X(t, 59)  \
    X(t, 60) X(t, 61) X(t, 62) X(t, 63) X(t, 64) X(t, 65) X(t, 66) X(t, 67) X(t, 68) X(t, 69) X(t, 70)  \
    X(t, 71) X(t, 72) X(t, 73) X(t, 74) X(t, 75) X(t, 76) X(t, 77) X(t, 78) X(t, 79) X(t, 80) X(t, 81)  \
    X(t, 82) X(t, 83) X(t, 84) X(t, 85) X(t, 86) X(t, 87) X(t, 88) X(t, 89) X(t, 90) X(t, 91) X(t, 92)  \
    X(t, 93) X(t, 94)
TCTX_UNMODELLED(FK_STUB, TOOLS_CONTEXT)

static const void *tools_context[95] = {
    [0] = (void *)(95 * sizeof(void *)),
    [4] = (void *)tctx_number,
    [39] = (void *)tctx_stream_number,
    [51] = (void *)tctx_stream,
    TCTX_UNMODELLED(FK_STUB_ENTRY, TOOLS_CONTEXT)
};

/*
 * ---- UNKNOWN_1734DC26 ----
 * A table no public source names. cuBLASLt 13.4 (PyTorch's) fetches it in one function on its
 * half-precision GEMM heuristics path (H200: cublasLtHSHMatmulAlgoGetHeuristic) and calls slot 4
 * with two out-pointers (a byte array it then reads, and a handle it gives to slot 13); when slot 4
 * fails it takes its other path, but a missing table is a NULL it calls (a crash). So the table is
 * served with every slot a stub (CUDA_ERROR_NOT_SUPPORTED), 14 slots (13 is the highest called),
 * slot 0 a size word as in the documented tables.
 */
#define U1734_UNMODELLED(X, t) \
    X(t, 1) X(t, 2) X(t, 3) X(t, 4) X(t, 5) X(t, 6) X(t, 7) X(t, 8) X(t, 9) X(t, 10) X(t, 11) X(t, 12) X(t, 13)
U1734_UNMODELLED(FK_STUB, UNKNOWN_1734DC26)

static const void *unknown_1734dc26[14] = {
    [0] = (void *)(14 * sizeof(void *)),
    U1734_UNMODELLED(FK_STUB_ENTRY, UNKNOWN_1734DC26)
};

#undef FK_STUB
#undef FK_STUB_ENTRY

FK_EXPORT uint64_t fakecuda_table_unmodelled_calls(void)
{
    return atomic_load_explicit(&unmodelled_calls, memory_order_relaxed);
}

/* ---- CONTEXT_LOCAL_STORAGE_V0301 ---- */

typedef void fk_cls_dtor(CUcontext ctx, void *key, void *value);

struct fk_cls {
    struct fk_ctx *ctx;
    void *key, *value;
    fk_cls_dtor *dtor;
    struct fk_cls *next;
};

static pthread_mutex_t cls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fk_cls *cls_list;

/* The context a storage call names (NULL: the current one), or NULL. */
static struct fk_ctx *cls_ctx(CUcontext h)
{
    fk_lock();
    struct fk_ctx *c = h ? fk_ctx_lookup(h) : fk_current_ctx();
    fk_unlock();
    return c;
}

static struct fk_cls **cls_find(struct fk_ctx *c, void *key)
{
    struct fk_cls **pp = &cls_list;
    while (*pp && ((*pp)->ctx != c || (*pp)->key != key))
        pp = &(*pp)->next;
    return pp;
}

static CUresult cls_put(CUcontext h, void *key, void *value, fk_cls_dtor *dtor)
{
    TABLE_CALL(CONTEXT_LOCAL_STORAGE_V0301);
    struct fk_ctx *c = cls_ctx(h);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&cls_mu);
    struct fk_cls **pp = cls_find(c, key);
    if (!*pp && (*pp = calloc(1, sizeof **pp))) {
        (*pp)->ctx = c;
        (*pp)->key = key;
    }
    if (*pp) {
        (*pp)->value = value;
        (*pp)->dtor = dtor;
    }
    pthread_mutex_unlock(&cls_mu);
    return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult cls_delete(CUcontext h, void *key)
{
    TABLE_CALL(CONTEXT_LOCAL_STORAGE_V0301);
    struct fk_ctx *c = cls_ctx(h);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&cls_mu);
    struct fk_cls **pp = cls_find(c, key), *e = *pp;
    if (e)
        *pp = e->next;
    pthread_mutex_unlock(&cls_mu);
    free(e);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext h, void *key)
{
    TABLE_CALL(CONTEXT_LOCAL_STORAGE_V0301);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_ctx *c = cls_ctx(h);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&cls_mu);
    struct fk_cls *e = *cls_find(c, key);
    if (e)
        *value = e->value;
    pthread_mutex_unlock(&cls_mu);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void fk_cls_run(struct fk_ctx *c)
{
    /* Taken out first, run after: a destructor may call the driver, and put or delete again. */
    struct fk_cls *mine = NULL;
    pthread_mutex_lock(&cls_mu);
    for (struct fk_cls **pp = &cls_list; *pp;) {
        struct fk_cls *e = *pp;
        if (e->ctx == c) {
            *pp = e->next;
            e->next = mine;
            mine = e;
        } else {
            pp = &e->next;
        }
    }
    pthread_mutex_unlock(&cls_mu);
    while (mine) {
        struct fk_cls *e = mine;
        mine = e->next;
        if (e->dtor)
            e->dtor((CUcontext)c, e->key, e->value);
        free(e);
    }
}

void fk_cls_forget(void)
{
    /* After fork(): the parent's entries are no concern of the child's contexts. */
    pthread_mutex_init(&cls_mu, NULL);
    cls_list = NULL;
}

static const void *context_local_storage[4] = { (void *)cls_put, (void *)cls_delete, (void *)cls_get, NULL };

/* ---- CONTEXT_CHECKS ---- */

static CUresult ctx_check(CUcontext ctx, uint32_t *result1, const void **result2)
{
    TABLE_CALL(CONTEXT_CHECKS);
    if (result1)
        *result1 = 0;
    return CUDA_SUCCESS;
}

static uint32_t ctx_check3(void)
{
    TABLE_CALL(CONTEXT_CHECKS);
    return 0;
}

static const void *context_checks[4] = { (void *)(4 * sizeof(void *)), NULL, (void *)ctx_check, (void *)ctx_check3 };

/* ---- INTEGRITY_CHECK ---- */

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]);

static const void *integrity_table[3] = { (void *)(3 * sizeof(void *)), (void *)integrity_check, NULL };

/* The HMAC key, published by ZLUDA (the result of the check's first pass, which uses no input). */
static const uint8_t integrity_key[16] = { 0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                           0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f };

struct integrity_head {
    uint32_t driver_version, version, pid, thread;
    const void *cudart_table, *integrity_table, *fn;
    uint64_t unix_seconds;
};

struct integrity_device {
    unsigned char uuid[16];
    int32_t pci_domain, pci_bus, pci_device;
};

static void integrity_answer(uint32_t version, uint64_t unix_seconds, uint32_t thread, uint64_t result[2])
{
    if (version % 10 < 2) {
        static const uint64_t fixed[2][2] = { { 0x3341181c03cb675cull, 0x8ed383aa1f4cd1e8ull },
                                              { 0x1841181c03cb675cull, 0x8ed383aa1f4cd1e8ull } };
        result[0] = fixed[version % 10][0];
        result[1] = fixed[version % 10][1];
        return;
    }
    int n = fk_visible_count();
    size_t len = sizeof(struct integrity_head) + (size_t)n * sizeof(struct integrity_device);
    unsigned char msg[sizeof(struct integrity_head) + FK_MAX_DEV * sizeof(struct integrity_device)];
    struct integrity_head h = { (uint32_t)fk_config()->driver_version, version, (uint32_t)getpid(), thread,
                                cudart_interface, integrity_table, (const void *)integrity_check, unix_seconds };
    memcpy(msg, &h, sizeof h);
    for (int d = 0; d < n; d++) {
        struct integrity_device dev = { { 0 }, 0, 0, 0 };
        CUuuid u;
        cuDeviceGetUuid_v2(&u, d);
        memcpy(dev.uuid, u.bytes, 16);
        cuDeviceGetAttribute(&dev.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
        cuDeviceGetAttribute(&dev.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
        cuDeviceGetAttribute(&dev.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
        memcpy(msg + sizeof h + (size_t)d * sizeof dev, &dev, sizeof dev);
    }
    uint8_t mac[16];
    fk_hmac_md2(integrity_key, msg, len, mac);
    memcpy(result, mac, 16);
}

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2])
{
    TABLE_CALL(INTEGRITY_CHECK);
    if (!result)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fk_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    integrity_answer(version, unix_seconds, (uint32_t)(uintptr_t)pthread_self(), result);
    return CUDA_SUCCESS;
}

/* ---- cuGetExportTable ---- */

struct fk_table_row {
    const char *name;
    const void *const *table;
    int len;
};

/* In FK_TABLES' order. */
static const struct fk_table_row tables[FK_NTABLES] = {
    { "CUDART_INTERFACE", cudart_interface, 13 },
    { "TOOLS_RUNTIME_CALLBACK_HOOKS", tools_runtime_callback_hooks, 7 },
    { "TOOLS_TLS", tools_tls, 4 },
    { "TOOLS_CONTEXT", tools_context, 95 },
    { "CONTEXT_LOCAL_STORAGE_V0301", context_local_storage, 4 },
    { "CONTEXT_CHECKS", context_checks, 4 },
    { "INTEGRITY_CHECK", integrity_table, 3 },
    { "UNKNOWN_1734DC26", unknown_1734dc26, 14 },
};

static const char *const table_names[FK_NTABLES] = {
#define FK_TABLE_NAME(name, len, ...) #name,
    FK_TABLES(FK_TABLE_NAME)
#undef FK_TABLE_NAME
};

static const unsigned char uuids[FK_NTABLES][16] = {
#define FK_TABLE_UUID(name, len, ...) { __VA_ARGS__ },
    FK_TABLES(FK_TABLE_UUID)
#undef FK_TABLE_UUID
};

FK_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    FK_ENTER(cuGetExportTable);
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < FK_NTABLES; i++) {
        if (memcmp(uuids[i], pExportTableId->bytes, 16) == 0) {
            *ppExportTable = tables[i].table;
            return CUDA_SUCCESS;
        }
    }
    if (fk_config()->trace) {
        const unsigned char *b = (const unsigned char *)pExportTableId->bytes;
        fprintf(stderr, "fakecuda: cuGetExportTable: no table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                "%02x%02x%02x%02x%02x%02x\n", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
                b[11], b[12], b[13], b[14], b[15]);
    }
    *ppExportTable = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FK_EXPORT uint64_t fakecuda_table_calls(const char *table)
{
    for (int i = 0; table && i < FK_NTABLES; i++)
        if (strcmp(tables[i].name, table) == 0)
            return atomic_load_explicit(&table_calls[i], memory_order_relaxed);
    return UINT64_MAX;
}

FK_EXPORT const void *fakecuda_table(const char *table, unsigned char uuid[16], int *slots)
{
    for (int i = 0; table && i < FK_NTABLES; i++) {
        if (strcmp(tables[i].name, table) == 0) {
            if (uuid)
                memcpy(uuid, uuids[i], 16);
            if (slots)
                *slots = tables[i].len;
            return tables[i].table;
        }
    }
    return NULL;
}
