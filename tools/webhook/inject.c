/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject.c: the injection patch of a pod CREATE (the layout of contract 2, admission.h): the
 * identity and driver variables of each GPU container, its read-only mounts of the library, the
 * preload file and its locked ini, its ledger, the two emptyDir volumes and the `gpucap inject`
 * init container (whose arguments carry each container's budget and, for a burstable one, its
 * request: gpucap inject writes both into the locked ini). A tenant's variables or mounts over gpucap's are refused unless the namespace is
 * trusted. What is already there and ours is kept, so a second pass patches nothing (reinvocation).
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

/* The paths gpucap owns inside a GPU container; a tenant mount at or under one is an override. */
static const char *const owned_paths[] = {GPC_MOUNT_INI_DIR, GPC_MOUNT_PRELOAD, GPC_MOUNT_PREFIX, "/run/gpucap"};

/* The identity variables of contract 2; every other GPUCAP_* in a GPU container is the tenant's. */
static const char *const identity_fields[][2] = {
    {"GPUCAP_POD_NAMESPACE", "metadata.namespace"},
    {"GPUCAP_POD_NAME", "metadata.name"},
    {"GPUCAP_POD_UID", "metadata.uid"},
};
#define IDENTITY_NAME "GPUCAP_CONTAINER_NAME"

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

