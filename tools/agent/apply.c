/* SPDX-License-Identifier: Apache-2.0 */
/*
 * apply.c: a container's budget record applied on the node.
 *
 * The webhook's init container wrote each injected container's locked settings file into the pod's
 * gpucap-lib emptyDir; the container sees it through a subPath mount at /etc/gpucap/gpucap.ini.
 * A subPath mount binds the file's inode when the container starts: a write into the same file
 * shows through, a new file renamed over it does not. So the file is rewritten in place, and never
 * made shorter (a reader that reads while it is written never sees a new head with the old tail;
 * the library also reads it again when its identity moved during the read). Every path component
 * under the kubelet's directory is opened without following links: the volumes are the pod's.
 * The container's use comes from its ledger (gpucap-ledger/<container>/gpucap.ledger), read
 * into memory with the library's own checks (a tenant may write anything there: it only colours
 * the Event's message).
 */
#include "apply.h"

#include "common/ledger.h"
#include "common/units.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INI_MAX 16384

/* The text of line [p, e) without blanks at both ends, into buf. */
static void trimmed(const char *p, const char *e, char *buf, size_t len)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    size_t n = (size_t)(e - p) < len - 1 ? (size_t)(e - p) : len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

static bool padding_line(const char *p, const char *e)
{
    if (p == e || *p != ';')
        return false;
    for (p++; p < e; p++)
        if (*p != ' ')
            return false;
    return true;
}

int gpc_agent_ini_set(const char *in, const char *key, const char *value, char *out, size_t outlen, char *old,
                      size_t oldlen)
{
    size_t n = 0;
    bool in_gpucap = false, done = false;
    old[0] = '\0';
#define PUT(s, l)                                  \
    do {                                           \
        if (n + (l) + 1 > outlen)                  \
            return -ENOSPC;                        \
        memcpy(out + n, (s), (l));                 \
        n += (l);                                  \
    } while (0)
    char setting[256];
    int sl = snprintf(setting, sizeof setting, "%s = %s\n", key, value);
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        if (!e)
            e = next;
        char line[512];
        trimmed(p, e, line, sizeof line);
        if (padding_line(p, e)) {
            p = next;
            continue;
        }
        if (line[0] == '[') {
            if (in_gpucap && !done) {
                PUT(setting, (size_t)sl); /* the key was not in [gpucap]: it goes at its end */
                done = true;
            }
            in_gpucap = strcmp(line, "[gpucap]") == 0;
        } else if (in_gpucap && !done) {
            char *eq = strchr(line, '=');
            if (eq) {
                char k[128];
                trimmed(line, eq, k, sizeof k);
                if (strcmp(k, key) == 0) {
                    trimmed(eq + 1, eq + strlen(eq), old, oldlen);
                    PUT(setting, (size_t)sl);
                    done = true;
                    p = next;
                    continue;
                }
            }
        }
        PUT(p, (size_t)(next - p));
        if (next == e && e > p && e[-1] != '\n' && *next == '\0')
            PUT("\n", 1);
        p = next;
    }
    if (!done) {
        if (!in_gpucap)
            PUT("[gpucap]\n", 9);
        PUT(setting, (size_t)sl);
    }
    out[n] = '\0';
#undef PUT
    return 0;
}

int gpc_agent_write_in_place(int fd, const char *text)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    size_t n = strlen(text);
    char buf[INI_MAX + 256];
    if (n >= sizeof buf || (off_t)n > (off_t)sizeof buf - 1)
        return -EFBIG;
    memcpy(buf, text, n);
    if ((off_t)n < st.st_size) {
        size_t pad = (size_t)st.st_size - n;
        if (n + pad > sizeof buf)
            return -EFBIG;
        if (pad == 1) {
            buf[n] = '\n';
        } else {
            buf[n] = ';';
            memset(buf + n + 1, ' ', pad - 2);
            buf[n + pad - 1] = '\n';
        }
        n += pad;
    }
    /* One write of the whole file at offset 0 (a few hundred bytes: one page). */
    ssize_t w = pwrite(fd, buf, n, 0);
    if (w < 0)
        return -errno;
    return (size_t)w == n ? 0 : -EIO;
}

/* Opens `name` under directory fd `dir` without following a link (O_DIRECTORY when dir). */
static int open_at(int dir, const char *name, int flags)
{
    return openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
}

/* The directory <root>/<uid>/volumes/kubernetes.io~empty-dir/<volume>/<container>, or -errno. */
static int volume_dir(const char *root, const char *uid, const char *volume, const char *container)
{
    const char *parts[] = {uid, "volumes", "kubernetes.io~empty-dir", volume, container};
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; fd >= 0 && i < sizeof parts / sizeof parts[0]; i++) {
        int next = open_at(fd, parts[i], O_RDONLY | O_DIRECTORY);
        int saved = errno;
        close(fd);
        fd = next;
        errno = saved;
    }
    return fd >= 0 ? fd : -errno;
}

