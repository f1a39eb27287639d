/* SPDX-License-Identifier: Apache-2.0 */
/*
 * review.h: the private parts of the admission handler, shared by its files and by nothing else
 * (admission.h is the handler's contract). One review is one struct review, filled as the request
 * is read; each file owns one concern, bottom up:
 *   patch.c      the scratch every other file writes with: JSONPatch operations, messages, JSON
 *                reading helpers, the annotations patch;
 *   detect.c     which containers are GPU containers (resources, scheduler annotations, claims,
 *                NVIDIA_VISIBLE_DEVICES, envFrom);
 *   tenant.c     what a tenant may not set: gpucap's variables and volumes in containers gpucap
 *                does not cap, envFrom prefixes that reach them;
 *   precedence.c the platform's side (namespace policy, cluster flags) and the one order of
 *                precedence of a container's budget; the budget record;
 *   inject.c     the injection patch of a pod CREATE: env, mounts, volumes, the init container;
 *   update.c     pod UPDATE (every subresource): the record, the scheduler's shares, the injected
 *                parts; ephemeral containers;
 *   admission.c  routing: the envelope, which review a request gets, the response.
 */
#ifndef GPUCAP_WEBHOOK_REVIEW_H
#define GPUCAP_WEBHOOK_REVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "admission.h"
#include "common/units.h"

#define ANN_MEMORY "gpucap.io/memory"
#define ANN_MEMORY_REQUEST "gpucap.io/memory-request"
#define ANN_INJECT "gpucap.io/inject"
#define ANN_INJECTED "gpucap.io/injected"
#define ANN_PRELOAD "gpucap.io/preload"
#define USER_PRELOAD "LD_PRELOAD_BEFORE_GPUCAP"
#define VISIBLE "NVIDIA_VISIBLE_DEVICES"
/* The NVIDIA container toolkit's apply-cuda-memory-limits hook reads these: whole MiB, both needed. */
#define DRIVER_REQUEST "NVIDIA_GPU_MEMORY_REQUEST"
#define DRIVER_LIMIT "NVIDIA_GPU_MEMORY_LIMIT"
#define MAX_CHOSEN 64

enum verdict { V_ALLOW, V_DENY, V_BAD };

/* One GPU container chosen for injection, with the budget it gets and where that came from. */
struct chosen {
    char name[72];
    char budget[64];
    const char *source; /* "KAI annotation gpu-fraction", "annotation gpucap.io/memory", ... */
    char request[64];   /* memory_request (issue 35), "" none: the container is guaranteed as before */
    const char *request_source;
    bool request_asked; /* the pod asked for the request (an annotation), not the platform's QoS default */
    bool mig;           /* a MIG device: the driver's limits do not apply there */
};

struct review {
    const struct gpc_admission_config *cfg;
    json_t *pod;
    json_t *patch;   /* JSONPatch operations, in order */
    json_t *warnings; /* the response's warnings: parts of a request gpucap does not enforce */
    bool oom;
    int code;        /* status.code of a denial: 400, or 503 when retrying may succeed */
    const char *ns;
    struct gpc_ns_policy policy;
    bool trusted;    /* tenant overrides allowed in this namespace */
    bool driver;     /* the driver's own limits are set too (inject.c) */
    bool opt_out;    /* the pod asks to opt out where the platform does not allow it: a GPU container denies it */
    enum gpc_preload_mode preload;
    char max[64];    /* the maximum that applies, "" none */
    const char *max_source;
    char fallback[64]; /* budget of containers that ask for none, "" none */
    const char *fallback_source;
    char annotation[64]; /* the pod's gpucap.io/memory, trimmed and checked, "" none */
    char request_annotation[64]; /* the pod's gpucap.io/memory-request, trimmed and checked, "" none */
    bool burstable;  /* QoS on (namespace policy qos, else --qos): containers without a request get 0 */
    const char *qos_source;
    bool sched_pod;  /* a scheduler annotation makes every container, and its named init container, GPU ones */
    struct chosen chosen[MAX_CHOSEN];
    size_t nchosen;
    char names[400]; /* comma-separated names of the chosen containers, for the log and annotation */
    char msg[1000];  /* reason for a denial or a 400 */
    char held[1000]; /* a denial that holds once the pod gets a cap: a tenant's setting in a container
                        gpucap does not cap (wh_tenant_settings) */
};

/* The pod's parts every review reads. */
struct pod_parts {
    json_t *meta, *ann, *spec;
    const char *inject, *memory, *memory_request, *preload;
};

/* ---- patch.c: the scratch ---- */

