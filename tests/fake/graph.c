/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.c: CUDA graphs, as far as memory goes. Memory nodes get their address when added; a
 * launch (synchronous here) makes the graph's allocations live and runs its free nodes. Each
 * device has graph memory `reserved`: a launch needing more than reserved - used grows it
 * (rounded up to 2 MiB, charging the record), and it stays reserved after the launch until
 * cuDeviceGraphMemTrim gives back what no live graph allocation uses. Other node types are inert.
 * cuGraphUpload (and cuGraphInstantiateWithParams with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) grows the
 * reserve as a launch would, without making allocations live.
 * Stream capture (cuStreamBeginCapture_v2 .. cuStreamEndCapture): cuMemAllocAsync and
 * cuMemFreeAsync on a capturing stream add allocation and free nodes to the captured graph
 * instead of running, as the driver does ("Graph memory nodes", CUDA programming guide).
 * An executable graph belongs to the context current at its instantiation; tearing that context
 * down destroys it, frees its live allocations and gives back the device's unused graph reserve
 * (cuCtxDestroy "destroys and cleans up all resources associated with the context").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

struct fk_gnode {
    void *key; /* own address: the CUgraphNode handle */
    struct fk_graph *g;
    CUgraphNodeType type;
    uint64_t bytes;      /* MEM_ALLOC */
    int ordinal;         /* MEM_ALLOC */
    CUdeviceptr dptr;    /* MEM_ALLOC: its address; MEM_FREE: the address freed */
    struct fk_gnode *next;
    UT_hash_handle hh;
};

struct fk_graph {
    void *key;
    struct fk_gnode *nodes;
    int execs;           /* instantiations alive (at most one with memory nodes) */
    bool mem_nodes;
    UT_hash_handle hh;
};

struct fk_galloc {
    CUdeviceptr ptr;
    uint64_t bytes;
    int ordinal;
};

struct fk_gexec {
    void *key;
    struct fk_graph *src;  /* NULL once the graph is destroyed */
    struct fk_ctx *ctx;    /* current at instantiation */
    unsigned long long flags;
    size_t nalloc, nfree;
    struct fk_galloc *allocs;
    CUdeviceptr *frees;
    UT_hash_handle hh;
};

struct fk_graphmem {
    uint64_t used, used_high, reserved, reserved_high;
};

struct fk_addr {
    CUdeviceptr p;
    struct fk_ctx *ctx; /* the context of the executable graph that last made it live */
    UT_hash_handle hh;
};

static struct fk_graph *graphs;
static struct fk_gnode *nodes;
static struct fk_gexec *execs;
static struct fk_addr *graph_addrs; /* every address an alloc node ever got */
struct fk_capture {
    void *key; /* the capturing stream */
    struct fk_graph *g;
    UT_hash_handle hh;
};
static struct fk_capture *captures;
static struct fk_graphmem gmem[FK_MAX_DEV]; /* by ordinal */

#define FIND(set, h, out) do { const void *k_ = (h); out = NULL; if (k_) HASH_FIND_PTR(set, &k_, out); } while (0)

void fk_graph_alloc_freed(struct fk_alloc *a)
{
    struct fk_graphmem *m = &gmem[a->ordinal];
    m->used -= a->size < m->used ? a->size : m->used;
    fk_alloc_remove(a);
}

void fk_graph_forget(void)
{
    memset(gmem, 0, sizeof gmem);
}

/* Gives back what the device reserves beyond its live graph allocations. Under fk_mu. */
static void trim(int ordinal)
{
    struct fk_graphmem *m = &gmem[ordinal];
    uint64_t keep = FK_ROUND_UP(m->used, FK_GRAN);
    if (m->reserved > keep) {
        fk_uncharge(fk_phys_of(ordinal), m->reserved - keep);
        m->reserved = keep;
    }
}

