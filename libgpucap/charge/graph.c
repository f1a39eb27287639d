/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.c: the accounting of the memory of CUDA graphs (allocation nodes), with graph launches left at
 * full speed; the hooks are in hooks/graph.c.
 *
 * An allocation node takes no memory when it is added: its memory is taken from the device's graph
 * memory when a graph holding it is launched (or uploaded), and that memory stays reserved for
 * graphs after the graph frees it, until cuDeviceGraphMemTrim. So what is charged per device is
 * the graph memory the device reserves for this process (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT):
 *  - every instantiation (cuGraphInstantiate, _v2, WithFlags, WithParams and its _ptsz) inspects the
 *    graph's nodes, so allocation nodes that stream capture made count like the ones added by hand,
 *    and records the executable graph in a table that launches read without a lock: "no allocation
 *    node", or the bytes its allocation nodes ask for on each device;
 *  - a launch or upload of a graph without allocation nodes is that lookup and the driver call:
 *    no lock, no driver query;
 *  - a launch or upload of a graph with allocation nodes reserves those bytes (rounded up to 2 MiB)
 *    before the driver call, less what the device reserves unused when no other such launch on the
 *    device is under way, and afterwards settles the charge to the device's reserved graph memory
 *    and gives back what its reservation did not pay for. While a launch that counted on the
 *    unused memory is under way, the others may take that memory: what they leave unspent pays for
 *    its growth and goes back when it ends. No lock is held across the driver call but a read
 *    lock that such launches share; trims take it exclusively, so that no trim takes away reserved
 *    memory that a launch under way counted on;
 *  - the charge is also settled at cuDeviceGraphMemTrim, before any denial (gpc_graphs_trim) and at
 *    context teardown (gpc_graphs_forget_ctx);
 *  - executable graphs we could not inspect (a driver without the node queries, a full table, an
 *    instantiation we did not see) are settled after one launch in UNSURE_EVERY per thread, charged
 *    even past the budget so that the figures stay true.
 */
#include "charge/graph.h"

#include "common/defs.h"
#include "common/log.h"
#include "core/budget.h"
#include "core/locks.h"
#include "core/state.h"
#include "driver/resolve.h"
#include "charge/charge.h"
#include "charge/device.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_GDEVS GPC_GRAPH_DEVS
#define MAX_NEEDS 1024       /* executable graphs with allocation nodes */
#define EXEC_SLOTS GPC_GRAPH_EXEC_SLOTS
#define GRAPH_GRANULE ((uint64_t)2 << 20)
#define UNSURE_EVERY 64

#define KEY_GONE ((uintptr_t)1) /* a removed slot: lookups go on past it, inserts reuse it */
#define INFO_NONE GPC_GRAPH_INFO_NONE
#define INFO_UNSURE GPC_GRAPH_INFO_UNSURE

struct gpc_graph_exec gpc_graph_execs[EXEC_SLOTS];
static struct gpc_graph_need needs[MAX_NEEDS];  /* written under table_lock before the slot is published */
static bool need_used[MAX_NEEDS];     /* under table_lock */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER; /* inserts and removals */
static pthread_rwlock_t trim_lock = PTHREAD_RWLOCK_INITIALIZER; /* launches with nodes (read), trims */
static _Atomic uint64_t charged[GPC_MAX_DEVICES]; /* budget held for each device's graph memory */
static _Atomic uint64_t pooled[GPC_MAX_DEVICES];  /* unspent reservations kept for a counting launch */
static pthread_mutex_t dev_lock[GPC_MAX_DEVICES] = {[0 ... GPC_MAX_DEVICES - 1] = PTHREAD_MUTEX_INITIALIZER};
static int inflight[GPC_MAX_DEVICES];             /* launches with allocation nodes under way (dev_lock) */
static bool counting[GPC_MAX_DEVICES];            /* one of them counted on the unused reserve (dev_lock) */
static uint64_t promised[GPC_MAX_DEVICES];        /* how much it counted on (dev_lock) */
static uint64_t kept[GPC_MAX_DEVICES];            /* put in the pool meanwhile (dev_lock) */
static atomic_bool any_graph_memory; /* an executable graph with (or maybe with) allocation nodes */
static __thread unsigned unsure_launches;

