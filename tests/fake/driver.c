/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.c: the fake driver's frame. It owns the configuration (FAKECUDA_* and
 * CUDA_VISIBLE_DEVICES, read once), the per-entry-point call counters and the trace, cuInit,
 * contexts (per-thread current-context stacks, primary and green contexts), the fake address
 * space, fork() handling and cuGetProcAddress with its version table (entries.h). Devices are
 * device.c's, streams and events stream.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaProfiler.h>

#include "fake_internal.h"
#include "common/units.h"

_Atomic uint64_t fk_calls[FK_NENTRIES];

pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;

void fk_lock(void)
{
    pthread_mutex_lock(&fk_mu);
}

void fk_unlock(void)
{
    pthread_mutex_unlock(&fk_mu);
}

/* ---- configuration ---- */

static struct fk_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static char cfg_error[256];

static void after_fork_prepare(void);
static void after_fork_parent(void);
static void after_fork_child(void);

static void bad_setting(const char *name, const char *value, const char *why)
{
    if (cfg.error)
        return;
    snprintf(cfg_error, sizeof cfg_error, "%s=\"%s\": %s", name, value, why);
    cfg.error = cfg_error;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_bytes(const char *s, uint64_t *out)
{
    struct gpc_size sz;
    if (gpc_parse_size(s, &sz) < 0 || sz.is_percent)
        return false;
    *out = sz.bytes;
    return true;
}

/* A size, or one per FAKECUDA_DEVICES device, each above 0, into out[FK_MAX_DEV]; false if malformed. */
static bool parse_sizes(const char *name, const char *v, uint64_t *out)
{
    char buf[1024];
    uint64_t vals[FK_MAX_DEV];
    int count = 0;
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (count == FK_MAX_DEV || !parse_bytes(tok, &vals[count]) || vals[count] == 0) {
            bad_setting(name, v, "want one size, or one per device, each above 0");
            return false;
        }
        count++;
    }
    if (count == 1) {
        for (int d = 0; d < FK_MAX_DEV; d++)
            out[d] = vals[0];
    } else if (count > 1 && count == cfg.ndev) {
        memcpy(out, vals, sizeof vals[0] * (size_t)count);
    } else {
        bad_setting(name, v, "a list needs exactly one size per FAKECUDA_DEVICES device");
        return false;
    }
    return true;
}

/* FAKECUDA_PROFILE: one profile for every device, or one per FAKECUDA_DEVICES device. */
static void parse_profiles(const char *v)
{
    char buf[1024];
    const struct fk_profile *vals[FK_MAX_DEV];
    int count = 0;
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (count == FK_MAX_DEV || !(vals[count] = fk_profile_find(tok))) {
            char why[128];
            snprintf(why, sizeof why, "want one of %s, or one per device", fk_profile_names());
            bad_setting("FAKECUDA_PROFILE", v, why);
            return;
        }
        count++;
    }
    if (count == 1) {
        for (int d = 0; d < FK_MAX_DEV; d++)
            cfg.profile[d] = vals[0];
    } else if (count > 1 && count == cfg.ndev) {
        memcpy(cfg.profile, vals, sizeof vals[0] * (size_t)count);
    } else {
        bad_setting("FAKECUDA_PROFILE", v, "a list needs exactly one profile per FAKECUDA_DEVICES device");
    }
}

