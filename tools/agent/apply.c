/* SPDX-License-Identifier: Apache-2.0 */
/*
 * apply.c: a container's budget record applied on the node.
 *
 * The webhook's init container wrote each injected container's locked settings file into the pod's
 * gpucap-lib emptyDir; the container sees it through a subPath mount at /etc/gpucap/gpucap.ini.
 * A subPath mount binds the file's inode when the container starts: a write into the same file
 * shows through, a new file renamed over it does not. So the file is rewritten in place, and never
 * made shorter (a reader that reads while it is written never sees a new head with the old tail;
 * the library also reads it again when its identity moved during the read).
 *
 * The record only asks: the most it can get is the ceiling `gpucap inject` wrote in the file when
 * the pod was created, which every rewrite keeps (gpc_agent_apply's contract says how it is found).
 *
 * A rewrite is signalled once complete: the file's first line is its generation ("; generation =
 * N", 17 hex digits), which every process of the container maps and compares before each admission
 * (libgpucap/charge/live.c). The text is written first with the generation it had, then the line
 * alone with N + 1: from the moment that second write returns, no process of the container admits
 * anything under the budget it replaces (the one mechanism burstable QoS drives: a loan is a raise,
 * taking it back a lowering, in force when the write returns).
 *
 * The pod's volumes are the pod's: every path component under the kubelet's directory is opened
 * without following links, and a file is first opened as a path only (O_PATH: no FIFO blocks, no
 * device is opened), checked (a regular file, one link, its directory's owner), then reopened
 * through /proc/self/fd, which names that very inode, without blocking. The container's use comes
 * from its ledger (gpucap-ledger/<container>/gpucap.ledger) read the same way, with the library's
 * own checks (a tenant may write anything there: it only colours the Event's message).
 */
#include "apply.h"

#include "common/ledger.h"
#include "common/units.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
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

bool gpc_agent_padding_line(const char *p, const char *e)
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
        if (gpc_agent_padding_line(p, e)) {
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

#define GEN_PREFIX "; generation = "

/* The generation of `text` (its first line), or -1 when it has none. */
static long long generation_of(const char *text)
{
    size_t n = strlen(GEN_PREFIX);
    if (strncmp(text, GEN_PREFIX, n) != 0)
        return -1;
    char *end;
    unsigned long long g = strtoull(text + n, &end, 16);
    return end == text + n + 17 && *end == '\n' ? (long long)(g & 0x7fffffffffffffffull) : -1;
}

int gpc_agent_signal_generation(char *text, size_t len, const char *in)
{
    long long g = generation_of(in);
    size_t n = strlen(GEN_PREFIX);
    /* The generation line out of the new text, wherever ini_set and the ceiling left it (first or
     * second), then first with the file's generation as it was. */
    for (int pass = 0; pass < 2; pass++) {
        char *at = pass == 0 ? text : strchr(text, '\n');
        if (at && pass == 1)
            at++;
        if (at && strncmp(at, GEN_PREFIX, n) == 0) {
            char *e = strchr(at, '\n');
            memmove(at, e ? e + 1 : at + strlen(at), strlen(e ? e + 1 : at + strlen(at)) + 1);
            break;
        }
    }
    char line[48];
    int m = snprintf(line, sizeof line, GEN_PREFIX "%017llx\n", g < 0 ? 0ull : (unsigned long long)g);
    size_t have = strlen(text);
    if (have + (size_t)m + 1 > len)
        return -ENOSPC;
    memmove(text + m, text, have + 1);
    memcpy(text, line, (size_t)m);
    return 0;
}

int gpc_agent_signal(int fd, const char *text)
{
    long long g = generation_of(text);
    if (g < 0)
        return -EINVAL;
    char line[48];
    int m = snprintf(line, sizeof line, GEN_PREFIX "%017llx\n", (unsigned long long)(g + 1) & 0xfffffffffffffffull);
    ssize_t w = pwrite(fd, line, (size_t)m, 0);
    return w == m ? 0 : w < 0 ? -errno : -EIO;
}

int gpc_agent_write_in_place(int fd, const char *text)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    size_t n = strlen(text);
    char buf[INI_MAX + 512];
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

/* The value of `key` in the [gpucap] section of `in`, into out ("" when absent; the last one wins,
 * as in the library's parser). */
static void ini_get(const char *in, const char *key, char *out, size_t len)
{
    bool in_gpucap = false;
    out[0] = '\0';
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        char line[512];
        trimmed(p, e ? e : next, line, sizeof line);
        if (line[0] == '[') {
            in_gpucap = strcmp(line, "[gpucap]") == 0;
        } else if (in_gpucap && line[0] != ';' && line[0] != '#') {
            char *eq = strchr(line, '=');
            if (eq) {
                char k[128];
                trimmed(line, eq, k, sizeof k);
                if (strcmp(k, key) == 0)
                    trimmed(eq + 1, eq + strlen(eq), out, len);
            }
        }
        p = next;
    }
}

#define CEILING_MARK "; ceiling = "

/* The size of the ceiling line (CEILING_MARK SIZE: ...), "" when there is none; the lowest of
 * several that compare, the first otherwise. */
