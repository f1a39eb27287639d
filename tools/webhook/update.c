/* SPDX-License-Identifier: Apache-2.0 */
/*
 * update.c: UPDATE of a running pod, through the pod itself or any of its subresources, and
 * ephemeral containers (pods/ephemeralcontainers).
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

/* The pod annotations a change of budget comes from (gpucap's own, KAI's). */
static const char *const budget_annotations[] = {ANN_MEMORY, "gpu-fraction", "gpu-memory",
                                                 "gpu-fraction-container-name", "gpu-fraction-num-devices"};

/*
 * `kubectl debug` and the like: an ephemeral container added to a running pod (UPDATE of
 * pods/ephemeralcontainers). gpucap cannot cap it (its ini comes from the init container, which ran
 * when the pod started, and no volume can be added now), so one that could see a GPU is refused,
 * as is one that mounts gpucap's volumes (it could rewrite the library, the ini or the ledger).
 * Ephemeral containers cannot request resources: NVIDIA_VISIBLE_DEVICES (or an envFrom that could
 * set it) is how they would see a GPU. Those already in the pod were checked when added.
 */
enum verdict wh_review_ephemeral(struct review *r, json_t *req, json_t *pod, const char **what)
{
    struct pod_parts p;
    enum verdict v = wh_pod_parts(r, req, pod, &p);
    if (v != V_ALLOW || (v = wh_platform(r, NULL, p.spec)) != V_ALLOW)
        return v;
    bool bad = false;
    json_t *list = wh_get_typed(p.spec, "ephemeralContainers", JSON_ARRAY, &bad);
    json_t *old = json_object_get(json_object_get(json_object_get(req, "oldObject"), "spec"), "ephemeralContainers");
    if (bad) {
        wh_say(r, "request.object.spec.ephemeralContainers is not an array");
        return V_BAD;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        bool seen = false;
        for (size_t k = 0; name && k < json_array_size(old); k++)
            seen |= json_equal(json_array_get(old, k), c);
        if (seen)
            continue;
        char shown[72];
        wh_clean(shown, sizeof shown, name ? name : "");
        long from_at = -1;
        const char *why = wh_visible_reason(r, c, &from_at);
        if (why) {
            wh_say_visible(r, "ephemeral container", shown, why, from_at);
            strncat(r->msg, "; gpucap cannot cap an ephemeral container (the pod's volumes and init container are "
                            "fixed at creation): debug without GPU access",
                    sizeof r->msg - strlen(r->msg) - 1);
            return V_DENY;
        }
        if ((v = wh_other_mounts(r, c, shown)) != V_ALLOW || (v = wh_tenant_settings(r, c, "ephemeral container", shown)) != V_ALLOW)
            return v;
    }
    *what = "ephemeral containers: none sees a GPU";
    return V_ALLOW;
}

/* True when the pod annotation `key` differs between two annotation objects (absent counts). */
static bool annotation_changed(json_t *a, json_t *b, const char *key)
{
    json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
    return !(x == y || (x && y && json_equal(x, y)));
}

/*
 * Pod UPDATE: only annotations (and a few spec fields gpucap does not own) change on a running pod.
 * A pod gpucap did not inject (no gpu-init, no record on the old object) gets no record: a tenant's
 * is removed. An injected pod whose budget annotations (gpucap.io/memory, KAI's) changed has the
 * budget of every container it injected resolved again, with the same precedence and maximum as at
 * creation: above the maximum (or left with none) the update is denied, naming the values; else
 * the record is rewritten and the node agent applies it. Any other update keeps the old record,
 * whatever the tenant wrote into it.
 */
