/* SPDX-License-Identifier: Apache-2.0 */
/*
 * precedence.c: the platform's side of a review and the budget of each GPU container. The
 * namespace policy (a lookup the caller supplies) and then the cluster's flags give the maximum,
 * the default and who is trusted; without a maximum the default is the maximum. A container's budget
 * comes in one order of precedence (wh_budget_of); the resolved budgets are recorded on the pod
 * (GPC_ANN_BUDGETS) for the node agent.
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

#include "common/units.h"

/*
 * The card size at which a size of bytes and a share of the card meet (bytes / share), as text;
 * false when the two are of one kind or the share is 0.
 */
static bool meet_card(const struct gpc_size *a, const struct gpc_size *b, char card[GPC_SIZE_TEXT])
{
    if (a->is_percent == b->is_percent)
        return false;
    uint32_t share = a->is_percent ? a->ppm : b->ppm;
    if (share == 0)
        return false;
    long double at = (long double)(a->is_percent ? b->bytes : a->bytes) * 1e6L / (long double)share;
    gpc_format_size(at >= 1.8e19L ? UINT64_MAX : (uint64_t)at, card, GPC_SIZE_TEXT);
    return true;
}

/*
 * Where the maximum lowers a budget that passed admission, the response says so (kubectl shows it),
 * once per container. Of one kind (a default above the namespace's or the cluster's maximum): the
 * budget is the maximum, said with both values. Of two kinds (bytes against a share of the card),
 * the card decides, which is known only on the node: the library takes the lower of the two there,
 * and the warning says on which cards that is the maximum (bytes A under a share m: cards under
 * A / m; a share s under bytes B: cards over B / s). A maximum of 100% is the card itself: no word.
 */
static void clamp_warning(struct review *r, const struct chosen *out, const char *name)
{
    struct gpc_size b, m;
    char card[GPC_SIZE_TEXT];
    if (!wh_size_of(out->budget, &b) || !wh_size_of(r->max, &m) || (m.is_percent && m.ppm >= 1000000u) ||
        !meet_card(&b, &m, card))
        return;
    wh_warn(r, "container %s: %s (%s) is above the maximum %s (%s) on cards %s %s: there its budget is %s", name,
            out->budget, out->source, r->max, r->max_source, b.is_percent ? "over" : "under", card, r->max);
}

/*
 * The request of a chosen container whose budget (its limit) is out->budget (issue 35), in one
 * order: a scheduler's request/limit pair (Run:ai's gpu-fraction with gpu-fraction-limit), else the
 * pod's gpucap.io/memory-request, else "0" (best effort) where the platform turned QoS on, else none
 * (the container stays guaranteed at its budget, as before). A request above the maximum or above
 * the limit (of one kind) is the tenant's ask: denied, never lowered. Of two kinds (bytes against
 * a share) the card decides on the node, where a request above the limit runs best effort: the
 * warning says on which cards.
 */
static enum verdict request_of(struct review *r, json_t *c, const char *name, struct chosen *out)
{
    char err[256] = "";
    out->request[0] = '\0';
    out->request_source = NULL;
    out->request_asked = true;
    int rc = gpc_wh_sched_request(r->pod, c, out->request, sizeof out->request, err, sizeof err);
    if (rc < 0) { /* gpc_wh_sched_budget() said it first; kept for a caller that asks this alone */
        char shown[256];
        wh_clean(shown, sizeof shown, err);
        wh_say(r, "container %s: %s", name, shown);
        return V_DENY;
    }
    if (rc > 0) {
        out->request_source = gpc_wh_sched_request_source(r->pod);
    } else if (r->request_annotation[0]) {
        snprintf(out->request, sizeof out->request, "%s", r->request_annotation);
        out->request_source = "annotation " ANN_MEMORY_REQUEST;
    } else if (r->burstable) {
        snprintf(out->request, sizeof out->request, "0");
        out->request_source = r->qos_source;
        out->request_asked = false;
        return V_ALLOW; /* best effort: below every limit and maximum */
    } else {
        out->request_asked = false;
        return V_ALLOW;
    }
    struct gpc_size q, l;
    if (!wh_size_of(out->request, &q)) {
        wh_say(r, "container %s: the request gives \"%s\" (%s), not a size", name, out->request, out->request_source);
        return V_DENY;
    }
    if (r->max[0] && wh_above(out->request, r->max)) {
        wh_say(r, "container %s requests %s (%s), above the maximum %s (%s); request %s or less", name, out->request,
               out->request_source, r->max, r->max_source, r->max);
        return V_DENY;
    }
    if (wh_above(out->request, out->budget)) {
        wh_say(r, "container %s requests %s (%s), above its limit %s (%s); a request is at most the limit (request = "
               "limit: guaranteed)", name, out->request, out->request_source, out->budget, out->source);
        return V_DENY;
    }
    /* Where the limit or the maximum is of the other kind, the card decides: said, once. */
    char card[GPC_SIZE_TEXT];
    struct gpc_size m;
    if (!(q.is_percent ? q.ppm != 0 : q.bytes != 0))
        return V_ALLOW;
    if (wh_size_of(out->budget, &l) && meet_card(&q, &l, card))
        wh_warn(r, "container %s: its request %s (%s) is above its limit %s (%s) on cards %s %s: there it runs best "
                "effort (request 0)", name, out->request, out->request_source, out->budget, out->source,
                q.is_percent ? "over" : "under", card);
    else if (r->max[0] && wh_size_of(r->max, &m) && !(m.is_percent && m.ppm >= 1000000u) && meet_card(&q, &m, card))
        wh_warn(r, "container %s: its request %s (%s) is above the maximum %s (%s) on cards %s %s: there it runs best "
                "effort (request 0)", name, out->request, out->request_source, r->max, r->max_source,
                q.is_percent ? "over" : "under", card);
    return V_ALLOW;
}

