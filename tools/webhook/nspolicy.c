/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nspolicy.c: the per-namespace budget policy, from a file the platform owns (a ConfigMap mounted
 * into the webhook). One ini section per namespace:
 *
 *   [ml-team]
 *   max_memory = 50%       ; no container of the namespace gets more
 *   default_memory = 25%   ; budget of containers that ask for none
 *   trusted = false        ; true: tenant GPUCAP_* variables and mounts over gpucap's paths allowed
 *   allow_opt_out = false  ; true: a pod's gpucap.io/inject: "false" is honoured here
 *   driver_limits = auto   ; on, off, auto: the NVIDIA driver's own limits too (--driver-limits)
 *   qos = burstable        ; burstable: containers without a request are best effort (--qos)
 *
 * Read with inih. A lookup stats the file (a ConfigMap update swaps a symlink) and reads it again
 * when it changed; an update that breaks the file keeps the last good table, said once in the log.
 */
#include "admission.h"

#include <errno.h>
#include <ini.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/units.h"

struct entry {
    char ns[64];
    struct gpc_ns_policy policy;
};

struct table {
    struct entry *v;
    size_t n;
    char err[256];
};

struct gpc_nspolicy {
    pthread_mutex_t lock;
    char path[4096];
    struct stat seen; /* the file the table was read from */
    struct table t;
    bool broken_said;
};

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct table *t = user;
    if (!section[0] || strlen(section) >= sizeof t->v[0].ns) {
        snprintf(t->err, sizeof t->err, "key %s outside a [namespace] section, or a section name too long", name);
        return 0;
    }
    struct entry *e = t->n ? &t->v[t->n - 1] : NULL;
    if (!e || strcmp(e->ns, section) != 0) {
        struct entry *more = realloc(t->v, (t->n + 1) * sizeof *t->v);
        if (!more) {
            snprintf(t->err, sizeof t->err, "out of memory");
            return 0;
        }
        t->v = more;
        e = &t->v[t->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->ns, sizeof e->ns, "%s", section);
    }
    struct gpc_size size;
    if (strcmp(name, "max_memory") == 0 || strcmp(name, "default_memory") == 0) {
        if (strlen(value) >= sizeof e->policy.max_memory || gpc_parse_size(value, &size) != 0) {
            snprintf(t->err, sizeof t->err, "[%s] %s = %s: not a size", section, name, value);
            return 0;
        }
        snprintf(name[0] == 'm' ? e->policy.max_memory : e->policy.default_memory, sizeof e->policy.max_memory, "%s",
                 value);
    } else if (strcmp(name, "trusted") == 0 || strcmp(name, "allow_opt_out") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            snprintf(t->err, sizeof t->err, "[%s] %s = %s: not true or false", section, name, value);
            return 0;
        }
        *(name[0] == 't' ? &e->policy.trusted : &e->policy.allow_opt_out) = value[0] == 't';
    } else if (strcmp(name, "driver_limits") == 0) {
        if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0 && strcmp(value, "auto") != 0) {
            snprintf(t->err, sizeof t->err, "[%s] driver_limits = %s: not on, off or auto", section, value);
            return 0;
        }
        snprintf(e->policy.driver_limits, sizeof e->policy.driver_limits, "%s", value);
    } else if (strcmp(name, "qos") == 0) {
        if (strcmp(value, "burstable") != 0 && strcmp(value, "guaranteed") != 0) {
            snprintf(t->err, sizeof t->err, "[%s] qos = %s: not burstable or guaranteed", section, value);
            return 0;
        }
        snprintf(e->policy.qos, sizeof e->policy.qos, "%s", value);
    } else {
        snprintf(t->err, sizeof t->err,
                 "[%s] unknown key %s (max_memory, default_memory, trusted, allow_opt_out, driver_limits, qos)", section,
                 name);
        return 0;
    }
    return 1;
}

/* Reads the file into *t; 0, or -errno/-EINVAL with t->err set. */
static int load(const char *path, struct table *t, struct stat *st)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(t->err, sizeof t->err, "%s", strerror(e));
        return -e;
    }
    if (fstat(fileno(f), st) != 0)
        memset(st, 0, sizeof *st);
    int rc = ini_parse_file(f, on_key, t);
    fclose(f);
    if (rc == 0)
        return 0;
    if (!t->err[0])
        snprintf(t->err, sizeof t->err, "line %d: not an ini line", rc);
    else if (rc > 0) {
        char e[sizeof t->err + 32];
        snprintf(e, sizeof e, "line %d: %s", rc, t->err);
        snprintf(t->err, sizeof t->err, "%.200s", e);
    }
    free(t->v);
    t->v = NULL;
    t->n = 0;
    return -EINVAL;
}

int gpc_nspolicy_open(const char *path, struct gpc_nspolicy **out, char *err, size_t errlen)
{
    struct gpc_nspolicy *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    snprintf(p->path, sizeof p->path, "%s", path);
    int rc = load(path, &p->t, &p->seen);
    if (rc != 0) {
        snprintf(err, errlen, "namespace policy %s: %s", path, p->t.err);
        free(p);
        return rc;
    }
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return 0;
}

static bool changed(const struct stat *a, const struct stat *b)
{
    return a->st_ino != b->st_ino || a->st_dev != b->st_dev || a->st_size != b->st_size ||
           a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

int gpc_nspolicy_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    struct gpc_nspolicy *p = ctx;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&p->lock);
    struct stat st;
    if (stat(p->path, &st) == 0 && changed(&st, &p->seen)) {
        struct table t;
        struct stat now;
        if (load(p->path, &t, &now) == 0) {
            free(p->t.v);
            p->t = t;
            p->seen = now;
            p->broken_said = false;
        } else if (!p->broken_said) {
            /* Keep enforcing the last good policy: a typo must not lift every namespace's maximum. */
            fprintf(stderr, "gpucap-webhook: namespace policy %s: %s; keeping the last good policy\n", p->path,
                    t.err);
            p->broken_said = true;
        }
    }
    for (size_t i = 0; i < p->t.n; i++)
        if (strcmp(p->t.v[i].ns, ns) == 0)
            *out = p->t.v[i].policy;
    pthread_mutex_unlock(&p->lock);
    (void)err, (void)errlen;
    return 0;
}

void gpc_nspolicy_close(struct gpc_nspolicy *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p->t.v);
    free(p);
}