enum verdict wh_review_update(struct review *r, json_t *req, json_t *pod, const char **what)
{
    struct pod_parts p;
    bool bad = false;
    enum verdict v = wh_pod_parts(r, req, pod, &p);
    json_t *old = wh_get_typed(req, "oldObject", JSON_OBJECT, &bad);
    if (v != V_ALLOW)
        return v;
    if (!old || bad) {
        wh_say(r, "request.oldObject is missing or not an object in an UPDATE");
        return V_BAD;
    }
    json_t *old_ann = json_object_get(json_object_get(old, "metadata"), "annotations");
    const char *injected = json_string_value(json_object_get(old_ann, ANN_INJECTED));
    const char *old_record = json_string_value(json_object_get(old_ann, GPC_ANN_BUDGETS));
    if (!injected || !*injected || wh_find_init(json_object_get(old, "spec")) < 0) {
        const char *none[2] = {NULL, NULL};
        wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, none, 2);
        *what = json_array_size(r->patch) ? "update: a record gpucap did not write removed" : "update: not injected";
        return V_ALLOW;
    }
    bool changed = false;
    for (size_t k = 0; k < sizeof budget_annotations / sizeof budget_annotations[0]; k++)
        changed |= annotation_changed(old_ann, p.ann, budget_annotations[k]);
    if (!changed && old_record) {
        const char *keep[2] = {injected, old_record};
        wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, keep, 2);
        *what = json_array_size(r->patch) ? "update: the record restored" : "update: budgets unchanged";
        return V_ALLOW;
    }

    /* Resolved again. Without a change (a pod from before the record), a failure only skips the record. */
    struct review fresh = {.cfg = r->cfg, .code = 400, .patch = r->patch, .warnings = r->warnings};
    struct review *f = changed ? r : &fresh;
    f->pod = pod;
    f->ns = r->ns;
    if (p.memory && !wh_take_size(f, f->annotation, sizeof f->annotation, p.memory, "annotation " ANN_MEMORY))
        return changed ? V_DENY : V_ALLOW;
    if ((v = wh_platform(f, NULL, p.spec)) != V_ALLOW)
        return changed ? v : V_ALLOW;
    f->sched_pod = gpc_wh_sched_gpu_pod(pod);
    for (const char *n = injected; *n;) {
        size_t len = strcspn(n, ",");
        char name[72];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), n);
        n += len + (n[len] == ',');
        json_t *c = NULL;
        static const char *const fields[2] = {"containers", "initContainers"};
        for (size_t l = 0; !c && l < 2; l++) {
            json_t *list = json_object_get(p.spec, fields[l]);
            for (size_t i = 0; !c && i < json_array_size(list); i++) {
                const char *cn = json_string_value(json_object_get(json_array_get(list, i), "name"));
                if (cn && strcmp(cn, name) == 0)
                    c = json_array_get(list, i);
            }
        }
        if (!c || f->nchosen == MAX_CHOSEN)
            continue; /* the spec's containers cannot change on UPDATE: not ours to judge */
        bool skip = false;
        struct chosen *ch = &f->chosen[f->nchosen];
        if ((v = wh_budget_of(f, c, name, ch, &skip)) != V_ALLOW)
            return changed ? v : V_ALLOW;
        if (skip) {
            if (!changed)
                return V_ALLOW;
            wh_say(r, "container %s would have no budget after this update, but carries gpucap's cap: keep "
                   ANN_MEMORY " (or the scheduler's request) on the pod", name);
            return V_DENY;
        }
        snprintf(ch->name, sizeof ch->name, "%s", name);
        f->nchosen++;
        wh_append_name(f->names, sizeof f->names, name);
        /* The driver's limit was applied when the container started; a raise does not reach it. */
        json_t *env = json_object_get(c, "env");
        for (size_t i = 0; changed && i < json_array_size(env); i++) {
            json_t *e = json_array_get(env, i);
            const char *var = json_string_value(json_object_get(e, "name"));
            const char *mib = json_string_value(json_object_get(e, "value"));
            struct gpc_size s;
            if (var && mib && strcmp(var, DRIVER_LIMIT) == 0 && wh_size_of(ch->budget, &s) &&
                (s.is_percent || s.bytes > strtoull(mib, NULL, 10) << 20))
                wh_warn(r, "container %s: the driver's limit stays %s MiB (" DRIVER_LIMIT ", applied when the container "
                        "started); gpucap's budget %s applies below it", name, mib, ch->budget);
        }
    }
    char *record = wh_budget_record(f);
    if (!record) {
        r->oom = true;
        return V_ALLOW;
    }
    const char *values[2] = {injected, record};
    wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, values, 2);
    free(record);
    if (f != r) { /* for the log line */
        r->nchosen = f->nchosen;
        memcpy(r->chosen, f->chosen, sizeof r->chosen);
        snprintf(r->max, sizeof r->max, "%s", f->max);
        r->oom |= f->oom;
    }
    *what = changed ? "update: budgets resolved again" : "update: budgets recorded";
    return V_ALLOW;
}
