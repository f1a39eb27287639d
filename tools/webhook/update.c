/* SPDX-License-Identifier: Apache-2.0 */
/*
 * update.c: UPDATE of a running pod, through the pod itself or any of its subresources
 * (pods/status, pods/resize, pods/ephemeralcontainers...), and the Bindings of pods/binding, which
 * copy their annotations onto the pod.
 *
 * What holds on a running pod (issue 30): the record (GPC_ANN_BUDGETS, ANN_INJECTED) is what the
 * webhook wrote, never what a tenant wrote: an update that does not change a budget annotation keeps
 * the old record exactly (none if there was none: a pod injected before records existed gets none
 * from its tenant), one that changes it has every budget resolved again and is denied when that
 * fails, and a subresource or a Binding cannot change either. A scheduler's share (KAI) placed the
 * pod on a card packed with others: changing it may only lower a budget. The injected parts (the
 * init container, the two volumes, the env, envFrom and mounts of the capped containers) cannot
 * change at all: an init container's image is mutable on a running pod, and a new one would write
 * another ini.
 *
 * A container's request (issue 35) is fixed when the pod is created: gpucap inject wrote it into the
 * locked ini from the init container's arguments, which cannot change (above), and the node agent
 * rewrites budgets only. So an update may change a limit but not the request the pod asks for, and
 * no limit may fall below the request written at creation (the library would run the container
 * best effort).
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

/* The pod annotations a change of budget comes from: gpucap's own, then KAI's (from SCHED_FIRST on:
 * a scheduler's share, which may only lower a budget on a running pod). */
static const char *const budget_annotations[] = {ANN_MEMORY, ANN_MEMORY_REQUEST, "gpu-fraction", "gpu-memory",
                                                 "gpu-fraction-container-name", "gpu-fraction-num-devices",
                                                 "gpu-fraction-limit", "gpu-memory-limit"};
#define NBUDGET_ANN (sizeof budget_annotations / sizeof budget_annotations[0])
#define SCHED_FIRST 2

/*
 * `kubectl debug` and the like: an ephemeral container added to a running pod (UPDATE of
 * pods/ephemeralcontainers). gpucap cannot cap it (its ini comes from the init container, which ran
 * when the pod started, and no volume can be added now), so one that could see a GPU is refused,
 * as is one that mounts gpucap's volumes (it could rewrite the library, the ini or the ledger).
 * Ephemeral containers cannot request resources: NVIDIA_VISIBLE_DEVICES (or an envFrom that could
 * set it) is how they would see a GPU. Those already in the pod were checked when added.
 */
static enum verdict review_ephemeral(struct review *r, json_t *req, const struct pod_parts *pp, const char **what)
{
    struct pod_parts p = *pp;
    enum verdict v = wh_platform(r, NULL, p.spec);
    if (v != V_ALLOW)
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

/* Both absent (or null), or both there and equal. */
static bool same(json_t *a, json_t *b)
{
    if (json_is_null(a))
        a = NULL;
    if (json_is_null(b))
        b = NULL;
    return a == b || (a && b && json_equal(a, b));
}

/* The element of array `list` whose "name" is `name`, or NULL. */
static json_t *named(json_t *list, const char *name)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(list, i), "name"));
        if (n && strcmp(n, name) == 0)
            return json_array_get(list, i);
    }
    return NULL;
}

/* The container `name` of a pod spec, among its containers, then its init containers; NULL if none. */
static json_t *container_named(json_t *spec, const char *name)
{
    json_t *c = named(json_object_get(spec, "containers"), name);
    return c ? c : named(json_object_get(spec, "initContainers"), name);
}

/* The next name of the comma-separated list at *p into name (at most 71 characters); false at its end. */
static bool next_name(const char **p, char name[72])
{
    if (!*p || !**p)
        return false;
    size_t len = strcspn(*p, ",");
    snprintf(name, 72, "%.*s", (int)(len < 71 ? len : 71), *p);
    *p += len + ((*p)[len] == ',');
    return true;
}

/*
 * The injected parts of an injected pod, the same on both sides of an UPDATE of the pod itself: the
 * init container whole (its image: the one thing of it the API server lets change), the two
 * volumes, and the env, envFrom and volume mounts of every container that carries the cap (which
 * the API server keeps immutable today; checked all the same, as the ValidatingAdmissionPolicy of
 * examples/components/immutable-injection does). V_DENY naming the part otherwise.
 */
