/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.c: the decision and the JSONPatch for one AdmissionReview.
 *
 * Pure: a request body in, an HTTP status and a body out, no I/O and no global state, so the server
 * calls it from many threads and the unit tests and the fuzzer call it directly (the namespace
 * policy comes through the caller's lookup).
 *
 * Pod CREATE: GPU containers (an nvidia.com/gpu* or nvidia.com/mig-* resource; a scheduler's share
 * annotation; a DRA claim, NVIDIA_VISIBLE_DEVICES or an envFrom that could carry it, as flags
 * choose) get the layout of contract 2 (admission.h): an init container `gpucap inject` that writes
 * one locked ini per GPU container into an emptyDir, read-only mounts of the library,
 * /etc/ld.so.preload and the ini, a ledger directory of their own, and the identity variables;
 * where the node's driver enforces limits itself, its variables too (driver_env()). The budget is
 * the platform's: see budget_of() for the order of precedence; without a maximum the default is
 * the maximum. It is recorded on the pod (GPC_ANN_BUDGETS) for the node agent. A tenant's GPUCAP_*
 * or driver-limit variables and mounts over gpucap's paths are denied unless the namespace is
 * trusted; `gpucap.io/inject: "false"` is honoured only where the platform allows opting out. What
 * is already there and ours is kept, so a second pass over a mutated pod produces an empty patch
 * (reinvocation).
 *
 * Pod UPDATE (review_update()): a changed budget annotation is checked as at creation and the record
 * rewritten; the record cannot be set by the tenant. `pods/ephemeralcontainers`: an ephemeral
 * container that could see a GPU is refused (its cap would need the init container, long gone).
 *
 * Input arrives already decoded by the API server into Go types, so a field of the wrong JSON type
 * means the caller is not the API server: that is a 400, not a denial. A value a user wrote wrongly
 * (the annotations) is a denial with a message the user sees in `kubectl` output; a namespace policy
 * that cannot be read now is a 503 that says to retry.
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

#include "common/units.h"

#define ANN_MEMORY "gpucap.io/memory"
#define ANN_INJECT "gpucap.io/inject"
#define ANN_INJECTED "gpucap.io/injected"
#define ANN_PRELOAD "gpucap.io/preload"
#define USER_PRELOAD "LD_PRELOAD_BEFORE_GPUCAP"
#define VISIBLE "NVIDIA_VISIBLE_DEVICES"
/* The NVIDIA container toolkit's apply-cuda-memory-limits hook reads these: whole MiB, both needed. */
#define DRIVER_REQUEST "NVIDIA_GPU_MEMORY_REQUEST"
#define DRIVER_LIMIT "NVIDIA_GPU_MEMORY_LIMIT"
#define MAX_CHOSEN 64

/* The device plugin's resources start so: nvidia.com/gpu, nvidia.com/gpu.shared, HAMi's gpumem. */
static const char gpu_prefix[] = "nvidia.com/gpu";
/* MIG devices: nvidia.com/mig-1g.10gb and the like (the device plugin's mixed strategy). */
static const char mig_prefix[] = "nvidia.com/mig-";

/* The pod annotations a change of budget comes from (gpucap's own, KAI's); see review_update(). */
static const char *const budget_annotations[] = {ANN_MEMORY, "gpu-fraction", "gpu-memory",
                                                 "gpu-fraction-container-name", "gpu-fraction-num-devices"};

/* The paths gpucap owns inside a GPU container; a tenant mount at or under one is an override. */
static const char *const owned_paths[] = {GPC_MOUNT_INI_DIR, GPC_MOUNT_PRELOAD, GPC_MOUNT_PREFIX, "/run/gpucap"};

/* The identity variables of contract 2; every other GPUCAP_* in a GPU container is the tenant's. */
static const char *const identity_fields[][2] = {
    {"GPUCAP_POD_NAMESPACE", "metadata.namespace"},
    {"GPUCAP_POD_NAME", "metadata.name"},
    {"GPUCAP_POD_UID", "metadata.uid"},
};
#define IDENTITY_NAME "GPUCAP_CONTAINER_NAME"

enum verdict { V_ALLOW, V_DENY, V_BAD };

/* One GPU container chosen for injection, with the budget it gets and where that came from. */
struct chosen {
    char name[72];
    char budget[64];
    const char *source; /* "KAI annotation gpu-fraction", "annotation gpucap.io/memory", ... */
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
    bool driver;     /* the driver's own limits are set too (patch_env()) */
    bool opt_out;    /* the pod asks to opt out where the platform does not allow it: a GPU container denies it */
    enum gpc_preload_mode preload;
    char max[64];    /* the maximum that applies, "" none */
    const char *max_source;
    char fallback[64]; /* budget of containers that ask for none, "" none */
    const char *fallback_source;
    char annotation[64]; /* the pod's gpucap.io/memory, trimmed and checked, "" none */
    bool sched_pod;  /* a scheduler annotation makes every container, and its named init container, GPU ones */
    struct chosen chosen[MAX_CHOSEN];
    size_t nchosen;
    char names[400]; /* comma-separated names of the chosen containers, for the log and annotation */
    char msg[1000];  /* reason for a denial or a 400 */
    char held[1000]; /* a denial that holds once the pod gets a cap: a tenant's setting in a container
                        gpucap does not cap (tenant_settings) */
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

/* True when `path` is `dir` or lies under it ("/etc/gpucap/x" under "/etc/gpucap", not "/etc/gpucapx"). */
static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
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

/* Appends `item` to the array at `at`/`field`, creating the array when it is absent. */
static void append(struct review *r, const char *at, const char *field, bool exists, json_t *item)
{
    char path[160];
    if (!item) {
        r->oom = true;
        return;
    }
    snprintf(path, sizeof path, "%s/%s%s", at, field, exists ? "/-" : "");
    op(r, "add", path, exists ? item : json_pack("[o]", item));
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

/* Parses a size as the library will; false when it is not one. */
static bool size_of(const char *text, struct gpc_size *out)
{
    return text && *text && gpc_parse_size(text, out) == 0;
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
        trim_copy(t, sizeof t, v ? v : "");
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

/* True when the comma-separated `list` holds `name`. */
static bool list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t tok = strcspn(p, ", ");
        if (tok == n && n && memcmp(p, name, n) == 0)
            return true;
        p += tok;
    }
    return false;
}

/* The identity variable as the webhook writes it (fieldRef, or the container's name literally). */
static json_t *identity_var(size_t i, const char *container)
{
    if (i == sizeof identity_fields / sizeof identity_fields[0])
        return env_var(IDENTITY_NAME, container);
    return json_pack("{s:s, s:{s:{s:s, s:s}}}", "name", identity_fields[i][0], "valueFrom", "fieldRef",
                     "apiVersion", "v1", "fieldPath", identity_fields[i][1]);
}

/* Index of the identity variable `name`, or -1. */
static int identity_index(const char *name)
{
    for (size_t i = 0; i < sizeof identity_fields / sizeof identity_fields[0]; i++)
        if (strcmp(name, identity_fields[i][0]) == 0)
            return (int)i;
    return strcmp(name, IDENTITY_NAME) == 0 ? (int)(sizeof identity_fields / sizeof identity_fields[0]) : -1;
}

/*
 * The driver's limit for a chosen container, as the toolkit's hook reads it: whole MiB in decimal
 * digits, rounded down (never above the budget). False when none is set: the driver's limits are
 * off for this pod, the device is a MIG one (not supported there), or the budget is a share of the
 * card, whose bytes only the node knows (gpucap alone enforces those).
 */
static bool driver_mib(const struct review *r, const struct chosen *ch, char out[24])
{
    struct gpc_size s;
    if (!r->driver || ch->mig || !size_of(ch->budget, &s) || s.is_percent)
        return false;
    snprintf(out, 24, "%llu", (unsigned long long)(s.bytes >> 20));
    return true;
}

/*
 * The env patch of one chosen container at JSON Pointer `at`: the identity variables, the driver's
 * limits where they apply (request = limit = the budget: gpucap has one figure) and, in LD_PRELOAD
 * mode, the library appended to LD_PRELOAD. A tenant GPUCAP_* or NVIDIA_GPU_MEMORY_* variable (or
 * an envFrom whose prefix makes GPUCAP_* names) is an override: denied unless the namespace is
 * trusted (which then keeps its own driver variables and gets neither of ours: the hook refuses a
 * request above the limit). An envFrom could carry the driver's variables too, but an `env` entry
 * wins over every envFrom in the kubelet: ours hold where we set them, and where we do not there is
 * no driver limit of the platform's to loosen (gpucap's cap holds either way).
 */
/* True when an envFrom `prefix` can make the variable `name` (with `family`, any name that starts
 * with `name`, as "GPUCAP_" does for every gpucap setting). */
static bool prefix_reaches(const char *prefix, const char *name, bool family)
{
    size_t n = prefix ? strlen(prefix) : 0, m = strlen(name);
    return n && strncmp(prefix, name, family && n > m ? m : n) == 0;
}

static enum verdict patch_env(struct review *r, const char *at, const char *where, json_t *c,
                              const struct chosen *ch)
{
    const char *name = ch->name;
    bool bad = false;
    json_t *env = get_typed(c, "env", JSON_ARRAY, &bad);
    json_t *from = get_typed(c, "envFrom", JSON_ARRAY, &bad);
    if (bad) {
        say(r, "%s: env or envFrom has the wrong type (not an array)", where);
        return V_BAD;
    }
    for (size_t i = 0; i < json_array_size(from) && !r->trusted; i++) {
        const char *prefix = json_string_value(json_object_get(json_array_get(from, i), "prefix"));
        if (prefix_reaches(prefix, "GPUCAP_", true)) {
            char shown[64];
            clean(shown, sizeof shown, prefix);
            say(r, "container %s: envFrom[%zu] with prefix \"%s\" would set GPUCAP_* variables; gpucap's "
                   "settings belong to the platform in this namespace", name, i, shown);
            return V_DENY;
        }
    }

    const size_t nid = sizeof identity_fields / sizeof identity_fields[0] + 1;
    char mib[24];
    bool driver = driver_mib(r, ch, mib);
    static const char *const driver_vars[2] = {DRIVER_REQUEST, DRIVER_LIMIT};
    bool have[8] = {false}, have_driver[2] = {false};
    long preload = -1;
    for (size_t i = 0; i < json_array_size(env); i++) {
        json_t *e = json_array_get(env, i);
        if (!json_is_object(e)) {
            say(r, "%s.env[%zu] is not an object", where, i);
            return V_BAD;
        }
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!n)
            continue; /* the API server's validation rejects it after us */
        if (strcmp(n, "LD_PRELOAD") == 0)
            preload = (long)i; /* with duplicates the last one wins, as in the kubelet */
        int d = strcmp(n, DRIVER_REQUEST) == 0 ? 0 : strcmp(n, DRIVER_LIMIT) == 0 ? 1 : -1;
        if (strncmp(n, "GPUCAP_", 7) != 0 && d < 0)
            continue;
        int id = d >= 0 ? -1 : identity_index(n);
        json_t *want = id >= 0 ? identity_var((size_t)id, name) : d >= 0 && driver ? env_var(driver_vars[d], mib) : NULL;
        bool ours = want && json_equal(want, e);
        json_decref(want);
        if (ours || r->trusted) {
            if (id >= 0)
                have[id] = true;
            if (d >= 0)
                have_driver[d] = true;
            if (d >= 0 && !ours) /* a trusted tenant's own: it keeps its pair, ours would not match it */
                have_driver[0] = have_driver[1] = true;
            continue;
        }
        char shown[64], value[64];
        clean(shown, sizeof shown, n);
        clean(value, sizeof value, json_string_value(json_object_get(e, "value")));
        if (d >= 0)
            say(r, "container %s sets %s%s%s%s: the driver's memory limits belong to the platform in this namespace "
                   "(they follow the container's gpucap budget)",
                name, shown, value[0] ? "=\"" : "", value, value[0] ? "\"" : "");
        else
            say(r, "container %s sets %s%s%s%s: gpucap's settings belong to the platform in this namespace (its "
                   "budget comes from the " ANN_MEMORY " annotation within the namespace maximum)",
                name, shown, value[0] ? "=\"" : "", value, value[0] ? "\"" : "");
        return V_DENY;
    }

    char path[160];
    /* Changes at existing indices come before the appends, so no index moves under a later op. */
    if (r->preload == GPC_PRELOAD_ENV && preload >= 0) {
        json_t *e = json_array_get(env, (size_t)preload);
        const char *value = get_string(e, "value", &bad);
        json_t *vfrom = json_object_get(e, "valueFrom");
        if (bad) {
            say(r, "%s.env[%ld].value is not a string", where, preload);
            return V_BAD;
        }
        if (value && *value) {
            if (!preload_has(value, GPC_MOUNT_LIB)) {
                size_t n = strlen(value);
                char *joined = malloc(n + sizeof GPC_MOUNT_LIB + 2);
                if (!joined) {
                    r->oom = true;
                    return V_ALLOW;
                }
                bool sep = value[n - 1] == ':' || value[n - 1] == ' ';
                sprintf(joined, "%s%s%s", value, sep ? "" : ":", GPC_MOUNT_LIB);
                snprintf(path, sizeof path, "%s/env/%ld/value", at, preload);
                op(r, "add", path, json_string(joined));
                free(joined);
            }
        } else if (json_is_object(vfrom)) {
            /*
             * The user's list comes from a ConfigMap or Secret that we cannot read: move it to a
             * variable just before LD_PRELOAD and append to it with the kubelet's $(VAR) expansion.
             * Its name must not start with GPUCAP_: that prefix belongs to the platform.
             */
            snprintf(path, sizeof path, "%s/env/%ld", at, preload);
            op(r, "add", path, json_pack("{s:s, s:O}", "name", USER_PRELOAD, "valueFrom", vfrom));
            snprintf(path, sizeof path, "%s/env/%ld", at, preload + 1);
            op(r, "replace", path, env_var("LD_PRELOAD", "$(" USER_PRELOAD "):" GPC_MOUNT_LIB));
        } else {
            snprintf(path, sizeof path, "%s/env/%ld/value", at, preload);
            op(r, "add", path, json_string(GPC_MOUNT_LIB));
        }
    }
    bool exists = env != NULL;
    if (r->preload == GPC_PRELOAD_ENV && preload < 0) {
        append(r, at, "env", exists, env_var("LD_PRELOAD", GPC_MOUNT_LIB));
        exists = true;
    }
    for (size_t i = 0; i < nid; i++) {
        if (have[i])
            continue;
        append(r, at, "env", exists, identity_var(i, name));
        exists = true;
    }
    for (size_t d = 0; driver && d < 2; d++) {
        if (have_driver[d])
            continue;
        append(r, at, "env", exists, env_var(driver_vars[d], mib));
        exists = true;
    }
    return V_ALLOW;
}

/* The mounts a chosen container gets, in order. */
static size_t wanted_mounts(const struct review *r, const char *name, json_t *out[4])
{
    char sub[96];
    size_t n = 0;
    out[n++] = json_pack("{s:s, s:s, s:b}", "name", GPC_ADMISSION_VOLUME, "mountPath", GPC_MOUNT_PREFIX, "readOnly", 1);
    if (r->preload == GPC_PRELOAD_FILE)
        out[n++] = json_pack("{s:s, s:s, s:s, s:b}", "name", GPC_ADMISSION_VOLUME, "mountPath", GPC_MOUNT_PRELOAD,
                             "subPath", "ld.so.preload", "readOnly", 1);
    snprintf(sub, sizeof sub, "%s/gpucap.ini", name);
    out[n++] = json_pack("{s:s, s:s, s:s, s:b}", "name", GPC_ADMISSION_VOLUME, "mountPath", GPC_MOUNT_INI,
                         "subPath", sub, "readOnly", 1);
    /* The ledger file alone (gpucap inject made it): a mount point the container cannot remove,
     * rename or replace, whatever its uid. */
    snprintf(sub, sizeof sub, "%s/gpucap.ledger", name);
    out[n++] = json_pack("{s:s, s:s, s:s}", "name", GPC_ADMISSION_LEDGER_VOLUME, "mountPath", GPC_MOUNT_LEDGER_FILE,
                         "subPath", sub);
    return n;
}

/*
 * The mounts of one chosen container. A mount of the tenant at or under a path gpucap owns would
 * replace the library, the preload file, the locked ini or the ledger: denied unless trusted (a
 * trusted namespace keeps its own mount there and gets none of ours at that path).
 */
static enum verdict patch_mounts(struct review *r, const char *at, const char *where, json_t *c, const char *name)
{
    bool bad = false;
    json_t *mounts = get_typed(c, "volumeMounts", JSON_ARRAY, &bad);
    if (bad) {
        say(r, "%s.volumeMounts is not an array", where);
        return V_BAD;
    }
    json_t *want[4] = {NULL};
    size_t nwant = wanted_mounts(r, name, want);
    bool skip[4] = {false};
    enum verdict v = V_ALLOW;
    for (size_t i = 0; i < json_array_size(mounts) && v == V_ALLOW; i++) {
        json_t *m = json_array_get(mounts, i);
        if (!json_is_object(m)) {
            say(r, "%s.volumeMounts[%zu] is not an object", where, i);
            v = V_BAD;
            break;
        }
        const char *mp = json_string_value(json_object_get(m, "mountPath"));
        const char *vol = json_string_value(json_object_get(m, "name"));
        if (!mp)
            continue;
        bool ours = false, owned = false, any = false;
        for (size_t k = 0; k < nwant; k++)
            any |= json_equal(m, want[k]);
        if (vol && !any && !r->trusted &&
            (strcmp(vol, GPC_ADMISSION_VOLUME) == 0 || strcmp(vol, GPC_ADMISSION_LEDGER_VOLUME) == 0)) {
            say(r, "container %s mounts gpucap's volume %s itself: only gpucap mounts it", name, vol);
            v = V_DENY;
            break;
        }
        for (size_t k = 0; k < nwant; k++) {
            if (!same_path(mp, json_string_value(json_object_get(want[k], "mountPath"))))
                continue;
            skip[k] = true; /* something is there: ours from an earlier pass, or a trusted tenant's */
            ours = json_equal(m, want[k]);
        }
        for (size_t k = 0; k < sizeof owned_paths / sizeof owned_paths[0]; k++)
            owned |= under(mp, owned_paths[k]);
        if (owned && !ours && !r->trusted) {
            char shown[96];
            clean(shown, sizeof shown, mp);
            say(r, "container %s mounts %s over a path gpucap owns (%s, %s, %s, /run/gpucap): the cap "
                   "would not hold; mount elsewhere", name, shown, GPC_MOUNT_INI_DIR, GPC_MOUNT_PRELOAD,
                GPC_MOUNT_PREFIX);
            v = V_DENY;
        }
    }
    bool exists = mounts != NULL;
    for (size_t k = 0; k < nwant; k++) {
        if (v == V_ALLOW && !skip[k]) {
            append(r, at, "volumeMounts", exists, json_incref(want[k]));
            exists = true;
        }
        json_decref(want[k]);
    }
    return v;
}

/* Container names are DNS labels; anything else is kept out of file names and init arguments. */
static bool dns_label(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63 || name[0] == '-' || name[n - 1] == '-')
        return false;
    for (const char *p = name; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
            return false;
    return true;
}

/* True when both sizes are of one kind (bytes or share) and a is above b. */
static bool above(const char *a, const char *b)
{
    struct gpc_size sa, sb;
    if (!size_of(a, &sa) || !size_of(b, &sb) || sa.is_percent != sb.is_percent)
        return false;
    return sa.is_percent ? sa.ppm > sb.ppm : sa.bytes > sb.bytes;
}

/*
 * The budget of one GPU container, in the one order of precedence: the platform maximum bounds
 * everything; then the scheduler's request; then gpucap's own annotation; then the namespace's
 * default or the cluster's default (also the maximum where none is set: platform()). Returns V_ALLOW
 * with *skip set when nothing gives a budget (the pod is left alone: annotated pods only), V_DENY
 * above the maximum.
 */
static enum verdict budget_of(struct review *r, json_t *c, const char *name, struct chosen *out, bool *skip)
{
    char err[256] = "";
    int rc = gpc_wh_sched_budget(r->pod, c, out->budget, sizeof out->budget, err, sizeof err);
    if (rc < 0) {
        char shown[256];
        clean(shown, sizeof shown, err);
        say(r, "container %s: %s", name, shown);
        return V_DENY;
    }
    if (rc > 0) {
        struct gpc_size s;
        if (!size_of(out->budget, &s)) {
            say(r, "container %s: the scheduler's request gives \"%s\", not a size", name, out->budget);
            return V_DENY;
        }
        out->source = gpc_wh_sched_source(r->pod, c);
    } else if (r->annotation[0]) {
        snprintf(out->budget, sizeof out->budget, "%s", r->annotation);
        out->source = "annotation " ANN_MEMORY;
    } else if (r->fallback[0]) {
        snprintf(out->budget, sizeof out->budget, "%s", r->fallback);
        out->source = r->fallback_source;
    } else {
        *skip = true;
        return V_ALLOW;
    }
    if (r->max[0] && above(out->budget, r->max)) {
        say(r, "container %s asks for %s (%s), above the maximum %s (%s); ask for %s or less", name, out->budget,
            out->source, r->max, r->max_source, r->max);
        return V_DENY;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    return V_ALLOW;
}

/* A container gpucap leaves alone must not mount gpucap's volumes: it could rewrite the library. */
static enum verdict other_mounts(struct review *r, json_t *c, const char *name)
{
    json_t *mounts = json_object_get(c, "volumeMounts");
    for (size_t i = 0; i < json_array_size(mounts) && !r->trusted; i++) {
        const char *vol = json_string_value(json_object_get(json_array_get(mounts, i), "name"));
        if (vol && (strcmp(vol, GPC_ADMISSION_VOLUME) == 0 || strcmp(vol, GPC_ADMISSION_LEDGER_VOLUME) == 0)) {
            say(r, "container %s mounts gpucap's volume %s: only gpucap mounts it", name, vol);
            return V_DENY;
        }
    }
    return V_ALLOW;
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
static const char *visible_reason(const struct review *r, json_t *c, long *from_at)
{
    if (r->cfg->visible == GPC_VISIBLE_IGNORE)
        return NULL;
    json_t *env = json_object_get(c, "env");
    if (visible_devices(env))
        return VISIBLE;
    *from_at = env_names(env, VISIBLE) ? -1 : env_from_could_set(json_object_get(c, "envFrom"), VISIBLE);
    return *from_at >= 0 ? "envFrom" : NULL;
}

/* The denial of a container that could see GPUs without a cap (visible_reason() said why). */
static void say_visible(struct review *r, const char *kind, const char *name, const char *why, long from_at)
{
    if (strcmp(why, VISIBLE) == 0)
        say(r, "%s %s sets " VISIBLE " without requesting nvidia.com/gpu: it would see GPUs without a cap; "
               "request the GPU as a resource", kind, name);
    else
        say(r, "%s %s takes envFrom[%ld] (a ConfigMap or Secret) that could set " VISIBLE " without requesting "
               "nvidia.com/gpu: it could see GPUs without a cap; request the GPU as a resource, give envFrom a "
               "prefix, or set " VISIBLE "=void in env", kind, name, from_at);
}

/*
 * Why a container is a GPU container, or NULL; *mig when it asks for a MIG device. V_DENY (with
 * r->msg) for a refused way of asking.
 */
static const char *gpu_reason(struct review *r, json_t *c, const char *field, const char *name, bool *mig,
                              enum verdict *v)
{
    if (requests_gpu(c, mig))
        return *mig ? "nvidia.com/mig-*" : "nvidia.com/gpu";
    /* KAI gives the share to a regular container, or to the init container its annotation names
     * (a request for it, or a malformed one that budget_of() then denies); a KAI pod's other
     * regular containers may see the device too: capped, from the annotation or the default. */
    char budget[64], err[256];
    if (r->sched_pod && (strcmp(field, "containers") == 0 ||
                         gpc_wh_sched_budget(r->pod, c, budget, sizeof budget, err, sizeof err) != 0))
        return "scheduler annotation";
    json_t *claims = json_object_get(json_object_get(c, "resources"), "claims");
    if (r->cfg->dra_claims && json_array_size(claims) > 0)
        return "resource claim";
    long from_at = -1;
    const char *why = visible_reason(r, c, &from_at);
    if (why && r->cfg->visible == GPC_VISIBLE_CAP)
        return why;
    if (why) {
        say_visible(r, "container", name, why, from_at);
        *v = V_DENY;
    }
    return NULL;
}

/* Adds one line to the response's warnings (cleaned, bounded). */
static void warn(struct review *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct review *r, const char *fmt, ...)
{
    char text[256], cleaned[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    clean(cleaned, sizeof cleaned, text);
    if (json_array_append_new(r->warnings, json_string(cleaned)) != 0)
        r->oom = true;
}

/* Where the driver's limits are on but cannot be set for this container, the response says why. */
static void driver_warning(struct review *r, const struct chosen *ch)
{
    char mib[24];
    if (!r->driver || driver_mib(r, ch, mib))
        return;
    if (ch->mig)
        warn(r, "container %s: the driver's memory limits do not apply to MIG devices; gpucap alone enforces %s",
             ch->name, ch->budget);
    else
        warn(r, "container %s: budget %s is a share of the card, known only on the node; the driver's limit "
                "(whole MiB) is not set, gpucap alone enforces it", ch->name, ch->budget);
}

/*
 * GPUCAP_* or NVIDIA_GPU_MEMORY_* variables of a container gpucap does not cap (one without a GPU of
 * its own, an ephemeral one), by env, valueFrom or an envFrom whose prefix could make them: refused
 * as in a GPU container unless the namespace is trusted. Such a container that sees a GPU all the
 * same (an image whose ENV sets NVIDIA_VISIBLE_DEVICES) must not carry a driver limit or request of
 * the tenant's; gpucap sets none there, so none of the tenant's would be overridden. `kind`:
 * "container", "init container" or "ephemeral container".
 */
static enum verdict tenant_settings(struct review *r, json_t *c, const char *kind, const char *shown)
{
    if (r->trusted)
        return V_ALLOW;
    json_t *env = json_object_get(c, "env"), *from = json_object_get(c, "envFrom");
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(env, i), "name"));
        if (n && (strncmp(n, "GPUCAP_", 7) == 0 || strcmp(n, DRIVER_REQUEST) == 0 || strcmp(n, DRIVER_LIMIT) == 0)) {
            char var[64];
            clean(var, sizeof var, n);
            say(r, "%s %s sets %s: gpucap's settings and the driver's memory limits belong to the platform in this "
                   "namespace", kind, shown, var);
            return V_DENY;
        }
    }
    /* Without a prefix an envFrom is the kubelet's to read, as in any container (see patch_env). */
    for (size_t i = 0; i < json_array_size(from); i++) {
        const char *prefix = json_string_value(json_object_get(json_array_get(from, i), "prefix"));
        if (prefix_reaches(prefix, "GPUCAP_", true) || prefix_reaches(prefix, DRIVER_REQUEST, false) ||
            prefix_reaches(prefix, DRIVER_LIMIT, false)) {
            char var[64];
            clean(var, sizeof var, prefix);
            say(r, "%s %s takes envFrom[%zu] with prefix \"%s\", which could set GPUCAP_* or NVIDIA_GPU_MEMORY_* "
                   "variables: gpucap's settings and the driver's memory limits belong to the platform in this "
                   "namespace", kind, shown, i, var);
            return V_DENY;
        }
    }
    return V_ALLOW;
}

/* Patches every GPU container of spec[field] ("containers" or "initContainers"). */
static enum verdict patch_list(struct review *r, json_t *spec, const char *field, long init_at)
{
    bool bad = false;
    json_t *list = get_typed(spec, field, JSON_ARRAY, &bad);
    if (bad) {
        say(r, "request.object.spec.%s is not an array", field);
        return V_BAD;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        char where[96], at[96];
        snprintf(where, sizeof where, "request.object.spec.%s[%zu]", field, i);
        snprintf(at, sizeof at, "/spec/%s/%zu", field, i);
        if (!json_is_object(c)) {
            say(r, "%s is not an object", where);
            return V_BAD;
        }
        if ((long)i == init_at)
            continue; /* our own init container */
        const char *name = get_string(c, "name", &bad);
        if (bad) {
            say(r, "%s.name is not a string", where);
            return V_BAD;
        }
        enum verdict v = V_ALLOW;
        char shown[72];
        clean(shown, sizeof shown, name ? name : "");
        bool mig = false;
        if (!gpu_reason(r, c, field, shown, &mig, &v)) {
            if (v != V_ALLOW || (v = other_mounts(r, c, shown)) != V_ALLOW)
                return v;
            if (!r->held[0] &&
                tenant_settings(r, c, strcmp(field, "initContainers") == 0 ? "init container" : "container", shown) !=
                    V_ALLOW) {
                memcpy(r->held, r->msg, sizeof r->held);
                r->msg[0] = '\0';
            }
            continue;
        }
        char text[256];
        if (gpc_wh_sched_warning(c, text, sizeof text) > 0)
            warn(r, "%s", text);
        if (!name || !dns_label(name)) {
            say(r, "%s: name \"%s\" is not a DNS label", where, shown);
            return V_BAD;
        }
        if (init_at >= 0 && (long)i < init_at && strcmp(field, "initContainers") == 0) {
            say(r, "init container %s uses a GPU but runs before " GPC_ADMISSION_INIT
                   ", which provides the cap; move it after", name);
            return V_DENY;
        }
        if (r->nchosen == MAX_CHOSEN) {
            say(r, "more than %d GPU containers in one pod", MAX_CHOSEN);
            return V_DENY;
        }
        bool skip = false;
        struct chosen *ch = &r->chosen[r->nchosen];
        if ((v = budget_of(r, c, name, ch, &skip)) != V_ALLOW)
            return v;
        if (skip)
            continue;
        if (r->opt_out) {
            say(r, "annotation " ANN_INJECT ": \"false\" is not allowed in namespace %s: who runs a GPU without "
                   "gpucap's cap is the platform's decision (namespace policy allow_opt_out, or --pod-opt-out); "
                   "container %s would get %s (%s)", r->ns ? r->ns : "-", name, ch->budget, ch->source);
            return V_DENY;
        }
        ch->mig = mig;
        driver_warning(r, ch);
        if ((v = patch_env(r, at, where, c, ch)) != V_ALLOW || (v = patch_mounts(r, at, where, c, name)) != V_ALLOW)
            return v;
        r->nchosen++;
        append_name(r->names, sizeof r->names, name);
    }
    return V_ALLOW;
}

/* The two pod volumes; an existing one of either name must be exactly ours. */
static bool patch_volumes(struct review *r, json_t *spec, long init_at)
{
    bool bad = false;
    json_t *vols = get_typed(spec, "volumes", JSON_ARRAY, &bad);
    if (bad) {
        say(r, "request.object.spec.volumes is not an array");
        return false;
    }
    static const char *const names[] = {GPC_ADMISSION_VOLUME, GPC_ADMISSION_LEDGER_VOLUME};
    bool exists = vols != NULL;
    for (size_t k = 0; k < 2; k++) {
        json_t *want = json_pack("{s:s, s:{}}", "name", names[k], "emptyDir");
        bool found = false;
        for (size_t i = 0; i < json_array_size(vols); i++) {
            json_t *v = json_array_get(vols, i);
            const char *name = json_string_value(json_object_get(v, "name"));
            if (!name || strcmp(name, names[k]) != 0)
                continue;
            found = true;
            /* Ours only after our init container was added: a tenant's volume could be written to. */
            if (!json_equal(v, want) || init_at < 0) {
                /* Another volume of that name would be mounted over the library's path. */
                say(r, "the pod already has a volume named %s that gpucap did not add; rename it", names[k]);
                json_decref(want);
                return false;
            }
        }
        if (!found) {
            append(r, "/spec", "volumes", exists, json_incref(want));
            exists = true;
        }
        json_decref(want);
    }
    return true;
}

/* The init container that fills the volumes: `gpucap inject` from the gpucap image, restricted. */
static json_t *init_container(struct review *r)
{
    json_t *cmd = json_pack("[s, s, s, s, s, s]", GPC_MOUNT_CLI, "inject", "--to", GPC_INIT_LIB_DIR, "--ledgers",
                            GPC_INIT_LEDGER_DIR);
    if (cmd && r->max[0]) {
        json_array_append_new(cmd, json_string("--max"));
        json_array_append_new(cmd, json_string(r->max));
    }
    for (size_t i = 0; cmd && i < r->nchosen; i++) {
        char arg[160];
        snprintf(arg, sizeof arg, "%s=%s", r->chosen[i].name, r->chosen[i].budget);
        json_array_append_new(cmd, json_string(arg));
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:{s:b, s:i, s:i, s:b, s:b, s:{s:[s]}, "
                     "s:{s:s}}, s:[{s:s, s:s}, {s:s, s:s}]}",
                     "name", GPC_ADMISSION_INIT, "image", r->cfg->image, "imagePullPolicy", "IfNotPresent",
                     "command", cmd,
                     "resources", "requests", "cpu", "10m", "memory", "16Mi", "limits", "cpu", "100m", "memory",
                     "64Mi",
                     "securityContext", "runAsNonRoot", 1, "runAsUser", 65532, "runAsGroup", 65532,
                     "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL",
                     "seccompProfile", "type", "RuntimeDefault",
                     "volumeMounts", "name", GPC_ADMISSION_VOLUME, "mountPath", GPC_INIT_LIB_DIR, "name",
                     GPC_ADMISSION_LEDGER_VOLUME, "mountPath", GPC_INIT_LEDGER_DIR);
}

/* Index of our init container among spec.initContainers, or -1. */
static long find_init(json_t *spec)
{
    json_t *list = json_object_get(spec, "initContainers");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *name = json_string_value(json_object_get(json_array_get(list, i), "name"));
        if (name && strcmp(name, GPC_ADMISSION_INIT) == 0)
            return (long)i;
    }
    return -1;
}

/* Adds the init container first (last op: it shifts the indices the ops before it used), or fixes ours. */
static void patch_init(struct review *r, json_t *spec, long init_at)
{
    json_t *want = init_container(r);
    if (!want) {
        r->oom = true;
        return;
    }
    if (init_at >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/spec/initContainers/%ld", init_at);
        if (json_equal(want, json_array_get(json_object_get(spec, "initContainers"), (size_t)init_at)))
            json_decref(want);
        else
            op(r, "replace", path, want);
    } else if (json_is_array(json_object_get(spec, "initContainers"))) {
        op(r, "add", "/spec/initContainers/0", want);
    } else {
        op(r, "add", "/spec/initContainers", json_pack("[o]", want));
    }
}

static void op_remove(struct review *r, const char *path)
{
    json_t *o = json_pack("{s:s, s:s}", "op", "remove", "path", path);
    if (!o || json_array_append_new(r->patch, o) != 0)
        r->oom = true;
}

/*
 * Sets the pod's annotations keys[i] to values[i] (NULL: removed), creating metadata and
 * annotations as needed; only what differs is patched, so a second pass patches nothing.
 */
static void patch_annotations(struct review *r, json_t *meta, json_t *ann, const char *const keys[],
                              const char *const values[], size_t n)
{
    json_t *all = json_object();
    bool any = false;
    for (size_t k = 0; all && k < n; k++) {
        const char *now = json_string_value(json_object_get(ann, keys[k]));
        char key[64], path[96];
        pointer_escape(key, sizeof key, keys[k]);
        snprintf(path, sizeof path, "/metadata/annotations/%s", key);
        if (!values[k]) {
            if (json_object_get(ann, keys[k]))
                op_remove(r, path);
            continue;
        }
        if (json_object_set_new(all, keys[k], json_string(values[k])) != 0)
            r->oom = true;
        if (now && strcmp(now, values[k]) == 0)
            continue;
        any = true;
        if (ann)
            op(r, "add", path, json_string(values[k])); /* "add" replaces an existing member */
    }
    if (!all)
        r->oom = true;
    else if (any && !meta)
        op(r, "add", "/metadata", json_pack("{s:O}", "annotations", all));
    else if (any && !ann)
        op(r, "add", "/metadata/annotations", json_incref(all));
    json_decref(all);
}

/*
 * The record of the resolved budgets (GPC_ANN_BUDGETS) as compact JSON:
 * {"max":"10GiB","containers":{"train":"8GiB","helper":"25%"}}, "max" absent when none applies.
 * NULL when memory ran out (r->oom set). The caller frees it.
 */
static char *budget_record(struct review *r)
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
static const char *const record_keys[2] = {ANN_INJECTED, GPC_ANN_BUDGETS};

/* Records the injection on the pod (both annotations); with nothing chosen, removes a tenant's. */
static void patch_records(struct review *r, json_t *meta, json_t *ann)
{
    char *budgets = r->nchosen ? budget_record(r) : NULL;
    if (r->nchosen && !budgets)
        return;
    const char *values[2] = {r->nchosen ? r->names : NULL, budgets};
    patch_annotations(r, meta, ann, record_keys, values, 2);
    free(budgets);
}

/* A size annotation or setting, trimmed into dst; false (with r->msg) when it is not a size. */
static bool take_size(struct review *r, char *dst, size_t len, const char *text, const char *what)
{
    char t[64];
    trim_copy(t, sizeof t, text);
    struct gpc_size size;
    int rc = strlen(text) >= sizeof t ? -EINVAL : gpc_parse_size(t, &size);
    if (rc == 0) {
        snprintf(dst, len, "%s", t);
        return true;
    }
    char shown[64];
    clean(shown, sizeof shown, text);
    say(r, "%s: \"%s\" is %s; accepted forms: %s", what, shown,
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
        if (!take_size(r, dst, len, ns, ns_what))
            return false;
        *source = ns_source;
    } else if (cluster) {
        trim_copy(dst, len, cluster);
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
 * The platform's side: namespace policy, then cluster flags; fills max, fallback, trusted, preload
 * and whether the driver's limits are set (spec: the pod's, for `auto`). Without a maximum the
 * default is the maximum: a tenant may ask for less than the default, never more.
 */
static enum verdict platform(struct review *r, const char *preload_ann, json_t *spec)
{
    if (r->cfg->ns_lookup && r->ns) {
        char err[256] = "";
        int rc = r->cfg->ns_lookup(r->cfg->ns_ctx, r->ns, &r->policy, err, sizeof err);
        if (rc != 0) {
            char shown[256];
            clean(shown, sizeof shown, err);
            /* A malformed policy stays malformed; anything else (the API unreachable, slow, 5xx) may pass. */
            if (rc == -EINVAL) {
                say(r, "the policy of namespace %s is not valid (%s); the platform must fix it", r->ns, shown);
            } else {
                r->code = 503;
                say(r, "the policy of namespace %s cannot be read now (%s); retry later", r->ns, shown);
            }
            return V_DENY;
        }
    }
    r->trusted = r->policy.trusted || (r->ns && list_has(r->cfg->trusted_namespaces, r->ns));
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
            clean(shown, sizeof shown, d);
            say(r, "the policy of namespace %s is not valid (driver_limits \"%s\" is not on, off or auto); the "
                   "platform must fix it", r->ns ? r->ns : "-", shown);
            return V_DENY;
        }
        mode = d[1] == 'n' ? GPC_DRIVER_ON : d[1] == 'f' ? GPC_DRIVER_OFF : GPC_DRIVER_AUTO;
    }
    r->driver = mode == GPC_DRIVER_ON ||
                (mode == GPC_DRIVER_AUTO && selects_label(spec, r->cfg->driver_label ? r->cfg->driver_label
                                                                                      : GPC_DRIVER_LABEL));

    r->preload = r->cfg->preload;
    if (preload_ann) {
        bool env = strcmp(preload_ann, "env") == 0, file = strcmp(preload_ann, "file") == 0;
        if (!env && !file) {
            char shown[64];
            clean(shown, sizeof shown, preload_ann);
            say(r, "annotation " ANN_PRELOAD ": \"%s\" is not \"file\" or \"env\"", shown);
            return V_DENY;
        }
        /* LD_PRELOAD is the tenant's to clear: only a trusted namespace may choose it. */
        if (env && r->preload != GPC_PRELOAD_ENV && !r->trusted) {
            say(r, "annotation " ANN_PRELOAD ": \"env\" is for trusted namespaces: LD_PRELOAD can be cleared by "
                   "the container, /etc/ld.so.preload cannot");
            return V_DENY;
        }
        r->preload = env ? GPC_PRELOAD_ENV : GPC_PRELOAD_FILE;
    }
    return V_ALLOW;
}

