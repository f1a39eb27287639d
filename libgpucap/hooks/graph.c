/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.c: graph instantiation, launch, upload and trim. Each hook starts the library and
 * hands the call to the accounting of graph memory (charge/graph.c, whose head says how it is
 * counted with launches left at full speed).
 */
#include "hooks/init.h"

#include "common/defs.h"
#include "charge/graph.h"
#include "driver/resolve.h"

#include <stddef.h>
#include <stdint.h>

GPC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    struct gpc_graph_need need;
    gpc_init();
    int how = gpc_graphs_inst_begin(hGraph, &need);
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
    gpc_graphs_inst_end(rc, phGraphExec, how, &need);
    return rc;
}

/* _v2 and the CUDA 10 entry point (cuGetProcAddress below 11000), with the same arguments. */
#define INSTANTIATE(name)                                                                                     \
    GPC_EXPORT CUresult name(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer, \
                             size_t bufferSize)                                                               \
    {                                                                                                         \
        struct gpc_graph_need need;                                                                           \
        gpc_init();                                                                                           \
        int how = gpc_graphs_inst_begin(hGraph, &need);                                                       \
        CUresult rc = GPC_CALL_REAL(name, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));         \
        gpc_graphs_inst_end(rc, phGraphExec, how, &need);                                                     \
        return rc;                                                                                            \
    }
INSTANTIATE(cuGraphInstantiate_v2)
INSTANTIATE(cuGraphInstantiate)

GPC_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    gpc_init();
    return gpc_graphs_instantiate_params("cuGraphInstantiateWithParams", &gpc_real.cuGraphInstantiateWithParams,
                                         phGraphExec, hGraph, instantiateParams);
}

GPC_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    gpc_init();
    return gpc_graphs_instantiate_params("cuGraphInstantiateWithParams_ptsz",
                                         &gpc_real.cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph,
                                         instantiateParams);
}

GPC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGraphExecDestroy, (hGraphExec));
    if (rc == CUDA_SUCCESS)
        gpc_graphs_exec_destroyed(hGraphExec);
    return rc;
}

/* Launches of graphs that may take memory, and every launch before the library is set up: this
 * may be the process's first CUDA call. */
static __attribute__((noinline)) CUresult launch_slow(const char *call, gpc_launch_fn *real, CUgraphExec exec,
                                                      CUstream s, uint32_t info)
{
    gpc_init();
    return gpc_graphs_launch_slow(call, real, exec, s, info);
}

static inline CUresult launch(const char *call, gpc_launch_fn *real, CUgraphExec exec, CUstream s)
{
    /* The common case, a graph without allocation nodes (its instantiation set the library up):
     * one lookup, then the driver. Kept apart from launch_slow so that it saves no registers. */
    uint32_t info = gpc_graphs_exec_info((uintptr_t)exec);
    gpc_launch_fn fn = *real;
    if (gpc_likely(info == GPC_GRAPH_INFO_NONE && fn))
        return fn(exec, s);
    return launch_slow(call, real, exec, s, info);
}

/* Launches and uploads. */
#define LAUNCH(name)                                                                \
    GPC_EXPORT CUresult name(CUgraphExec hGraphExec, CUstream hStream)              \
    {                                                                               \
        return launch(#name, &gpc_real.name, hGraphExec, hStream);                  \
    }
LAUNCH(cuGraphLaunch)
LAUNCH(cuGraphLaunch_ptsz)
LAUNCH(cuGraphUpload)
LAUNCH(cuGraphUpload_ptsz)

GPC_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    gpc_init();
    return gpc_graphs_device_trim(device);
}