void gpc_graphs_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_GRAPH_TRIM) {
        if (step == GPC_FORK_PREPARE)
            pthread_rwlock_wrlock(&trim_lock);
        else if (step == GPC_FORK_PARENT)
            pthread_rwlock_unlock(&trim_lock);
        else
            pthread_rwlock_init(&trim_lock, NULL);
    }
    /* Each device's lock: made fresh in the child only (FRESH), with what it guards. */
    for (int d = 0; rank == GPC_LOCK_GRAPH_DEV && step == GPC_FORK_CHILD && d < GPC_MAX_DEVICES; d++) {
        gpc_fork_mutex(&dev_lock[d], step);
        /* The parent's launches under way are not the child's: nothing is under way here. */
        inflight[d] = 0;
        counting[d] = false;
        atomic_store(&pooled[d], 0);
    }
    if (rank == GPC_LOCK_GRAPH_TABLE)
        gpc_fork_mutex(&table_lock, step);
}

static inline bool dev_ok(int device) { return device >= 0 && device < GPC_MAX_DEVICES; }

static uint64_t round_granule(uint64_t n)
{
    return n > UINT64_MAX - GRAPH_GRANULE ? UINT64_MAX : (n + GRAPH_GRANULE - 1) / GRAPH_GRANULE * GRAPH_GRANULE;
}

/* ---- the table of executable graphs: lock-free lookups, inserts and removals under table_lock ---- */

static void info_free(uint32_t info)
{
    if (info != INFO_NONE && info != INFO_UNSURE)
        need_used[info - 1] = false;
}

/* Records `key` with `info` (replacing a stale record of the same handle). Under table_lock. */
static void exec_put(uintptr_t key, uint32_t info, CUcontext ctx)
{
    struct gpc_graph_exec *free_slot = NULL;
    uint32_t i = gpc_graphs_slot_of(key);
    for (int p = 0; p < GPC_GRAPH_PROBES; p++, i = (i + 1) & (EXEC_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&gpc_graph_execs[i].key, memory_order_relaxed);
        if (k == key) {
            info_free(atomic_load_explicit(&gpc_graph_execs[i].info, memory_order_relaxed));
            gpc_graph_execs[i].ctx = ctx;
            atomic_store_explicit(&gpc_graph_execs[i].info, info, memory_order_release);
            return;
        }
        if ((k == 0 || k == KEY_GONE) && !free_slot)
            free_slot = &gpc_graph_execs[i];
        if (k == 0)
            break;
    }
    if (!free_slot) {
        /* No room near its place: unknown to launches, which then treat it as not inspected. */
        info_free(info);
        if (info != INFO_NONE)
            gpc_log(GPC_LOG_WARN, "more than %d executable graphs: graph memory settled after launches",
                    EXEC_SLOTS);
        return;
    }
    free_slot->ctx = ctx;
    atomic_store_explicit(&free_slot->info, info, memory_order_relaxed);
    atomic_store_explicit(&free_slot->key, key, memory_order_release);
}

static void slot_drop(struct gpc_graph_exec *s)
{
    info_free(atomic_load_explicit(&s->info, memory_order_relaxed));
    atomic_store_explicit(&s->info, INFO_UNSURE, memory_order_relaxed);
    atomic_store_explicit(&s->key, KEY_GONE, memory_order_release);
}

static void exec_remove(uintptr_t key)
{
    gpc_lock(&table_lock, GPC_LOCK_GRAPH_TABLE);
    uint32_t i = gpc_graphs_slot_of(key);
    for (int p = 0; p < GPC_GRAPH_PROBES; p++, i = (i + 1) & (EXEC_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&gpc_graph_execs[i].key, memory_order_relaxed);
        if (k == key) {
            slot_drop(&gpc_graph_execs[i]);
            break;
        }
        if (k == 0)
            break;
    }
    gpc_unlock(&table_lock, GPC_LOCK_GRAPH_TABLE);
}

/* ---- the charge of each device's graph memory ---- */

static bool reserved_of(int device, uint64_t *reserved, uint64_t *used)
{
    cuuint64_t r = 0, u = 0;
    if (!gpc_real.cuDeviceGetGraphMemAttribute ||
        gpc_real.cuDeviceGetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        (used && gpc_real.cuDeviceGetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS))
        return false;
    *reserved = r;
    if (used)
        *used = u;
    return true;
}

