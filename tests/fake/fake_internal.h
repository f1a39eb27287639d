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
        atomic_fetch_add_explicit(&fk_calls[FK_##sym], 1, memory_order_relaxed);        \
        if (fk_config()->stub)                                                          \
            return CUDA_ERROR_STUB_LIBRARY;                                             \
    } while (0)
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
        return call;                                                                    \
    }

/* Physical index of a CUDA ordinal (after CUDA_VISIBLE_DEVICES), or -1 for a bad ordinal. */
int fk_phys_of(CUdevice ordinal);

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
    struct fk_ctx *next; /* all contexts ever made, never freed (stale handles stay checkable;
                            FAKECUDA_CTX_REUSE=1: a destroyed one is made again, as a driver may) */
};

/* The calling thread's current context if alive, else NULL. Under fk_mu. */
struct fk_ctx *fk_current_ctx(void);
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
/* A fresh, never reused, 256-aligned address range of `size` bytes for device `phys`
 * (legacy32: below 4 GiB);
 * returns 0 when the fake address space is spent. Called under fk_mu. */
CUdeviceptr fk_addr_alloc(int phys, uint64_t size, bool legacy32);
/* Whether a stream handle is acceptable (0, legacy, per-thread or a live stream). */
bool fk_stream_ok(CUstream s);

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

enum fk_kind { FK_LINEAR, FK_LEGACY32, FK_MANAGED, FK_POOL, FK_GRAPH };

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
/* Removes and frees an entry (does not touch the record). Under fk_mu. */
void fk_alloc_remove(struct fk_alloc *a);
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

/* ---- vmm.c / array.c ---- */
/* Device ordinal of a VMM-mapped address, or -1. Under fk_mu. */
int fk_vmm_ordinal(CUdeviceptr p, CUdeviceptr *base, uint64_t *size);
void fk_vmm_forget(void);
void fk_array_free_ctx(struct fk_ctx *c);
void fk_array_forget(void);

#endif