static void load_config(void)
{
    const char *v;
    long n;
    cfg.ndev = 1;
    cfg.driver_version = 13000;
    for (int d = 0; d < FK_MAX_DEV; d++)
        cfg.mem[d] = (uint64_t)16 << 30;
    if ((v = getenv("FAKECUDA_DEVICES")) && *v) {
        if (parse_int(v, 0, FK_MAX_DEV, &n))
            cfg.ndev = (int)n;
        else
            bad_setting("FAKECUDA_DEVICES", v, "want 0 to 16");
    }
    if ((v = getenv("FAKECUDA_PROFILE")) && *v)
        parse_profiles(v);
    for (int d = 0; d < FK_MAX_DEV; d++)
        if (cfg.profile[d])
            cfg.mem[d] = cfg.profile[d]->mem;
    if ((v = getenv("FAKECUDA_MEM")) && *v)
        parse_sizes("FAKECUDA_MEM", v, cfg.mem);
    /* The driver's own per-container limit (cgroup v2, driver r615+): this process belongs to the
     * limited container; memory queries answer the limit and allocations past it fail. */
    if ((v = getenv("FAKECUDA_DRIVER_LIMIT")) && *v && parse_sizes("FAKECUDA_DRIVER_LIMIT", v, cfg.driver_limit))
        cfg.limited = true;
    if ((v = getenv("FAKECUDA_CTX_BYTES")) && *v && !parse_bytes(v, &cfg.ctx_bytes))
        bad_setting("FAKECUDA_CTX_BYTES", v, "not a size");
    if ((v = getenv("FAKECUDA_MODULE_BYTES")) && *v && !parse_bytes(v, &cfg.module_bytes))
        bad_setting("FAKECUDA_MODULE_BYTES", v, "not a size");
    cfg.trace = (v = getenv("FAKECUDA_TRACE")) ? atoi(v) : 0;
    if ((v = getenv("FAKECUDA_DRIVER_VERSION")) && *v) {
        if (parse_int(v, 1000, 1000000, &n))
            cfg.driver_version = (int)n;
        else
            bad_setting("FAKECUDA_DRIVER_VERSION", v, "want e.g. 13000");
    }
    cfg.stub = (v = getenv("FAKECUDA_STUB")) && strcmp(v, "1") == 0;
    cfg.proc_oldest = (v = getenv("FAKECUDA_PROC_OLDEST")) && strcmp(v, "1") == 0;
    cfg.ctx_reuse = (v = getenv("FAKECUDA_CTX_REUSE")) && strcmp(v, "1") == 0;
    if ((v = getenv("FAKECUDA_CTX_DESTROY_DELAY_MS")) && *v && !parse_int(v, 0, 10000, &cfg.destroy_delay_ms))
        bad_setting("FAKECUDA_CTX_DESTROY_DELAY_MS", v, "want 0 to 10000");
    if ((v = getenv("FAKECUDA_RECORD")) && *v)
        cfg.record_path = strdup(v);
    pthread_atfork(after_fork_prepare, after_fork_parent, after_fork_child);
}

void fk_trace_call(const char *sym)
{
    fprintf(stderr, "fakecuda: %s\n", sym);
}

void fk_trace_result(const char *sym, CUresult rc)
{
    fprintf(stderr, "fakecuda: %s -> %d\n", sym, (int)rc);
}

/* Read once; every later call is one load (entry points call it on each call: FK_ENTER). */
static const struct fk_config *_Atomic cfg_ready;

const struct fk_config *fk_config(void)
{
    const struct fk_config *c = atomic_load_explicit(&cfg_ready, memory_order_acquire);
    if (__builtin_expect(c != NULL, 1))
        return c;
    pthread_once(&cfg_once, load_config);
    atomic_store_explicit(&cfg_ready, &cfg, memory_order_release);
    return &cfg;
}

/* ---- cuInit and the visible devices ---- */

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool inited;
static int vis_phys[FK_MAX_DEV];
static int vis_n;

bool fk_initialized(void)
{
    return atomic_load_explicit(&inited, memory_order_acquire);
}

int fk_phys_of(CUdevice ordinal)
{
    return ordinal >= 0 && ordinal < vis_n ? vis_phys[ordinal] : -1;
}

/* CUDA_VISIBLE_DEVICES as the driver reads it: indices or (prefixes of) UUIDs, the first bad or
 * repeated entry ends the list. */
static void compute_visible(int ndev)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    vis_n = 0;
    if (!env) {
        for (int p = 0; p < ndev; p++)
            vis_phys[vis_n++] = p;
        return;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    char *save, *tok = strtok_r(buf, ",", &save);
    for (; tok && vis_n < FK_MAX_DEV; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
            tok[--len] = 0;
        int phys = -1;
        long n;
        if (len && tok[0] >= '0' && tok[0] <= '9' && parse_int(tok, 0, ndev - 1, &n)) {
            phys = (int)n;
        } else if (len > 4 && strncmp(tok, "GPU-", 4) == 0) {
            int matches = 0;
            for (int p = 0; p < ndev; p++) {
                char u[48];
                fk_uuid_string(p, u);
                if (strncmp(u, tok, len) == 0) {
                    matches++;
                    phys = p;
                }
            }
            if (matches != 1)
                phys = -1;
        }
        for (int i = 0; i < vis_n && phys >= 0; i++)
            if (vis_phys[i] == phys)
                phys = -1;
        if (phys < 0)
            break;
        vis_phys[vis_n++] = phys;
    }
}

