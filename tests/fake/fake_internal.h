/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_internal.h: what the fake driver's files share, grouped by the file that owns each
 * declaration. Every function here runs inside libcuda.so.1 only; the fake NVML reaches the
 * record through the exported fakecuda_* functions instead (fakecuda.h).
 */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uthash.h>

#include "entries.h"
#include "fakecuda.h"

#define FK_MAX_DEV 16
#define FK_GRAN ((uint64_t)2 << 20) /* VMM granularity and pool/graph reservation step */
#define FK_ROUND_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))
#define FK_EXPORT __attribute__((visibility("default")))

/* ---- driver.c: configuration, call counters, devices, contexts ---- */

enum fk_entry {
#define FK_ENUM(sym, base, ver, ptsz) FK_##sym,
    FK_ENTRIES(FK_ENUM)
#undef FK_ENUM
    FK_NENTRIES
};
extern _Atomic uint64_t fk_calls[FK_NENTRIES];

struct fk_config {
    int ndev;                        /* physical devices (FAKECUDA_DEVICES) */
    uint64_t mem[FK_MAX_DEV];        /* FAKECUDA_MEM per physical device */
    uint64_t ctx_bytes;              /* FAKECUDA_CTX_BYTES */
    uint64_t module_bytes;           /* FAKECUDA_MODULE_BYTES: what each module or library load takes */
    const struct fk_profile *profile[FK_MAX_DEV]; /* FAKECUDA_PROFILE per physical device, NULL: "fake" */
    int trace;                       /* FAKECUDA_TRACE: 1 names the fake lacks are said on stderr, 2 every call too */
    uint64_t driver_limit[FK_MAX_DEV]; /* FAKECUDA_DRIVER_LIMIT per physical device, 0: not limited */
    bool limited;                    /* some device has a driver limit: this process is in the container */
    int driver_version;              /* FAKECUDA_DRIVER_VERSION */
    bool stub;                       /* FAKECUDA_STUB=1 */
    bool proc_oldest;                /* FAKECUDA_PROC_OLDEST=1: cuGetProcAddress answers a known name below
                                      * its first version with its oldest variant (a driver with an older
                                      * variant than any gpucap knows) */
    bool ctx_reuse;                  /* FAKECUDA_CTX_REUSE=1: a new context takes a destroyed one's handle */
    long destroy_delay_ms;           /* FAKECUDA_CTX_DESTROY_DELAY_MS: cuCtxDestroy returns that late */
    const char *record_path;         /* FAKECUDA_RECORD, NULL: private record */
    const char *error;               /* first bad setting, reported by cuInit; NULL when fine */
};

/* The configuration, read from the environment once (thread-safe, never fails). */
const struct fk_config *fk_config(void);

/* True once cuInit succeeded in this process. */
bool fk_initialized(void);