/* The identity variable as the webhook writes it (fieldRef, or the container's name literally). */
static json_t *identity_var(size_t i, const char *container)
{
    if (i == sizeof identity_fields / sizeof identity_fields[0])
        return wh_env_var(IDENTITY_NAME, container);
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
    if (!r->driver || ch->mig || !wh_size_of(ch->budget, &s) || s.is_percent)
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
static enum verdict patch_env(struct review *r, const char *at, const char *where, json_t *c,
                              const struct chosen *ch)
{
    const char *name = ch->name;
    bool bad = false;
    json_t *env = wh_get_typed(c, "env", JSON_ARRAY, &bad);
    json_t *from = wh_get_typed(c, "envFrom", JSON_ARRAY, &bad);
    if (bad) {
        wh_say(r, "%s: env or envFrom has the wrong type (not an array)", where);
        return V_BAD;
    }
    for (size_t i = 0; i < json_array_size(from) && !r->trusted; i++) {
        const char *prefix = json_string_value(json_object_get(json_array_get(from, i), "prefix"));
        if (wh_prefix_reaches(prefix, "GPUCAP_", true)) {
            char shown[64];
            wh_clean(shown, sizeof shown, prefix);
            wh_say(r, "container %s: envFrom[%zu] with prefix \"%s\" would set GPUCAP_* variables; gpucap's "
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
            wh_say(r, "%s.env[%zu] is not an object", where, i);
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
        json_t *want = id >= 0 ? identity_var((size_t)id, name) : d >= 0 && driver ? wh_env_var(driver_vars[d], mib) : NULL;
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
        wh_clean(shown, sizeof shown, n);
        wh_clean(value, sizeof value, json_string_value(json_object_get(e, "value")));
        if (d >= 0)
            wh_say(r, "container %s sets %s%s%s%s: the driver's memory limits belong to the platform in this namespace "
                   "(they follow the container's gpucap budget)",
                name, shown, value[0] ? "=\"" : "", value, value[0] ? "\"" : "");
        else
            wh_say(r, "container %s sets %s%s%s%s: gpucap's settings belong to the platform in this namespace (its "
                   "budget comes from the " ANN_MEMORY " annotation within the namespace maximum)",
                name, shown, value[0] ? "=\"" : "", value, value[0] ? "\"" : "");
        return V_DENY;
    }

    char path[160];
    /* Changes at existing indices come before the appends, so no index moves under a later op. */
    if (r->preload == GPC_PRELOAD_ENV && preload >= 0) {
        json_t *e = json_array_get(env, (size_t)preload);
        const char *value = wh_get_string(e, "value", &bad);
        json_t *vfrom = json_object_get(e, "valueFrom");
        if (bad) {
            wh_say(r, "%s.env[%ld].value is not a string", where, preload);
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
                wh_op(r, "add", path, json_string(joined));
                free(joined);
            }
        } else if (json_is_object(vfrom)) {
            /*
             * The user's list comes from a ConfigMap or Secret that we cannot read: move it to a
             * variable just before LD_PRELOAD and append to it with the kubelet's $(VAR) expansion.
             * Its name must not start with GPUCAP_: that prefix belongs to the platform.
             */
            snprintf(path, sizeof path, "%s/env/%ld", at, preload);
            wh_op(r, "add", path, json_pack("{s:s, s:O}", "name", USER_PRELOAD, "valueFrom", vfrom));
            snprintf(path, sizeof path, "%s/env/%ld", at, preload + 1);
            wh_op(r, "replace", path, wh_env_var("LD_PRELOAD", "$(" USER_PRELOAD "):" GPC_MOUNT_LIB));
        } else {
            snprintf(path, sizeof path, "%s/env/%ld/value", at, preload);
            wh_op(r, "add", path, json_string(GPC_MOUNT_LIB));
        }
    }
    bool exists = env != NULL;
    if (r->preload == GPC_PRELOAD_ENV && preload < 0) {
        wh_append(r, at, "env", exists, wh_env_var("LD_PRELOAD", GPC_MOUNT_LIB));
        exists = true;
    }
    for (size_t i = 0; i < nid; i++) {
        if (have[i])
            continue;
        wh_append(r, at, "env", exists, identity_var(i, name));
        exists = true;
    }
    for (size_t d = 0; driver && d < 2; d++) {
        if (have_driver[d])
            continue;
        wh_append(r, at, "env", exists, wh_env_var(driver_vars[d], mib));
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
    json_t *mounts = wh_get_typed(c, "volumeMounts", JSON_ARRAY, &bad);
    if (bad) {
        wh_say(r, "%s.volumeMounts is not an array", where);
        return V_BAD;
    }
    json_t *want[4] = {NULL};
    size_t nwant = wanted_mounts(r, name, want);
    bool skip[4] = {false};
    enum verdict v = V_ALLOW;
    for (size_t i = 0; i < json_array_size(mounts) && v == V_ALLOW; i++) {
        json_t *m = json_array_get(mounts, i);
        if (!json_is_object(m)) {
            wh_say(r, "%s.volumeMounts[%zu] is not an object", where, i);
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
            wh_say(r, "container %s mounts gpucap's volume %s itself: only gpucap mounts it", name, vol);
            v = V_DENY;
            break;
        }
        for (size_t k = 0; k < nwant; k++) {
            if (!wh_same_path(mp, json_string_value(json_object_get(want[k], "mountPath"))))
                continue;
            skip[k] = true; /* something is there: ours from an earlier pass, or a trusted tenant's */
            ours = json_equal(m, want[k]);
        }
        for (size_t k = 0; k < sizeof owned_paths / sizeof owned_paths[0]; k++)
            owned |= wh_under(mp, owned_paths[k]);
        if (owned && !ours && !r->trusted) {
            char shown[96];
            wh_clean(shown, sizeof shown, mp);
            wh_say(r, "container %s mounts %s over a path gpucap owns (%s, %s, %s, /run/gpucap): the cap "
                   "would not hold; mount elsewhere", name, shown, GPC_MOUNT_INI_DIR, GPC_MOUNT_PRELOAD,
                GPC_MOUNT_PREFIX);
            v = V_DENY;
        }
    }
    bool exists = mounts != NULL;
    for (size_t k = 0; k < nwant; k++) {
        if (v == V_ALLOW && !skip[k]) {
            wh_append(r, at, "volumeMounts", exists, json_incref(want[k]));
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

/* Where the driver's limits are on but cannot be set for this container, the response says why. */
static void driver_warning(struct review *r, const struct chosen *ch)
{
    char mib[24];
    if (!r->driver || driver_mib(r, ch, mib))
        return;
    if (ch->mig)
        wh_warn(r, "container %s: the driver's memory limits do not apply to MIG devices; gpucap alone enforces %s",
             ch->name, ch->budget);
    else
        wh_warn(r, "container %s: budget %s is a share of the card, known only on the node; the driver's limit "
                "(whole MiB) is not set, gpucap alone enforces it", ch->name, ch->budget);
}

/* Patches every GPU container of spec[field] ("containers" or "initContainers"). */
static enum verdict patch_list(struct review *r, json_t *spec, const char *field, long init_at)
{
    bool bad = false;
    json_t *list = wh_get_typed(spec, field, JSON_ARRAY, &bad);
    if (bad) {
        wh_say(r, "request.object.spec.%s is not an array", field);
        return V_BAD;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        char where[96], at[96];
        snprintf(where, sizeof where, "request.object.spec.%s[%zu]", field, i);
        snprintf(at, sizeof at, "/spec/%s/%zu", field, i);
        if (!json_is_object(c)) {
            wh_say(r, "%s is not an object", where);
            return V_BAD;
        }
        if ((long)i == init_at)
            continue; /* our own init container */
        const char *name = wh_get_string(c, "name", &bad);
        if (bad) {
            wh_say(r, "%s.name is not a string", where);
            return V_BAD;
        }
        enum verdict v = V_ALLOW;
        char shown[72];
        wh_clean(shown, sizeof shown, name ? name : "");
        bool mig = false;
        if (!wh_gpu_reason(r, c, field, shown, &mig, &v)) {
            if (v != V_ALLOW || (v = wh_other_mounts(r, c, shown)) != V_ALLOW)
                return v;
            if (!r->held[0] &&
                wh_tenant_settings(r, c, strcmp(field, "initContainers") == 0 ? "init container" : "container", shown) !=
                    V_ALLOW) {
                memcpy(r->held, r->msg, sizeof r->held);
                r->msg[0] = '\0';
            }
            continue;
        }
        char text[256];
        if (gpc_wh_sched_warning(c, text, sizeof text) > 0)
            wh_warn(r, "%s", text);
        if (!name || !dns_label(name)) {
            wh_say(r, "%s: name \"%s\" is not a DNS label", where, shown);
            return V_BAD;
        }
        if (init_at >= 0 && (long)i < init_at && strcmp(field, "initContainers") == 0) {
            wh_say(r, "init container %s uses a GPU but runs before " GPC_ADMISSION_INIT
                   ", which provides the cap; move it after", name);
            return V_DENY;
        }
        if (r->nchosen == MAX_CHOSEN) {
            wh_say(r, "more than %d GPU containers in one pod", MAX_CHOSEN);
            return V_DENY;
        }
        bool skip = false;
        struct chosen *ch = &r->chosen[r->nchosen];
        if ((v = wh_budget_of(r, c, name, ch, &skip)) != V_ALLOW)
            return v;
        if (skip)
            continue;
        if (r->opt_out) {
            wh_say(r, "annotation " ANN_INJECT ": \"false\" is not allowed in namespace %s: who runs a GPU without "
                   "gpucap's cap is the platform's decision (namespace policy allow_opt_out, or --pod-opt-out); "
                   "container %s would get %s (%s)", r->ns ? r->ns : "-", name, ch->budget, ch->source);
            return V_DENY;
        }
        ch->mig = mig;
        driver_warning(r, ch);
        if ((v = patch_env(r, at, where, c, ch)) != V_ALLOW || (v = patch_mounts(r, at, where, c, name)) != V_ALLOW)
            return v;
        r->nchosen++;
        wh_append_name(r->names, sizeof r->names, name);
    }
    return V_ALLOW;
}

/* The two pod volumes; an existing one of either name must be exactly ours. */
static bool patch_volumes(struct review *r, json_t *spec, long init_at)
{
    bool bad = false;
    json_t *vols = wh_get_typed(spec, "volumes", JSON_ARRAY, &bad);
    if (bad) {
        wh_say(r, "request.object.spec.volumes is not an array");
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
                wh_say(r, "the pod already has a volume named %s that gpucap did not add; rename it", names[k]);
                json_decref(want);
                return false;
            }
        }
        if (!found) {
            wh_append(r, "/spec", "volumes", exists, json_incref(want));
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
        char arg[224];
        /* With a request (issue 35), NAME=LIMIT,request=REQUEST: gpucap inject writes memory_request. */
        snprintf(arg, sizeof arg, "%s=%s%s%s", r->chosen[i].name, r->chosen[i].budget,
                 r->chosen[i].request[0] ? ",request=" : "", r->chosen[i].request);
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
long wh_find_init(json_t *spec)
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
            wh_op(r, "replace", path, want);
    } else if (json_is_array(json_object_get(spec, "initContainers"))) {
        wh_op(r, "add", "/spec/initContainers/0", want);
    } else {
        wh_op(r, "add", "/spec/initContainers", json_pack("[o]", want));
    }
}

/*
 * Pod CREATE: the pod's own choices first (opt-out, gpucap.io/memory), then the platform's
 * (wh_platform), then every GPU container of its init containers and containers patched; the
 * volumes, the init container and the record come last. A tenant's setting in a container gpucap
 * does not cap denies the pod only when the pod gets a cap (r->held).
 */
enum verdict wh_review_create(struct review *r, json_t *req, json_t *pod, const char **what)
{
    struct pod_parts p;
    enum verdict v = wh_pod_parts(r, req, pod, &p);
    if (v != V_ALLOW)
        return v;
    bool opt_out = p.inject && strcmp(p.inject, "false") == 0;
    if (opt_out && r->cfg->pod_opt_out) {
        wh_patch_records(r, p.meta, p.ann);
        *what = "opted out (" ANN_INJECT ": false, --pod-opt-out)";
        return V_ALLOW;
    }
    if (p.inject && !opt_out && strcmp(p.inject, "true") != 0) {
        char shown[64];
        wh_clean(shown, sizeof shown, p.inject);
        wh_say(r, "annotation " ANN_INJECT ": \"%s\" is not \"true\" or \"false\"", shown);
        return V_DENY;
    }
    if (p.memory && !wh_take_size(r, r->annotation, sizeof r->annotation, p.memory, "annotation " ANN_MEMORY))
        return V_DENY;
    if (p.memory_request && !wh_take_size(r, r->request_annotation, sizeof r->request_annotation, p.memory_request,
                                          "annotation " ANN_MEMORY_REQUEST))
        return V_DENY;

    if ((v = wh_platform(r, p.preload, p.spec)) != V_ALLOW)
        return v;
    if (opt_out && r->policy.allow_opt_out) {
        wh_patch_records(r, p.meta, p.ann);
        *what = "opted out (" ANN_INJECT ": false, allowed by the namespace policy)";
        return V_ALLOW;
    }
    r->opt_out = opt_out;
    r->sched_pod = gpc_wh_sched_gpu_pod(pod);
    long init_at = wh_find_init(p.spec);
    if ((v = patch_list(r, p.spec, "initContainers", init_at)) != V_ALLOW ||
        (v = patch_list(r, p.spec, "containers", -1)) != V_ALLOW)
        return v;
    if (r->nchosen && r->held[0]) {
        memcpy(r->msg, r->held, sizeof r->msg);
        return V_DENY;
    }
    if (!r->nchosen) {
        wh_patch_records(r, p.meta, p.ann);
        *what = r->fallback[0] || r->annotation[0] ? "no GPU container" : "no budget (no annotation, no default)";
        return V_ALLOW;
    }
    if (!patch_volumes(r, p.spec, init_at))
        return V_DENY;
    patch_init(r, p.spec, init_at);
    wh_patch_records(r, p.meta, p.ann);
    *what = json_array_size(r->patch) ? "patched" : "already injected";
    return V_ALLOW;
}