static enum verdict injected_parts_kept(struct review *r, json_t *old_spec, json_t *spec, const char *injected)
{
    json_t *was = named(json_object_get(old_spec, "initContainers"), GPC_ADMISSION_INIT);
    json_t *now = named(json_object_get(spec, "initContainers"), GPC_ADMISSION_INIT);
    if (!same(was, now)) {
        char a[96], b[96];
        wh_clean(a, sizeof a, json_string_value(json_object_get(was, "image")));
        wh_clean(b, sizeof b, json_string_value(json_object_get(now, "image")));
        wh_say(r, "the " GPC_ADMISSION_INIT " init container of a running pod is the platform's and cannot change "
                  "(image %s%s%s%s): it writes the cap of every container; recreate the pod", a[0] ? a : "-",
               strcmp(a, b) ? " -> " : "", strcmp(a, b) ? (b[0] ? b : "removed") : "", strcmp(a, b) ? "" : ", other fields");
        return V_DENY;
    }
    static const char *const vols[] = {GPC_ADMISSION_VOLUME, GPC_ADMISSION_LEDGER_VOLUME};
    for (size_t k = 0; k < 2; k++)
        if (!same(named(json_object_get(old_spec, "volumes"), vols[k]), named(json_object_get(spec, "volumes"), vols[k]))) {
            wh_say(r, "the volume %s of a running pod is gpucap's and cannot change; recreate the pod", vols[k]);
            return V_DENY;
        }
    static const char *const fields[] = {"env", "envFrom", "volumeMounts"};
    char name[72];
    for (const char *n = injected; next_name(&n, name);) {
        json_t *oc = container_named(old_spec, name), *nc = container_named(spec, name);
        for (size_t f = 0; f < 3; f++) {
            if (same(json_object_get(oc, fields[f]), json_object_get(nc, fields[f])))
                continue;
            char shown[72];
            wh_clean(shown, sizeof shown, name);
            wh_say(r, "container %s carries gpucap's cap: its %s cannot change on a running pod; recreate the pod",
                   shown, fields[f]);
            return V_DENY;
        }
    }
    return V_ALLOW;
}

/*
 * The budget of every container of `injected` resolved on `pod` (its spec and its gpucap.io/memory
 * `memory`) into f->chosen, as at creation. V_DENY (with f->msg) when one fails or has none.
 */
static enum verdict resolve(struct review *f, json_t *pod, json_t *spec, const char *memory, const char *injected)
{
    f->pod = pod;
    if (memory && !wh_take_size(f, f->annotation, sizeof f->annotation, memory, "annotation " ANN_MEMORY))
        return V_DENY;
    const char *request = json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), ANN_MEMORY_REQUEST));
    if (request && !wh_take_size(f, f->request_annotation, sizeof f->request_annotation, request,
                                 "annotation " ANN_MEMORY_REQUEST))
        return V_DENY;
    enum verdict v = wh_platform(f, NULL, spec);
    if (v != V_ALLOW)
        return v;
    f->sched_pod = gpc_wh_sched_gpu_pod(pod);
    char name[72];
    for (const char *n = injected; next_name(&n, name);) {
        json_t *c = container_named(spec, name);
        if (!c || f->nchosen == MAX_CHOSEN)
            continue; /* the spec's containers cannot change on UPDATE: not ours to judge */
        bool skip = false;
        struct chosen *ch = &f->chosen[f->nchosen];
        if ((v = wh_budget_of(f, c, name, ch, &skip)) != V_ALLOW)
            return v;
        if (skip) {
            wh_say(f, "container %s would have no budget after this update, but carries gpucap's cap: keep "
                      ANN_MEMORY " (or the scheduler's request) on the pod", name);
            return V_DENY;
        }
        snprintf(ch->name, sizeof ch->name, "%s", name);
        f->nchosen++;
        wh_append_name(f->names, sizeof f->names, name);
    }
    return V_ALLOW;
}

/* The budget of container `name` in review `f` (resolved), or NULL. */
static const char *chosen_budget(const struct review *f, const char *name)
{
    for (size_t i = 0; i < f->nchosen; i++)
        if (strcmp(f->chosen[i].name, name) == 0)
            return f->chosen[i].budget;
    return NULL;
}

/*
 * A scheduler's share changed (KAI's annotations): KAI placed the pod on a card by that share and
 * packed others beside it, so no container's budget may rise above what it had. What it had: the
 * old pod's budgets resolved now and, where the old record (the webhook's, kept so far) says less,
 * the record's. A budget that cannot be compared with the old one (a share of the card against
 * bytes) counts as a raise. V_DENY naming the container otherwise.
 */
