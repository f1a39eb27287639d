/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant.c: what a tenant may not set in the containers gpucap does not cap (those without a GPU
 * of their own, ephemeral ones): gpucap's GPUCAP_* settings and the driver's NVIDIA_GPU_MEMORY_*
 * limits, by env, valueFrom or an envFrom prefix that reaches them, and mounts of gpucap's volumes.
 * A trusted namespace may. The same rules inside a GPU container are in inject.c, where they are
 * applied together with the patch.
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

/* True when an envFrom `prefix` can make the variable `name` (with `family`, any name that starts
 * with `name`, as "GPUCAP_" does for every gpucap setting). */
bool wh_prefix_reaches(const char *prefix, const char *name, bool family)
{
    size_t n = prefix ? strlen(prefix) : 0, m = strlen(name);
    return n && strncmp(prefix, name, family && n > m ? m : n) == 0;
}

/*
 * GPUCAP_* or NVIDIA_GPU_MEMORY_* variables of a container gpucap does not cap (one without a GPU of
 * its own, an ephemeral one), by env, valueFrom or an envFrom whose prefix could make them: refused
 * as in a GPU container unless the namespace is trusted. Such a container that sees a GPU all the
 * same (an image whose ENV sets NVIDIA_VISIBLE_DEVICES) must not carry a driver limit or request of
 * the tenant's; gpucap sets none there, so none of the tenant's would be overridden. `kind`:
 * "container", "init container" or "ephemeral container".
 */
enum verdict wh_tenant_settings(struct review *r, json_t *c, const char *kind, const char *shown)
{
    if (r->trusted)
        return V_ALLOW;
    json_t *env = json_object_get(c, "env"), *from = json_object_get(c, "envFrom");
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(env, i), "name"));
        if (n && (strncmp(n, "GPUCAP_", 7) == 0 || strcmp(n, DRIVER_REQUEST) == 0 || strcmp(n, DRIVER_LIMIT) == 0)) {
            char var[64];
            wh_clean(var, sizeof var, n);
            wh_say(r, "%s %s sets %s: gpucap's settings and the driver's memory limits belong to the platform in this "
                   "namespace", kind, shown, var);
            return V_DENY;
        }
    }
    /* Without a prefix an envFrom is the kubelet's to read, as in any container (see patch_env). */
    for (size_t i = 0; i < json_array_size(from); i++) {
        const char *prefix = json_string_value(json_object_get(json_array_get(from, i), "prefix"));
        if (wh_prefix_reaches(prefix, "GPUCAP_", true) || wh_prefix_reaches(prefix, DRIVER_REQUEST, false) ||
            wh_prefix_reaches(prefix, DRIVER_LIMIT, false)) {
            char var[64];
            wh_clean(var, sizeof var, prefix);
            wh_say(r, "%s %s takes envFrom[%zu] with prefix \"%s\", which could set GPUCAP_* or NVIDIA_GPU_MEMORY_* "
                   "variables: gpucap's settings and the driver's memory limits belong to the platform in this "
                   "namespace", kind, shown, i, var);
            return V_DENY;
        }
    }
    return V_ALLOW;
}

/* A container gpucap leaves alone must not mount gpucap's volumes: it could rewrite the library. */
enum verdict wh_other_mounts(struct review *r, json_t *c, const char *name)
{
    json_t *mounts = json_object_get(c, "volumeMounts");
    for (size_t i = 0; i < json_array_size(mounts) && !r->trusted; i++) {
        const char *vol = json_string_value(json_object_get(json_array_get(mounts, i), "name"));
        if (vol && (strcmp(vol, GPC_ADMISSION_VOLUME) == 0 || strcmp(vol, GPC_ADMISSION_LEDGER_VOLUME) == 0)) {
            wh_say(r, "container %s mounts gpucap's volume %s: only gpucap mounts it", name, vol);
            return V_DENY;
        }
    }
    return V_ALLOW;
}
