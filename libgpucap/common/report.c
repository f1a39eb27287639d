/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.c: the usage report, formatted from a ledger.
 *
 * One formatter for both writers: the library at process exit (GPUCAP_REPORT, report_exit.c) and
 * `gpucap run`, which reads the run's private ledger after the command is gone, so that a run of
 * several processes has one report. Per device: budget, peak, in use, allocations, frees, denials,
 * the largest request and when the first denial came (ISO 8601, UTC). Text for people, one JSON
 * object for machines. Written with snprintf into a stack buffer and write(2): it may run in a
 * destructor of a process in any state, so no malloc and no stdio stream.
 *
 * A report file is never written through an existing name: it is made new (O_EXCL, O_NOFOLLOW)
 * under a temporary name in the same directory and renamed over the report's, so a symbolic or hard
 * link planted at that name cannot lead the write to another file. A directory that every user can
 * write is refused unless it is sticky (/tmp): there only a file's owner may rename or remove it,
 * so nobody else can swap or take the report, and a name another user holds cannot be replaced.
 */
#include "common/report.h"

#include "common/defs.h"
#include "common/drvlimit.h"
#include "common/ledger.h"
#include "common/units.h"

#include "gpucap_version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct out {
    int fd;
    int err;
    size_t n;
    char buf[4096];
};

static void flush(struct out *o)
{
    size_t off = 0;
    while (off < o->n && !o->err) {
        ssize_t w = write(o->fd, o->buf + off, o->n - off);
        if (w < 0 && errno != EINTR)
            o->err = errno;
        else if (w > 0)
            off += (size_t)w;
    }
    o->n = 0;
}

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (o->n + (size_t)n > sizeof o->buf)
        flush(o);
    memcpy(o->buf + o->n, line, (size_t)n);
    o->n += (size_t)n;
}

static void format_time(uint64_t ns, char out[40])
{
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%03uZ", (unsigned)(ns / 1000000u % 1000u));
}

struct figures {
    uint64_t limit, used, peak, allocs, frees, denials, largest, first_denial_ns, driver_limit;
};

static void read_figures(const struct gpc_ledger *l, int id, struct figures *f)
{
    const struct gpc_slot *s = &l->dev[id].slot;
    f->limit = atomic_load(&s->limit);
    f->used = gpc_ledger_in_use(l, id);
    f->peak = gpc_ledger_peak(l, id);
    if (f->used > f->peak)
        f->peak = f->used;
    f->allocs = atomic_load(&s->allocs);
    f->frees = atomic_load(&s->frees);
    f->denials = atomic_load(&s->denials);
    f->largest = atomic_load(&s->largest);
    f->first_denial_ns = atomic_load(&s->first_denial_ns);
    f->driver_limit = atomic_load(&l->dev[id].driver_limit);
}

static void text_device(struct out *o, const struct gpc_ledger_dev *d, const struct figures *f, bool audit)
{
    char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], when[40];
    gpc_uuid_format(d->uuid, uuid);
    if (f->limit == GPC_UNLIMITED)
        put(o, "device %s (%s): no budget\n", uuid, gpc_format_size(d->physical, b, sizeof b));
    else
        put(o, "device %s: budget %s of %s\n", uuid, gpc_format_size(f->limit, a, sizeof a),
            gpc_format_size(d->physical, b, sizeof b));
    if (f->driver_limit)
        put(o, "  enforced by   %s (the driver's limit %s)\n", gpc_enforced_by(f->driver_limit),
            gpc_format_size(f->driver_limit, a, sizeof a));
    else
        put(o, "  enforced by   %s\n", gpc_enforced_by(0));
    put(o, "  peak          %s (%llu bytes)%s\n", gpc_format_size(f->peak, a, sizeof a), (unsigned long long)f->peak,
        audit ? ": the budget this job needs" : "");
    put(o, "  in use at end %s (%llu bytes)\n", gpc_format_size(f->used, a, sizeof a), (unsigned long long)f->used);
    put(o, "  allocations   %llu\n", (unsigned long long)f->allocs);
    put(o, "  frees         %llu\n", (unsigned long long)f->frees);
    put(o, "  denials       %llu%s\n", (unsigned long long)f->denials,
        audit && f->denials ? " (would have been denied; admitted in audit mode)" : "");
    if (audit && f->denials)
        put(o, "  sufficient    %s (%llu bytes): a budget of the peak would have denied nothing\n",
            gpc_format_size(f->peak, a, sizeof a), (unsigned long long)f->peak);
    put(o, "  largest       %s (%llu bytes)\n", gpc_format_size(f->largest, a, sizeof a),
        (unsigned long long)f->largest);
    if (f->first_denial_ns) {
        format_time(f->first_denial_ns, when);
        put(o, "  first denial  %s\n", when);
    } else {
        put(o, "  first denial  none\n");
    }
}

/* "timeline":{"start":ISO,"points":[[seconds from start, highest, last, denials],...]} */
static void json_timeline(struct out *o, const struct gpc_timeline *tl)
{
    char when[40];
    format_time(tl->p[0].t_ns, when);
    put(o, ",\"timeline\":{\"start\":\"%s\",\"points\":[", when);
    for (int i = 0; i < tl->n; i++) {
        uint64_t dt = tl->p[i].t_ns - tl->p[0].t_ns;
        put(o, "%s[%llu.%06llu,%llu,%llu,%u]", i ? "," : "", (unsigned long long)(dt / 1000000000u),
            (unsigned long long)(dt / 1000u % 1000000u), (unsigned long long)tl->p[i].max,
            (unsigned long long)tl->p[i].last, tl->p[i].denials);
    }
    put(o, "]}");
}