/* Two sizes as written stand for the same budget. */
static bool same_size(const char *a, const char *b)
{
    struct gpc_size x, y;
    if (gpc_parse_size(a, &x) != 0 || gpc_parse_size(b, &y) != 0)
        return strcmp(a, b) == 0;
    return x.is_percent == y.is_percent && (x.is_percent ? x.ppm == y.ppm : x.bytes == y.bytes);
}

/* The container's use per its ledger, against the budget `value` on each device. */
static void read_use(const char *root, const char *uid, const char *container, const char *value,
                     struct gpc_agent_change *c)
{
    int dir = volume_dir(root, uid, "gpucap-ledger", container);
    if (dir < 0)
        return;
    int fd = open_at(dir, "gpucap.ledger", O_RDONLY);
    close(dir);
    struct gpc_ledger *l = NULL;
    if (fd < 0 || !(l = calloc(1, sizeof *l)))
        goto out;
    /* A copy, never a mapping (the tenant can shrink its file under a mapping: SIGBUS), by the
     * readers' one routine; the figures are whole even when the identity block was torn. */
    enum gpc_ledger_fault f = gpc_ledger_copy(fd, l, NULL);
    struct gpc_size size;
    if ((f != GPC_LEDGER_USABLE && f != GPC_LEDGER_TORN) || gpc_parse_size(value, &size) != 0)
        goto out;
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (atomic_load(&l->dev[d].state) != 1)
            continue;
        uint64_t used = gpc_ledger_in_use(l, d), budget = gpc_size_resolve(&size, l->dev[d].physical);
        if (used >= c->in_use) {
            c->in_use = used;
            c->budget = budget;
        }
        c->above |= used > budget;
    }
out:
    free(l);
    if (fd >= 0)
        close(fd);
}

static bool value_ok(const char *v)
{
    struct gpc_size s;
    if (!v || !*v || strlen(v) >= 64 || gpc_parse_size(v, &s) != 0)
        return false;
    for (const char *p = v; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == ';' || *p == '#' || *p == '[' || *p == '=')
            return false;
    return s.is_percent ? s.ppm > 0 : s.bytes > 0;
}

int gpc_agent_apply(const char *root, const char *pod_uid, const char *container, const char *value, const char *max,
                    struct gpc_agent_change *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    err[0] = '\0';
    if (!tool_name_ok(pod_uid) || !tool_name_ok(container)) {
        snprintf(err, errlen, "pod uid or container name '%s' is not a name", container);
        return -EINVAL;
    }
    if (!value_ok(value) || (max && !value_ok(max))) {
        snprintf(err, errlen, "container %s: budget '%s'%s%s is not a size (%s)", container, value,
                 max ? " or maximum " : "", max ? max : "", gpc_size_forms);
        return -EINVAL;
    }
    int dir = volume_dir(root, pod_uid, "gpucap-lib", container);
    if (dir < 0)
        return dir;
    int fd = open_at(dir, "gpucap.ini", O_RDWR);
    int rc = fd < 0 ? -errno : 0;
    close(dir);
    if (rc != 0)
        return rc;
    struct stat st;
    static char in[INI_MAX + 1], mid[INI_MAX + 256], out[INI_MAX + 256];
    ssize_t got;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > INI_MAX) {
        snprintf(err, errlen, "container %s: its settings file is not a regular file of at most %d bytes", container,
                 INI_MAX);
        rc = -EINVAL;
    } else if ((got = pread(fd, in, INI_MAX, 0)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "container %s: read its settings file: %s", container, strerror(errno));
    }
    if (rc != 0)
        goto out;
    in[got] = '\0';
    const char *text = in;
    if (max) {
        if ((rc = gpc_agent_ini_set(text, "memory_limit_max", max, mid, sizeof mid, c->max_from, sizeof c->max_from)))
            goto out;
        snprintf(c->max_to, sizeof c->max_to, "%s", max);
        text = mid;
    }
    if ((rc = gpc_agent_ini_set(text, "memory_limit", value, out, sizeof out, c->from, sizeof c->from)))
        goto out;
    snprintf(c->to, sizeof c->to, "%s", value);
    if (same_size(c->from, c->to) && (!max || same_size(c->max_from, c->max_to))) {
        rc = 0; /* the file says it already, however it is spelled */
        goto out;
    }
    if ((rc = gpc_agent_write_in_place(fd, out)) != 0) {
        snprintf(err, errlen, "container %s: rewrite its settings file: %s", container, strerror(-rc));
        goto out;
    }
    read_use(root, pod_uid, container, value, c);
    rc = 1;
out:
    if (rc < 0 && !err[0])
        snprintf(err, errlen, "container %s: %s", container, strerror(-rc));
    close(fd);
    return rc;
}
