/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options_resolve.c: the per-device figures of loaded settings (options.c loads them): which value
 * applies to a device (precedence), the limit with its bounds, and the burstable model of issue 35
 * (the request, the arbiter's grant and the budget in force, min(limit, max(request, grant))), and
 * where a value came from. Pure functions of a gpc_settings and a card's size: the library
 * (charge/device.c, at start-up and for every live change alike) and the tools use the same.
 */
#include "common/options.h"

#include "common/defs.h"
#include "common/units.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The per-UUID value from `src` whose configured text is a prefix of `uuid`, or NULL. */
static const struct gpc_value *uuid_match(const struct gpc_settings *s, enum gpc_opt o, const char *uuid,
                                          enum gpc_source src)
{
    for (int i = 0; uuid && i < s->n_uuid; i++) {
        const struct gpc_uuid_limit *u = &s->uuid_limit[i];
        const struct gpc_value *v = gpc_settings_uuid_slot((struct gpc_uuid_limit *)u, o);
        if (v->set && v->src == src && strncasecmp(uuid, u->uuid, strlen(u->uuid)) == 0)
            return v;
    }
    return NULL;
}

const struct gpc_value *gpc_settings_pick(const struct gpc_settings *s, enum gpc_opt o, int ordinal,
                                          const char *uuid, bool forced)
{
    static const struct gpc_value broken = {.set = true, .bad = true};
    const struct gpc_value *dev = ordinal >= 0 && ordinal < GPC_MAX_DEVICES
                                      ? gpc_settings_dev_value((struct gpc_settings *)s, o, ordinal)
                                      : NULL;
    const struct gpc_value *all = &s->opt[o];
    const struct gpc_value *v = NULL;

    /* Environment first (per UUID, per ordinal, for all), then the file (in the same order). */
    if ((v = uuid_match(s, o, uuid, GPC_SRC_ENV)))
        ;
    else if (dev && dev->set && dev->src == GPC_SRC_ENV)
        v = dev;
    else if (all->set && all->src == GPC_SRC_ENV)
        v = all;
    else if (forced && s->config_bad)
        v = &broken;
    else if ((v = uuid_match(s, o, uuid, GPC_SRC_FILE)))
        ;
    else if (dev && dev->set)
        v = dev;
    else if (all->set)
        v = all;
    if (forced && s->env_bad)
        v = &broken;
    return v;
}

uint64_t gpc_settings_limit(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                            const struct gpc_value **from)
{
    const struct gpc_value *v = gpc_settings_pick(s, GPC_OPT_MEMORY_LIMIT, ordinal, uuid, true);
    uint64_t limit = !v ? GPC_UNLIMITED : v->bad ? 0 : gpc_size_resolve(&v->u.size, physical);

    /* The bounds: the platform's maximum, the scheduler's request, and under the lock the platform
     * file's own figure (resolved on this card, so a percentage and a size compare). */
    const struct gpc_value *bounds[] = {&s->opt[GPC_OPT_MEMORY_LIMIT_MAX], &s->opt[GPC_OPT_SCHED_LIMIT]};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        const struct gpc_value *b = bounds[i];
        uint64_t x = !b->set ? GPC_UNLIMITED : b->bad ? 0 : gpc_size_resolve(&b->u.size, physical);
        if (x < limit) {
            limit = x;
            v = b;
        }
    }
    if (s->platform) {
        const struct gpc_value *pf;
        uint64_t x = gpc_settings_limit(s->platform, ordinal, uuid, physical, &pf);
        if (x < limit) {
            limit = x;
            v = pf;
        }
    }
    if (from)
        *from = v;
    return limit;
}

