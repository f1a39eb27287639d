/* TEMP stub: the real one is requests.c */
/*
 * requests_stub.c: stands in for requests.c (the schedulers' GPU-share requests) until the two
 * branches merge: no scheduler annotation makes a pod a GPU pod, and none gives a budget.
 */
#include "admission.h"

bool gpc_wh_sched_gpu_pod(const json_t *pod)
{
    (void)pod;
    return false;
}

int gpc_wh_sched_budget(const json_t *pod, const json_t *container, char *budget, size_t n, char *err, size_t errn)
{
    (void)pod, (void)container, (void)budget, (void)n, (void)err, (void)errn;
    return 0;
}
