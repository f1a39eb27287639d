/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter_file.c: the files the arbiter writes.
 *
 * The grant goes into the member's platform settings file exactly as gpucap-agent writes a live
 * budget there (apply.c): opened only as a regular file of one link owned by its directory's owner,
 * no link followed, nothing blocking; rewritten in place (a subPath mount binds the inode), never
 * shorter; the text first with the generation it had, then the generation line alone with N + 1,
 * so that the library applies the new budget in force once the rewrite is complete (a raise at
 * once, a lowering exact: charge/live.c). `memory_grant = <bytes>` in [gpucap] for a member on one
 * card, else in the card's [device.GPU-...] section.
 *
 * Beside that file, qos.state (one line per card the member uses) and, in --state-dir, cards.state
 * (one line per card): the exporter's view of the arbiter, which no tenant can write. Each is a new
 * file renamed over the old one, written only when its text changed.
 */
#include "arbiter.h"

#include "apply.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INI_MAX 16384

/* The section name of a header line "[name]" (blanks around ignored), or false. */
static bool header(const char *p, const char *e, char *out, size_t len)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= e || *p != '[')
        return false;
    const char *close = memchr(p, ']', (size_t)(e - p));
    if (!close)
        return false;
    size_t n = (size_t)(close - p - 1);
    if (n >= len)
        n = len - 1;
    memcpy(out, p + 1, n);
    out[n] = '\0';
    return true;
}

/* The key of a setting line "key = value" into out (false for comments, blanks, headers). */
static bool line_key(const char *p, const char *e, char *out, size_t len, const char **value)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= e || *p == ';' || *p == '#' || *p == '[')
        return false;
    const char *eq = memchr(p, '=', (size_t)(e - p));
    if (!eq)
        return false;
    const char *k = eq;
    while (k > p && (k[-1] == ' ' || k[-1] == '\t'))
        k--;
    size_t n = (size_t)(k - p) < len - 1 ? (size_t)(k - p) : len - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    if (value)
        *value = eq + 1;
    return true;
}

bool gpc_arb_ini_get(const char *in, const char *section, const char *key, char *out, size_t len)
{
    char sec[128] = "", k[128];
    bool found = false;
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        if (!e)
            e = next;
        const char *v;
        if (header(p, e, sec, sizeof sec)) {
            /* the section changed */
        } else if (strcasecmp(sec, section) == 0 && line_key(p, e, k, sizeof k, &v) && strcmp(k, key) == 0) {
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = e;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
                ve--;
            size_t n = (size_t)(ve - v) < len - 1 ? (size_t)(ve - v) : len - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            found = true;
        }
        p = next;
    }
    return found;
}

int gpc_arb_ini_set(const char *in, const char *section, const char *key, const char *value, char *out, size_t outlen)
{
    size_t n = 0;
    char sec[128] = "", k[128], setting[256];
    bool in_target = false, done = false;
    int sl = snprintf(setting, sizeof setting, "%s = %s\n", key, value);
#define PUT(s, l)                          \
    do {                                   \
        if (n + (l) + 1 > outlen)          \
            return -ENOSPC;                \
        memcpy(out + n, (s), (l));         \
        n += (l);                          \
    } while (0)
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        if (!e)
            e = next;
        if (gpc_agent_padding_line(p, e)) {
            p = next;
            continue;
        }
        if (header(p, e, sec, sizeof sec)) {
            if (in_target && !done) {
                PUT(setting, (size_t)sl); /* the key goes at the end of its section */
                done = true;
            }
            in_target = strcasecmp(sec, section) == 0;
        } else if (in_target && line_key(p, e, k, sizeof k, NULL) && strcmp(k, key) == 0) {
            if (!done)
                PUT(setting, (size_t)sl);
            done = true; /* a second copy of the key is dropped: one value */
            p = next;
            continue;
        }
        PUT(p, (size_t)(next - p));
        if (next == e && *next == '\0' && e > p && e[-1] != '\n')
            PUT("\n", 1);
        p = next;
    }
    if (!done) {
        if (!in_target) {
            char h[160];
            int hl = snprintf(h, sizeof h, "[%s]\n", section);
            PUT(h, (size_t)hl);
        }
        PUT(setting, (size_t)sl);
    }
    out[n] = '\0';
#undef PUT
    return 0;
}

/* The directory of the member's settings file, no component under the kubelet's directory followed
 * as a link (a run's directory: the last one). An fd or -errno. */
