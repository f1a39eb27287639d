/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.h: graph memory, counted by what the device reserves for graphs (graph.c).
 */
#ifndef GPUCAP_CHARGE_GRAPH_H
#define GPUCAP_CHARGE_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/resolve.h"

/* cuDeviceGraphMemTrim on `device`, then releases what it gave back: true when anything was. */
bool gpc_graphs_trim(int device);
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
 * A launch or upload of `exec` by `*real` (read now: the hook started the library): a graph
 * without allocation nodes goes straight to the driver; one with them is reserved for and settled.
 * The driver's result, or CUDA_ERROR_OUT_OF_MEMORY when denied.
 */
typedef CUresult (*gpc_launch_fn)(CUgraphExec, CUstream);
CUresult gpc_graphs_launch(const char *call, gpc_launch_fn *real, CUgraphExec exec, CUstream s);
/* cuDeviceGraphMemTrim: calls the driver and settles the device's graph memory charge. */
CUresult gpc_graphs_device_trim(CUdevice device);

#endif