/*
 * The budget of one GPU container, in the one order of precedence: the platform maximum bounds
 * everything; then the scheduler's request; then gpucap's own annotation; then the namespace's
 * default or the cluster's default (also the maximum where none is set: wh_platform()). Returns V_ALLOW
 * with *skip set when nothing gives a budget (the pod is left alone: annotated pods only), V_DENY
 * when a request (the scheduler's, the annotation) is above the maximum. A default above the maximum
 * (the cluster's default under a namespace's lower maximum) is the platform's own, not the tenant's
 * ask: the budget is the maximum, said in the response's warnings, and what is recorded is that
 * effective budget. Any other budget the maximum may lower on the node is said there too. The
 * container's request comes last (request_of).
 */
enum verdict wh_budget_of(struct review *r, json_t *c, const char *name, struct chosen *out, bool *skip)
{
    char err[256] = "";
    bool fallback = false;
    int rc = gpc_wh_sched_budget(r->pod, c, out->budget, sizeof out->budget, err, sizeof err);
    if (rc < 0) {
        char shown[256];
        wh_clean(shown, sizeof shown, err);
        wh_say(r, "container %s: %s", name, shown);
        return V_DENY;
    }
    if (rc > 0) {
        struct gpc_size s;
        if (!wh_size_of(out->budget, &s)) {
            wh_say(r, "container %s: the scheduler's request gives \"%s\", not a size", name, out->budget);
            return V_DENY;
        }
        out->source = gpc_wh_sched_source(r->pod, c);
    } else if (r->annotation[0]) {
        snprintf(out->budget, sizeof out->budget, "%s", r->annotation);
        out->source = "annotation " ANN_MEMORY;
    } else if (r->fallback[0]) {
        snprintf(out->budget, sizeof out->budget, "%s", r->fallback);
        out->source = r->fallback_source;
        fallback = true;
    } else {
        *skip = true;
        return V_ALLOW;
    }
    if (r->max[0] && wh_above(out->budget, r->max)) {
        if (!fallback) {
            wh_say(r, "container %s asks for %s (%s), above the maximum %s (%s); ask for %s or less", name,
                   out->budget, out->source, r->max, r->max_source, r->max);
            return V_DENY;
        }
        wh_warn(r, "container %s: the default %s (%s) is above the maximum %s (%s): its budget is %s", name,
                out->budget, out->source, r->max, r->max_source, r->max);
        snprintf(out->budget, sizeof out->budget, "%s", r->max);
    } else if (r->max[0]) {
        clamp_warning(r, out, name);
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    return request_of(r, c, name, out);
}

/*
 * The record of the resolved budgets (GPC_ANN_BUDGETS) as compact JSON:
 * {"max":"10GiB","containers":{"train":"8GiB","helper":"25%"}}, "max" absent when none applies.
 * NULL when memory ran out (r->oom set). The caller frees it.
 */
char *wh_budget_record(struct review *r)
{
    json_t *containers = json_object(), *rec = json_object();
    char *text = NULL;
    if (!containers || !rec)
        goto out;
    for (size_t i = 0; i < r->nchosen; i++)
        if (json_object_set_new(containers, r->chosen[i].name, json_string(r->chosen[i].budget)) != 0)
            goto out;
    if ((r->max[0] && json_object_set_new(rec, "max", json_string(r->max)) != 0) ||
        json_object_set(rec, "containers", containers) != 0)
        goto out;
    text = json_dumps(rec, JSON_COMPACT);
out:
    json_decref(containers);
    json_decref(rec);
    if (!text)
        r->oom = true;
    return text;
}

/* The two annotations only the webhook writes: which containers carry the cap, and their budgets. */
const char *const wh_record_keys[2] = {ANN_INJECTED, GPC_ANN_BUDGETS};

/* Records the injection on the pod (both annotations); with nothing chosen, removes a tenant's. */
void wh_patch_records(struct review *r, json_t *meta, json_t *ann)
{
    char *budgets = r->nchosen ? wh_budget_record(r) : NULL;
    if (r->nchosen && !budgets)
        return;
    const char *values[2] = {r->nchosen ? r->names : NULL, budgets};
    wh_patch_annotations(r, meta, ann, wh_record_keys, values, 2);
    free(budgets);
}

/* A size annotation or setting, trimmed into dst; false (with r->msg) when it is not a size. */
bool wh_take_size(struct review *r, char *dst, size_t len, const char *text, const char *what)
{
    char t[64];
    wh_trim_copy(t, sizeof t, text);
    struct gpc_size size;
    int rc = strlen(text) >= sizeof t ? -EINVAL : gpc_parse_size(t, &size);
    if (rc == 0) {
        snprintf(dst, len, "%s", t);
        return true;
    }
    char shown[64];
    wh_clean(shown, sizeof shown, text);
    wh_say(r, "%s: \"%s\" is %s; accepted forms: %s", what, shown,
        rc == -ERANGE ? "out of range (above 2^64-1 bytes or 100%)" : "not a size", gpc_size_forms);
    return false;
}

/*
 * A size the namespace's policy or else the cluster sets (the maximum, the default budget): the
 * policy's `ns` (checked as `ns_what`) or else the cluster's `cluster` (checked at start-up), trimmed
 * into dst, and *source set to ns_source or cluster_source; neither set: dst and *source unchanged.
 * False (with r->msg) when the policy's is not a size.
 */
static bool policy_size(struct review *r, char *dst, size_t len, const char **source, const char *ns,
                        const char *ns_what, const char *ns_source, const char *cluster, const char *cluster_source)
{
    if (ns[0]) {
        if (!wh_take_size(r, dst, len, ns, ns_what))
            return false;
        *source = ns_source;
    } else if (cluster) {
        wh_trim_copy(dst, len, cluster);
        *source = cluster_source;
    }
    return true;
}

/*
 * True when the pod can only run on nodes labelled `label`="true": its nodeSelector says so, or
 * every term of its required node affinity does (the terms are alternatives).
 */
static bool selects_label(json_t *spec, const char *label)
{
    const char *v = json_string_value(json_object_get(json_object_get(spec, "nodeSelector"), label));
    if (v && strcmp(v, "true") == 0)
        return true;
    json_t *req = json_object_get(json_object_get(json_object_get(spec, "affinity"), "nodeAffinity"),
                                  "requiredDuringSchedulingIgnoredDuringExecution");
    json_t *terms = json_object_get(req, "nodeSelectorTerms");
    bool all = json_array_size(terms) > 0;
    for (size_t t = 0; all && t < json_array_size(terms); t++) {
        json_t *exprs = json_object_get(json_array_get(terms, t), "matchExpressions");
        bool term = false;
        for (size_t e = 0; !term && e < json_array_size(exprs); e++) {
            json_t *x = json_array_get(exprs, e);
            const char *key = json_string_value(json_object_get(x, "key"));
            const char *oper = json_string_value(json_object_get(x, "operator"));
            json_t *values = json_object_get(x, "values");
            term = key && oper && strcmp(key, label) == 0 && strcmp(oper, "In") == 0 && json_array_size(values) > 0;
            for (size_t i = 0; term && i < json_array_size(values); i++)
                term = json_is_string(json_array_get(values, i)) &&
                       strcmp(json_string_value(json_array_get(values, i)), "true") == 0;
        }
        all = term;
    }
    return all;
}

/*
 * The platform's side: namespace policy, then cluster flags; fills max, fallback, trusted, preload,
 * QoS (burstable: containers without a request get 0) and whether the driver's limits are set
 * (spec: the pod's, for `auto`). Without a maximum the
 * default is the maximum: a tenant may ask for less than the default, never more.
 */
enum verdict wh_platform(struct review *r, const char *preload_ann, json_t *spec)
{
    if (r->cfg->ns_lookup && r->ns) {
        char err[256] = "";
        int rc = r->cfg->ns_lookup(r->cfg->ns_ctx, r->ns, &r->policy, err, sizeof err);
        if (rc != 0) {
            char shown[256];
            wh_clean(shown, sizeof shown, err);
            /* A malformed policy stays malformed; anything else (the API unreachable, slow, 5xx) may pass. */
            if (rc == -EINVAL) {
                wh_say(r, "the policy of namespace %s is not valid (%s); the platform must fix it", r->ns, shown);
            } else {
                r->code = 503;
                wh_say(r, "the policy of namespace %s cannot be read now (%s); retry later", r->ns, shown);
            }
            return V_DENY;
        }
    }
    r->trusted = r->policy.trusted || (r->ns && wh_list_has(r->cfg->trusted_namespaces, r->ns));
    if (!policy_size(r, r->max, sizeof r->max, &r->max_source, r->policy.max_memory, "namespace policy max_memory",
                     "namespace policy", r->cfg->max_memory, "cluster --max-memory"))
        return V_DENY;
    bool ns_default = r->policy.default_memory[0] != '\0';
    if (!policy_size(r, r->fallback, sizeof r->fallback, &r->fallback_source, r->policy.default_memory,
                     "namespace policy default_memory", "namespace default", r->cfg->default_memory,
                     "cluster --default-memory"))
        return V_DENY;
    if (!r->fallback[0] && r->max[0]) {
        snprintf(r->fallback, sizeof r->fallback, "%s", r->max);
        r->fallback_source = r->max_source;
    }
    if (!r->max[0] && r->fallback[0]) {
        snprintf(r->max, sizeof r->max, "%s", r->fallback);
        r->max_source = ns_default ? "namespace default, the maximum where none is set"
                                   : "cluster --default-memory, the maximum where none is set";
    }