/* Counts a call of `sym`; in stub mode returns CUDA_ERROR_STUB_LIBRARY from the caller. */
#define FK_ENTER(sym)                                                                   \
    do {                                                                                \
        const struct fk_config *cfg_ = fk_config();                                     \
        atomic_fetch_add_explicit(&fk_calls[FK_##sym], 1, memory_order_relaxed);        \
        if (__builtin_expect(cfg_->trace > 1 || cfg_->stub, 0)) {                       \
            if (cfg_->trace > 1)                                                        \
                fk_trace_call(#sym);                                                    \
            if (cfg_->stub)                                                             \
                return CUDA_ERROR_STUB_LIBRARY;                                         \
        }                                                                               \
    } while (0)
/* FAKECUDA_TRACE=2: says each call on stderr. */
void fk_trace_call(const char *sym);
void fk_trace_result(const char *sym, CUresult rc);
/* FK_ENTER, then CUDA_ERROR_NOT_INITIALIZED before a successful cuInit. */
#define FK_ENTER_INIT(sym)                                                              \
    do {                                                                                \
        FK_ENTER(sym);                                                                  \
        if (!fk_initialized())                                                          \
            return CUDA_ERROR_NOT_INITIALIZED;                                          \
    } while (0)
/* Defines the exported entry point `sym` (parameters `params`, parenthesised) as FK_ENTER_INIT,
 * then `return call`: each ABI variant (_v2, legacy, _ptsz) of one static helper is one line. */
#define FK_FORWARD(sym, params, call)                                                   \
    FK_EXPORT CUresult sym params                                                       \
    {                                                                                   \
        FK_ENTER_INIT(sym);                                                             \
        CUresult rc_ = call;                                                            \
        if (rc_ != CUDA_SUCCESS && fk_config()->trace > 1)                              \
            fk_trace_result(#sym, rc_);                                                 \
        return rc_;                                                                     \
    }

/* Physical index of a CUDA ordinal (after CUDA_VISIBLE_DEVICES), or -1 for a bad ordinal. */
int fk_phys_of(CUdevice ordinal);
/* Declares `int phys`, the physical index of CUDA ordinal `dev`, or returns CUDA_ERROR_INVALID_DEVICE
 * from the caller for a bad ordinal. */
#define FK_DEVICE(dev, phys)                                                            \
    int phys = fk_phys_of(dev);                                                         \
    if (phys < 0)                                                                       \
        return CUDA_ERROR_INVALID_DEVICE
/* How many devices CUDA_VISIBLE_DEVICES leaves (the ordinals 0 .. n-1); 0 before cuInit. */
int fk_visible_count(void);

/* ---- device.c: the cards' profiles and identities ---- */

struct fk_profile {
    const char *key, *name; /* FAKECUDA_PROFILE's name for it; the device name (a %d: the physical index) */
    int cc_major, cc_minor, sms;
    uint64_t mem, l2;
    int clock_khz, mem_clock_khz, bus_width, threads_per_sm, blocks_per_sm, smem_optin, smem_per_sm, async_engines;
    uint16_t pci_device, uuid_tag; /* the PCI product id (vendor 10de); the UUID's second group */
    int bus;                       /* the PCI bus of physical device 0; device n is on bus + n */
};
/* The profile named `key`, or NULL; fk_profile_names lists the names for an error message. */
const struct fk_profile *fk_profile_find(const char *key);
const char *fk_profile_names(void);
/* A physical device's compute capability (its profile's; 0.0 for a bad index). */
void fk_device_cc(int phys, int *major, int *minor);
/* A physical device's UUID, as cuDeviceGetUuid_v2 gives it and as text ("GPU-..."). */
void fk_uuid_bytes(int phys, unsigned char out[16]);
void fk_uuid_string(int phys, char out[48]);

/* The in-process lock over every handle table (allocations, pools, VMM, arrays, graphs). */
extern pthread_mutex_t fk_mu;
void fk_lock(void);
void fk_unlock(void);

struct fk_ctx {
    int ordinal, phys;
    bool primary, green;
    bool alive;          /* created and not destroyed (primary: retained at least once) */
    int refs;            /* primary: retain count */
    unsigned flags;      /* primary: flags for cuDevicePrimaryCtxGetState */
    uint64_t charged;    /* FAKECUDA_CTX_BYTES this context holds on the record */
    size_t limits[3];    /* cuCtxSetLimit's stack size, printf FIFO, malloc heap (0: the default) */
    uint64_t id;         /* cuCtxGetId's answer: fresh each time the context becomes alive */
    unsigned settings[3]; /* extra.c: cuCtxSetFlags, cuCtxSetCacheConfig, cuCtxSetSharedMemConfig */
    struct fk_ctx *next; /* all contexts ever made, never freed (stale handles stay checkable;
                            FAKECUDA_CTX_REUSE=1: a destroyed one is made again, as a driver may) */
};

/* A live context by its handle (primary ones once retained), else NULL. Under fk_mu. */
struct fk_ctx *fk_ctx_lookup(CUcontext h);
/* The handle of ordinal `dev`'s primary context, without retaining it (CUDART_INTERFACE slot 2). */
CUresult fk_primary_handle(CUdevice dev, CUcontext *pctx);
/* The calling thread's current context if alive, else NULL. Under fk_mu. */
struct fk_ctx *fk_current_ctx(void);
/* The CUDA ordinal of a live green context (cuGreenCtxCreate), else -1. Takes fk_mu. */
int fk_green_ordinal(CUgreenCtx h);
/* The handle cuCtxGetCurrent answers (the top of the calling thread's stack, NULL when empty),
 * without counting a call of it (TOOLS_TLS slot 2). */
CUcontext fk_current_handle(void);
/* cuCtxGetId's answer for context `h` (NULL: the current one) without counting a call of it
 * (TOOLS_CONTEXT slot 4): CUDA_ERROR_INVALID_CONTEXT when it is not alive. */
CUresult fk_ctx_id(CUcontext h, unsigned long long *id);
/* fk_current_ctx as a CUresult: CUDA_ERROR_INVALID_CONTEXT when there is none. Under fk_mu. */
CUresult fk_require_ctx(struct fk_ctx **out);
/*
 * The "allocate and record" path of every entry point that makes an object in the current context
 * (linear and host memory, arrays, mipmapped arrays, streams, events). fk_entry_begin
 * makes a zeroed entry of `size` bytes, takes fk_mu, finds the current context (*c) and charges
 * `bytes` to its device. It returns the entry with fk_mu held, or NULL with *rc the error
 * (CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_CONTEXT) and nothing held or charged. The caller
 * fills and inserts the entry, then calls fk_unlock; or gives up with fk_entry_abort, which gives
 * `bytes` back, unlocks and frees the entry.
 */
void *fk_entry_begin(size_t size, uint64_t bytes, struct fk_ctx **c, CUresult *rc);
void fk_entry_abort(void *entry, struct fk_ctx *c, uint64_t bytes);
/* fk_entry_begin as the helpers of the entry points call it: declares `struct fk_ctx *c` and
 * `type *var`, the entry (fk_mu held), or returns fk_entry_begin's error from the caller. */
#define FK_ENTRY_BEGIN(type, var, bytes, c)                                             \
    struct fk_ctx *c;                                                                   \
    type *var;                                                                          \
    do {                                                                                \
        CUresult rc_;                                                                   \
        var = fk_entry_begin(sizeof *var, (bytes), &c, &rc_);                           \
        if (!var)                                                                       \
            return rc_;                                                                 \
    } while (0)
/* Defines `static type *fn(const void *h)`: the entry of the uthash table `table`, keyed by its
 * handle (a pointer), whose handle is `h`; NULL when there is none or h is NULL. Under fk_mu. */
#define FK_DEFINE_FIND(fn, type, table)                                                 \
    static type *fn(const void *h)                                                      \
    {                                                                                   \
        type *e_ = NULL;                                                                \
        if (h)                                                                          \
            HASH_FIND_PTR(table, &h, e_);                                               \
        return e_;                                                                      \
    }
/* A fresh, never reused, 256-aligned address range of `size` bytes for device `phys`
 * (legacy32: below 4 GiB);
 * returns 0 when the fake address space is spent. Called under fk_mu. */
CUdeviceptr fk_addr_alloc(int phys, uint64_t size, bool legacy32);
/* Whether a stream handle is acceptable (0, legacy, per-thread or a live stream). */
bool fk_stream_ok(CUstream s);
/* cuStreamGetId's answer for stream `h` of context `ctx` (the special handles: ctx's own), without
 * counting a call (TOOLS_CONTEXT slots 39 and 51): CUDA_ERROR_INVALID_CONTEXT for a context not
 * alive, CUDA_ERROR_INVALID_HANDLE for a stream that is not ctx's. `id` may be NULL. Takes fk_mu. */
CUresult fk_stream_id(CUcontext ctx, CUstream h, unsigned long long *id);

/* ---- record.c: the physical truth shared between processes ---- */

/* Reads state, threads (NULL: not wanted) and start time (fields 3, 20 and 22) of
 * /proc/<pid>/stat: 0, or -1 when unreadable. */
int fk_proc_stat(pid_t pid, char *state, long *threads, uint64_t *start);
/* Attaches (once) the record: the FAKECUDA_RECORD file or a private shared-anonymous map.
 * Returns 0 or a negative errno; the error is also reported on stderr once. */
int fk_record_attach(void);
/* Physical devices and capacity as the record holds them (the record's creator decides). */
int fk_record_ndev(void);
uint64_t fk_record_capacity(int phys);
/* Takes `bytes` of physical device `phys` for this process; CUDA_ERROR_OUT_OF_MEMORY when the
 * card (all live processes together) would exceed its capacity. Reaps dead processes first
 * when it would not fit. */
CUresult fk_charge(int phys, uint64_t bytes);
/* Gives back what fk_charge took (clamped to what this process holds). */
void fk_uncharge(int phys, uint64_t bytes);
/* Bytes held on `phys` by the live processes of the driver-limited container (FAKECUDA_DRIVER_LIMIT). */
uint64_t fk_record_container_used(int phys);
/* Adjusts this process's context count on a device (NVML lists processes holding one). */
void fk_record_ctx(int phys, int delta);
/* After fork(): the child holds nothing on the record and claims its own slot lazily. */
void fk_record_forget_slot(void);

/* ---- holders.c: who holds a process's device file ---- */

/*
 * Whether a process other than `owner` holds the device file (the pipe `ino` at descriptor `fd`)
 * that owner opened: a fork or raw clone child that neither exited nor exec'd. *hint / *hint_start:
 * the holder found last, tried first, and updated to the one found.
 */
bool fk_device_file_held(int32_t owner, int32_t fd, uint64_t ino, int32_t *hint, uint64_t *hint_start);

/* ---- memory.c: linear allocations, host memory, pools, pointer queries ---- */

/* FK_IPC: another process's allocation opened here (cuIpcOpenMemHandle): charged to the exporter.
 * FK_GLOBAL: a module's __device__ variable (module.c): part of the module's load. Neither is freed
 * by cuMemFree. */
enum fk_kind { FK_LINEAR, FK_LEGACY32, FK_MANAGED, FK_POOL, FK_GRAPH, FK_IPC, FK_GLOBAL };

struct fk_alloc {
    CUdeviceptr ptr;
    uint64_t size;        /* bytes the caller asked for (pitch*height for pitched) */
    uint64_t charged;     /* bytes this entry holds on the record itself (0 for pool/graph) */
    int ordinal, phys;
    enum fk_kind kind;
    struct fk_ctx *ctx;   /* NULL for pool and graph allocations */
    struct fk_pool *pool; /* FK_POOL */
    UT_hash_handle hh;
};

/* Looks up the allocation holding `p` (exactly or inside); NULL if none. Under fk_mu. */
struct fk_alloc *fk_alloc_find(CUdeviceptr p, bool interior);
/* Adds an entry for a graph allocation made by graph.c. Under fk_mu. */
void fk_alloc_insert(struct fk_alloc *a);
/* Adds entry `a` of `kind`, made in context c (its ordinal, device and context). Under fk_mu. */
void fk_alloc_insert_in(struct fk_alloc *a, struct fk_ctx *c, enum fk_kind kind);
/* Removes and frees an entry (does not touch the record). Under fk_mu. */
void fk_alloc_remove(struct fk_alloc *a);
/* What an address is: 1 device memory (an allocation or a VMM mapping), 0 host memory the driver
 * knows (pinned, registered), -1 unknown. Under fk_mu. */
int fk_ptr_kind(CUdeviceptr p);
/* host.c: the pinned or registered host range holding `p` (*base, *size), if any. Under fk_mu. */
bool fk_host_range(uintptr_t p, uint64_t *base, uint64_t *size);
/* Frees every linear allocation of a context being destroyed. Under fk_mu. */
void fk_free_ctx_allocs(struct fk_ctx *c);
/* Releases pool memory above each pool's threshold, as at a synchronisation. Under fk_mu. */
void fk_pools_sync(void);
/* Frees a pool allocation back to its pool. Under fk_mu. */
void fk_pool_free(struct fk_alloc *a);
/* Drops every in-process table after fork() in the child. */
void fk_memory_forget(void);

/* ---- graph.c ---- */
/* A graph allocation got freed outside a graph launch (cuMemFree*, cuMemFreeAsync). Under fk_mu. */
void fk_graph_alloc_freed(struct fk_alloc *a);
void fk_graph_forget(void);
/* Destroys the executable graphs of a context being destroyed, frees their live allocations and
 * trims the device's graph reserve. Under fk_mu. */
void fk_graph_free_ctx(struct fk_ctx *c);
/* Stream capture: whether `s` is capturing, and the nodes cuMemAllocAsync / cuMemFreeAsync add to
 * the captured graph instead of running. Under fk_mu. */
bool fk_graph_capturing(CUstream s);
CUresult fk_graph_capture_alloc(CUstream s, int ordinal, uint64_t bytes, CUdeviceptr *dptr);
CUresult fk_graph_capture_free(CUstream s, CUdeviceptr p);

/* ---- export.c and md2.c: the runtime's private tables ---- */
/* Runs and drops the context-local storage destructors of a context that goes. Not under fk_mu. */
void fk_cls_run(struct fk_ctx *c);
void fk_cls_forget(void);
struct fk_md2 {
    uint8_t state[16], checksum[16], buf[16];
    unsigned n; /* bytes in buf */
};
void fk_md2_init(struct fk_md2 *m);
void fk_md2_update(struct fk_md2 *m, const void *data, size_t len);
void fk_md2_final(struct fk_md2 *m, uint8_t digest[16]);
/* HMAC-MD2 with a 16-byte key (one MD2 block). */
void fk_hmac_md2(const uint8_t key[16], const void *msg, size_t len, uint8_t mac[16]);

/* ---- image.c: the code an image holds ---- */

#define FK_IMAGE_MAX 32
struct fk_code {
    bool ptx;          /* PTX (compiled at the load) or a cubin */
    uint16_t arch;     /* 86 for sm_86 */
    uint16_t ptx_arch; /* the PTX version a cubin was compiled from (its arch where unknown) */
};
struct fk_image {
    int n;
    bool any;          /* a form or part the fake does not read: it claims nothing about it */
    struct fk_code code[FK_IMAGE_MAX];
};
/* Reads the architectures of the code in `image` (a fat binary or its runtime wrapper, a CUDA ELF
 * file, PTX text; anything else: `any`) at its load, while the caller's bytes are there. */
void fk_image_read(const void *image, struct fk_image *img);
/* The code a device of compute capability major.minor runs from the image: its binary and PTX
 * versions (the answers of CU_FUNC_ATTRIBUTE_BINARY_VERSION and PTX_VERSION), or
 * CUDA_ERROR_NO_BINARY_FOR_GPU when it can run none of it. */
CUresult fk_image_select(const struct fk_image *img, int major, int minor, int *binary, int *ptx);

/* ---- module.c: modules, libraries, functions, launches ---- */
/* Loads a module from an image (a fat binary, cubin or PTX: not parsed) in the current context,
 * charging FAKECUDA_MODULE_BYTES there. */
CUresult fk_module_load_image(CUmodule *module, const void *image);
/* Gives back what modules and libraries took in a context being destroyed. Under fk_mu. */
void fk_module_free_ctx(struct fk_ctx *c);
void fk_module_forget(void);

/* ---- vmm.c / array.c ---- */
/* Device ordinal of a VMM-mapped address, or -1. Under fk_mu. */
int fk_vmm_ordinal(CUdeviceptr p, CUdeviceptr *base, uint64_t *size);
void fk_vmm_forget(void);
void fk_array_free_ctx(struct fk_ctx *c);
void fk_array_forget(void);

#endif