FK_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    FK_ENTER_INIT(cuGraphCreate);
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_graph *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->key = g;
    fk_lock();
    HASH_ADD_PTR(graphs, key, g);
    fk_unlock();
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    FK_ENTER_INIT(cuGraphDestroy);
    fk_lock();
    struct fk_graph *g;
    FIND(graphs, hGraph, g);
    if (g) {
        HASH_DEL(graphs, g);
        for (struct fk_gnode *n = g->nodes, *next; n; n = next) {
            next = n->next;
            HASH_DEL(nodes, n);
            free(n);
        }
        struct fk_gexec *e, *tmp;
        HASH_ITER(hh, execs, e, tmp)
            if (e->src == g)
                e->src = NULL;
        free(g);
    }
    fk_unlock();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Adds a node after checking the graph and the dependencies. Under fk_mu. */
static CUresult add_node(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                         struct fk_gnode *proto)
{
    if (!out || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_graph *g;
    FIND(graphs, hGraph, g);
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        struct fk_gnode *d;
        FIND(nodes, deps[i], d);
        if (!d || d->g != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (proto->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        struct fk_addr *a;
        HASH_FIND(hh, graph_addrs, &proto->dptr, sizeof proto->dptr, a);
        if (!a)
            return CUDA_ERROR_INVALID_VALUE;
    }
    struct fk_gnode *n = malloc(sizeof *n);
    struct fk_addr *addr = proto->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? calloc(1, sizeof *addr) : NULL;
    if (!n || (proto->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && !addr)) {
        free(n);
        free(addr);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *n = *proto;
    n->key = n;
    n->g = g;
    if (addr) {
        n->dptr = fk_addr_alloc(fk_phys_of(n->ordinal), n->bytes, false);
        if (!n->dptr) {
            free(n);
            free(addr);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        addr->p = n->dptr;
        HASH_ADD(hh, graph_addrs, p, sizeof addr->p, addr);
    }
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        g->mem_nodes = true;
    n->next = g->nodes;
    g->nodes = n;
    HASH_ADD_PTR(nodes, key, n);
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static CUresult add_alloc(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                          const CUmemPoolProps *props, size_t bytes, CUdeviceptr *dptr)
{
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fk_phys_of(props->location.id) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    struct fk_gnode proto = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .bytes = bytes, .ordinal = props->location.id };
    fk_lock();
    CUresult rc = add_node(out, g, deps, ndeps, &proto);
    if (rc == CUDA_SUCCESS)
        *dptr = ((struct fk_gnode *)*out)->dptr;
    fk_unlock();
    return rc;
}

static CUresult add_simple(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                           CUgraphNodeType type, CUdeviceptr dptr)
{
    struct fk_gnode proto = { .type = type, .dptr = dptr };
    fk_lock();
    CUresult rc = add_node(out, g, deps, ndeps, &proto);
    fk_unlock();
    return rc;
}

FK_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    FK_ENTER_INIT(cuGraphAddMemAllocNode);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    return add_alloc(phGraphNode, hGraph, dependencies, numDependencies, &nodeParams->poolProps,
                     nodeParams->bytesize, &nodeParams->dptr);
}

FK_FORWARD(cuGraphAddMemFreeNode,
           (CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies,
            CUdeviceptr dptr),
           add_simple(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr))

static CUresult add_generic(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                            CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return add_alloc(out, g, deps, ndeps, &p->alloc.poolProps, p->alloc.bytesize, &p->alloc.dptr);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return add_simple(out, g, deps, ndeps, p->type, p->free.dptr);
    default:
        if ((unsigned)p->type > CU_GRAPH_NODE_TYPE_CONDITIONAL)
            return CUDA_ERROR_INVALID_VALUE;
        return add_simple(out, g, deps, ndeps, p->type, 0);
    }
}

FK_FORWARD(cuGraphAddNode,
           (CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies,
            CUgraphNodeParams *nodeParams),
           add_generic(phGraphNode, hGraph, dependencies, numDependencies, nodeParams))
FK_FORWARD(cuGraphAddNode_v2,
           (CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
            const CUgraphEdgeData *dependencyData, size_t numDependencies, CUgraphNodeParams *nodeParams),
           add_generic(phGraphNode, hGraph, dependencies, numDependencies, nodeParams))

/* cuGraphAddKernelNode and _v2 differ only in the type of their parameters, which the fake does not read. */
#define FK_ADD_KERNEL_NODE(sym, params_type)                                                                 \
    FK_FORWARD(sym,                                                                                          \
               (CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                   \
                size_t numDependencies, const params_type *nodeParams),                                      \
               !nodeParams ? CUDA_ERROR_INVALID_VALUE                                                        \
                           : add_simple(phGraphNode, hGraph, dependencies, numDependencies,                  \
                                        CU_GRAPH_NODE_TYPE_KERNEL, 0))
FK_ADD_KERNEL_NODE(cuGraphAddKernelNode, CUDA_KERNEL_NODE_PARAMS_v1)
FK_ADD_KERNEL_NODE(cuGraphAddKernelNode_v2, CUDA_KERNEL_NODE_PARAMS)
#undef FK_ADD_KERNEL_NODE

static CUresult instantiate(CUgraphExec *out, CUgraph hGraph, unsigned long long flags)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_graph *g;
    FIND(graphs, hGraph, g);
    /* The driver allows one executable at a time of a graph with memory nodes. */
    CUresult rc = !g || (g->mem_nodes && g->execs > 0) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    struct fk_gexec *e = rc == CUDA_SUCCESS ? calloc(1, sizeof *e) : NULL;
    if (rc == CUDA_SUCCESS && !e)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (e) {
        size_t na = 0, nf = 0;
        for (struct fk_gnode *n = g->nodes; n; n = n->next) {
            na += n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
            nf += n->type == CU_GRAPH_NODE_TYPE_MEM_FREE;
        }
        e->allocs = calloc(na + 1, sizeof *e->allocs);
        e->frees = calloc(nf + 1, sizeof *e->frees);
        if (!e->allocs || !e->frees) {
            free(e->allocs);
            free(e->frees);
            free(e);
            e = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (e) {
        for (struct fk_gnode *n = g->nodes; n; n = n->next) {
            if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
                e->allocs[e->nalloc++] = (struct fk_galloc){ n->dptr, n->bytes, n->ordinal };
            else if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
                e->frees[e->nfree++] = n->dptr;
        }
        e->key = e;
        e->src = g;
        e->ctx = fk_current_ctx();
        e->flags = flags;
        g->execs++;
        HASH_ADD_PTR(execs, key, e);
        *out = (CUgraphExec)e;
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuGraphInstantiateWithFlags,
           (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags),
           instantiate(phGraphExec, hGraph, flags))
FK_FORWARD(cuGraphInstantiate,
           (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize),
           instantiate(phGraphExec, hGraph, 0))
FK_FORWARD(cuGraphInstantiate_v2,
           (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize),
           instantiate(phGraphExec, hGraph, 0))

static void exec_destroy(struct fk_gexec *e)
{
    if (e->src)
        e->src->execs--;
    HASH_DEL(execs, e);
    free(e->allocs);
    free(e->frees);
    free(e);
}

FK_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FK_ENTER_INIT(cuGraphExecDestroy);
    fk_lock();
    struct fk_gexec *e;
    FIND(execs, hGraphExec, e);
    if (e)
        exec_destroy(e);
    fk_unlock();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void fk_graph_free_ctx(struct fk_ctx *c)
{
    struct fk_gexec *e, *tmp;
    HASH_ITER(hh, execs, e, tmp)
        if (e->ctx == c)
            exec_destroy(e);
    for (struct fk_addr *addr = graph_addrs; addr; addr = addr->hh.next) {
        struct fk_alloc *a = addr->ctx == c ? fk_alloc_find(addr->p, false) : NULL;
        if (a && a->kind == FK_GRAPH)
            fk_graph_alloc_freed(a);
    }
    trim(c->ordinal);
}

/* Grows each device's reserve by what `need` does not find unused in it: all or nothing. Under fk_mu. */
static CUresult grow(const uint64_t need[FK_MAX_DEV])
{
    uint64_t grown[FK_MAX_DEV] = { 0 };
    CUresult rc = CUDA_SUCCESS;
    for (int d = 0; rc == CUDA_SUCCESS && d < FK_MAX_DEV; d++) {
        struct fk_graphmem *m = &gmem[d];
        if (need[d] && m->used + need[d] > m->reserved) {
            grown[d] = FK_ROUND_UP(m->used + need[d] - m->reserved, FK_GRAN);
            rc = fk_charge(fk_phys_of(d), grown[d]);
            if (rc != CUDA_SUCCESS)
                grown[d] = 0;
        }
    }
    for (int d = 0; d < FK_MAX_DEV; d++) {
        if (rc != CUDA_SUCCESS) {
            fk_uncharge(fk_phys_of(d), grown[d]);
        } else if (grown[d]) {
            gmem[d].reserved += grown[d];
            if (gmem[d].reserved > gmem[d].reserved_high)
                gmem[d].reserved_high = gmem[d].reserved;
        }
    }
    return rc;
}

/* Uploads: the reserve grows for the allocations that are not live already. Under fk_mu. */
static CUresult upload(struct fk_gexec *e, CUstream s)
{
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fk_stream_ok(s))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t need[FK_MAX_DEV] = { 0 };
    for (size_t i = 0; i < e->nalloc; i++)
        if (!fk_alloc_find(e->allocs[i].ptr, false))
            need[e->allocs[i].ordinal] += e->allocs[i].bytes;
    return grow(need);
}

static CUresult launch(CUgraphExec h, CUstream s)
{
    fk_lock();
    struct fk_gexec *e;
    FIND(execs, h, e);
    CUresult rc = !e ? CUDA_ERROR_INVALID_VALUE : fk_stream_ok(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && e->nalloc == 0 && e->nfree == 0) {
        fk_unlock(); /* no memory node: nothing to do (and cheap, for bench/bench_graph) */
        return rc;
    }
    /* An allocation of this graph still live from the last launch: freed first with
     * AUTO_FREE_ON_LAUNCH, an error without. */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < e->nalloc; i++) {
        struct fk_alloc *a = fk_alloc_find(e->allocs[i].ptr, false);
        if (a && !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t need[FK_MAX_DEV] = { 0 };
    struct fk_alloc **made = NULL;
    if (rc == CUDA_SUCCESS) {
        made = calloc(e->nalloc + 1, sizeof *made);
        for (size_t i = 0; made && i < e->nalloc; i++)
            if (!(made[i] = calloc(1, sizeof **made)))
                rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (!made)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        for (size_t i = 0; i < e->nalloc; i++) {
            struct fk_alloc *a = fk_alloc_find(e->allocs[i].ptr, false);
            if (a)
                fk_graph_alloc_freed(a);
            need[e->allocs[i].ordinal] += e->allocs[i].bytes;
        }
        rc = grow(need);
    }
    if (rc == CUDA_SUCCESS) {
        for (size_t i = 0; i < e->nalloc; i++) {
            struct fk_alloc *a = made[i];
            made[i] = NULL;
            a->ptr = e->allocs[i].ptr;
            a->size = e->allocs[i].bytes;
            a->ordinal = e->allocs[i].ordinal;
            a->phys = fk_phys_of(a->ordinal);
            a->kind = FK_GRAPH;
            fk_alloc_insert(a);
            struct fk_addr *addr;
            HASH_FIND(hh, graph_addrs, &a->ptr, sizeof a->ptr, addr);
            if (addr)
                addr->ctx = e->ctx;
            struct fk_graphmem *m = &gmem[a->ordinal];
            m->used += a->size;
            if (m->used > m->used_high)
                m->used_high = m->used;
        }
        for (size_t i = 0; i < e->nfree; i++) {
            struct fk_alloc *a = fk_alloc_find(e->frees[i], false);
            if (a && a->kind == FK_GRAPH)
                fk_graph_alloc_freed(a);
        }
    }
    for (size_t i = 0; made && i < e->nalloc; i++)
        free(made[i]);
    free(made);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), launch(hGraphExec, hStream))
FK_FORWARD(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), launch(hGraphExec, hStream))

FK_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    FK_ENTER_INIT(cuDeviceGraphMemTrim);
    int phys = fk_phys_of(device);
    if (phys < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    trim(device);
    fk_unlock();
    return CUDA_SUCCESS;
}

/* The figure behind a graph memory attribute; NULL for an unknown attribute. */
static uint64_t *graph_mem_field(struct fk_graphmem *m, CUgraphMem_attribute attr)
{
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: return &m->used;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: return &m->used_high;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: return &m->reserved;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: return &m->reserved_high;
    default: return NULL;
    }
}

/* cuDeviceGetGraphMemAttribute and cuDeviceSetGraphMemAttribute (set). Only the high watermarks can
 * be set, and only to 0, which resets them to the current value. */
static CUresult graph_mem_attr(CUdevice device, CUgraphMem_attribute attr, void *value, bool set)
{
    if (!value || (set && *(cuuint64_t *)value != 0))
        return CUDA_ERROR_INVALID_VALUE;
    if (fk_phys_of(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fk_lock();
    struct fk_graphmem *m = &gmem[device];
    uint64_t *field = graph_mem_field(m, attr);
    CUresult rc = field ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (field && !set)
        *(cuuint64_t *)value = *field;
    else if (field == &m->used_high)
        m->used_high = m->used;
    else if (field == &m->reserved_high)
        m->reserved_high = m->reserved;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    fk_unlock();
    return rc;
}

FK_FORWARD(cuDeviceGetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void *value),
           graph_mem_attr(device, attr, value, false))
FK_FORWARD(cuDeviceSetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void *value),
           graph_mem_attr(device, attr, value, true))

static CUresult upload_exec(CUgraphExec h, CUstream s)
{
    fk_lock();
    struct fk_gexec *e;
    FIND(execs, h, e);
    CUresult rc = upload(e, s);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream), upload_exec(hGraphExec, hStream))