FK_EXPORT CUresult cuInit(unsigned int Flags)
{
    FK_ENTER(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&init_mu);
    if (!fk_initialized()) {
        if (cfg.error) {
            fprintf(stderr, "fakecuda: bad setting %s\n", cfg.error);
            rc = CUDA_ERROR_INVALID_VALUE;
        } else if (fk_record_attach()) {
            rc = CUDA_ERROR_OPERATING_SYSTEM;
        } else {
            compute_visible(fk_record_ndev());
            if (vis_n == 0)
                rc = CUDA_ERROR_NO_DEVICE;
            else
                atomic_store_explicit(&inited, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&init_mu);
    return rc;
}

FK_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    FK_ENTER(cuDriverGetVersion);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = cfg.driver_version;
    return CUDA_SUCCESS;
}

int fk_visible_count(void)
{
    return vis_n;
}

/* ---- the fake address space ---- */

/* Device `phys` owns [(phys+1) << 48, (phys+2) << 48); legacy 32-bit allocations share
 * [256 MiB, 4 GiB); nothing is ever handed out twice. */
static uint64_t bump[FK_MAX_DEV];
static uint64_t bump32 = (uint64_t)256 << 20;

CUdeviceptr fk_addr_alloc(int phys, uint64_t size, bool legacy32)
{
    if (size > ((uint64_t)1 << 47))
        return 0;
    uint64_t step = FK_ROUND_UP(size ? size : 1, 256);
    if (legacy32) {
        if (bump32 + step > ((uint64_t)1 << 32))
            return 0;
        CUdeviceptr p = bump32;
        bump32 += step;
        return p;
    }
    uint64_t base = (uint64_t)(phys + 1) << 48;
    if (bump[phys] + step > ((uint64_t)1 << 48))
        return 0;
    CUdeviceptr p = base + bump[phys];
    bump[phys] += step;
    return p;
}

/* ---- contexts ---- */

#define FK_STACK_MAX 64

struct fk_ctx_key {
    struct fk_ctx *c;
    UT_hash_handle hh;
};

static struct fk_ctx primary[FK_MAX_DEV];
static struct fk_ctx *all_ctx;          /* created and green contexts, never freed */
static struct fk_ctx_key *ctx_set;      /* every valid handle, primary included */
static __thread struct fk_ctx *tls_stack[FK_STACK_MAX];
static __thread int tls_depth;

static struct fk_ctx_key *ctx_key(const void *c)
{
    struct fk_ctx_key *k;
    HASH_FIND_PTR(ctx_set, &c, k);
    return k;
}

static void ctx_register(struct fk_ctx *c)
{
    struct fk_ctx_key *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->c = c;
    HASH_ADD_PTR(ctx_set, c, k);
}

/* A context handle a caller passed in: a known, non-green context (alive or not). */
static struct fk_ctx *ctx_from_handle(CUcontext h)
{
    struct fk_ctx_key *k = h ? ctx_key(h) : NULL;
    return k && !k->c->green ? k->c : NULL;
}

/* A handle that may become current: alive, or a primary context (active again on retain). */
static struct fk_ctx *ctx_bindable(CUcontext h)
{
    struct fk_ctx *c = ctx_from_handle(h);
    return c && (c->alive || c->primary) ? c : NULL;
}

struct fk_ctx *fk_current_ctx(void)
{
    struct fk_ctx *c = tls_depth ? tls_stack[tls_depth - 1] : NULL;
    return c && c->alive ? c : NULL;
}

CUresult fk_require_ctx(struct fk_ctx **out)
{
    *out = fk_current_ctx();
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

void *fk_entry_begin(size_t size, uint64_t bytes, struct fk_ctx **c, CUresult *rc)
{
    void *entry = calloc(1, size);
    if (!entry) {
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    fk_lock();
    *rc = fk_require_ctx(c);
    if (*rc == CUDA_SUCCESS)
        *rc = fk_charge((*c)->phys, bytes);
    if (*rc == CUDA_SUCCESS)
        return entry;
    fk_unlock();
    free(entry);
    return NULL;
}

void fk_entry_abort(void *entry, struct fk_ctx *c, uint64_t bytes)
{
    fk_uncharge(c->phys, bytes);
    fk_unlock();
    free(entry);
}

/* Ids of contexts (cuCtxGetId: "unique for the life of the program"): a context made alive again
 * (a destroyed handle made again with FAKECUDA_CTX_REUSE, a primary context retained after its
 * reset) is a new context, with nothing of the old one's, so it gets a new id. Under fk_mu. */
static uint64_t last_ctx_id;

static CUresult ctx_activate(struct fk_ctx *c)
{
    CUresult rc = fk_charge(c->phys, cfg.ctx_bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    c->id = ++last_ctx_id;
    c->charged = cfg.ctx_bytes;
    c->alive = true;
    fk_record_ctx(c->phys, +1);
    return CUDA_SUCCESS;
}

/* The driver's default printf FIFO and malloc heap (CU_LIMIT_PRINTF_FIFO_SIZE = 1,
 * CU_LIMIT_MALLOC_HEAP_SIZE = 2): part of FAKECUDA_CTX_BYTES. */
static const size_t limit_default[3] = {1024, 1 << 20, 8 << 20};

/* What a heap of `value` bytes takes on the card beyond the default the context already holds. */
static uint64_t heap_beyond(int i, size_t value)
{
    size_t v = value ? value : limit_default[i];
    return i > 0 && v > limit_default[i] ? v - limit_default[i] : 0;
}

/* Destroys what lives in a context, as the driver does when the context goes away. */
static void ctx_deactivate(struct fk_ctx *c)
{
    for (int i = 0; i < 3; i++) {
        fk_uncharge(c->phys, heap_beyond(i, c->limits[i]));
        c->limits[i] = 0;
    }
    fk_graph_free_ctx(c);
    fk_free_ctx_allocs(c);
    fk_array_free_ctx(c);
    fk_module_free_ctx(c);
    fk_uncharge(c->phys, c->charged);
    c->charged = 0;
    c->alive = false;
    fk_record_ctx(c->phys, -1);
}

static CUresult push_ctx(struct fk_ctx *c)
{
    if (tls_depth == FK_STACK_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    tls_stack[tls_depth++] = c;
    return CUDA_SUCCESS;
}

/* With FAKECUDA_CTX_REUSE=1, the most recently made context that was destroyed (its handle is
 * given out again, possibly for another device); else NULL. Under fk_mu. */
static struct fk_ctx *ctx_reusable(void)
{
    if (!fk_config()->ctx_reuse)
        return NULL;
    for (struct fk_ctx *c = all_ctx; c; c = c->next)
        if (!c->alive)
            return c;
    return NULL;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev, bool green)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    fk_lock();
    struct fk_ctx *c = ctx_reusable();
    bool reused = c != NULL;
    if (!c)
        c = calloc(1, sizeof *c);
    if (!c) {
        fk_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->ordinal = dev;
    c->phys = phys;
    c->green = green;
    CUresult rc = green || tls_depth < FK_STACK_MAX ? ctx_activate(c) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        if (!reused) {
            c->next = all_ctx;
            all_ctx = c;
            ctx_register(c);
        }
        if (!green)
            push_ctx(c);
        *pctx = (CUcontext)c;
    }
    fk_unlock();
    if (rc != CUDA_SUCCESS && !reused)
        free(c);
    return rc;
}

FK_FORWARD(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev), ctx_create(pctx, dev, false))
FK_FORWARD(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), ctx_create(pctx, dev, false))

FK_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                  unsigned int flags, CUdevice dev)
{
    FK_ENTER_INIT(cuCtxCreate_v3);
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, dev, false);
}