static void json_device(struct out *o, const struct gpc_ledger_dev *d, const struct figures *f, bool first,
                        const struct gpc_timeline *tl)
{
    char uuid[GPC_UUID_TEXT], when[40];
    gpc_uuid_format(d->uuid, uuid);
    put(o, "%s{\"uuid\":\"%s\",\"physical\":%llu,", first ? "" : ",", uuid, (unsigned long long)d->physical);
    if (f->limit == GPC_UNLIMITED)
        put(o, "\"budget\":null,");
    else
        put(o, "\"budget\":%llu,", (unsigned long long)f->limit);
    put(o, "\"enforced_by\":\"%s\",", gpc_enforced_by(f->driver_limit));
    if (f->driver_limit)
        put(o, "\"driver_limit\":%llu,", (unsigned long long)f->driver_limit);
    else
        put(o, "\"driver_limit\":null,");
    put(o, "\"peak\":%llu,\"in_use\":%llu,\"allocations\":%llu,\"frees\":%llu,\"denials\":%llu,\"largest\":%llu,",
        (unsigned long long)f->peak, (unsigned long long)f->used, (unsigned long long)f->allocs,
        (unsigned long long)f->frees, (unsigned long long)f->denials, (unsigned long long)f->largest);
    if (f->first_denial_ns) {
        format_time(f->first_denial_ns, when);
        put(o, "\"first_denial\":\"%s\"", when);
    } else {
        put(o, "\"first_denial\":null");
    }
    if (tl && tl->n > 0)
        json_timeline(o, tl);
    put(o, "}");
}

int gpc_report_write(int fd, const struct gpc_ledger *l, bool json, bool audit)
{
    return gpc_report_write_timeline(fd, l, json, audit, NULL, 0);
}

int gpc_report_write_timeline(int fd, const struct gpc_ledger *l, bool json, bool audit,
                              const struct gpc_timeline *tl, int ntl)
{
    struct out o = {.fd = fd};
    int shown = 0;
    if (json)
        put(&o, "{\"version\":\"%s\",\"mode\":\"%s\",\"devices\":[", GPUCAP_VERSION_STRING,
            audit ? "audit" : "enforce");
    else
        put(&o, "gpucap report (version %s%s)\n", GPUCAP_VERSION_STRING, audit ? "; audit mode: nothing was denied" : "");
    for (int i = 0; l && i < GPC_LEDGER_DEVICES; i++) {
        const struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1)
            continue;
        struct figures f;
        read_figures(l, i, &f);
        const struct gpc_timeline *mine = NULL;
        for (int t = 0; t < ntl && !mine; t++)
            if (memcmp(tl[t].uuid, d->uuid, sizeof tl[t].uuid) == 0)
                mine = &tl[t];
        if (json)
            json_device(&o, d, &f, shown == 0, mine);
        else
            text_device(&o, d, &f, audit);
        shown++;
    }
    if (json)
        put(&o, "]}\n");
    else if (!shown)
        put(&o, "no device memory was allocated under a budget\n");
    flush(&o);
    return -o.err;
}

int gpc_report_file(const char *path, int (*write)(int fd, void *arg), void *arg, char *why, size_t len)
{
    char dir[512], tmp[600];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else
        snprintf(dir, sizeof dir, ".");
    int rc = 0, fd = -1, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    bool exists = false;
    if (!*base || strlen(path) >= sizeof dir) {
        rc = -EINVAL;
        snprintf(why, len, "is not a file name");
    } else if (dfd < 0 || fstat(dfd, &st) != 0) {
        rc = -errno;
        snprintf(why, len, "its directory cannot be opened (%s)", strerror(errno));
    } else if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        rc = -EPERM;
        snprintf(why, len, "its directory %s is writable by every user and not sticky: refused", dir);
    } else if ((exists = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) && S_ISLNK(st.st_mode)) {
        rc = -ELOOP;
        snprintf(why, len, "is a symbolic link: refused (a report is never written through a link)");
    } else if (exists && !S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        snprintf(why, len, "exists and is not a regular file");
    }
    for (int i = 0; rc == 0 && fd < 0 && i < 100; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(tmp, sizeof tmp, ".%s.%d.%ld.tmp", base, (int)getpid(), (long)(ts.tv_nsec + i));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            rc = -errno;
            snprintf(why, len, "cannot be created (%s)", strerror(errno));
        }
    }
    if (rc == 0 && fd < 0) {
        rc = -EEXIST;
        snprintf(why, len, "no temporary name is free beside it");
    }
    if (rc == 0) {
        /* A report that replaces one of ours keeps its permissions. */
        if (exists && st.st_uid == geteuid())
            fchmod(fd, st.st_mode & 0777);
        rc = write(fd, arg);
        if (rc != 0)
            snprintf(why, len, "cannot be written (%s)", strerror(-rc));
        else if (renameat(dfd, tmp, dfd, base) != 0) {
            rc = -errno;
            snprintf(why, len, "cannot be replaced (%s)", strerror(errno));
        }
        if (rc != 0)
            unlinkat(dfd, tmp, 0);
    }
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}
