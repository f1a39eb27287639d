/*
 * hooks_graph.c: memory of CUDA graphs (allocation nodes).
 *
 * An allocation node takes no memory when it is added: its memory is taken from the device's graph
 * memory when a graph holding it is launched, and that memory stays reserved for graphs after the
 * graph frees it, until cuDeviceGraphMemTrim. So what is charged per device is the graph memory the
 * device reserves for this process (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT):
 *  - cuGraphAddMemAllocNode / cuGraphAddNode(_v2) with a mem-alloc node record, per graph, the
 *    bytes its allocation nodes ask for on each device; cuGraphInstantiate* copies that to the
 *    executable graph;
 *  - cuGraphLaunch of an executable graph with allocation nodes reserves that amount (rounded up to
 *    2 MiB) on each device before the launch; a reservation that does not fit first trims the
 *    device's graph memory (cuDeviceGraphMemTrim) and stream-ordered pools and is tried once more,
 *    then the launch is denied with CUDA_ERROR_OUT_OF_MEMORY. After the launch the charge is
 *    settled to the device's reserved graph memory (the surplus goes back);
 *  - launches of graphs without an allocation node we saw (most graphs) take no lock and add one
 *    query of the device's reserved graph memory after the launch; only when it moved is it settled;
 *  - cuDeviceGraphMemTrim releases what the device gave back.
 * Limits, said plainly: graphs built by stream capture (cudaMallocAsync while capturing) or
 * instantiated with cuGraphInstantiateWithParams have allocation nodes we did not see; their
 * launches are not checked before, only settled after (charged even past the budget, so the
 * figures stay true); the tables hold MAX_GRAPHS graphs and executable graphs, beyond which graphs
 * are treated the same way.
 */
#include "internal.h"

#include <pthread.h>

#define MAX_GRAPHS 256
#define MAX_GDEVS 4 /* devices with allocation nodes in one graph */
#define GRAPH_GRANULE ((uint64_t)2 << 20)

struct need {
    int device[MAX_GDEVS];
    uint64_t bytes[MAX_GDEVS];
    int n;
};

struct entry {
    uintptr_t key; /* CUgraph or CUgraphExec; 0 free */
    struct need need;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* both tables and `charged` */
static struct entry graphs[MAX_GRAPHS], execs[MAX_GRAPHS];
static uint64_t charged[GPC_MAX_DEVICES];
static atomic_bool any_graph_memory; /* a graph with allocation nodes was seen: tables in use */

static struct entry *find(struct entry *t, uintptr_t key, bool add)
{
    struct entry *free_e = NULL;
    for (int i = 0; i < MAX_GRAPHS; i++) {
        if (t[i].key == key)
            return &t[i];
        if (!t[i].key && !free_e)
            free_e = &t[i];
    }
    if (add && free_e) {
        free_e->key = key;
        free_e->need.n = 0;
    }
    return add ? free_e : NULL;
}

static void need_add(struct need *n, int device, uint64_t bytes)
{
    for (int i = 0; i < n->n; i++)
        if (n->device[i] == device) {
            n->bytes[i] += bytes;
            return;
        }
    if (n->n < MAX_GDEVS) {
        n->device[n->n] = device;
        n->bytes[n->n++] = bytes;
    }
}

static bool reserved_of(int device, uint64_t *out)
{
    cuuint64_t v = 0;
    if (!gpc_real.cuDeviceGetGraphMemAttribute ||
        gpc_real.cuDeviceGetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
        return false;
    *out = v;
    return true;
}

/*
 * Settles the charge of `device` to its reserved graph memory, `held` being what the caller
 * reserved for it beforehand (released or kept here). Under `lock`. True if anything was released.
 */
static bool settle(int device, uint64_t held)
{
    if (device < 0 || device >= GPC_MAX_DEVICES)
        return false;
    int budget = gpc_device_budget_if_ready(device);
    if (budget == GPC_BUDGET_NONE)
        return false;
    uint64_t r;
    if (!reserved_of(device, &r))
        r = charged[device] + held; /* cannot tell: keep what was reserved */
    uint64_t have = charged[device] + held;
    if (r < have) {
        gpc_budget_release(budget, have - r);
    } else if (r > have) {
        /* Taken already (an unseen allocation node): count it, even past the budget. */
        gpc_budget_reserve_unchecked(budget, r - have);
    }
    bool released = r < charged[device];
    /* Atomic only so that launch() may compare it without the lock. */
    __atomic_store_n(&charged[device], r, __ATOMIC_RELAXED);
    return released;
}

bool gpc_graphs_trim(int device)
{
    if (!atomic_load(&any_graph_memory) || device < 0 || device >= GPC_MAX_DEVICES)
        return false;
    /* trylock: a launch holds this lock while it asks the budget (and so may come back here). */
    if (pthread_mutex_trylock(&lock) != 0)
        return false;
    bool released = false;
    if (gpc_real.cuDeviceGraphMemTrim && gpc_real.cuDeviceGraphMemTrim(device) == CUDA_SUCCESS)
        released = settle(device, 0);
    pthread_mutex_unlock(&lock);
    return released;
}

/* ---- building graphs ---- */

static void note_alloc_node(CUresult rc, CUgraph g, const CUmemPoolProps *props, size_t bytes)
{
    if (rc != CUDA_SUCCESS || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        atomic_load(&gpc_passthrough))
        return;
    atomic_store(&any_graph_memory, true);
    pthread_mutex_lock(&lock);
    struct entry *e = find(graphs, (uintptr_t)g, true);
    if (e)
        need_add(&e->need, props->location.id, bytes);
    pthread_mutex_unlock(&lock);
}

GPC_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphAddMemAllocNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (nodeParams)
        note_alloc_node(rc, hGraph, &nodeParams->poolProps, nodeParams->bytesize);
    return rc;
}

GPC_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphAddNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (nodeParams && nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        note_alloc_node(rc, hGraph, &nodeParams->alloc.poolProps, nodeParams->alloc.bytesize);
    return rc;
}

GPC_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                      CUgraphNodeParams *nodeParams)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphAddNode_v2,
                                (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
    if (nodeParams && nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        note_alloc_node(rc, hGraph, &nodeParams->alloc.poolProps, nodeParams->alloc.bytesize);
    return rc;
}

static void forget(struct entry *t, uintptr_t key)
{
    if (!atomic_load(&any_graph_memory))
        return;
    pthread_mutex_lock(&lock);
    struct entry *e = find(t, key, false);
    if (e)
        e->key = 0;
    pthread_mutex_unlock(&lock);
}

GPC_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphDestroy, (hGraph));
    if (rc == CUDA_SUCCESS)
        forget(graphs, (uintptr_t)hGraph);
    return rc;
}