FK_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                  CUdevice dev)
{
    FK_ENTER_INIT(cuCtxCreate_v4);
    if (ctxCreateParams && ctxCreateParams->numExecAffinityParams > 0 && !ctxCreateParams->execAffinityParams)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, dev, false);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    fk_lock();
    struct fk_ctx *c = ctx_from_handle(ctx);
    bool ok = c && !c->primary && c->alive;
    fk_unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    fk_cls_run(c); /* the runtime's context-local storage goes first, outside the lock */
    fk_lock();
    if (!c->alive) {
        fk_unlock();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    ctx_deactivate(c);
    if (tls_depth && tls_stack[tls_depth - 1] == c)
        tls_depth--;
    fk_unlock();
    /* The context is gone (its handle may be given out again) before the call returns. */
    if (cfg.destroy_delay_ms)
        usleep((useconds_t)cfg.destroy_delay_ms * 1000);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuCtxDestroy, (CUcontext ctx), ctx_destroy(ctx))
FK_FORWARD(cuCtxDestroy_v2, (CUcontext ctx), ctx_destroy(ctx))

FK_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FK_ENTER_INIT(cuCtxSetCurrent);
    if (!ctx) {
        if (tls_depth)
            tls_depth--;
        return CUDA_SUCCESS;
    }
    fk_lock();
    struct fk_ctx *c = ctx_bindable(ctx);
    fk_unlock();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth)
        tls_stack[tls_depth - 1] = c;
    else
        push_ctx(c);
    return CUDA_SUCCESS;
}