/* The pod's parts every review reads; V_BAD (with r->msg) when the types are not a pod's. */
struct pod_parts {
    json_t *meta, *ann, *spec;
    const char *inject, *memory, *preload;
};

static enum verdict pod_parts(struct review *r, json_t *req, json_t *pod, struct pod_parts *p)
{
    bool bad = false;
    r->pod = pod;
    p->meta = get_typed(pod, "metadata", JSON_OBJECT, &bad);
    p->ann = get_typed(p->meta, "annotations", JSON_OBJECT, &bad);
    p->spec = get_typed(pod, "spec", JSON_OBJECT, &bad);
    p->inject = get_string(p->ann, ANN_INJECT, &bad);
    p->memory = get_string(p->ann, ANN_MEMORY, &bad);
    p->preload = get_string(p->ann, ANN_PRELOAD, &bad);
    r->ns = get_string(req, "namespace", &bad);
    if (!r->ns)
        r->ns = get_string(p->meta, "namespace", &bad);
    if (bad || !p->spec) {
        say(r, "request.object is not a pod: metadata, annotations, namespace or spec is missing or has the "
               "wrong type");
        return V_BAD;
    }
    return V_ALLOW;
}

/*
 * `kubectl debug` and the like: an ephemeral container added to a running pod (UPDATE of
 * pods/ephemeralcontainers). gpucap cannot cap it (its ini comes from the init container, which ran
 * when the pod started, and no volume can be added now), so one that could see a GPU is refused,
 * as is one that mounts gpucap's volumes (it could rewrite the library, the ini or the ledger).
 * Ephemeral containers cannot request resources: NVIDIA_VISIBLE_DEVICES (or an envFrom that could
 * set it) is how they would see a GPU. Those already in the pod were checked when added.
 */