FK_FORWARD(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream), upload_exec(hGraphExec, hStream))

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = instantiate(out, g, p->flags);
    if (rc == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
        fk_lock();
        struct fk_gexec *e;
        FIND(execs, *out, e);
        rc = upload(e, p->hUploadStream);
        if (rc != CUDA_SUCCESS)
            exec_destroy(e);
        fk_unlock();
    }
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

FK_FORWARD(cuGraphInstantiateWithParams,
           (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
           instantiate_params(phGraphExec, hGraph, instantiateParams))
FK_FORWARD(cuGraphInstantiateWithParams_ptsz,
           (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
           instantiate_params(phGraphExec, hGraph, instantiateParams))

/* ---- inspecting graphs ---- */

FK_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    FK_ENTER_INIT(cuGraphGetNodes);
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_graph *g;
    FIND(graphs, hGraph, g);
    size_t n = 0;
    for (struct fk_gnode *x = g ? g->nodes : NULL; x; x = x->next, n++)
        if (nodes && n < *numNodes)
            nodes[n] = (CUgraphNode)x;
    /* Larger than needed: the rest is NULL and *numNodes says how many there are. */
    for (size_t i = n; nodes && i < *numNodes; i++)
        nodes[i] = NULL;
    if (!nodes || n < *numNodes)
        *numNodes = n;
    fk_unlock();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A copy of graph node `h`, taken under fk_mu; false for an unknown handle. */
static bool node_copy(CUgraphNode h, struct fk_gnode *out)
{
    fk_lock();
    struct fk_gnode *n;
    FIND(nodes, h, n);
    if (n)
        *out = *n;
    fk_unlock();
    return n != NULL;
}

FK_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    FK_ENTER_INIT(cuGraphNodeGetType);
    struct fk_gnode n;
    if (!type || !node_copy(hNode, &n))
        return CUDA_ERROR_INVALID_VALUE;
    *type = n.type;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    FK_ENTER_INIT(cuGraphMemAllocNodeGetParams);
    struct fk_gnode n;
    if (!params_out || !node_copy(hNode, &n) || n.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return CUDA_ERROR_INVALID_VALUE;
    memset(params_out, 0, sizeof *params_out);
    params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params_out->poolProps.location.id = n.ordinal;
    params_out->bytesize = n.bytes;
    params_out->dptr = n.dptr;
    return CUDA_SUCCESS;
}

/* ---- stream capture ---- */

FK_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    FK_ENTER_INIT(cuStreamBeginCapture_v2);
    (void)mode;
    fk_lock();
    struct fk_capture *c;
    FIND(captures, hStream, c);
    /* The legacy NULL stream cannot be captured. */
    CUresult rc = !hStream || !fk_stream_ok(hStream) ? CUDA_ERROR_INVALID_HANDLE
                  : c                                  ? CUDA_ERROR_ILLEGAL_STATE
                                                       : CUDA_SUCCESS;
    struct fk_graph *g = NULL;
    if (rc == CUDA_SUCCESS) {
        c = calloc(1, sizeof *c);
        g = calloc(1, sizeof *g);
        if (!c || !g) {
            free(c);
            free(g);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (rc == CUDA_SUCCESS) {
        g->key = g;
        HASH_ADD_PTR(graphs, key, g);
        c->key = hStream;
        c->g = g;
        HASH_ADD_PTR(captures, key, c);
    }
    fk_unlock();
    return rc;
}

FK_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    FK_ENTER_INIT(cuStreamEndCapture);
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_capture *c;
    FIND(captures, hStream, c);
    if (c) {
        *phGraph = (CUgraph)c->g;
        HASH_DEL(captures, c);
        free(c);
    }
    fk_unlock();
    return c ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
}

bool fk_graph_capturing(CUstream s)
{
    struct fk_capture *c;
    FIND(captures, s, c);
    return c != NULL;
}

CUresult fk_graph_capture_alloc(CUstream s, int ordinal, uint64_t bytes, CUdeviceptr *dptr)
{
    struct fk_capture *c;
    FIND(captures, s, c);
    struct fk_gnode proto = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .bytes = bytes, .ordinal = ordinal };
    CUgraphNode n;
    CUresult rc = add_node(&n, (CUgraph)c->g, NULL, 0, &proto);
    if (rc == CUDA_SUCCESS)
        *dptr = ((struct fk_gnode *)n)->dptr;
    return rc;
}

CUresult fk_graph_capture_free(CUstream s, CUdeviceptr p)
{
    struct fk_capture *c;
    FIND(captures, s, c);
    struct fk_gnode proto = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .dptr = p };
    CUgraphNode n;
    return add_node(&n, (CUgraph)c->g, NULL, 0, &proto);
}