static enum verdict shares_not_raised(struct review *r, const struct review *now, json_t *old, const char *old_record,
                                      const char *injected, const char *key)
{
    /* The old pod resolved again says nothing to the user: its warnings go nowhere. */
    json_t *unsaid = json_array();
    struct review was = {.cfg = r->cfg, .code = 400, .ns = r->ns, .patch = r->patch, .warnings = unsaid};
    json_t *old_ann = json_object_get(json_object_get(old, "metadata"), "annotations");
    bool known = resolve(&was, old, json_object_get(old, "spec"), json_string_value(json_object_get(old_ann, ANN_MEMORY)),
                         injected) == V_ALLOW;
    json_t *rec = old_record ? json_loads(old_record, 0, NULL) : NULL;
    json_t *recorded = json_object_get(rec, "containers");
    enum verdict v = V_ALLOW;
    for (size_t i = 0; i < now->nchosen && v == V_ALLOW; i++) {
        const struct chosen *ch = &now->chosen[i];
        const char *before = known ? chosen_budget(&was, ch->name) : NULL;
        const char *in_record = json_string_value(json_object_get(recorded, ch->name));
        if (in_record && (!before || wh_above(before, in_record)))
            before = in_record;
        struct gpc_size a, b;
        bool comparable = before && wh_size_of(before, &a) && wh_size_of(ch->budget, &b) && a.is_percent == b.is_percent;
        if (comparable && !wh_above(ch->budget, before))
            continue;
        char shown[64];
        wh_clean(shown, sizeof shown, before ? before : "unknown");
        wh_say(r, "annotation %s: a scheduler's share cannot raise a budget on a running pod (the scheduler placed "
                  "the pod by it, beside others on the card): container %s would get %s (%s), it has %s; keep the "
                  "share, lower it, or recreate the pod", key, ch->name, ch->budget, ch->source, shown);
        v = V_DENY;
    }
    json_decref(rec);
    json_decref(unsaid);
    return v;
}

/*
 * The request the init container of `spec` wrote for container `name` (its argument
 * NAME=LIMIT,request=REQUEST) into out; "" when it wrote none (a guaranteed container).
 */
static void request_at_creation(json_t *spec, const char *name, char *out, size_t len)
{
    json_t *cmd = json_object_get(named(json_object_get(spec, "initContainers"), GPC_ADMISSION_INIT), "command");
    size_t n = strlen(name);
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        const char *a = json_string_value(json_array_get(cmd, i));
        const char *at = a && strncmp(a, name, n) == 0 && a[n] == '=' ? strstr(a + n, ",request=") : NULL;
        if (at)
            snprintf(out, len, "%s", at + strlen(",request="));
    }
}

/*
 * The requests of an UPDATE (issue 35): the one written at creation stays. A request the pod asks
 * for now that is not that one is denied, as is the removal of gpucap.io/memory-request
 * (annotation_moved) (a platform default, QoS turned on since, is not the pod's
 * ask: the written one stays); a limit below the written request is denied. Each chosen request is
 * set to the written one, for what follows.
 */
static enum verdict requests_kept(struct review *r, json_t *old_spec, bool annotation_moved)
{
    for (size_t i = 0; i < r->nchosen; i++) {
        struct chosen *ch = &r->chosen[i];
        char fixed[64];
        request_at_creation(old_spec, ch->name, fixed, sizeof fixed);
        const char *now = ch->request_asked ? ch->request : "";
        if ((ch->request_asked || annotation_moved) && strcmp(now, fixed) != 0) {
            wh_say(r, "container %s: its request is fixed when the pod is created (%s); this update asks for %s%s%s%s: "
                      "recreate the pod to change it", ch->name, fixed[0] ? fixed : "none: guaranteed at its budget",
                   now[0] ? now : "none", now[0] ? " (" : "", now[0] ? ch->request_source : "", now[0] ? ")" : "");
            return V_DENY;
        }
        if (fixed[0] && wh_above(fixed, ch->budget)) {
            wh_say(r, "container %s: its limit would be %s (%s), below its request %s fixed at creation; a limit is at "
                      "least the request", ch->name, ch->budget, ch->source, fixed);
            return V_DENY;
        }
        snprintf(ch->request, sizeof ch->request, "%s", fixed);
    }
    return V_ALLOW;
}

/* Where the driver's limit was set when the container started, a raise does not reach it: said. */
static void driver_warnings(struct review *r, json_t *spec)
{
    for (size_t k = 0; k < r->nchosen; k++) {
        const struct chosen *ch = &r->chosen[k];
        json_t *env = json_object_get(container_named(spec, ch->name), "env");
        for (size_t i = 0; i < json_array_size(env); i++) {
            json_t *e = json_array_get(env, i);
            const char *var = json_string_value(json_object_get(e, "name"));
            const char *mib = json_string_value(json_object_get(e, "value"));
            struct gpc_size s;
            if (var && mib && strcmp(var, DRIVER_LIMIT) == 0 && wh_size_of(ch->budget, &s) &&
                (s.is_percent || s.bytes > strtoull(mib, NULL, 10) << 20))
                wh_warn(r, "container %s: the driver's limit stays %s MiB (" DRIVER_LIMIT ", applied when the "
                           "container started); gpucap's budget %s applies below it", ch->name, mib, ch->budget);
        }
    }
}