static enum verdict review_ephemeral(struct review *r, json_t *req, json_t *pod, const char **what)
{
    struct pod_parts p;
    enum verdict v = pod_parts(r, req, pod, &p);
    if (v != V_ALLOW || (v = platform(r, NULL, p.spec)) != V_ALLOW)
        return v;
    bool bad = false;
    json_t *list = get_typed(p.spec, "ephemeralContainers", JSON_ARRAY, &bad);
    json_t *old = json_object_get(json_object_get(json_object_get(req, "oldObject"), "spec"), "ephemeralContainers");
    if (bad) {
        say(r, "request.object.spec.ephemeralContainers is not an array");
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
        clean(shown, sizeof shown, name ? name : "");
        long from_at = -1;
        const char *why = visible_reason(r, c, &from_at);
        if (why) {
            say_visible(r, "ephemeral container", shown, why, from_at);
            strncat(r->msg, "; gpucap cannot cap an ephemeral container (the pod's volumes and init container are "
                            "fixed at creation): debug without GPU access",
                    sizeof r->msg - strlen(r->msg) - 1);
            return V_DENY;
        }
        if ((v = other_mounts(r, c, shown)) != V_ALLOW || (v = tenant_settings(r, c, "ephemeral container", shown)) != V_ALLOW)
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
static enum verdict review_update(struct review *r, json_t *req, json_t *pod, const char **what)
{
    struct pod_parts p;
    bool bad = false;
    enum verdict v = pod_parts(r, req, pod, &p);
    json_t *old = get_typed(req, "oldObject", JSON_OBJECT, &bad);
    if (v != V_ALLOW)
        return v;
    if (!old || bad) {
        say(r, "request.oldObject is missing or not an object in an UPDATE");
        return V_BAD;
    }
    json_t *old_ann = json_object_get(json_object_get(old, "metadata"), "annotations");
    const char *injected = json_string_value(json_object_get(old_ann, ANN_INJECTED));
    const char *old_record = json_string_value(json_object_get(old_ann, GPC_ANN_BUDGETS));
    if (!injected || !*injected || find_init(json_object_get(old, "spec")) < 0) {
        const char *none[2] = {NULL, NULL};
        patch_annotations(r, p.meta, p.ann, record_keys, none, 2);
        *what = json_array_size(r->patch) ? "update: a record gpucap did not write removed" : "update: not injected";
        return V_ALLOW;
    }
    bool changed = false;
    for (size_t k = 0; k < sizeof budget_annotations / sizeof budget_annotations[0]; k++)
        changed |= annotation_changed(old_ann, p.ann, budget_annotations[k]);
    if (!changed && old_record) {
        const char *keep[2] = {injected, old_record};
        patch_annotations(r, p.meta, p.ann, record_keys, keep, 2);
        *what = json_array_size(r->patch) ? "update: the record restored" : "update: budgets unchanged";
        return V_ALLOW;
    }

    /* Resolved again. Without a change (a pod from before the record), a failure only skips the record. */
    struct review fresh = {.cfg = r->cfg, .code = 400, .patch = r->patch, .warnings = r->warnings};
    struct review *f = changed ? r : &fresh;
    f->pod = pod;
    f->ns = r->ns;
    if (p.memory && !take_size(f, f->annotation, sizeof f->annotation, p.memory, "annotation " ANN_MEMORY))
        return changed ? V_DENY : V_ALLOW;
    if ((v = platform(f, NULL, p.spec)) != V_ALLOW)
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
        if ((v = budget_of(f, c, name, ch, &skip)) != V_ALLOW)
            return changed ? v : V_ALLOW;
        if (skip) {
            if (!changed)
                return V_ALLOW;
            say(r, "container %s would have no budget after this update, but carries gpucap's cap: keep "
                   ANN_MEMORY " (or the scheduler's request) on the pod", name);
            return V_DENY;
        }
        snprintf(ch->name, sizeof ch->name, "%s", name);
        f->nchosen++;
        append_name(f->names, sizeof f->names, name);
        /* The driver's limit was applied when the container started; a raise does not reach it. */
        json_t *env = json_object_get(c, "env");
        for (size_t i = 0; changed && i < json_array_size(env); i++) {
            json_t *e = json_array_get(env, i);
            const char *var = json_string_value(json_object_get(e, "name"));
            const char *mib = json_string_value(json_object_get(e, "value"));
            struct gpc_size s;
            if (var && mib && strcmp(var, DRIVER_LIMIT) == 0 && size_of(ch->budget, &s) &&
                (s.is_percent || s.bytes > strtoull(mib, NULL, 10) << 20))
                warn(r, "container %s: the driver's limit stays %s MiB (" DRIVER_LIMIT ", applied when the container "
                        "started); gpucap's budget %s applies below it", name, mib, ch->budget);
        }
    }
    char *record = budget_record(f);
    if (!record) {
        r->oom = true;
        return V_ALLOW;
    }
    const char *values[2] = {injected, record};
    patch_annotations(r, p.meta, p.ann, record_keys, values, 2);
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
    bool create = !opname || strcmp(opname, "CREATE") == 0, update = opname && strcmp(opname, "UPDATE") == 0;
    bool ephemeral = sub && strcmp(sub, "ephemeralcontainers") == 0;
    /* The webhook configuration sends pod creations and updates, and ephemeral containers. */
    if ((k && strcmp(k, "Pod") != 0) || !(create || update) || (sub && *sub && !(ephemeral && update))) {
        *what = "not a pod creation or update";
        return V_ALLOW;
    }
    json_t *pod = get_typed(req, "object", JSON_OBJECT, &bad);
    if (!pod) {
        say(r, "request.object is missing or not an object");
        return V_BAD;
    }
    if (ephemeral)
        return review_ephemeral(r, req, pod, what);
    if (update)
        return review_update(r, req, pod, what);

    struct pod_parts p;
    enum verdict v = pod_parts(r, req, pod, &p);
    if (v != V_ALLOW)
        return v;
    bool opt_out = p.inject && strcmp(p.inject, "false") == 0;
    if (opt_out && r->cfg->pod_opt_out) {
        patch_records(r, p.meta, p.ann);
        *what = "opted out (" ANN_INJECT ": false, --pod-opt-out)";
        return V_ALLOW;
    }
    if (p.inject && !opt_out && strcmp(p.inject, "true") != 0) {
        char shown[64];
        clean(shown, sizeof shown, p.inject);
        say(r, "annotation " ANN_INJECT ": \"%s\" is not \"true\" or \"false\"", shown);
        return V_DENY;
    }
    if (p.memory && !take_size(r, r->annotation, sizeof r->annotation, p.memory, "annotation " ANN_MEMORY))
        return V_DENY;

    if ((v = platform(r, p.preload, p.spec)) != V_ALLOW)
        return v;
    if (opt_out && r->policy.allow_opt_out) {
        patch_records(r, p.meta, p.ann);
        *what = "opted out (" ANN_INJECT ": false, allowed by the namespace policy)";
        return V_ALLOW;
    }
    r->opt_out = opt_out;
    r->sched_pod = gpc_wh_sched_gpu_pod(pod);
    long init_at = find_init(p.spec);
    if ((v = patch_list(r, p.spec, "initContainers", init_at)) != V_ALLOW ||
        (v = patch_list(r, p.spec, "containers", -1)) != V_ALLOW)
        return v;
    if (r->nchosen && r->held[0]) {
        memcpy(r->msg, r->held, sizeof r->msg);
        return V_DENY;
    }
    if (!r->nchosen) {
        patch_records(r, p.meta, p.ann);
        *what = r->fallback[0] || r->annotation[0] ? "no GPU container" : "no budget (no annotation, no default)";
        return V_ALLOW;
    }
    if (!patch_volumes(r, p.spec, init_at))
        return V_DENY;
    patch_init(r, p.spec, init_at);
    patch_records(r, p.meta, p.ann);
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
    if (json_array_size(r->warnings) && json_object_set(resp, "warnings", r->warnings))
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
    r.warnings = json_array();
    const char *what = "";
    enum verdict v = r.patch && r.warnings ? review_pod(&r, req, &what) : V_ALLOW;

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
            append_name(budgets, sizeof budgets, one);
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
        trim_copy(text, sizeof text, sizes[i]);
        if (strlen(sizes[i]) >= sizeof text || gpc_parse_size(text, &size) != 0) {
            snprintf(err, errlen, "%s \"%s\": not a size; accepted forms: %s", names[i], sizes[i], gpc_size_forms);
            return -EINVAL;
        }
    }
    if (cfg->default_memory && cfg->max_memory && above(cfg->default_memory, cfg->max_memory)) {
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
    snprintf(out, len, "policy: %s; default-memory %s; pod opt-out (%s: \"false\") %s; driver limits %s%s%s%s",
             bound, def ? def : "none", ANN_INJECT,
             cfg->pod_opt_out ? "honoured everywhere" : "only where the namespace policy allows it",
             driver[cfg->driver <= GPC_DRIVER_AUTO ? cfg->driver : 0],
             cfg->driver == GPC_DRIVER_AUTO ? " (pods selecting nodes labelled " : "",
             cfg->driver == GPC_DRIVER_AUTO ? (cfg->driver_label ? cfg->driver_label : GPC_DRIVER_LABEL) : "",
             cfg->driver == GPC_DRIVER_AUTO ? "=true)" : "");
}
