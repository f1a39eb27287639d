/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.c: one AdmissionReview in, one answer out: the envelope, which review a request gets,
 * and the response (the JSONPatch in base64, the denial, the warnings). The decisions are in the
 * files review.h lists.
 *
 * Pure: a request body in, an HTTP status and a body out, no I/O and no global state, so the server
 * calls it from many threads and the unit tests and the fuzzer call it directly (the namespace
 * policy comes through the caller's lookup).
 *
 * Pod CREATE (review_create()): GPU containers (detect.c) get the layout of contract 2
 * (admission.h, inject.c) with the budget of the one order of precedence (precedence.c), recorded
 * on the pod (GPC_ANN_BUDGETS) for the node agent. `gpucap.io/inject: "false"` is honoured only
 * where the platform allows opting out. Pod UPDATE, through the pod or any subresource, and
 * ephemeral containers: update.c.
 *
 * Input arrives already decoded by the API server into Go types, so a field of the wrong JSON type
 * means the caller is not the API server: that is a 400, not a denial. A value a user wrote wrongly
 * (the annotations) is a denial with a message the user sees in `kubectl` output; a namespace policy
 * that cannot be read now is a 503 that says to retry.
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

enum verdict wh_pod_parts(struct review *r, json_t *req, json_t *pod, struct pod_parts *p)
{
    bool bad = false;
    r->pod = pod;
    p->meta = wh_get_typed(pod, "metadata", JSON_OBJECT, &bad);
    p->ann = wh_get_typed(p->meta, "annotations", JSON_OBJECT, &bad);
    p->spec = wh_get_typed(pod, "spec", JSON_OBJECT, &bad);
    p->inject = wh_get_string(p->ann, ANN_INJECT, &bad);
    p->memory = wh_get_string(p->ann, ANN_MEMORY, &bad);
    p->memory_request = wh_get_string(p->ann, ANN_MEMORY_REQUEST, &bad);
    p->preload = wh_get_string(p->ann, ANN_PRELOAD, &bad);
    r->ns = wh_get_string(req, "namespace", &bad);
    if (!r->ns)
        r->ns = wh_get_string(p->meta, "namespace", &bad);
    if (bad || !p->spec) {
        wh_say(r, "request.object is not a pod: metadata, annotations, namespace or spec is missing or has the "
               "wrong type");
        return V_BAD;
    }
    return V_ALLOW;
}

/* The decision for a request whose envelope is valid; fills r->patch, r->msg and *what for the log. */
static enum verdict review_pod(struct review *r, json_t *req, const char **what)
{
    bool bad = false;
    json_t *kind = wh_get_typed(req, "kind", JSON_OBJECT, &bad);
    const char *k = json_string_value(json_object_get(kind, "kind"));
    const char *opname = wh_get_string(req, "operation", &bad);
    const char *sub = wh_get_string(req, "subResource", &bad);
    if (bad) {
        wh_say(r, "request.kind, request.operation or request.subResource has the wrong type");
        return V_BAD;
    }
    bool create = !opname || strcmp(opname, "CREATE") == 0, update = opname && strcmp(opname, "UPDATE") == 0;
    if (!sub)
        sub = "";
    /* A Binding's annotations are copied onto its pod (pods/binding). */
    if (create && strcmp(sub, "binding") == 0 && (!k || strcmp(k, "Binding") == 0))
        return wh_review_binding(r, req, what);
    /* The webhook configuration sends pod creations, and updates of pods and their subresources. */
    if ((k && strcmp(k, "Pod") != 0) || !(create || update) || (create && *sub)) {
        *what = "not a pod creation or update";
        return V_ALLOW;
    }
    json_t *pod = wh_get_typed(req, "object", JSON_OBJECT, &bad);
    if (!pod) {
        wh_say(r, "request.object is missing or not an object");
        return V_BAD;
    }
    if (update)
        return wh_review_update(r, req, pod, sub, what);
    return wh_review_create(r, req, pod, what);
}

static char *base64(const char *in, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        *o++ = abc[v >> 18 & 63];
        *o++ = abc[v >> 12 & 63];
        *o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int set_text(struct gpc_admission_result *out, int status, const char *text)
{
    out->status = status;
    out->content_type = "text/plain";
    size_t n = strlen(text);
    out->body = malloc(n + 2);
    if (!out->body) {
        out->status = 500;
        return -ENOMEM;
    }
    memcpy(out->body, text, n);
    memcpy(out->body + n, "\n", 2);
    out->body_len = n + 1;
    return 0;
}

static int set_review(struct gpc_admission_result *out, const char *uid, struct review *r, enum verdict v)
{
    json_t *resp = json_pack("{s:s, s:b}", "uid", uid, "allowed", v == V_ALLOW);
    if (!resp)
        goto oom;
    /* Warnings are about what an admitted pod gets: a denial says all there is to say. */
    if (v != V_DENY && json_array_size(r->warnings) && json_object_set(resp, "warnings", r->warnings))
        goto oom;
    if (v == V_DENY) {
        if (json_object_set_new(resp, "status", r->code == 503 ? json_pack("{s:i, s:s, s:s}", "code", 503, "reason",
                                                                          "ServiceUnavailable", "message", r->msg)
                                                              : json_pack("{s:i, s:s}", "code", r->code, "message",
                                                                          r->msg)))
            goto oom;
    } else if (json_array_size(r->patch)) {
        char *text = json_dumps(r->patch, JSON_COMPACT);
        char *b64 = text ? base64(text, strlen(text)) : NULL;
        free(text);
        int rc = b64 ? json_object_set_new(resp, "patchType", json_string("JSONPatch")) |
                           json_object_set_new(resp, "patch", json_string(b64))
                     : -1;
        free(b64);
        if (rc)
            goto oom;
    }
    json_t *review = json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview",
                               "response", resp);
    out->body = review ? json_dumps(review, JSON_COMPACT) : NULL;
    json_decref(review);
    if (!out->body)
        return -ENOMEM;
    out->status = 200;
    out->content_type = "application/json";
    out->body_len = strlen(out->body);
    return 0;
oom:
    json_decref(resp);
    return -ENOMEM;
}

int gpc_admission_handle(const struct gpc_admission_config *cfg, const char *body, size_t len,
                         struct gpc_admission_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = 500;
    if (len > GPC_ADMISSION_MAX_BODY) {
        snprintf(out->log, sizeof out->log, "rejected: body of %zu bytes", len);
        return set_text(out, 413, "request body larger than " GPC_ADMISSION_MAX_BODY_TEXT);
    }

    struct review r = {.cfg = cfg, .code = 400};

    json_error_t jerr;
    json_t *root = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char text[sizeof jerr.text];
        wh_clean(text, sizeof text, jerr.text);
        wh_say(&r, "malformed JSON: %s (line %d, column %d)", text, jerr.line, jerr.column);
        snprintf(out->log, sizeof out->log, "rejected: %s", r.msg);
        return set_text(out, 400, r.msg);
    }

    int rc;
    const char *api = json_string_value(json_object_get(root, "apiVersion"));
    const char *kind = json_string_value(json_object_get(root, "kind"));
    json_t *req = json_object_get(root, "request");
    const char *uid = json_string_value(json_object_get(req, "uid"));
    if (!api || strcmp(api, "admission.k8s.io/v1") != 0 || !kind || strcmp(kind, "AdmissionReview") != 0 ||
        !json_is_object(req) || !uid || !*uid || strlen(uid) > 128) {
        wh_say(&r, "not an admission.k8s.io/v1 AdmissionReview with a request and its uid");
        snprintf(out->log, sizeof out->log, "rejected: %s", r.msg);
        rc = set_text(out, 400, r.msg);
        goto done;
    }

    r.patch = json_array();
    r.warnings = json_array();
    const char *what = "";
    enum verdict v = r.patch && r.warnings ? review_pod(&r, req, &what) : V_ALLOW;

    /* For the log: who asked, about which pod. Names are empty on create with generateName. */
    json_t *meta = json_object_get(json_object_get(req, "object"), "metadata");
    const char *ns = json_string_value(json_object_get(req, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    char cuid[64], cns[72], cname[80], cwhat[sizeof r.msg];
    wh_clean(cuid, sizeof cuid, uid);
    wh_clean(cns, sizeof cns, ns ? ns : json_string_value(json_object_get(meta, "namespace")));
    wh_clean(cname, sizeof cname, name && *name ? name : gen);
    wh_clean(cwhat, sizeof cwhat, v == V_ALLOW ? what : r.msg);
    if (!name || !*name)
        strncat(cname, "*", sizeof cname - strlen(cname) - 1);

    if (r.oom || !r.patch || !r.warnings) {
        rc = -ENOMEM;
    } else if (v == V_BAD) {
        snprintf(out->log, sizeof out->log, "uid=%s pod=%s/%s rejected: %s", cuid, cns, cname, cwhat);
        rc = set_text(out, 400, r.msg);
    } else {
        char budgets[600] = "";
        for (size_t i = 0; i < r.nchosen; i++) {
            char one[160];
            snprintf(one, sizeof one, "%s=%s", r.chosen[i].name, r.chosen[i].budget);
            wh_append_name(budgets, sizeof budgets, one);
        }
        snprintf(out->log, sizeof out->log, "uid=%s pod=%s/%s %s: %s containers=%s max=%s preload=%s", cuid, cns,
                 cname, v == V_DENY ? "denied" : "allowed", cwhat, budgets[0] ? budgets : "-", r.max[0] ? r.max : "-",
                 r.preload == GPC_PRELOAD_ENV ? "env" : "file");
        rc = set_review(out, uid, &r, v);
    }
    json_decref(r.patch);
    json_decref(r.warnings);
done:
    json_decref(root);
    if (rc == -ENOMEM) {
        free(out->body);
        out->body = NULL;
        out->body_len = 0;
        out->status = 500;
        out->content_type = "text/plain";
        snprintf(out->log, sizeof out->log, "error: out of memory");
    }
    return rc;
}

void gpc_admission_result_free(struct gpc_admission_result *res)
{
    free(res->body);
    res->body = NULL;
    res->body_len = 0;
}

/* An image reference as the init container takes it: no blanks or control characters. */
static bool plain_image(const char *p)
{
    if (!p || !*p || strlen(p) > 255)
        return false;
    for (; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '"' || *p == '\\' || *p == '$')
            return false;
    return true;
}

int gpc_admission_check_config(const struct gpc_admission_config *cfg, char *err, size_t errlen)
{
    struct gpc_size size;
    if (!plain_image(cfg->image)) {
        snprintf(err, errlen, "image \"%s\": must be an image reference (registry/name:tag), without blanks, "
                              "quotes or '$'", cfg->image ? cfg->image : "");
        return -EINVAL;
    }
    const char *sizes[2] = {cfg->default_memory, cfg->max_memory};
    const char *names[2] = {"default-memory", "max-memory"};
    for (int i = 0; i < 2; i++) {
        if (!sizes[i])
            continue;
        char text[64];
        wh_trim_copy(text, sizeof text, sizes[i]);
        if (strlen(sizes[i]) >= sizeof text || gpc_parse_size(text, &size) != 0) {
            snprintf(err, errlen, "%s \"%s\": not a size; accepted forms: %s", names[i], sizes[i], gpc_size_forms);
            return -EINVAL;
        }
    }
    if (cfg->default_memory && cfg->max_memory && wh_above(cfg->default_memory, cfg->max_memory)) {
        snprintf(err, errlen, "default-memory %s is above max-memory %s", cfg->default_memory, cfg->max_memory);
        return -EINVAL;
    }
    return 0;
}

void gpc_admission_describe(const struct gpc_admission_config *cfg, char *out, size_t len)
{
    static const char *const driver[] = {"off", "on", "auto"};
    const char *max = cfg->max_memory, *def = cfg->default_memory;
    char bound[160];
    if (max)
        snprintf(bound, sizeof bound, "max-memory %s", max);
    else if (def)
        snprintf(bound, sizeof bound, "no max-memory: the default %s is the maximum (a pod may ask for less, "
                                      "never more)", def);
    else
        snprintf(bound, sizeof bound, "no max-memory and no default: annotated pods only, bounded only by a "
                                      "namespace policy");
    snprintf(out, len, "policy: %s; default-memory %s; qos %s; pod opt-out (%s: \"false\") %s; driver limits %s%s%s%s",
             bound, def ? def : "none",
             cfg->qos == GPC_QOS_BURSTABLE ? "burstable (no request: best effort)" : "guaranteed (requests where asked)",
             ANN_INJECT,
             cfg->pod_opt_out ? "honoured everywhere" : "only where the namespace policy allows it",
             driver[cfg->driver <= GPC_DRIVER_AUTO ? cfg->driver : 0],
             cfg->driver == GPC_DRIVER_AUTO ? " (pods selecting nodes labelled " : "",
             cfg->driver == GPC_DRIVER_AUTO ? (cfg->driver_label ? cfg->driver_label : GPC_DRIVER_LABEL) : "",
             cfg->driver == GPC_DRIVER_AUTO ? "=true)" : "");
}