enum verdict wh_review_update(struct review *r, json_t *req, json_t *pod, const char *sub, const char **what)
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
    bool ephemeral = strcmp(sub, "ephemeralcontainers") == 0;
    json_t *old_ann = json_object_get(json_object_get(old, "metadata"), "annotations");
    json_t *old_spec = json_object_get(old, "spec");
    const char *injected = json_string_value(json_object_get(old_ann, ANN_INJECTED));
    const char *old_record = json_string_value(json_object_get(old_ann, GPC_ANN_BUDGETS));
    if (!injected || !*injected || wh_find_init(old_spec) < 0) {
        /* Not injected: no record, whoever wrote one. A gpucap-init of its own (the annotation gone,
         * or a pod from elsewhere) is held all the same: it would write the cap of its containers. */
        if (!*sub && wh_find_init(old_spec) >= 0 && (v = injected_parts_kept(r, old_spec, p.spec, "")) != V_ALLOW)
            return v;
        const char *none[2] = {NULL, NULL};
        wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, none, 2);
        if (ephemeral)
            return review_ephemeral(r, req, &p, what);
        *what = json_array_size(r->patch) ? "update: a record gpucap did not write removed" : "update: not injected";
        return V_ALLOW;
    }
    const char *changed = NULL, *sched = NULL; /* the first budget annotation, and scheduler's one, that changed */
    for (size_t k = 0; k < NBUDGET_ANN; k++) {
        if (!annotation_changed(old_ann, p.ann, budget_annotations[k]))
            continue;
        changed = changed ? changed : budget_annotations[k];
        sched = sched || k < SCHED_FIRST ? sched : budget_annotations[k];
    }
    if (changed && *sub) {
        wh_say(r, "annotation %s changes a budget: change it with an update of the pod itself, not of its %s "
                  "subresource", changed, sub);
        return V_DENY;
    }
    if (!*sub && (v = injected_parts_kept(r, old_spec, p.spec, injected)) != V_ALLOW)
        return v;
    if (!changed) {
        /* The old record exactly, whatever the tenant wrote into it; none if there was none. */
        const char *keep[2] = {injected, old_record};
        wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, keep, 2);
        if (ephemeral)
            return review_ephemeral(r, req, &p, what);
        *what = json_array_size(r->patch) ? "update: the record restored" : "update: budgets unchanged";
        return V_ALLOW;
    }

    /* A budget changed: resolved again as at creation; any failure denies the update. */
    bool request_moved = annotation_changed(old_ann, p.ann, ANN_MEMORY_REQUEST);
    if ((v = resolve(r, pod, p.spec, p.memory, injected)) != V_ALLOW ||
        (v = requests_kept(r, old_spec, request_moved)) != V_ALLOW)
        return v;
    if (sched && (v = shares_not_raised(r, r, old, old_record, injected, sched)) != V_ALLOW)
        return v;
    driver_warnings(r, p.spec);
    char *record = wh_budget_record(r);
    if (!record)
        return V_ALLOW; /* r->oom */
    const char *values[2] = {injected, record};
    wh_patch_annotations(r, p.meta, p.ann, wh_record_keys, values, 2);
    free(record);
    *what = "update: budgets resolved again";
    return V_ALLOW;
}

/*
 * CREATE of pods/binding: the API server copies a Binding's annotations onto the pod it binds, so a
 * Binding could write the record. One that carries any gpucap.io/ annotation is denied (a scheduler
 * has no reason to set them); the others pass.
 */
enum verdict wh_review_binding(struct review *r, json_t *req, const char **what)
{
    bool bad = false;
    json_t *binding = wh_get_typed(req, "object", JSON_OBJECT, &bad);
    json_t *meta = wh_get_typed(binding, "metadata", JSON_OBJECT, &bad);
    json_t *ann = wh_get_typed(meta, "annotations", JSON_OBJECT, &bad);
    if (bad || !binding) {
        wh_say(r, "request.object is not a Binding: metadata or annotations has the wrong type");
        return V_BAD;
    }
    const char *key;
    json_t *value;
    json_object_foreach(ann, key, value) {
        if (strncmp(key, "gpucap.io/", 10) == 0) {
            char shown[96];
            wh_clean(shown, sizeof shown, key);
            wh_say(r, "a Binding sets annotation %s on the pod it binds: gpucap's annotations are written by the "
                      "webhook only", shown);
            return V_DENY;
        }
    }
    *what = "binding: no gpucap annotation";
    return V_ALLOW;
}
