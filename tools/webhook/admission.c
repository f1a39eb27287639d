/*
 * admission.c: the decision and the JSONPatch for one AdmissionReview.
 *
 * Pure: a request body in, an HTTP status and a body out, no I/O and no global state, so the server
 * calls it from many threads and the unit tests and the fuzzer call it directly. A pod is chosen by
 * its `gpucap.io/memory` annotation (validated with the project's one size parser) or, when the
 * webhook has a default budget, by requesting a GPU; `gpucap.io/inject: "false"` opts out. Inside a
 * chosen pod only containers and init containers that request a GPU are changed: LD_PRELOAD gets the
 * library appended, GPUCAP_MEMORY_LIMIT and a GPUCAP_LEDGER private to the container are set, and the
 * library's host directory is mounted read-only from one pod volume. Whatever is already there is
 * kept, which makes a second pass over a mutated pod produce an empty patch (reinvocation).
 *
 * Input arrives already decoded by the API server into Go types, so a field of the wrong JSON type
 * means the caller is not the API server: that is a 400, not a denial. A value a user wrote wrongly
 * (the annotations) is a denial with a message the user sees in `kubectl` output.
 */
#include "admission.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

#define ANN_MEMORY "gpucap.io/memory"
#define ANN_INJECT "gpucap.io/inject"
#define ANN_INJECTED "gpucap.io/injected"
#define LIB_NAME "libgpucap.so"
#define USER_PRELOAD "LD_PRELOAD_BEFORE_GPUCAP"

/* The device plugin's resource, and the name it uses for shared replicas with renameByDefault. */
static const char *const gpu_resources[] = {"nvidia.com/gpu", "nvidia.com/gpu.shared"};

enum verdict { V_ALLOW, V_DENY, V_BAD };

struct review {
    const struct gpc_admission_config *cfg;
    json_t *patch;     /* JSONPatch operations, in order */
    bool oom;
    char lib_path[600];
    char budget[128];  /* the env value: annotation (or default) text, trimmed */
    char chosen[400];  /* comma-separated names of the GPU containers, for the log and annotation */
    bool want_volume;  /* some chosen container mounts the pod volume */
    char msg[1000];    /* reason for a denial or a 400 */
};

