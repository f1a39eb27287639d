/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hooks_graph.c: graph instantiation, launch, upload and trim. Each hook starts the library and
 * hands the call to the accounting of graph memory (charge/graph.c, whose head says how it is
 * counted with launches left at full speed).
 */
#include "hooks/init.h"

#include "charge/graph.h"
#include "driver/resolve.h"

#include <stddef.h>

GPC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    struct gpc_graph_need need;
    gpc_init();
    int how = gpc_graphs_inst_begin(hGraph, &need);
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
    gpc_graphs_inst_end(rc, phGraphExec, how, &need);
    return rc;
}

GPC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                          char *logBuffer, size_t bufferSize)
{
    struct gpc_graph_need need;
    gpc_init();
    int how = gpc_graphs_inst_begin(hGraph, &need);
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiate_v2, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
    gpc_graphs_inst_end(rc, phGraphExec, how, &need);
    return rc;
}

/* The CUDA 10 entry point (cuGetProcAddress below 11000): same arguments as _v2. */
GPC_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    struct gpc_graph_need need;
    gpc_init();
    int how = gpc_graphs_inst_begin(hGraph, &need);
    CUresult rc = GPC_CALL_REAL(cuGraphInstantiate, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
    gpc_graphs_inst_end(rc, phGraphExec, how, &need);
    return rc;
}

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

GPC_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    gpc_init();
    return gpc_graphs_launch("cuGraphLaunch", &gpc_real.cuGraphLaunch, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    gpc_init();
    return gpc_graphs_launch("cuGraphLaunch_ptsz", &gpc_real.cuGraphLaunch_ptsz, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    gpc_init();
    return gpc_graphs_launch("cuGraphUpload", &gpc_real.cuGraphUpload, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    gpc_init();
    return gpc_graphs_launch("cuGraphUpload_ptsz", &gpc_real.cuGraphUpload_ptsz, hGraphExec, hStream);
}

GPC_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    gpc_init();
    return gpc_graphs_device_trim(device);
}