CUcontext fk_current_handle(void)
{
    return tls_depth ? (CUcontext)tls_stack[tls_depth - 1] : NULL;
}

FK_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FK_ENTER_INIT(cuCtxGetCurrent);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = fk_current_handle();
    return CUDA_SUCCESS;
}

static CUresult ctx_get_device(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_ctx *c = ctx ? ctx_from_handle(ctx) : fk_current_ctx();
    CUresult rc = c && c->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        *device = c->ordinal;
    fk_unlock();
    return rc;
}

FK_FORWARD(cuCtxGetDevice, (CUdevice *device), ctx_get_device(device, NULL))
FK_FORWARD(cuCtxGetDevice_v2, (CUdevice *device, CUcontext ctx), ctx_get_device(device, ctx))

/*
 * cuCtxSetLimit and cuCtxGetLimit of the current context. The printf FIFO and the malloc heap take
 * memory on the card at the call beyond their defaults (CUDA_ERROR_OUT_OF_MEMORY when it does not
 * fit), given back by a smaller setting or the context's end; the stack size is kept, with no
 * memory modelled. CU_LIMIT_CIG_ENABLED (cuda.h: "a non-zero value indicates this CUDA context is
 * a CIG-enabled context. Can only be queried") reads 0: the fake makes no CIG (CUDA in graphics)
 * contexts. cuBLASLt 13 asks it at cublasLtCreate and fails the handle (CUBLAS_STATUS_NOT_INITIALIZED)
 * when the query fails. Every other limit is CUDA_ERROR_UNSUPPORTED_LIMIT.
 */
static CUresult set_limit(CUlimit limit, size_t value)
{
    if ((unsigned)limit > CU_LIMIT_MALLOC_HEAP_SIZE)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    int i = (int)limit;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    if (rc == CUDA_SUCCESS) {
        uint64_t had = heap_beyond(i, c->limits[i]), want = heap_beyond(i, value);
        if (want > had)
            rc = fk_charge(c->phys, want - had);
        else
            fk_uncharge(c->phys, had - want);
        if (rc == CUDA_SUCCESS)
            c->limits[i] = value;
    }
    fk_unlock();
    return rc;
}

static CUresult get_limit(size_t *pvalue, CUlimit limit)
{
    if ((unsigned)limit > CU_LIMIT_MALLOC_HEAP_SIZE && limit != CU_LIMIT_CIG_ENABLED)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (!pvalue)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_ctx *c;
    CUresult rc = fk_require_ctx(&c);
    if (rc == CUDA_SUCCESS && limit == CU_LIMIT_CIG_ENABLED)
        *pvalue = 0;
    else if (rc == CUDA_SUCCESS)
        *pvalue = c->limits[limit] ? c->limits[limit] : limit_default[limit];
    fk_unlock();
    return rc;
}

FK_FORWARD(cuCtxSetLimit, (CUlimit limit, size_t value), set_limit(limit, value))
FK_FORWARD(cuCtxGetLimit, (size_t *pvalue, CUlimit limit), get_limit(pvalue, limit))

static CUresult ctx_push(CUcontext ctx)
{
    fk_lock();
    struct fk_ctx *c = ctx_bindable(ctx);
    fk_unlock();
    return c ? push_ctx(c) : CUDA_ERROR_INVALID_CONTEXT;
}

FK_FORWARD(cuCtxPushCurrent, (CUcontext ctx), ctx_push(ctx))
FK_FORWARD(cuCtxPushCurrent_v2, (CUcontext ctx), ctx_push(ctx))