bool gpc_settings_any_limit(const struct gpc_settings *s)
{
    if (s->config_bad || s->env_bad || s->opt[GPC_OPT_MEMORY_LIMIT].set || s->opt[GPC_OPT_MEMORY_LIMIT_MAX].set ||
        s->opt[GPC_OPT_MEMORY_REQUEST].set ||
        s->opt[GPC_OPT_SCHED_LIMIT].set || (s->platform && gpc_settings_any_limit(s->platform)))
        return true;
    for (int i = 0; i < GPC_MAX_DEVICES; i++)
        if (s->dev_limit[i].set || s->dev_request[i].set)
            return true;
    return s->n_uuid > 0;
}

const char *gpc_value_origin(const struct gpc_settings *s, const struct gpc_value *v, enum gpc_opt opt,
                             int ordinal, char *buf, size_t len)
{
    if (!v || !v->set) {
        snprintf(buf, len, "unset");
    } else if (v->bad && v->text[0] == '\0') {
        snprintf(buf, len, "safe state after an error");
    } else if (v->src == GPC_SRC_ENV) {
        const char *uuid = NULL;
        for (int i = 0; i < s->n_uuid; i++)
            if (v == gpc_settings_uuid_slot((struct gpc_uuid_limit *)&s->uuid_limit[i], opt))
                uuid = s->uuid_limit[i].uuid;
        if (uuid)
            snprintf(buf, len, "%s_%s", gpc_option_defs[opt].env, uuid);
        else if (ordinal >= 0 && ordinal < GPC_MAX_DEVICES &&
                 v == gpc_settings_dev_value((struct gpc_settings *)s, opt, ordinal))
            snprintf(buf, len, "%s_%d", gpc_option_defs[opt].env, ordinal);
        else if (v >= s->opt && v < s->opt + GPC_OPT__COUNT) /* a bound: memory_limit_max, GPU_MEMORY_LIMIT */
            snprintf(buf, len, "%s", gpc_option_defs[v - s->opt].env);
        else
            snprintf(buf, len, "%s", gpc_option_defs[opt].env);
    } else if (v->src == GPC_SRC_FILE) {
        snprintf(buf, len, "%s:%d", s->config_path, v->line);
    } else {
        snprintf(buf, len, "%s", v->src == GPC_SRC_ENV ? "environment" : "default");
    }
    return buf;
}

/* ---- burstable memory (issue 35) ---- */

bool gpc_settings_request(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                          uint64_t *request, const struct gpc_value **from)
{
    /* Not forced by a broken file or environment: those put the limit at 0, which bounds all. */
    const struct gpc_value *v = gpc_settings_pick(s, GPC_OPT_MEMORY_REQUEST, ordinal, uuid, false);
    bool has = v != NULL;
    uint64_t r = !v ? GPC_UNLIMITED : v->bad ? 0 : gpc_size_resolve(&v->u.size, physical);
    /* Under the lock the platform file's request bounds the environment's: the lower applies on
     * this card (a percentage and a size compare here). None there: the environment's stands (a
     * request is never above the limit, which is the platform's "no request"). */
    if (s->platform) {
        const struct gpc_value *pf = NULL;
        uint64_t p = 0;
        if (gpc_settings_request(s->platform, ordinal, uuid, physical, &p, &pf)) {
            if (!has || p < r) {
                r = p;
                v = pf;
            }
            has = true;
        }
    }
    if (from)
        *from = v;
    if (request)
        *request = has ? r : 0;
    return has;
}

uint64_t gpc_settings_grant(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical)
{
    /* The environment never sets it (GPC_OPTF_FILE_ONLY: such a variable is refused at load); under
     * the lock the file read is the platform's alone. */
    const struct gpc_value *v = gpc_settings_pick(s, GPC_OPT_MEMORY_GRANT, ordinal, uuid, false);
    if (!v || v->bad || v->src != GPC_SRC_FILE)
        return 0;
    return gpc_size_resolve(&v->u.size, physical);
}

uint64_t gpc_qos_in_force(uint64_t limit, uint64_t request, uint64_t grant, bool *refused)
{
    *refused = request > limit;
    if (*refused)
        request = 0;
    if (grant > limit)
        grant = limit;
    uint64_t want = request > grant ? request : grant;
    return want < limit ? want : limit;
}