/* ---- kernel nodes' parameters: the function is kept, the rest the fake does not read ---- */

/* `n` is a kernel node of a live graph (`exec`: and `e` a live executable graph). Under fk_mu. */
static struct fk_gnode *kernel_node(CUgraphNode h, const void *exec)
{
    struct fk_gnode *n;
    FIND(nodes, h, n);
    if (exec) {
        struct fk_gexec *e;
        FIND(execs, exec, e);
        if (!e)
            return NULL;
    }
    return n && n->type == CU_GRAPH_NODE_TYPE_KERNEL ? n : NULL;
}

static CUresult kernel_params(CUgraphNode h, const void *exec, void *params, size_t size, bool set)
{
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_gnode *n = kernel_node(h, exec);
    if (n && !set)
        memset(params, 0, size);
    fk_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FK_FORWARD(cuGraphKernelNodeGetParams, (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams),
           kernel_params(hNode, NULL, nodeParams, sizeof *nodeParams, false))
FK_FORWARD(cuGraphKernelNodeGetParams_v2, (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams),
           kernel_params(hNode, NULL, nodeParams, sizeof *nodeParams, false))
FK_FORWARD(cuGraphKernelNodeSetParams, (CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams),
           kernel_params(hNode, NULL, (void *)nodeParams, sizeof *nodeParams, true))
FK_FORWARD(cuGraphKernelNodeSetParams_v2, (CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams),
           kernel_params(hNode, NULL, (void *)nodeParams, sizeof *nodeParams, true))
FK_FORWARD(cuGraphExecKernelNodeSetParams,
           (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams),
           kernel_params(hNode, hGraphExec, (void *)nodeParams, sizeof *nodeParams, true))
FK_FORWARD(cuGraphExecKernelNodeSetParams_v2,
           (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams),
           kernel_params(hNode, hGraphExec, (void *)nodeParams, sizeof *nodeParams, true))