static void ceiling_of(const char *in, char *out, size_t len)
{
    out[0] = '\0';
    struct gpc_size best = {0}, s;
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        size_t n = strlen(CEILING_MARK);
        if ((size_t)((e ? e : next) - p) > n && strncmp(p, CEILING_MARK, n) == 0) {
            char v[64];
            const char *a = p + n, *b = a;
            while (b < (e ? e : next) && *b != ':' && *b != ' ' && *b != '\r')
                b++;
            size_t m = (size_t)(b - a) < sizeof v - 1 ? (size_t)(b - a) : sizeof v - 1;
            memcpy(v, a, m);
            v[m] = '\0';
            bool take = !out[0];
            if (!take && gpc_parse_size(v, &s) == 0 && s.is_percent == best.is_percent)
                take = s.is_percent ? s.ppm < best.ppm : s.bytes < best.bytes;
            if (!out[0] && gpc_parse_size(v, &s) != 0) {
                snprintf(out, len, "%s", v); /* not a size: the caller refuses the file */
                return;
            }
            if (take) {
                snprintf(out, len, "%s", v);
                gpc_parse_size(v, &best);
            }
        }
        p = next;
    }
}

int gpc_agent_volume_dir(const char *root, const char *uid, const char *volume, const char *container)
{
    const char *parts[] = {uid, "volumes", "kubernetes.io~empty-dir", volume, container};
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; fd >= 0 && i < sizeof parts / sizeof parts[0]; i++) {
        int next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int saved = errno;
        close(fd);
        fd = next;
        errno = saved;
    }
    return fd >= 0 ? fd : -errno;
}

static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int gpc_agent_open_typed(int dir, const char *name, int flags, off_t max, struct stat *st, char *why, size_t whylen)
{
    struct stat ds, st2;
    int fd = -1, p = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (p < 0 || fstat(dir, &ds) != 0 || fstat(p, st) != 0) {
        rc = -errno;
        snprintf(why, whylen, "%s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || st->st_uid != ds.st_uid) {
        if (!S_ISREG(st->st_mode))
            snprintf(why, whylen, "it is %s", kind_of(st->st_mode));
        else if (st->st_nlink != 1)
            snprintf(why, whylen, "it has %lu links (a hard link to another file?)", (unsigned long)st->st_nlink);
        else
            snprintf(why, whylen, "it is owned by uid %u, not by its directory's owner %u", (unsigned)st->st_uid,
                     (unsigned)ds.st_uid);
        rc = -EPERM;
        goto out;
    }
    if (st->st_size > max) {
        snprintf(why, whylen, "it has %lld bytes, more than %lld", (long long)st->st_size, (long long)max);
        rc = -EFBIG;
        goto out;
    }
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", p);
    fd = open(self, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) /* no /proc: the name again, checked below */
        fd = openat(dir, name, flags | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(why, whylen, "%s", strerror(errno));
        goto out;
    }
    if (fstat(fd, &st2) != 0 || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino || !S_ISREG(st2.st_mode) ||
        st2.st_nlink != 1) {
        snprintf(why, whylen, "it changed while it was opened");
        rc = -EPERM;
        goto out;
    }
    *st = st2;
out:
    if (p >= 0)
        close(p);
    if (rc != 0 && fd >= 0)
        close(fd);
    return rc != 0 ? rc : fd;
}

/* Two sizes as written stand for the same budget. */
static bool same_size(const char *a, const char *b)
{
    struct gpc_size x, y;
    if (gpc_parse_size(a, &x) != 0 || gpc_parse_size(b, &y) != 0)
        return strcmp(a, b) == 0;
    return x.is_percent == y.is_percent && (x.is_percent ? x.ppm == y.ppm : x.bytes == y.bytes);
}

/* a is above b, in the same unit (sizes of different units do not compare). */
static bool above(const struct gpc_size *a, const struct gpc_size *b)
{
    return a->is_percent == b->is_percent && (a->is_percent ? a->ppm > b->ppm : a->bytes > b->bytes);
}

void gpc_agent_use(const char *root, const char *uid, const char *container, const char *value,
                   struct gpc_agent_change *c)
{
    static struct gpc_ledger *l; /* one copy, kept: only its pages read are resident */
    char why[128];
    struct stat st;
    struct gpc_size size;
    int fd = -1, dir = gpc_agent_volume_dir(root, uid, "gpucap-ledger", container);
    if (dir < 0)
        return;
    fd = gpc_agent_open_typed(dir, "gpucap.ledger", O_RDONLY, (off_t)sizeof *l, &st, why, sizeof why);
    close(dir);
    if (fd < 0 || (!l && !(l = calloc(1, sizeof *l))) || gpc_parse_size(value, &size) != 0)
        goto out;
    /* A copy, never a mapping (the tenant can shrink its file under a mapping: SIGBUS), by the
     * readers' one routine: the header and the devices, then the process entries in use only; the
     * figures are whole even when the identity block was torn. */
    enum gpc_ledger_fault f = gpc_ledger_copy_used(fd, l, NULL);
    if (f != GPC_LEDGER_USABLE && f != GPC_LEDGER_TORN)
        goto out;
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (atomic_load(&l->dev[d].state) != 1)
            continue;
        /* What the container's live processes hold: the entries held by their locks (the node asks
         * them as `gpucap status` does in the container). */
        uint64_t used = gpc_ledger_in_use_held(l, d, fd), budget = gpc_size_resolve(&size, l->dev[d].physical);
        if (used >= c->in_use) {
            c->in_use = used;
            c->budget = budget;
        }
        c->above |= used > budget;
    }
out:
    if (fd >= 0)
        close(fd);
}

