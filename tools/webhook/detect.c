/* SPDX-License-Identifier: Apache-2.0 */
/*
 * detect.c: which containers of a pod are GPU containers. A container is one when it asks for an
 * nvidia.com/gpu* or nvidia.com/mig-* resource, when a scheduler's annotation gives it a share (KAI),
 * when it has a DRA claim (--dra-claims true), or when NVIDIA_VISIBLE_DEVICES, or an envFrom that
 * could set it, gives it devices (--visible-devices cap; deny refuses the pod, ignore passes it).
 */
#include "review.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device plugin's resources start so: nvidia.com/gpu, nvidia.com/gpu.shared, HAMi's gpumem. */
static const char gpu_prefix[] = "nvidia.com/gpu";
/* MIG devices: nvidia.com/mig-1g.10gb and the like (the device plugin's mixed strategy). */
static const char mig_prefix[] = "nvidia.com/mig-";

/* A resource quantity other than zero ("1", 2, "500m"; not "0", "0.0" or 0). */
static bool nonzero_quantity(json_t *q)
{
    if (json_is_number(q))
        return json_number_value(q) > 0;
    if (!json_is_string(q))
        return false;
    for (const char *p = json_string_value(q); *p; p++)
        if (*p >= '1' && *p <= '9')
            return true;
    return false;
}

/*
 * True when the container asks for a GPU as a resource: an nvidia.com/gpu* resource (whole cards,
 * shared replicas, HAMi's shares) or an nvidia.com/mig-* one (a MIG device, *mig set).
 */
static bool requests_gpu(json_t *container, bool *mig)
{
    json_t *res = json_object_get(container, "resources");
    static const char *const kinds[] = {"limits", "requests"};
    bool gpu = false;
    for (size_t k = 0; k < 2; k++) {
        const char *key;
        json_t *q;
        json_object_foreach(json_object_get(res, kinds[k]), key, q) {
            bool is_mig = strncmp(key, mig_prefix, sizeof mig_prefix - 1) == 0;
            if ((is_mig || strncmp(key, gpu_prefix, sizeof gpu_prefix - 1) == 0) && nonzero_quantity(q)) {
                gpu = true;
                *mig |= is_mig;
            }
        }
    }
    return gpu;
}

/*
 * True when NVIDIA_VISIBLE_DEVICES gives the container devices: "all", UUIDs or indices. "none",
 * "void" and the empty string give none; a value from a reference cannot be seen and counts.
 */
static bool visible_devices(json_t *env)
{
    bool visible = false;
    for (size_t i = 0; i < json_array_size(env); i++) {
        json_t *e = json_array_get(env, i);
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!n || strcmp(n, VISIBLE) != 0)
            continue;
        const char *v = json_string_value(json_object_get(e, "value"));
        char t[32];
        wh_trim_copy(t, sizeof t, v ? v : "");
        /* The last entry wins, as in the kubelet. */
        visible = v ? t[0] && strcmp(t, "none") != 0 && strcmp(t, "void") != 0
                    : json_object_get(e, "valueFrom") != NULL;
    }
    return visible;
}

/* True when an envFrom `prefix` ("" or absent: none) put before some key could make `name`. */
static bool prefix_could_make(const char *prefix, const char *name)
{
    size_t n = prefix ? strlen(prefix) : 0;
    return n < strlen(name) && strncmp(prefix ? prefix : "", name, n) == 0;
}

/*
 * Index of the first envFrom source (a ConfigMap or Secret, read by the kubelet, never by us) whose
 * keys could set `name`, or -1: without a prefix any key could, with one only a prefix of the name.
 */
static long env_from_could_set(json_t *from, const char *name)
{
    for (size_t i = 0; i < json_array_size(from); i++) {
        const char *prefix = json_string_value(json_object_get(json_array_get(from, i), "prefix"));
        if (prefix_could_make(prefix, name))
            return (long)i;
    }
    return -1;
}

/* True when an `env` entry names `name` (whatever its value: it wins over every envFrom). */
static bool env_names(json_t *env, const char *name)
{
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(env, i), "name"));
        if (n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/*
 * Why a container could see GPUs without asking for one as a resource, or NULL: NVIDIA_VISIBLE_DEVICES
 * in its env, or an envFrom (a ConfigMap or Secret we cannot read) that could set it, *from_at then
 * its index. Nothing under --visible-devices ignore (the node set-up ignores the variable).
 */
const char *wh_visible_reason(const struct review *r, json_t *c, long *from_at)
{
    if (r->cfg->visible == GPC_VISIBLE_IGNORE)
        return NULL;
    json_t *env = json_object_get(c, "env");
    if (visible_devices(env))
        return VISIBLE;
    *from_at = env_names(env, VISIBLE) ? -1 : env_from_could_set(json_object_get(c, "envFrom"), VISIBLE);
    return *from_at >= 0 ? "envFrom" : NULL;
}

/* The denial of a container that could see GPUs without a cap (wh_visible_reason() said why). */
void wh_say_visible(struct review *r, const char *kind, const char *name, const char *why, long from_at)
{
    if (strcmp(why, VISIBLE) == 0)
        wh_say(r, "%s %s sets " VISIBLE " without requesting nvidia.com/gpu: it would see GPUs without a cap; "
               "request the GPU as a resource", kind, name);
    else
        wh_say(r, "%s %s takes envFrom[%ld] (a ConfigMap or Secret) that could set " VISIBLE " without requesting "
               "nvidia.com/gpu: it could see GPUs without a cap; request the GPU as a resource, give envFrom a "
               "prefix, or set " VISIBLE "=void in env", kind, name, from_at);
}

/*
 * Why a container is a GPU container, or NULL; *mig when it asks for a MIG device. V_DENY (with
 * r->msg) for a refused way of asking.
 */
const char *wh_gpu_reason(struct review *r, json_t *c, const char *field, const char *name, bool *mig,
                              enum verdict *v)
{
    if (requests_gpu(c, mig))
        return *mig ? "nvidia.com/mig-*" : "nvidia.com/gpu";
    /* KAI gives the share to a regular container, or to the init container its annotation names
     * (a request for it, or a malformed one that wh_budget_of() then denies); a KAI pod's other
     * regular containers may see the device too: capped, from the annotation or the default. */
    char budget[64], err[256];
    if (r->sched_pod && (strcmp(field, "containers") == 0 ||
                         gpc_wh_sched_budget(r->pod, c, budget, sizeof budget, err, sizeof err) != 0))
        return "scheduler annotation";
    json_t *claims = json_object_get(json_object_get(c, "resources"), "claims");
    if (r->cfg->dra_claims && json_array_size(claims) > 0)
        return "resource claim";
    long from_at = -1;
    const char *why = wh_visible_reason(r, c, &from_at);
    if (why && r->cfg->visible == GPC_VISIBLE_CAP)
        return why;
    if (why) {
        wh_say_visible(r, "container", name, why, from_at);
        *v = V_DENY;
    }
    return NULL;
}