/* Takes up to `want` bytes from *from: what it took. */
static uint64_t take_from(_Atomic uint64_t *from, uint64_t want)
{
    uint64_t p = atomic_load(from), take;
    do
        take = p < want ? p : want;
    while (take && !atomic_compare_exchange_weak(from, &p, p - take));
    return take;
}

/*
 * Brings the charge of `device` to its reserved graph memory. Growth is paid from *own (what the
 * caller reserved for its launch; NULL: nothing), then from the pool of the device, and what is
 * still missing is charged past the budget if need be (a graph we could not inspect). Lock-free:
 * whoever changes `charged` does so from a figure read after the value it replaces, so the last
 * change is never older than the last growth. True when anything was released.
 */
static bool settle(int device, _Atomic uint64_t *own)
{
    if (!dev_ok(device))
        return false;
    int budget = gpc_device_budget_if_ready(device);
    if (budget == GPC_BUDGET_NONE)
        return false;
    uint64_t c = atomic_load(&charged[device]), r;
    for (;;) {
        if (!reserved_of(device, &r, NULL)) {
            r = c; /* cannot tell: keep what is charged */
            break;
        }
        if (r == c || atomic_compare_exchange_weak(&charged[device], &c, r))
            break;
    }
    if (r > c) {
        uint64_t grown = r - c, paid = own ? take_from(own, grown) : 0;
        paid += take_from(&pooled[device], grown - paid);
        if (grown > paid)
            gpc_budget_admit_unchecked(budget, grown - paid);
    } else if (r < c) {
        gpc_budget_release(budget, c - r);
    }
    return r < c;
}

bool gpc_graphs_trim(int device)
{
    if (!atomic_load(&any_graph_memory) || !dev_ok(device))
        return false;
    /* Not while a launch with allocation nodes is under way (it may be this thread, asking the
     * budget): the launch counted on the memory the device reserves. */
    if (gpc_trywrlock(&trim_lock, GPC_LOCK_GRAPH_TRIM) != 0)
        return false;
    bool released = false;
    if (gpc_real.cuDeviceGraphMemTrim && gpc_real.cuDeviceGraphMemTrim(device) == CUDA_SUCCESS)
        released = settle(device, NULL);
    gpc_rwunlock(&trim_lock, GPC_LOCK_GRAPH_TRIM);
    return released;
}

void gpc_graphs_forget_ctx(CUcontext ctx)
{
    gpc_lock(&table_lock, GPC_LOCK_GRAPH_TABLE);
    for (int i = 0; i < EXEC_SLOTS; i++) {
        uintptr_t k = atomic_load_explicit(&gpc_graph_execs[i].key, memory_order_relaxed);
        if (k > KEY_GONE && gpc_graph_execs[i].ctx == ctx)
            slot_drop(&gpc_graph_execs[i]);
    }
    gpc_unlock(&table_lock, GPC_LOCK_GRAPH_TABLE);
    if (!atomic_load(&any_graph_memory))
        return;
    /* The driver gave back the graph memory of the context: the devices' figures dropped. */
    gpc_rwlock(&trim_lock, GPC_LOCK_GRAPH_TRIM, true);
    for (int d = 0; d < GPC_MAX_DEVICES; d++)
        if (atomic_load(&charged[d]))
            settle(d, NULL);
    gpc_rwunlock(&trim_lock, GPC_LOCK_GRAPH_TRIM);
}

/* ---- reserving around a launch, an upload or an instantiation that uploads ---- */

struct hold {
    struct gpc_charge c[MAX_GDEVS];
    _Atomic uint64_t own[MAX_GDEVS]; /* what is left of c[i].bytes */
    bool counted[MAX_GDEVS];         /* alone on the device: counted on its unused reserve */
    int n;
};

/* A launch on `device` begins: true when it is the only one under way there. */
static bool dev_enter(int device)
{
    if (!dev_ok(device))
        return false;
    gpc_lock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
    bool alone = inflight[device]++ == 0;
    if (alone) {
        counting[device] = true;
        promised[device] = kept[device] = 0;
    }
    gpc_unlock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
    return alone;
}

/* The launch alone on `device` counted on `bytes` of its unused reserve. */
static void dev_promise(int device, uint64_t bytes)
{
    gpc_lock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
    promised[device] = bytes;
    gpc_unlock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
}