static void say(struct review *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct review *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* Copies text for a log line or a message: bounded, one line, printable ASCII only. */
static void clean(char *dst, size_t len, const char *src)
{
    size_t i = 0;
    for (; src && *src && i + 1 < len; src++)
        dst[i++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
    dst[i] = '\0';
}

static void trim_copy(char *dst, size_t len, const char *src)
{
    while (isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void join(char *dst, size_t len, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    snprintf(dst, len, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

/* Two paths are the same mount point when they differ only by trailing slashes. */
static bool same_path(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (lb > 1 && b[lb - 1] == '/')
        lb--;
    return la == lb && memcmp(a, b, la) == 0;
}

/* RFC 6901: '~' becomes "~0" and '/' becomes "~1" inside one reference token. */
static void pointer_escape(char *dst, size_t len, const char *key)
{
    size_t i = 0;
    for (; *key && i + 3 < len; key++) {
        if (*key == '~' || *key == '/') {
            dst[i++] = '~';
            dst[i++] = *key == '~' ? '0' : '1';
        } else {
            dst[i++] = *key;
        }
    }
    dst[i] = '\0';
}

static void op(struct review *r, const char *kind, const char *path, json_t *value)
{
    json_t *o = json_pack("{s:s, s:s, s:o}", "op", kind, "path", path, "value", value);
    if (!o || json_array_append_new(r->patch, o) != 0)
        r->oom = true;
}

static json_t *env_var(const char *name, const char *value)
{
    return json_pack("{s:s, s:s}", "name", name, "value", value);
}

/* A string member, or NULL when absent or null; *bad is set when it is there with another type. */
static const char *get_string(json_t *obj, const char *key, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        *bad = true;
        return NULL;
    }
    return json_string_value(v);
}

/* An object or array member, or NULL when absent or null; *bad is set for another type. */
static json_t *get_typed(json_t *obj, const char *key, json_type type, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return NULL;
    if (json_typeof(v) != type) {
        *bad = true;
        return NULL;
    }
    return v;
}

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

static bool requests_gpu(json_t *container)
{
    json_t *res = json_object_get(container, "resources");
    static const char *const kinds[] = {"limits", "requests"};
    for (size_t k = 0; k < 2; k++) {
        json_t *m = json_object_get(res, kinds[k]);
        for (size_t i = 0; i < sizeof gpu_resources / sizeof gpu_resources[0]; i++)
            if (nonzero_quantity(json_object_get(m, gpu_resources[i])))
                return true;
    }
    return false;
}

/* True when `list` (LD_PRELOAD syntax: colon- or blank-separated) already names `path`. */
static bool preload_has(const char *list, const char *path)
{
    size_t n = strlen(path);
    for (const char *p = list; *p;) {
        size_t tok = strcspn(p, ": \t");
        if (tok == n && memcmp(p, path, n) == 0)
            return true;
        p += tok;
        if (*p)
            p++;
    }
    return false;
}

static void append_name(char *list, size_t len, const char *name)
{
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s%s", used ? "," : "", name);
}

/* The env patch of one container at JSON Pointer `at`; false (with r->msg) on a malformed list. */
static bool patch_env(struct review *r, const char *at, const char *where, json_t *env, const char *ledger)
{
    char path[128];
    if (!env) {
        snprintf(path, sizeof path, "%s/env", at);
        json_t *list = json_pack("[o, o, o]", env_var("LD_PRELOAD", r->lib_path),
                                 env_var("GPUCAP_MEMORY_LIMIT", r->budget), env_var("GPUCAP_LEDGER", ledger));
        if (!list)
            r->oom = true;
        else
            op(r, "add", path, list);
        return true;
    }

    long preload = -1;
    bool has_limit = false, has_ledger = false;
    for (size_t i = 0; i < json_array_size(env); i++) {
        json_t *e = json_array_get(env, i);
        if (!json_is_object(e)) {
            say(r, "%s.env[%zu] is not an object", where, i);
            return false;
        }
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name)
            continue; /* the API server's validation rejects it after us */
        if (strcmp(name, "LD_PRELOAD") == 0)
            preload = (long)i; /* with duplicates the last one wins, as in the kubelet */
        else if (strcmp(name, "GPUCAP_MEMORY_LIMIT") == 0)
            has_limit = true;
        else if (strcmp(name, "GPUCAP_LEDGER") == 0)
            has_ledger = true;
    }

    /* Changes at existing indices come before the appends, so no index moves under a later op. */
    if (preload >= 0) {
        json_t *e = json_array_get(env, (size_t)preload);
        bool bad = false;
        const char *value = get_string(e, "value", &bad);
        json_t *from = json_object_get(e, "valueFrom");
        if (bad) {
            say(r, "%s.env[%ld].value is not a string", where, preload);
            return false;
        }
        if (value && *value) {
            if (!preload_has(value, r->lib_path)) {
                size_t n = strlen(value);
                char *joined = malloc(n + strlen(r->lib_path) + 2);
                if (!joined) {
                    r->oom = true;
                    return true;
                }
                bool sep = value[n - 1] == ':' || value[n - 1] == ' ';
                sprintf(joined, "%s%s%s", value, sep ? "" : ":", r->lib_path);
                snprintf(path, sizeof path, "%s/env/%ld/value", at, preload);
                op(r, "add", path, json_string(joined));
                free(joined);
            }
        } else if (json_is_object(from)) {
            /*
             * The user's list comes from a ConfigMap or Secret that we cannot read: move it to a
             * variable just before LD_PRELOAD and append to it with the kubelet's $(VAR) expansion.
             * Its name must not start with GPUCAP_: the library takes an unknown GPUCAP_* variable
             * for a misspelt limit and denies every allocation.
             */
            snprintf(path, sizeof path, "%s/env/%ld", at, preload);
            op(r, "add", path, json_pack("{s:s, s:O}", "name", USER_PRELOAD, "valueFrom", from));
            char value2[700];
            snprintf(value2, sizeof value2, "$(" USER_PRELOAD "):%s", r->lib_path);
            snprintf(path, sizeof path, "%s/env/%ld", at, preload + 1);
            op(r, "replace", path, env_var("LD_PRELOAD", value2));
        } else {
            snprintf(path, sizeof path, "%s/env/%ld/value", at, preload);
            op(r, "add", path, json_string(r->lib_path));
        }
    }
    snprintf(path, sizeof path, "%s/env/-", at);
    if (preload < 0)
        op(r, "add", path, env_var("LD_PRELOAD", r->lib_path));
    if (!has_limit)
        op(r, "add", path, env_var("GPUCAP_MEMORY_LIMIT", r->budget));
    if (!has_ledger)
        op(r, "add", path, env_var("GPUCAP_LEDGER", ledger));
    return true;
}

static bool patch_mounts(struct review *r, const char *at, const char *where, json_t *mounts)
{
    char path[128];
    const char *dir = r->cfg->lib_dir;
    if (mounts) {
        for (size_t i = 0; i < json_array_size(mounts); i++) {
            json_t *m = json_array_get(mounts, i);
            if (!json_is_object(m)) {
                say(r, "%s.volumeMounts[%zu] is not an object", where, i);
                return false;
            }
            const char *mp = json_string_value(json_object_get(m, "mountPath"));
            if (mp && same_path(mp, dir)) {
                const char *name = json_string_value(json_object_get(m, "name"));
                if (name && strcmp(name, GPC_ADMISSION_VOLUME) == 0)
                    r->want_volume = true;
                return true; /* something is mounted there already: the user's choice, or ours */
            }
        }
    }
    json_t *mount = json_pack("{s:s, s:s, s:b}", "name", GPC_ADMISSION_VOLUME, "mountPath", dir, "readOnly", 1);
    if (!mount) {
        r->oom = true;
        return true;
    }
    if (mounts) {
        snprintf(path, sizeof path, "%s/volumeMounts/-", at);
        op(r, "add", path, mount);
    } else {
        snprintf(path, sizeof path, "%s/volumeMounts", at);
        op(r, "add", path, json_pack("[o]", mount));
    }
    r->want_volume = true;
    return true;
}

/* Container and volume names are DNS labels; anything else is kept out of the ledger path. */
static void file_safe(char *dst, size_t len, const char *name)
{
    size_t i = 0;
    for (; *name && i + 1 < len; name++, i++) {
        bool ok = isalnum((unsigned char)*name) || *name == '-' || (*name == '.' && i > 0);
        dst[i] = ok ? *name : '_';
    }
    dst[i] = '\0';
}

/* Patches every GPU container of spec[field] ("containers" or "initContainers"). */
static bool patch_list(struct review *r, json_t *spec, const char *field)
{
    bool bad = false;
    json_t *list = get_typed(spec, field, JSON_ARRAY, &bad);
    if (bad) {
        say(r, "request.object.spec.%s is not an array", field);
        return false;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        char where[96], at[96];
        snprintf(where, sizeof where, "request.object.spec.%s[%zu]", field, i);
        snprintf(at, sizeof at, "/spec/%s/%zu", field, i);
        if (!json_is_object(c)) {
            say(r, "%s is not an object", where);
            return false;
        }
        if (!requests_gpu(c))
            continue;

        const char *name = get_string(c, "name", &bad);
        json_t *env = get_typed(c, "env", JSON_ARRAY, &bad);
        json_t *mounts = get_typed(c, "volumeMounts", JSON_ARRAY, &bad);
        if (bad) {
            say(r, "%s: name, env or volumeMounts has the wrong type", where);
            return false;
        }
        char safe[72], ledger[700];
        if (name && *name)
            file_safe(safe, sizeof safe, name);
        else
            snprintf(safe, sizeof safe, "%s-%zu", field, i);
        char file[96];
        snprintf(file, sizeof file, "gpucap-%s.ledger", safe);
        join(ledger, sizeof ledger, r->cfg->ledger_dir, file);

        if (!patch_env(r, at, where, env, ledger) || !patch_mounts(r, at, where, mounts))
            return false;
        append_name(r->chosen, sizeof r->chosen, safe);
    }
    return true;
}

/* One pod volume for the library's host directory; an existing one of that name must be ours. */
static bool patch_volume(struct review *r, json_t *spec)
{
    bool bad = false;
    json_t *vols = get_typed(spec, "volumes", JSON_ARRAY, &bad);
    if (bad) {
        say(r, "request.object.spec.volumes is not an array");
        return false;
    }
    for (size_t i = 0; i < json_array_size(vols); i++) {
        json_t *v = json_array_get(vols, i);
        const char *name = json_string_value(json_object_get(v, "name"));
        if (!name || strcmp(name, GPC_ADMISSION_VOLUME) != 0)
            continue;
        const char *host = json_string_value(json_object_get(json_object_get(v, "hostPath"), "path"));
        if (host && same_path(host, r->cfg->lib_dir))
            return true;
        /* Mounting some other volume over the library's path would run the pod uncapped. */
        say(r, "the pod already has a volume named " GPC_ADMISSION_VOLUME
               " that is not the hostPath %s; rename it or set " ANN_INJECT ": \"false\"",
            r->cfg->lib_dir);
        return false;
    }
    json_t *vol = json_pack("{s:s, s:{s:s, s:s}}", "name", GPC_ADMISSION_VOLUME, "hostPath", "path",
                            r->cfg->lib_dir, "type", "Directory");
    if (!vol)
        r->oom = true;
    else if (vols)
        op(r, "add", "/spec/volumes/-", vol);
    else
        op(r, "add", "/spec/volumes", json_pack("[o]", vol));
    return true;
}

/* Records which containers carry the injection; also shows JSON Pointer escaping of the key. */
static void patch_annotation(struct review *r, json_t *meta, json_t *annotations)
{
    const char *now = json_string_value(json_object_get(annotations, ANN_INJECTED));
    if (now && strcmp(now, r->chosen) == 0)
        return;
    if (!meta) {
        op(r, "add", "/metadata", json_pack("{s:{s:s}}", "annotations", ANN_INJECTED, r->chosen));
    } else if (!annotations) {
        op(r, "add", "/metadata/annotations", json_pack("{s:s}", ANN_INJECTED, r->chosen));
    } else {
        char key[64], path[96];
        pointer_escape(key, sizeof key, ANN_INJECTED);
        snprintf(path, sizeof path, "/metadata/annotations/%s", key);
        op(r, "add", path, json_string(r->chosen));
    }
}

/* The decision for a request whose envelope is valid; fills r->patch, r->msg and *what for the log. */
static enum verdict review_pod(struct review *r, json_t *req, const char **what)
{
    bool bad = false;
    json_t *kind = get_typed(req, "kind", JSON_OBJECT, &bad);
    const char *k = json_string_value(json_object_get(kind, "kind"));
    const char *opname = get_string(req, "operation", &bad);
    const char *sub = get_string(req, "subResource", &bad);
    if (bad) {
        say(r, "request.kind, request.operation or request.subResource has the wrong type");
        return V_BAD;
    }
    /* The webhook configuration sends only pod creations; anything else passes untouched. */
    if ((k && strcmp(k, "Pod") != 0) || (opname && strcmp(opname, "CREATE") != 0) || (sub && *sub)) {
        *what = "not a pod creation";
        return V_ALLOW;
    }

    json_t *pod = get_typed(req, "object", JSON_OBJECT, &bad);
    if (!pod) {
        say(r, "request.object is missing or not an object");
        return V_BAD;
    }
    json_t *meta = get_typed(pod, "metadata", JSON_OBJECT, &bad);
    json_t *ann = get_typed(meta, "annotations", JSON_OBJECT, &bad);
    json_t *spec = get_typed(pod, "spec", JSON_OBJECT, &bad);
    const char *inject = get_string(ann, ANN_INJECT, &bad);
    const char *memory = get_string(ann, ANN_MEMORY, &bad);
    if (bad || !spec) {
        say(r, "request.object is not a pod: metadata, annotations or spec is missing or has the wrong type");
        return V_BAD;
    }

    if (inject && strcmp(inject, "false") == 0) {
        *what = "opted out (" ANN_INJECT ": false)";
        return V_ALLOW;
    }
    if (inject && strcmp(inject, "true") != 0) {
        char shown[64];
        clean(shown, sizeof shown, inject);
        say(r, "annotation " ANN_INJECT ": \"%s\" is not \"true\" or \"false\"", shown);
        return V_DENY;
    }

    if (memory) {
        char text[sizeof r->budget];
        trim_copy(text, sizeof text, memory);
        struct gpc_size size;
        int rc = strlen(memory) >= sizeof text ? -EINVAL : gpc_parse_size(text, &size);
        if (rc != 0) {
            char shown[64];
            clean(shown, sizeof shown, memory);
            say(r, "annotation " ANN_MEMORY ": \"%s\" is %s; accepted forms: %s", shown,
                rc == -ERANGE ? "out of range (above 2^64-1 bytes or 100%)" : "not a size", gpc_size_forms);
            return V_DENY;
        }
        memcpy(r->budget, text, sizeof text);
    } else if (r->cfg->default_memory) {
        trim_copy(r->budget, sizeof r->budget, r->cfg->default_memory);
    } else {
        *what = "no budget (no " ANN_MEMORY " annotation, no default)";
        return V_ALLOW;
    }

    if (!patch_list(r, spec, "initContainers") || !patch_list(r, spec, "containers"))
        return V_BAD;
    if (!r->chosen[0]) {
        *what = "no container requests a GPU";
        return V_ALLOW;
    }
    if (r->want_volume && !patch_volume(r, spec))
        return V_DENY;
    patch_annotation(r, meta, ann);
    *what = json_array_size(r->patch) ? "patched" : "already injected";
    return V_ALLOW;
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
    if (v == V_DENY) {
        if (json_object_set_new(resp, "status", json_pack("{s:i, s:s}", "code", 400, "message", r->msg)))
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

    struct review r = {.cfg = cfg};
    join(r.lib_path, sizeof r.lib_path, cfg->lib_dir, LIB_NAME);

    json_error_t jerr;
    json_t *root = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char text[sizeof jerr.text];
        clean(text, sizeof text, jerr.text);
        say(&r, "malformed JSON: %s (line %d, column %d)", text, jerr.line, jerr.column);
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
        say(&r, "not an admission.k8s.io/v1 AdmissionReview with a request and its uid");
        snprintf(out->log, sizeof out->log, "rejected: %s", r.msg);
        rc = set_text(out, 400, r.msg);
        goto done;
    }

    r.patch = json_array();
    const char *what = "";
    enum verdict v = r.patch ? review_pod(&r, req, &what) : V_ALLOW;

    /* For the log: who asked, about which pod. Names are empty on create with generateName. */
    json_t *meta = json_object_get(json_object_get(req, "object"), "metadata");
    const char *ns = json_string_value(json_object_get(req, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    char cuid[64], cns[72], cname[80], cwhat[sizeof r.msg];
    clean(cuid, sizeof cuid, uid);
    clean(cns, sizeof cns, ns ? ns : json_string_value(json_object_get(meta, "namespace")));
    clean(cname, sizeof cname, name && *name ? name : gen);
    clean(cwhat, sizeof cwhat, v == V_ALLOW ? what : r.msg);
    if (!name || !*name)
        strncat(cname, "*", sizeof cname - strlen(cname) - 1);

    if (r.oom || !r.patch) {
        rc = -ENOMEM;
    } else if (v == V_BAD) {
        snprintf(out->log, sizeof out->log, "uid=%s pod=%s/%s rejected: %s", cuid, cns, cname, cwhat);
        rc = set_text(out, 400, r.msg);
    } else {
        snprintf(out->log, sizeof out->log, "uid=%s pod=%s/%s %s: %s containers=%s budget=%s", cuid, cns, cname,
                 v == V_DENY ? "denied" : "allowed", cwhat, r.chosen[0] ? r.chosen : "-",
                 r.budget[0] ? r.budget : "-");
        rc = set_review(out, uid, &r, v);
    }
    json_decref(r.patch);
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

static bool plain_path(const char *p)
{
    return p && p[0] == '/' && strlen(p) < 256 && !strpbrk(p, ": \t\n\r$\\\"'");
}

int gpc_admission_check_config(const struct gpc_admission_config *cfg, char *err, size_t errlen)
{
    struct gpc_size size;
    if (!plain_path(cfg->lib_dir) || same_path(cfg->lib_dir, "/")) {
        snprintf(err, errlen, "lib-dir \"%s\": must be an absolute directory other than /, under 256 characters, "
                              "without blanks, ':', '$', quotes or backslashes", cfg->lib_dir ? cfg->lib_dir : "");
        return -EINVAL;
    }
    if (!plain_path(cfg->ledger_dir)) {
        snprintf(err, errlen, "ledger-dir \"%s\": must be an absolute directory under 256 characters, "
                              "without blanks, ':', '$', quotes or backslashes", cfg->ledger_dir ? cfg->ledger_dir : "");
        return -EINVAL;
    }
    if (cfg->default_memory) {
        char text[128];
        trim_copy(text, sizeof text, cfg->default_memory);
        if (strlen(cfg->default_memory) >= sizeof text || gpc_parse_size(text, &size) != 0) {
            snprintf(err, errlen, "default-memory \"%s\": not a size; accepted forms: %s", cfg->default_memory,
                     gpc_size_forms);
            return -EINVAL;
        }
    }
    return 0;
}