static CUresult ctx_pop(CUcontext *pctx)
{
    if (!tls_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fk_ctx *c = tls_stack[--tls_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuCtxPopCurrent, (CUcontext *pctx), ctx_pop(pctx))
FK_FORWARD(cuCtxPopCurrent_v2, (CUcontext *pctx), ctx_pop(pctx))

static CUresult ctx_sync(CUcontext ctx)
{
    fk_lock();
    struct fk_ctx *c = ctx ? ctx_from_handle(ctx) : fk_current_ctx();
    CUresult rc = c && c->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        fk_pools_sync();
    fk_unlock();
    return rc;
}

FK_FORWARD(cuCtxSynchronize, (void), ctx_sync(NULL))
FK_FORWARD(cuCtxSynchronize_v2, (CUcontext ctx), ctx_sync(ctx))

/* The primary context of ordinal `dev`, registered on first use. Under fk_mu. */
static struct fk_ctx *primary_of(CUdevice dev, int phys)
{
    struct fk_ctx *c = &primary[dev];
    if (!c->primary) {
        c->primary = true;
        c->ordinal = dev;
        c->phys = phys;
        ctx_register(c);
    }
    return c;
}

CUresult fk_primary_handle(CUdevice dev, CUcontext *pctx)
{
    FK_DEVICE(dev, phys);
    fk_lock();
    *pctx = (CUcontext)primary_of(dev, phys);
    fk_unlock();
    return CUDA_SUCCESS;
}

struct fk_ctx *fk_ctx_lookup(CUcontext h)
{
    struct fk_ctx *c = ctx_from_handle(h);
    return c && c->alive ? c : NULL;
}

/* Primary contexts are static, one per ordinal, registered at first retain; the handle stays
 * the same across retain/release cycles, as the driver's does. */
FK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FK_ENTER_INIT(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    fk_lock();
    struct fk_ctx *c = primary_of(dev, phys);
    CUresult rc = CUDA_SUCCESS;
    if (c->refs == 0)
        rc = ctx_activate(c);
    if (rc == CUDA_SUCCESS) {
        c->refs++;
        *pctx = (CUcontext)c;
    }
    fk_unlock();
    return rc;
}

/* Before the last reference of a primary context goes (`all`: a reset): its context-local storage
 * destructors run, outside the lock (they may call the driver). */
static void primary_cls(CUdevice dev, bool all)
{
    fk_lock();
    struct fk_ctx *c = &primary[dev];
    bool last = c->refs > 0 && (all || c->refs == 1);
    fk_unlock();
    if (last)
        fk_cls_run(c);
}

static CUresult primary_release(CUdevice dev)
{
    FK_DEVICE(dev, phys);
    (void)phys;
    primary_cls(dev, false);
    fk_lock();
    struct fk_ctx *c = &primary[dev];
    CUresult rc = c->refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS && --c->refs == 0)
        ctx_deactivate(c);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuDevicePrimaryCtxRelease, (CUdevice dev), primary_release(dev))
FK_FORWARD(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), primary_release(dev))

static CUresult primary_reset(CUdevice dev)
{
    FK_DEVICE(dev, phys);
    (void)phys;
    primary_cls(dev, true);
    fk_lock();
    struct fk_ctx *c = &primary[dev];
    if (c->refs > 0) {
        c->refs = 0;
        ctx_deactivate(c);
    }
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDevicePrimaryCtxReset, (CUdevice dev), primary_reset(dev))
FK_FORWARD(cuDevicePrimaryCtxReset_v2, (CUdevice dev), primary_reset(dev))

FK_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FK_ENTER_INIT(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    (void)phys;
    fk_lock();
    *flags = primary[dev].flags;
    *active = primary[dev].refs > 0;
    fk_unlock();
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    FK_DEVICE(dev, phys);
    (void)phys;
    if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
                            CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    primary[dev].flags = flags;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned int flags), primary_set_flags(dev, flags))
FK_FORWARD(cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned int flags), primary_set_flags(dev, flags))

FK_FORWARD(cuGreenCtxCreate,
           (CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags),
           ctx_create((CUcontext *)phCtx, dev, true))

FK_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    FK_ENTER_INIT(cuGreenCtxDestroy);
    fk_lock();
    struct fk_ctx_key *k = hCtx ? ctx_key(hCtx) : NULL;
    CUresult rc = k && k->c->green && k->c->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        ctx_deactivate(k->c);
    fk_unlock();
    return rc;
}

int fk_green_ordinal(CUgreenCtx h)
{
    fk_lock();
    struct fk_ctx_key *k = h ? ctx_key(h) : NULL;
    int ordinal = k && k->c->green && k->c->alive ? k->c->ordinal : -1;
    fk_unlock();
    return ordinal;
}