/*
 * A launch on `device` ended with `left` of its reservation unspent. While a launch that counted
 * on the unused reserve is under way, others may have taken that memory: what they leave, up to
 * what it counted on, stays in the pool, which pays for its growth, until it ends.
 */
static void dev_leave(int device, int budget, uint64_t left, bool counted)
{
    uint64_t rest = left;
    if (dev_ok(device)) {
        gpc_lock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
        inflight[device]--;
        if (counted) {
            counting[device] = false;
            rest += atomic_exchange(&pooled[device], 0);
        } else if (counting[device]) {
            uint64_t keep = promised[device] - kept[device] < left ? promised[device] - kept[device] : left;
            kept[device] += keep;
            atomic_fetch_add(&pooled[device], keep);
            rest -= keep;
        }
        gpc_unlock(&dev_lock[device], GPC_LOCK_GRAPH_DEV);
    }
    if (rest)
        gpc_budget_release(budget, rest);
}

static void hold_end(struct hold *h)
{
    for (int i = 0; i < h->n; i++) {
        /* Launched: settled to the device's figure; not launched: nothing grew. */
        if (h->c[i].budget != GPC_BUDGET_NONE)
            settle(h->c[i].device, &h->own[i]);
        dev_leave(h->c[i].device, h->c[i].budget, atomic_load(&h->own[i]), h->counted[i]);
    }
    gpc_rwunlock(&trim_lock, GPC_LOCK_GRAPH_TRIM);
}

/*
 * Reserves what `need` may add to the devices' graph memory. CUDA_SUCCESS (then hold_end after
 * the driver call), or CUDA_ERROR_OUT_OF_MEMORY after the denial was logged (nothing held).
 */
static CUresult hold_begin(const struct gpc_graph_need *need, struct hold *h, const char *call)
{
    CUresult rc = CUDA_SUCCESS;
    gpc_rwlock(&trim_lock, GPC_LOCK_GRAPH_TRIM, false);
    for (h->n = 0; h->n < need->n; h->n++) {
        int i = h->n, dev = need->device[i];
        uint64_t ask = round_granule(need->bytes[i]), r, u;
        /* Alone on the device, the launch may count on what the device reserves unused. */
        h->counted[i] = dev_enter(dev);
        if (h->counted[i] && reserved_of(dev, &r, &u) && r > u) {
            ask = need->bytes[i] <= r - u ? 0 : round_granule(need->bytes[i] - (r - u));
            dev_promise(dev, round_granule(need->bytes[i]) - ask);
        }
        rc = gpc_charge_begin(&h->c[i], dev, ask, call);
        if (rc != CUDA_SUCCESS) {
            dev_leave(dev, GPC_BUDGET_NONE, 0, h->counted[i]);
            break;
        }
        atomic_init(&h->own[i], h->c[i].budget != GPC_BUDGET_NONE ? ask : 0);
    }
    if (rc != CUDA_SUCCESS)
        hold_end(h);
    return rc;
}

/* ---- instantiating: what the allocation nodes of a graph ask for ---- */

static bool need_add(struct gpc_graph_need *n, int device, uint64_t bytes)
{
    for (int i = 0; i < n->n; i++)
        if (n->device[i] == device) {
            n->bytes[i] += bytes;
            return true;
        }
    if (n->n == MAX_GDEVS)
        return false;
    n->device[n->n] = device;
    n->bytes[n->n++] = bytes;
    return true;
}

/*
 * The bytes the allocation nodes of `g` ask for, per device, into *out: 0, or a negative errno
 * when the graph cannot be inspected. (Child graphs and conditional bodies cannot hold allocation
 * nodes, so the top level is enough.)
 */