static void note_exec(CUresult rc, CUgraphExec *exec, CUgraph g)
{
    if (rc != CUDA_SUCCESS || !exec || !atomic_load(&any_graph_memory))
        return;
    pthread_mutex_lock(&lock);
    struct entry *src = find(graphs, (uintptr_t)g, false);
    if (src && src->need.n) {
        struct entry *e = find(execs, (uintptr_t)*exec, true);
        if (e)
            e->need = src->need;
    }
    pthread_mutex_unlock(&lock);
}

GPC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
    note_exec(rc, phGraphExec, hGraph);
    return rc;
}

GPC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                          char *logBuffer, size_t bufferSize)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiate_v2, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
    note_exec(rc, phGraphExec, hGraph);
    return rc;
}

GPC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphExecDestroy, (hGraphExec));
    if (rc == CUDA_SUCCESS)
        forget(execs, (uintptr_t)hGraphExec);
    return rc;
}

/* ---- launching and trimming ---- */

static CUresult launch(const char *call, CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream s)
{
    gpc_init();
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (!gpc_enforcing())
        return real(exec, s);
    pthread_mutex_lock(&lock);
    struct entry *e = find(execs, (uintptr_t)exec, false);
    struct need need = e ? e->need : (struct need){.n = 0};
    if (need.n == 0) {
        /*
         * No allocation node we saw (most graphs): launched without holding the lock, so threads
         * launching graphs do not wait for each other. A graph built by stream capture may still
         * hold graph memory: settled afterwards, under the lock, when the device's figure moved.
         */
        pthread_mutex_unlock(&lock);
        CUresult rc = real(exec, s);
        CUdevice dev;
        uint64_t r;
        if (rc == CUDA_SUCCESS && gpc_current_device(&dev) == CUDA_SUCCESS && dev >= 0 && dev < GPC_MAX_DEVICES &&
            reserved_of(dev, &r) && r != __atomic_load_n(&charged[dev], __ATOMIC_RELAXED) &&
            gpc_device_budget(dev) != GPC_BUDGET_NONE) {
            pthread_mutex_lock(&lock);
            settle(dev, 0);
            pthread_mutex_unlock(&lock);
        }
        return rc;
    }
    struct gpc_charge held[MAX_GDEVS];
    CUresult rc = CUDA_SUCCESS;
    int n = 0;
    for (; n < need.n; n++) {
        int dev = need.device[n];
        uint64_t ask = (need.bytes[n] + GRAPH_GRANULE - 1) / GRAPH_GRANULE * GRAPH_GRANULE;
        /* What the device reserves unused already covers part of it. */
        uint64_t r;
        if (dev >= 0 && dev < GPC_MAX_DEVICES && reserved_of(dev, &r)) {
            cuuint64_t used = 0;
            if (gpc_real.cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS &&
                r > used)
                ask = r - used >= ask ? 0 : ask - (r - used);
        }
        rc = gpc_charge_begin(&held[n], dev, ask, call);
        if (rc != CUDA_SUCCESS && dev >= 0 && dev < GPC_MAX_DEVICES) {
            bool freed = false;
            if (gpc_real.cuDeviceGraphMemTrim && gpc_real.cuDeviceGraphMemTrim(dev) == CUDA_SUCCESS)
                freed = settle(dev, 0);
            freed |= gpc_pools_trim(dev);
            if (freed)
                rc = gpc_charge_begin(&held[n], dev, ask, call);
        }
        if (rc != CUDA_SUCCESS)
            break;
    }
    if (rc == CUDA_SUCCESS)
        rc = real(exec, s);
    for (int i = 0; i < n; i++) {
        /* Launched: settle to the device's figure; not launched: the held bytes go back there too. */
        if (held[i].budget != GPC_BUDGET_NONE)
            settle(held[i].device, held[i].bytes);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

GPC_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return launch("cuGraphLaunch", gpc_real.cuGraphLaunch, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return launch("cuGraphLaunch_ptsz", gpc_real.cuGraphLaunch_ptsz, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    gpc_init();
    if (!atomic_load(&any_graph_memory) || atomic_load(&gpc_passthrough))
        return GPC_CALL_REAL(cuDeviceGraphMemTrim, (device));
    pthread_mutex_lock(&lock);
    CUresult rc = GPC_CALL_REAL(cuDeviceGraphMemTrim, (device));
    if (rc == CUDA_SUCCESS)
        settle(device, 0);
    pthread_mutex_unlock(&lock);
    return rc;
}