/* ---- fork(): the child starts with nothing of its parent's on the card ---- */

static void after_fork_prepare(void)
{
    fk_lock();
}

static void after_fork_parent(void)
{
    fk_unlock();
}

static void after_fork_child(void)
{
    fk_record_forget_slot();
    fk_memory_forget();
    fk_graph_forget();
    fk_vmm_forget();
    fk_array_forget();
    fk_module_forget();
    fk_cls_forget();
    for (struct fk_ctx *c = all_ctx; c; c = c->next)
        c->charged = 0;
    for (int d = 0; d < FK_MAX_DEV; d++)
        primary[d].charged = 0;
    fk_unlock();
}

/* ---- cuGetProcAddress ---- */

struct fk_proc {
    const char *sym, *base;
    int version;
    bool ptsz;
    void *fn;
};

static const struct fk_proc procs[FK_NENTRIES] = {
#define FK_ROW(sym, base, ver, pt) { #sym, #base, ver, pt, (void *)&sym },
    FK_ENTRIES(FK_ROW)
#undef FK_ROW
};

static CUresult proc_lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn || (flags & ~(cuuint64_t)3) || cudaVersion > cfg.driver_version)
        return CUDA_ERROR_INVALID_VALUE;
    const struct fk_proc *best = NULL, *best_pt = NULL;
    bool known = false;
    for (int i = 0; i < FK_NENTRIES; i++) {
        const struct fk_proc *p = &procs[i];
        if (strcmp(p->base, symbol) != 0)
            continue;
        known = true;
        if (p->version > cudaVersion)
            continue;
        const struct fk_proc **slot = p->ptsz ? &best_pt : &best;
        if (!*slot || p->version > (*slot)->version)
            *slot = p;
    }
    const struct fk_proc *pick = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_pt ? best_pt : best;
    for (int i = 0; !pick && known && fk_config()->proc_oldest && i < FK_NENTRIES; i++)
        if (strcmp(procs[i].base, symbol) == 0 && !procs[i].ptsz)
            pick = &procs[i]; /* rows are in version order: the first is the oldest */
    *pfn = pick ? pick->fn : NULL;
    if (status)
        *status = pick ? CU_GET_PROC_ADDRESS_SUCCESS
                       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (cfg.trace > 2)
        fprintf(stderr, "fakecuda: cuGetProcAddress(%s, %d, %llu): %s\n", symbol, cudaVersion,
                (unsigned long long)flags, pick ? pick->sym : "none");
    if (!known && cfg.trace && *symbol)
        fprintf(stderr, "fakecuda: cuGetProcAddress: no %s (version %d)\n", symbol, cudaVersion);
    /* A name the driver lacks is CUDA_ERROR_NOT_FOUND with NULL, as drivers answer it (cuda.h says
     * CUDA_SUCCESS): the runtime treats its optional entry points as absent only on that answer. */
    return known ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FK_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    FK_ENTER(cuGetProcAddress);
    return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

FK_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    FK_ENTER(cuGetProcAddress_v2);
    return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

FK_EXPORT int fakecuda_row(int i, const char **sym, const char **base, int *version, int *per_thread)
{
    if (i < 0 || i >= FK_NENTRIES)
        return -1;
    *sym = procs[i].sym;
    *base = procs[i].base;
    *version = procs[i].version;
    *per_thread = procs[i].ptsz;
    return 0;
}

FK_EXPORT uint64_t fakecuda_calls(const char *exported_name)
{
    for (int i = 0; exported_name && i < FK_NENTRIES; i++)
        if (strcmp(procs[i].sym, exported_name) == 0)
            return atomic_load_explicit(&fk_calls[i], memory_order_relaxed);
    return UINT64_MAX;
}

FK_EXPORT int fakecuda_ctx_grow(uint64_t bytes)
{
    fk_lock();
    struct fk_ctx *c = fk_current_ctx();
    int rc = c && fk_charge(c->phys, bytes) == CUDA_SUCCESS ? 0 : -1;
    if (rc == 0)
        c->charged += bytes;
    fk_unlock();
    return rc;
}

FK_EXPORT void *fakecuda_ctx_create(int ordinal)
{
    CUcontext c = NULL;
    return fk_initialized() && ctx_create(&c, ordinal, false) == CUDA_SUCCESS ? (void *)c : NULL;
}
