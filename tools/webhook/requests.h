/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requests.h: the GPU shares that schedulers already ask for (requests.c): KAI Scheduler's pod
 * annotations and HAMi-style container resources, read as gpucap budgets. Pure functions over the
 * pod's JSON: no I/O, no allocation that outlives a call.
 */
#ifndef GPUCAP_WEBHOOK_REQUESTS_H
#define GPUCAP_WEBHOOK_REQUESTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * True when KAI's `gpu-fraction` or `gpu-memory` annotation makes `pod` (the Pod object) a GPU pod,
 * even when no container requests nvidia.com/gpu (KAI hands the shared device over itself). True
 * for a malformed value too: gpc_wh_sched_budget() then says what is wrong.
 */
bool gpc_wh_sched_gpu_pod(const json_t *pod);

/*
 * The budget a scheduler's request gives `container` (an element of pod.spec.containers or
 * pod.spec.initContainers): returns 1 with a size the library reads ("2000MiB", "50%": a share of
 * the card it runs on, resolved on the node) in budget; 0 when no request applies to this container
 * (a KAI pod's other containers: KAI gives the share to one container); -1 with one line in err,
 * naming the annotation or resource and the accepted forms, when a request is malformed or two
 * requests for this container conflict. With a request/limit pair (gpc_wh_sched_request) the
 * budget is the limit. A budget is per device: a request for several devices
 * gives each the same share, as KAI and HAMi define it.
 */
int gpc_wh_sched_budget(const json_t *pod, const json_t *container, char *budget, size_t n, char *err,
                        size_t errn);

/*
 * The request (guaranteed, issue 35) a scheduler's request/limit pair gives `container`: Run:ai's
 * `gpu-fraction-limit` beside `gpu-fraction`, `gpu-memory-limit` beside `gpu-memory`, where the
 * budget gpc_wh_sched_budget() gives is the limit. Returns 1 with the request ("25%", "2000MiB")
 * in request, 0 when no pair applies (no `-limit` annotation: the one value is request and limit
 * alike, or the share goes to another container), -1 with one line in err as gpc_wh_sched_budget().
 */
int gpc_wh_sched_request(const json_t *pod, const json_t *container, char *request, size_t n, char *err,
                         size_t errn);

/* Where the request gpc_wh_sched_request() gave comes from: "KAI annotation gpu-fraction"... */
const char *gpc_wh_sched_request_source(const json_t *pod);

/*
 * Where the budget gpc_wh_sched_budget() gave `container` (returning 1) comes from, for messages:
 * "KAI annotation gpu-fraction", "HAMi resource nvidia.com/gpumem"...; "the scheduler's request"
 * when no request applies.
 */
const char *gpc_wh_sched_source(const json_t *pod, const json_t *container);

/*
 * A warning for a part of a scheduler's request that gpucap does not enforce (HAMi's
 * nvidia.com/gpucores, a share of the GPU's compute: gpucap caps memory only), for the caller to
 * return in the AdmissionReview's `warnings`: returns 1 with one line in warn, 0 when there is none.
 */
int gpc_wh_sched_warning(const json_t *container, char *warn, size_t n);

#endif
