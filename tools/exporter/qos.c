/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qos.c: the node arbiter's two state files, read for gpucap-exporter (qos.h). gpucap-agent's
 * arbiter writes qos.state beside each container's platform settings file (the pod's gpucap-lib
 * emptyDir, which the container mounts read-only) and cards.state in its state directory; both are
 * text, one line per card:
 *     GPU-<uuid> request=B limit=B grant=B used=B reclaims_kill=N reclaims_evict=N reclaims_deny=N overcommitted=0|1
 *     GPU-<uuid> size=B lendable=B loaned=B requested=B
 * They are the platform's, but they lie under the kubelet's pod directory and on a host path, so
 * they are read as the ledgers are: opened without following a link, O_NONBLOCK (a FIFO in their
 * place cannot hang the scrape), read only when fstat(2) says a regular file of a bounded size, and
 * parsed strictly, bounded by the file's size and GPC_QOS_STATE_LINES, never by a count in it. What
 * they say is bounded again by the caller (each figure at most the card's size, collect.c).
 */
#include "qos.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const gpc_reclaim_names[GPC_RECLAIM__COUNT] = {"kill", "evict", "deny"};

/* The whole file into buf (NUL-terminated); its length, or a negative errno. */
static long read_small(int dir, const char *name, char *buf, size_t cap)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ELOOP ? -EINVAL : -errno;
    struct stat st;
    long rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size >= cap) {
        rc = -EINVAL;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    rc = memchr(buf, '\0', got) ? -EINVAL : (long)got;
out:
    close(fd);
    return rc;
}

/* "GPU-" and 8-4-4-4-12 hexadecimal digits; copied in lower case into out. */
static bool card_uuid(const char *s, size_t n, char out[GPC_UUID_TEXT])
{
    static const char shape[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (n != sizeof shape - 1 || n >= GPC_UUID_TEXT)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (shape[i] == 'x') {
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                return false;
            out[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
        } else if (c != shape[i]) {
            return false;
        } else {
            out[i] = c;
        }
    }
    out[n] = '\0';
    return true;
}

/* Decimal digits only, at most 2^64 - 1. */
static bool number(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* The keys of one kind of line, their offsets in its struct; `needed` bits must all be seen. */
struct key {
    const char *name;
    size_t offset;
    bool flag; /* 0 or 1 only, stored as bool */
};

static const struct key member_keys[] = {
    {"request", offsetof(struct gpc_qos_line, request), false},
    {"limit", offsetof(struct gpc_qos_line, limit), false},
    {"grant", offsetof(struct gpc_qos_line, grant), false},
    {"used", offsetof(struct gpc_qos_line, used), false},
    {"reclaims_kill", offsetof(struct gpc_qos_line, reclaims) + GPC_RECLAIM_KILL * sizeof(uint64_t), false},
    {"reclaims_evict", offsetof(struct gpc_qos_line, reclaims) + GPC_RECLAIM_EVICT * sizeof(uint64_t), false},
    {"reclaims_deny", offsetof(struct gpc_qos_line, reclaims) + GPC_RECLAIM_DENY * sizeof(uint64_t), false},
    {"overcommitted", offsetof(struct gpc_qos_line, overcommitted), true},
};
static const struct key card_keys[] = {
    {"size", offsetof(struct gpc_card_line, size), false},
    {"lendable", offsetof(struct gpc_card_line, lendable), false},
    {"loaned", offsetof(struct gpc_card_line, loaned), false},
    {"requested", offsetof(struct gpc_card_line, requested), false},
};

/*
 * Parses one line [p, e) into rec (its UUID first: the struct's first member): true when the UUID
 * is one and every key of `keys` is there once with a valid value.
 */
static bool parse_line(const char *p, const char *e, const struct key *keys, size_t nkeys, void *rec)
{
    unsigned seen = 0;
    bool first = true;
    while (p < e) {
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        const char *tok = p;
        while (p < e && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        size_t n = (size_t)(p - tok);
        if (!n)
            break;
        if (first) {
            if (!card_uuid(tok, n, rec))
                return false;
            first = false;
            continue;
        }
        const char *eq = memchr(tok, '=', n);
        if (!eq)
            return false;
        size_t klen = (size_t)(eq - tok);
        for (size_t k = 0; k < nkeys; k++) {
            if (strlen(keys[k].name) != klen || memcmp(keys[k].name, tok, klen) != 0)
                continue;
            uint64_t v;
            if ((seen & (1u << k)) || !number(eq + 1, n - klen - 1, &v) || (keys[k].flag && v > 1))
                return false;
            seen |= 1u << k;
            if (keys[k].flag)
                *(bool *)((char *)rec + keys[k].offset) = v == 1;
            else
                memcpy((char *)rec + keys[k].offset, &v, sizeof v);
        }
    }
    return !first && seen == (1u << nkeys) - 1;
}

/* Reads a state file of lines of `size` bytes each (UUID first) into lines; see qos.h. */
static int read_lines(int dir, const char *name, const struct key *keys, size_t nkeys, void *lines, size_t size,
                      unsigned max, unsigned *refused)
{
    char buf[GPC_QOS_STATE_MAX];
    long len = read_small(dir, name, buf, sizeof buf);
    if (len < 0)
        return (int)len;
    unsigned n = 0;
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            e = end;
        const char *q = p;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < e) {
            char *rec = (char *)lines + (size_t)n * size;
            bool ok = n < max;
            if (ok) {
                memset(rec, 0, size);
                ok = parse_line(q, e, keys, nkeys, rec);
            }
            for (unsigned k = 0; ok && k < n; k++) /* one line per card: a repeat is refused */
                ok = strcmp((char *)lines + (size_t)k * size, rec) != 0;
            if (ok)
                n++;
            else
                ++*refused;
        }
        p = e + 1;
    }
    return (int)n;
}

int gpc_qos_read_member(int dir, const char *name, struct gpc_qos_line *lines, unsigned max, unsigned *refused)
{
    return read_lines(dir, name, member_keys, sizeof member_keys / sizeof member_keys[0], lines, sizeof *lines, max,
                      refused);
}

int gpc_qos_read_cards(int dir, const char *name, struct gpc_card_line *lines, unsigned max, unsigned *refused)
{
    return read_lines(dir, name, card_keys, sizeof card_keys / sizeof card_keys[0], lines, sizeof *lines, max,
                      refused);
}