    enum gpc_driver_limits mode = r->cfg->driver;
    if (r->policy.driver_limits[0]) {
        const char *d = r->policy.driver_limits;
        if (strcmp(d, "on") != 0 && strcmp(d, "off") != 0 && strcmp(d, "auto") != 0) {
            char shown[16];
            wh_clean(shown, sizeof shown, d);
            wh_say(r, "the policy of namespace %s is not valid (driver_limits \"%s\" is not on, off or auto); the "
                   "platform must fix it", r->ns ? r->ns : "-", shown);
            return V_DENY;
        }
        mode = d[1] == 'n' ? GPC_DRIVER_ON : d[1] == 'f' ? GPC_DRIVER_OFF : GPC_DRIVER_AUTO;
    }
    r->driver = mode == GPC_DRIVER_ON ||
                (mode == GPC_DRIVER_AUTO && selects_label(spec, r->cfg->driver_label ? r->cfg->driver_label
                                                                                      : GPC_DRIVER_LABEL));

    r->burstable = r->cfg->qos == GPC_QOS_BURSTABLE;
    r->qos_source = "cluster --qos=burstable";
    if (r->policy.qos[0]) {
        const char *q = r->policy.qos;
        if (strcmp(q, "burstable") != 0 && strcmp(q, "guaranteed") != 0) {
            char shown[16];
            wh_clean(shown, sizeof shown, q);
            wh_say(r, "the policy of namespace %s is not valid (qos \"%s\" is not burstable or guaranteed); the "
                   "platform must fix it", r->ns ? r->ns : "-", shown);
            return V_DENY;
        }
        r->burstable = q[0] == 'b';
        r->qos_source = "namespace policy qos = burstable";
    }

    r->preload = r->cfg->preload;
    if (preload_ann) {
        bool env = strcmp(preload_ann, "env") == 0, file = strcmp(preload_ann, "file") == 0;
        if (!env && !file) {
            char shown[64];
            wh_clean(shown, sizeof shown, preload_ann);
            wh_say(r, "annotation " ANN_PRELOAD ": \"%s\" is not \"file\" or \"env\"", shown);
            return V_DENY;
        }
        /* LD_PRELOAD is the tenant's to clear: only a trusted namespace may choose it. */
        if (env && r->preload != GPC_PRELOAD_ENV && !r->trusted) {
            wh_say(r, "annotation " ANN_PRELOAD ": \"env\" is for trusted namespaces: LD_PRELOAD can be cleared by "
                   "the container, /etc/ld.so.preload cannot");
            return V_DENY;
        }
        r->preload = env ? GPC_PRELOAD_ENV : GPC_PRELOAD_FILE;
    }
    return V_ALLOW;
}
