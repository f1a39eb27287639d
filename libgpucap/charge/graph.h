/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.h: graph memory, counted by what the device reserves for graphs (graph.c).
 */
#ifndef GPUCAP_CHARGE_GRAPH_H
#define GPUCAP_CHARGE_GRAPH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/locks.h"
#include "driver/resolve.h"

/* cuDeviceGraphMemTrim on `device`, then releases what it gave back: true when anything was. */
bool gpc_graphs_trim(int device);
/* Its part of the fork sequence (hooks/init.c), for its locks (core/locks.h: GRAPH_*). */
void gpc_graphs_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);
/*
 * After the driver tore down context `ctx` (it frees the graph memory and executable graphs that
 * lived there): forgets the executable graphs instantiated in it and settles each device's graph
 * memory charge to the driver's figure. Call it after the real teardown succeeded.
 */
void gpc_graphs_forget_ctx(CUcontext ctx);

/* What the allocation nodes of a graph ask for: bytes per device, on at most GPC_GRAPH_DEVS devices. */
#define GPC_GRAPH_DEVS 4
struct gpc_graph_need {
    int device[GPC_GRAPH_DEVS];
    uint64_t bytes[GPC_GRAPH_DEVS];
    int n;
};
/*
 * Around an instantiation of `g`: gpc_graphs_inst_begin inspects its allocation nodes into *need
 * (1 when nothing is counted, else 0 or a negative errno when the graph cannot be inspected);
 * after the driver call gpc_graphs_inst_end records the executable graph for its launches.
 */
int gpc_graphs_inst_begin(CUgraph g, struct gpc_graph_need *need);
void gpc_graphs_inst_end(CUresult rc, CUgraphExec *exec, int inspected, const struct gpc_graph_need *need);
/* cuGraphInstantiateWithParams (`real`: its form): may upload at once, so reserved as a launch. */
CUresult gpc_graphs_instantiate_params(const char *call, PFN_cuGraphInstantiateWithParams_v12000 *real,
                                       CUgraphExec *exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p);
/* The driver destroyed executable graph `exec`: forgets it. */
void gpc_graphs_exec_destroyed(CUgraphExec exec);

/*
 * The table of executable graphs, which a launch reads without a lock (graph.c writes it under its
 * lock): open addressing, a lookup reads at most GPC_GRAPH_PROBES slots. A graph's info is
 * GPC_GRAPH_INFO_NONE (no allocation node), GPC_GRAPH_INFO_UNSURE (not inspected, or not in the
 * table), or 1 + the index of what its allocation nodes ask for.
 */
#define GPC_GRAPH_EXEC_SLOTS 4096 /* a power of two */
#define GPC_GRAPH_EXEC_BITS 12
#define GPC_GRAPH_PROBES 64
#define GPC_GRAPH_INFO_NONE 0u
#define GPC_GRAPH_INFO_UNSURE UINT32_MAX
struct gpc_graph_exec {
    _Atomic uintptr_t key; /* CUgraphExec; 0: never used; 1: removed */
    _Atomic uint32_t info;
    CUcontext ctx;         /* current at instantiation (under graph.c's table lock) */
};
extern struct gpc_graph_exec gpc_graph_execs[GPC_GRAPH_EXEC_SLOTS];

static inline uint32_t gpc_graphs_slot_of(uintptr_t key)
{
    return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - GPC_GRAPH_EXEC_BITS));
}

/* The info of executable graph `key` (GPC_GRAPH_INFO_UNSURE when unknown). Inlined into the
 * launch hooks: a launch of a graph without allocation nodes is this lookup and the driver call. */
static inline uint32_t gpc_graphs_exec_info(uintptr_t key)
{
    uint32_t i = gpc_graphs_slot_of(key);
    for (int p = 0; p < GPC_GRAPH_PROBES; p++, i = (i + 1) & (GPC_GRAPH_EXEC_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&gpc_graph_execs[i].key, memory_order_acquire);
        if (k == key)
            return atomic_load_explicit(&gpc_graph_execs[i].info, memory_order_acquire);
        if (k == 0)
            break;
    }
    return GPC_GRAPH_INFO_UNSURE;
}

/*
 * A launch or upload of `exec` (info: gpc_graphs_exec_info's answer) by `*real`, read now: the hook
 * started the library first. A graph with allocation nodes is reserved for and settled; one not
 * inspected is settled now and then. The driver's result, or CUDA_ERROR_OUT_OF_MEMORY when denied.
 */
typedef CUresult (*gpc_launch_fn)(CUgraphExec, CUstream);
CUresult gpc_graphs_launch_slow(const char *call, gpc_launch_fn *real, CUgraphExec exec, CUstream s, uint32_t info);
/* cuDeviceGraphMemTrim: calls the driver and settles the device's graph memory charge. */
CUresult gpc_graphs_device_trim(CUdevice device);

#endif