static int settings_dir(const struct gpc_arbiter *a, const struct gpc_arb_member *m)
{
    if (m->pod_uid[0])
        return gpc_agent_volume_dir(a->cfg.base, m->pod_uid, "gpucap-lib", m->container);
    int fd = open(m->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

int gpc_arb_write_setting(const struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *section,
                          const char *key, const char *value, char *why, size_t whylen)
{
    static char in[INI_MAX + 1], out[INI_MAX + 512];
    char reason[160], old[64];
    struct stat st;
    int rc = 0, fd = -1, dir = settings_dir(a, m);
    if (dir < 0) {
        snprintf(why, whylen, "its directory: %s", strerror(-dir));
        return dir;
    }
    fd = gpc_agent_open_typed(dir, "gpucap.ini", O_RDWR, INI_MAX, &st, reason, sizeof reason);
    close(dir);
    if (fd < 0) {
        snprintf(why, whylen, "its settings file is refused: %s", reason);
        return fd;
    }
    ssize_t got = pread(fd, in, INI_MAX, 0);
    if (got < 0 || memchr(in, '\0', (size_t)got)) {
        rc = got < 0 ? -errno : -EINVAL;
        snprintf(why, whylen, "its settings file cannot be read as text");
        goto out;
    }
    in[got] = '\0';
    if (gpc_arb_ini_get(in, section, key, old, sizeof old) && strcmp(old, value) == 0)
        goto out; /* the file says it already */
    if ((rc = gpc_arb_ini_set(in, section, key, value, out, sizeof out)) != 0 ||
        (rc = gpc_agent_signal_generation(out, sizeof out, in)) != 0 || (rc = gpc_agent_write_in_place(fd, out)) != 0 ||
        (rc = gpc_agent_signal(fd, out)) != 0)
        snprintf(why, whylen, "rewrite its settings file: %s", strerror(-rc));
out:
    close(fd);
    return rc;
}

int gpc_arb_write_grant(const struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *uuid, bool only_card,
                        uint64_t bytes, char *why, size_t whylen)
{
    char section[96], value[32];
    if (only_card)
        snprintf(section, sizeof section, "gpucap");
    else
        snprintf(section, sizeof section, "device.%s", uuid);
    snprintf(value, sizeof value, "%llu", (unsigned long long)bytes);
    return gpc_arb_write_setting(a, m, section, "memory_grant", value, why, whylen);
}

/* Writes `text` as file `name` of directory fd `dir` (a new file renamed over the old), then closes dir. */
static int replace_file(int dir, const char *name, const char *text)
{
    if (dir < 0)
        return dir;
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".%s.%d", name, (int)getpid());
    unlinkat(dir, tmp, 0);
    int rc = 0, fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n || fchmod(fd, 0644) != 0)
        rc = -EIO;
    close(fd);
    if (rc == 0 && renameat(dir, tmp, dir, name) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(dir, tmp, 0);
out:
    close(dir);
    return rc;
}

void gpc_arb_write_member_state(struct gpc_arbiter *a, struct gpc_arb_member *m)
{
    char text[sizeof m->state_text];
    size_t n = 0;
    text[0] = '\0';
    for (int c = 0; c < a->ncards && n < sizeof text; c++) {
        const struct gpc_arb_use *u = &m->u[c];
        if (!u->on)
            continue;
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "%s request=%llu limit=%llu grant=%llu used=%llu reclaims_kill=%lu reclaims_evict=%lu "
                              "reclaims_deny=%lu overcommitted=%d\n",
                              a->card[c].uuid, (unsigned long long)(u->burstable ? u->request : u->limit),
                              (unsigned long long)u->limit, (unsigned long long)(u->burstable ? u->grant : 0),
                              (unsigned long long)u->used, u->kills, u->evicts, u->denies, u->overcommitted ? 1 : 0);
    }
    if (strcmp(text, m->state_text) == 0)
        return;
    if (replace_file(settings_dir(a, m), GPC_ARB_QOS_STATE, text) == 0)
        snprintf(m->state_text, sizeof m->state_text, "%s", text);
}

void gpc_arb_write_cards_state(struct gpc_arbiter *a)
{
    char text[sizeof a->cards_text];
    size_t n = 0;
    text[0] = '\0';
    for (int c = 0; c < a->ncards && n < sizeof text; c++) {
        const struct gpc_arb_card *k = &a->card[c];
        n += (size_t)snprintf(text + n, sizeof text - n, "%s size=%llu lendable=%llu loaned=%llu requested=%llu\n",
                              k->uuid, (unsigned long long)k->size, (unsigned long long)k->lendable,
                              (unsigned long long)k->loaned, (unsigned long long)k->requested);
    }
    if (strcmp(text, a->cards_text) == 0)
        return;
    mkdir(a->cfg.state_dir, 0755);
    int dir = open(a->cfg.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = replace_file(dir >= 0 ? dir : -errno, GPC_ARB_CARDS_STATE, text);
    if (rc == 0)
        snprintf(a->cards_text, sizeof a->cards_text, "%s", text);
    else if (!a->cards_text[0])
        fprintf(stderr, "gpucap-agent: arbiter: %s/%s cannot be written: %s\n", a->cfg.state_dir, GPC_ARB_CARDS_STATE,
                strerror(-rc));
}