/* The reason for a denial or a 400, into r->msg (bounded). */
void wh_say(struct review *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line for the response's warnings (cleaned, bounded); r->oom when it cannot be added. */
void wh_warn(struct review *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies text for a log line or a message: bounded, one line, printable ASCII only. */
void wh_clean(char *dst, size_t len, const char *src);
/* Copies src without its leading and trailing blanks, bounded by len. */
void wh_trim_copy(char *dst, size_t len, const char *src);
/* Two paths are the same mount point when they differ only by trailing slashes. */
bool wh_same_path(const char *a, const char *b);
/* True when `path` is `dir` or lies under it ("/etc/gpucap/x" under "/etc/gpucap", not "/etc/gpucapx"). */
bool wh_under(const char *path, const char *dir);
/* Appends one JSONPatch operation (the value's reference is taken; NULL sets r->oom). */
void wh_op(struct review *r, const char *kind, const char *path, json_t *value);
/* Appends `item` to the array at `at`/`field`, creating the array when it is absent (!exists). */
void wh_append(struct review *r, const char *at, const char *field, bool exists, json_t *item);
/* {"name": name, "value": value}, new reference. */
json_t *wh_env_var(const char *name, const char *value);
/* A string member, or NULL when absent or null; *bad is set when it is there with another type. */
const char *wh_get_string(json_t *obj, const char *key, bool *bad);
/* An object or array member, or NULL when absent or null; *bad is set for another type. */
json_t *wh_get_typed(json_t *obj, const char *key, json_type type, bool *bad);
/* Parses a size as the library will; false when it is not one. */
bool wh_size_of(const char *text, struct gpc_size *out);
/* True when both sizes are of one kind (bytes or share) and a is above b. */
bool wh_above(const char *a, const char *b);
/* Adds `name` to the comma-separated `list` (bounded by len). */
void wh_append_name(char *list, size_t len, const char *name);
/* True when the comma-separated `list` holds `name`. */
bool wh_list_has(const char *list, const char *name);
/*
 * Sets the pod's annotations keys[i] to values[i] (NULL: removed), creating metadata and
 * annotations as needed; only what differs is patched, so a second pass patches nothing.
 */
void wh_patch_annotations(struct review *r, json_t *meta, json_t *ann, const char *const keys[],
                          const char *const values[], size_t n);

/* ---- detect.c: GPU containers ---- */

/*
 * Why a container could see GPUs without asking for one as a resource, or NULL: NVIDIA_VISIBLE_DEVICES
 * in its env, or an envFrom that could set it (*from_at then its index). NULL under --visible-devices
 * ignore.
 */
const char *wh_visible_reason(const struct review *r, json_t *c, long *from_at);
/* The denial of a container that could see GPUs without a cap (wh_visible_reason() said why). */
void wh_say_visible(struct review *r, const char *kind, const char *name, const char *why, long from_at);
/*
 * Why a container of spec[field] is a GPU container, or NULL; *mig when it asks for a MIG device.
 * *v = V_DENY (with r->msg) for a refused way of asking.
 */
const char *wh_gpu_reason(struct review *r, json_t *c, const char *field, const char *name, bool *mig,
                          enum verdict *v);

/* ---- tenant.c: what the tenant may not set ---- */

/* True when an envFrom `prefix` can make the variable `name` (with `family`, any name that starts
 * with `name`, as "GPUCAP_" does for every gpucap setting). */
bool wh_prefix_reaches(const char *prefix, const char *name, bool family);
/*
 * GPUCAP_* or NVIDIA_GPU_MEMORY_* variables (env, valueFrom, an envFrom prefix that reaches them) of
 * a container gpucap does not cap; V_DENY with r->msg unless the namespace is trusted. `kind`:
 * "container", "init container" or "ephemeral container".
 */
enum verdict wh_tenant_settings(struct review *r, json_t *c, const char *kind, const char *shown);
/* A container gpucap leaves alone that mounts gpucap's volumes: V_DENY with r->msg (unless trusted). */
enum verdict wh_other_mounts(struct review *r, json_t *c, const char *name);

/* ---- precedence.c: the platform's side and the budget ---- */

/* The two annotations only the webhook writes: which containers carry the cap, and their budgets. */
extern const char *const wh_record_keys[2];
/*
 * The platform's side: namespace policy, then cluster flags; fills max, fallback, trusted, preload
 * and whether the driver's limits are set (spec: the pod's, for `auto`). V_DENY with r->msg (and
 * r->code 503 when retrying may help) when the policy cannot be used.
 */
enum verdict wh_platform(struct review *r, const char *preload_ann, json_t *spec);
/*
 * The budget of one GPU container in the one order of precedence (maximum, scheduler's request,
 * gpucap.io/memory, namespace or cluster default). V_ALLOW with *skip when nothing gives one,
 * V_DENY for a request above the maximum or a malformed one; a default above the maximum becomes
 * the maximum. Every budget the maximum lowers, here or on the node (a share against bytes), is
 * said in r->warnings. Then its request (issue 35) in out->request: the scheduler's pair's, else
 * gpucap.io/memory-request, else "0" where QoS is on, else none; V_DENY for one above the limit or
 * the maximum.
 */
enum verdict wh_budget_of(struct review *r, json_t *c, const char *name, struct chosen *out, bool *skip);
/* A size annotation or setting, trimmed into dst; false (with r->msg) when it is not a size. */
bool wh_take_size(struct review *r, char *dst, size_t len, const char *text, const char *what);
/* The record (GPC_ANN_BUDGETS) of r->chosen as compact JSON; NULL (r->oom) when memory ran out. */
char *wh_budget_record(struct review *r);
/* Records the injection on the pod (both annotations); with nothing chosen, removes a tenant's. */
void wh_patch_records(struct review *r, json_t *meta, json_t *ann);

/* ---- inject.c: the injection patch ---- */

/* Index of our init container among spec.initContainers, or -1. */
long wh_find_init(json_t *spec);
/* Pod CREATE: the injection patch and the record, or a denial. */
enum verdict wh_review_create(struct review *r, json_t *req, json_t *pod, const char **what);

/* ---- update.c: UPDATE of a pod and its subresources ---- */

/* Pod UPDATE, of the pod itself (`sub` "") or of a subresource (`sub` "status", "ephemeralcontainers"...). */
enum verdict wh_review_update(struct review *r, json_t *req, json_t *pod, const char *sub, const char **what);
/* CREATE of pods/binding (request.object a Binding). */
enum verdict wh_review_binding(struct review *r, json_t *req, const char **what);

/* ---- admission.c ---- */

/* The pod's parts every review reads; V_BAD (with r->msg) when the types are not a pod's. */
enum verdict wh_pod_parts(struct review *r, json_t *req, json_t *pod, struct pod_parts *p);

#endif