static int inspect(CUgraph g, struct gpc_graph_need *out)
{
    out->n = 0;
    if (!gpc_real.cuGraphGetNodes || !gpc_real.cuGraphNodeGetType || !gpc_real.cuGraphMemAllocNodeGetParams)
        return -ENOSYS;
    size_t n = 0;
    if (gpc_real.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS)
        return -EINVAL;
    CUgraphNode local[64];
    CUgraphNode *nodes = n <= 64 ? local : malloc(n * sizeof *nodes);
    if (!nodes)
        return -ENOMEM;
    int rc = 0;
    size_t got = n;
    if (n && gpc_real.cuGraphGetNodes(g, nodes, &got) != CUDA_SUCCESS)
        rc = -EINVAL;
    for (size_t i = 0; rc == 0 && i < got && i < n; i++) {
        CUgraphNodeType type;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        if (gpc_real.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
            rc = -EINVAL;
        else if (type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            continue;
        else if (gpc_real.cuGraphMemAllocNodeGetParams(nodes[i], &p) != CUDA_SUCCESS)
            rc = -EINVAL;
        else if (p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                 !need_add(out, p.poolProps.location.id, p.bytesize))
            rc = -E2BIG;
    }
    if (nodes != local)
        free(nodes);
    return rc;
}

/* Before an instantiation: 1 when nothing is counted, else inspect()'s answer. */
int gpc_graphs_inst_begin(CUgraph g, struct gpc_graph_need *need)
{
    need->n = 0;
    if (!gpc_counting())
        return 1;
    return inspect(g, need);
}

/* After an instantiation: records the executable graph for its launches. */
void gpc_graphs_inst_end(CUresult rc, CUgraphExec *exec, int inspected, const struct gpc_graph_need *need)
{
    if (rc != CUDA_SUCCESS || !exec || inspected > 0)
        return;
    CUcontext ctx = NULL;
    if (!gpc_real.cuCtxGetCurrent || gpc_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    uint32_t info = inspected < 0 ? INFO_UNSURE : INFO_NONE;
    gpc_lock(&table_lock, GPC_LOCK_GRAPH_TABLE);
    if (inspected == 0 && need->n) {
        int i = 0;
        while (i < MAX_NEEDS && need_used[i])
            i++;
        if (i < MAX_NEEDS) {
            need_used[i] = true;
            needs[i] = *need;
            info = (uint32_t)i + 1;
        } else {
            info = INFO_UNSURE;
        }
    }
    exec_put((uintptr_t)*exec, info, ctx);
    gpc_unlock(&table_lock, GPC_LOCK_GRAPH_TABLE);
    if (info != INFO_NONE)
        atomic_store(&any_graph_memory, true);
}

/* WithParams may upload the graph at once (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD): reserved as a launch. */
CUresult gpc_graphs_instantiate_params(const char *call, PFN_cuGraphInstantiateWithParams_v12000 *real,
                                       CUgraphExec *exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    struct gpc_graph_need need;
    int how = gpc_graphs_inst_begin(g, &need);
    if (!*real)
        return CUDA_ERROR_NOT_FOUND;
    struct hold h;
    bool upload = how == 0 && need.n && p && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
    if (upload) {
        CUresult rc = hold_begin(&need, &h, call);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = (*real)(exec, g, p);
    if (upload)
        hold_end(&h);
    gpc_graphs_inst_end(rc, exec, how, &need);
    return rc;
}

void gpc_graphs_exec_destroyed(CUgraphExec exec)
{
    exec_remove((uintptr_t)exec);
}

/* ---- launching, uploading and trimming ---- */

CUresult gpc_graphs_launch_slow(const char *call, gpc_launch_fn *real, CUgraphExec exec, CUstream s, uint32_t info)
{
    bool counted = gpc_counting();
    gpc_launch_fn fn = *real;
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (!counted && info != INFO_NONE && gpc_closed_now())
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!counted || info == INFO_NONE)
        return fn(exec, s);
    if (info == INFO_UNSURE) {
        CUresult rc = fn(exec, s);
        CUdevice dev;
        if (rc == CUDA_SUCCESS && unsure_launches++ % UNSURE_EVERY == 0 && gpc_current_device(&dev) == CUDA_SUCCESS)
            settle(dev, NULL);
        return rc;
    }
    struct gpc_graph_need need = needs[info - 1];
    struct hold h;
    CUresult rc = hold_begin(&need, &h, call);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(exec, s);
    hold_end(&h);
    return rc;
}

CUresult gpc_graphs_device_trim(CUdevice device)
{
    if (!atomic_load(&any_graph_memory) || atomic_load(&gpc_passthrough))
        return GPC_CALL_REAL(cuDeviceGraphMemTrim, (device));
    gpc_rwlock(&trim_lock, GPC_LOCK_GRAPH_TRIM, true);
    CUresult rc = GPC_CALL_REAL(cuDeviceGraphMemTrim, (device));
    if (rc == CUDA_SUCCESS)
        settle(device, NULL);
    gpc_rwunlock(&trim_lock, GPC_LOCK_GRAPH_TRIM);
    return rc;
}