static bool value_ok(const char *v)
{
    struct gpc_size s;
    if (!v || !*v || strlen(v) >= 64 || gpc_parse_size(v, &s) != 0)
        return false;
    for (const char *p = v; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == ';' || *p == '#' || *p == '[' || *p == '=')
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
    int dir = gpc_agent_volume_dir(root, pod_uid, "gpucap-lib", container);
    if (dir < 0)
        return dir;
    struct stat st;
    char why[160];
    int fd = gpc_agent_open_typed(dir, "gpucap.ini", O_RDWR, INI_MAX, &st, why, sizeof why);
    close(dir);
    if (fd < 0) {
        if (fd != -ENOENT)
            snprintf(err, errlen, "container %s: its settings file is refused: %s", container, why);
        return fd;
    }
    static char in[INI_MAX + 1], mid[INI_MAX + 256], out[INI_MAX + 512];
    int rc = 0;
    ssize_t got = pread(fd, in, INI_MAX, 0);
    if (got < 0) {
        rc = -errno;
        snprintf(err, errlen, "container %s: read its settings file: %s", container, strerror(errno));
        goto out;
    }
    in[got] = '\0';
    if (memchr(in, '\0', (size_t)got)) {
        snprintf(err, errlen, "container %s: its settings file is not text", container);
        rc = -EINVAL;
        goto out;
    }
    /* The ceiling, as the platform fixed it at creation. */
    char cur[64], cur_max[64], mark[64];
    ini_get(in, "memory_limit", cur, sizeof cur);
    ini_get(in, "memory_limit_max", cur_max, sizeof cur_max);
    ceiling_of(in, mark, sizeof mark);
    snprintf(c->ceiling, sizeof c->ceiling, "%s", mark[0] ? mark : cur_max[0] ? cur_max : cur);
    struct gpc_size ceil, v, m;
    if (!value_ok(c->ceiling) || gpc_parse_size(c->ceiling, &ceil) != 0) {
        snprintf(err, errlen, "container %s: its settings file fixes no maximum ('%s'): it is not one gpucap inject "
                 "wrote; left as it is", container, c->ceiling);
        rc = -EINVAL;
        goto out;
    }
    gpc_parse_size(value, &v);
    if (above(&v, &ceil)) {
        c->clamped = true;
        snprintf(c->asked, sizeof c->asked, "%s", value);
        value = c->ceiling;
    }
    /* The record's maximum where it is at most the ceiling (in the same unit), else the ceiling. */
    const char *new_max = c->ceiling;
    if (max && gpc_parse_size(max, &m) == 0 && m.is_percent == ceil.is_percent && !above(&m, &ceil))
        new_max = max;
    if ((rc = gpc_agent_ini_set(in, "memory_limit_max", new_max, mid, sizeof mid, c->max_from, sizeof c->max_from)))
        goto out;
    if (!c->max_from[0]) /* no maximum written: the ceiling is the most it has */
        snprintf(c->max_from, sizeof c->max_from, "%s", c->ceiling);
    snprintf(c->max_to, sizeof c->max_to, "%s", new_max);
    if ((rc = gpc_agent_ini_set(mid, "memory_limit", value, out, sizeof out, c->from, sizeof c->from)))
        goto out;
    snprintf(c->to, sizeof c->to, "%s", value);
    if (same_size(c->from, c->to) && same_size(c->max_from, c->max_to)) {
        rc = 0; /* the file says it already, however it is spelled */
        goto out;
    }
    if (!mark[0]) {
        /* First rewrite of a file of an older gpucap: its ceiling, as it was at creation, kept. */
        char line[160];
        int n = snprintf(line, sizeof line, CEILING_MARK "%s: the most gpucap-agent may set, fixed at creation\n",
                         c->ceiling);
        size_t len = strlen(out);
        if (len + (size_t)n + 1 > sizeof out) {
            rc = -ENOSPC;
            goto out;
        }
        memmove(out + n, out, len + 1);
        memcpy(out, line, (size_t)n);
    }
    /* The text, with the generation the file had; then the generation moves: complete. */
    if ((rc = gpc_agent_signal_generation(out, sizeof out, in)) != 0 || (rc = gpc_agent_write_in_place(fd, out)) != 0 ||
        (rc = gpc_agent_signal(fd, out)) != 0) {
        snprintf(err, errlen, "container %s: rewrite its settings file: %s", container, strerror(-rc));
        goto out;
    }
    rc = 1;
out:
    if (rc < 0 && !err[0])
        snprintf(err, errlen, "container %s: %s", container, strerror(-rc));
    close(fd);
    return rc;
}
