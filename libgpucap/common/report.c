/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.c: the usage report, formatted from a ledger.
 *
 * One formatter for both writers: the library at process exit (GPUCAP_REPORT, report_exit.c) and
 * `gpucap run`, which reads the run's private ledger after the command is gone, so that a run of
 * several processes has one report. Per device: budget, peak, in use, allocations, frees, denials,
 * refusals by the driver, context reserves, the largest request and when the first denial came
 * (ISO 8601, UTC), each live change of the budget (when, from, to, by whom) and the peak of each
 * budget period between them; for `gpucap run`, also the command, how it ended and its wall time. Text for
 * people, one JSON object for machines: the two say the same things. Written with snprintf into a
 * stack buffer and write(2): it may run in a destructor of a process in any state, so no malloc and
 * no stdio stream. The peak and the allocations are what the driver carried out (core/budget.c
 * notes them after the driver call); a request the driver refused is counted apart.
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

/* Appends n bytes as they are (no line bound). */
static void put_bytes(struct out *o, const char *p, size_t n)
{
    while (n > 0) {
        if (o->n == sizeof o->buf)
            flush(o);
        size_t k = sizeof o->buf - o->n < n ? sizeof o->buf - o->n : n;
        memcpy(o->buf + o->n, p, k);
        o->n += k, p += k, n -= k;
    }
}

/* A JSON string: quotes, backslashes and control characters escaped (bytes >= 0x80 as they are). */
static void put_json_string(struct out *o, const char *s)
{
    put_bytes(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put_bytes(o, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            put(o, "\\u%04x", c);
        } else {
            put_bytes(o, (const char *)&c, 1);
        }
    }
    put_bytes(o, "\"", 1);
}

/* A word of a command line as a shell would read it back: quoted when it holds anything but
 * plain characters (control characters shown as '?'). */
static void put_shell_word(struct out *o, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("-_./=:,+@%", *p)))
            plain = false;
    if (plain) {
        put_bytes(o, s, strlen(s));
        return;
    }
    put_bytes(o, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            put_bytes(o, "'\\''", 4);
        else if ((unsigned char)*p < 0x20 || *p == 0x7f)
            put_bytes(o, "?", 1);
        else
            put_bytes(o, p, 1);
    }
    put_bytes(o, "'", 1);
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
    uint64_t limit, used, peak, allocs, frees, denials, refused, contexts, held_at_exit, largest, first_denial_ns,
        driver_limit;
    /* The live changes kept (oldest first) and how many there were; the peak of the period now. */
    struct change {
        uint64_t t_ns, from, to, peak;
        unsigned by;
    } ch[GPC_LEDGER_CHANGES];
    int nch;
    unsigned changes;
    uint64_t period_peak;
};

static void read_figures(const struct gpc_ledger *l, int ledger_fd, int id, struct figures *f)
{
    const struct gpc_ledger_dev *d = &l->dev[id];
    const struct gpc_slot *s = &d->slot;
    f->limit = atomic_load(&s->limit);
    /* Processes that exited keep their share until a library reaps them (their memory goes only
     * when they are dead): a report, read in their PID namespace, leaves the dead ones out. */
    f->used = gpc_ledger_in_use_live(l, id, ledger_fd);
    f->peak = gpc_ledger_peak(l, id); /* never below f->used */
    f->allocs = atomic_load(&s->allocs);
    f->frees = atomic_load(&s->frees);
    f->denials = atomic_load(&s->denials);
    f->refused = atomic_load(&d->refused_driver);
    f->contexts = atomic_load(&d->context_count);
    f->held_at_exit = atomic_load(&d->held_at_exit);
    f->largest = atomic_load(&s->largest);
    f->first_denial_ns = atomic_load(&s->first_denial_ns);
    /* A limit at or above the card limits nothing (the ledger is the container's file): none. */
    f->driver_limit = gpc_drv_recorded(atomic_load(&l->dev[id].driver_limit), l->dev[id].physical);
    uint16_t n = atomic_load(&d->limit_changes);
    f->changes = n;
    f->nch = n < GPC_LEDGER_CHANGES ? n : GPC_LEDGER_CHANGES;
    for (int k = 0; k < f->nch; k++) {
        const struct gpc_limit_change *c = &d->changes[(uint16_t)(n - f->nch + k) % GPC_LEDGER_CHANGES];
        f->ch[k] = (struct change){atomic_load(&c->t_ns), atomic_load(&c->from), atomic_load(&c->to),
                                   atomic_load(&c->peak), atomic_load(&c->by)};
    }
    /* The period now: its peak, never below what is in use at its end. */
    f->period_peak = atomic_load(&d->period_peak);
    if (f->period_peak < f->used)
        f->period_peak = f->used;
    if (!f->nch)
        f->period_peak = f->peak;
}

/* The live changes and the budget periods, in text: one line per change with the peak of the
 * period it ended, then the peak of the period now. */
static void text_changes(struct out *o, const struct figures *f)
{
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], when[40];
    if (!f->changes)
        return;
    put(o, "  %-17s %u%s\n", "budget changes", f->changes,
        f->changes > (unsigned)f->nch ? " (the last ones below)" : "");
    for (int k = 0; k < f->nch; k++) {
        format_time(f->ch[k].t_ns, when);
        put(o, "    %s  %s -> %s (%s), peak before: %s\n", when, gpc_format_size(f->ch[k].from, a, sizeof a),
            gpc_format_size(f->ch[k].to, b, sizeof b), gpc_limit_by_name(f->ch[k].by),
            gpc_format_size(f->ch[k].peak, c, sizeof c));
    }
    put(o, "  %-17s %s (budget %s)\n", "peak since", gpc_format_size(f->period_peak, a, sizeof a),
        gpc_format_size(f->limit, b, sizeof b));
}

/* "budget_changes":[{at, from, to, by, peak_before}...],"budget_periods":[{from, budget, peak}...]:
 * a period runs from a change (null: the first one kept, from the start) to the next. */
static void json_changes(struct out *o, const struct figures *f)
{
    char when[40];
    put(o, "\"budget_changes\":[");
    for (int k = 0; k < f->nch; k++) {
        format_time(f->ch[k].t_ns, when);
        put(o, "%s{\"at\":\"%s\",\"from\":%llu,\"to\":%llu,\"by\":\"%s\",\"peak_before\":%llu}", k ? "," : "", when,
            (unsigned long long)f->ch[k].from, (unsigned long long)f->ch[k].to, gpc_limit_by_name(f->ch[k].by),
            (unsigned long long)f->ch[k].peak);
    }
    put(o, "],\"budget_periods\":[");
    for (int k = 0; k <= f->nch; k++) {
        uint64_t budget = k < f->nch ? f->ch[k].from : f->limit, peak = k < f->nch ? f->ch[k].peak : f->period_peak;
        if (k) {
            format_time(f->ch[k - 1].t_ns, when);
            put(o, ",{\"from\":\"%s\",", when);
        } else {
            put(o, "{\"from\":null,");
        }
        if (budget == GPC_UNLIMITED)
            put(o, "\"budget\":null,\"peak\":%llu}", (unsigned long long)peak);
        else
            put(o, "\"budget\":%llu,\"peak\":%llu}", (unsigned long long)budget, (unsigned long long)peak);
    }
    put(o, "],\"budget_changes_total\":%u,", f->changes);
}

/* The run's device `uuid` as the caller named it (index, name), or NULL. */
static const struct gpc_report_device *run_device(const struct gpc_report_run *run, const uint8_t uuid[16])
{
    for (int i = 0; run && i < run->ndev; i++)
        if (memcmp(run->dev[i].uuid, uuid, 16) == 0)
            return &run->dev[i];
    return NULL;
}

static void text_size(struct out *o, const char *label, uint64_t v, const char *note)
{
    char a[GPC_SIZE_TEXT];
    put(o, "  %-17s %s (%llu bytes)%s\n", label, gpc_format_size(v, a, sizeof a), (unsigned long long)v, note);
}

/* text_size for a figure that must suffice: rounded up. */
static void text_size_up(struct out *o, const char *label, uint64_t v, const char *note)
{
    char a[GPC_SIZE_TEXT];
    put(o, "  %-17s %s (%llu bytes)%s\n", label, gpc_format_size_up(v, a, sizeof a), (unsigned long long)v, note);
}

/* Who enforced the device's budget in the run: nobody in audit mode (gpucap denies nothing) or
 * without a budget; else gpucap, and the driver too where its limit was in force. */
static const char *enforcer(const struct figures *f, bool audit)
{
    if (audit || f->limit == GPC_UNLIMITED)
        return f->driver_limit ? "driver" : "none";
    return gpc_enforced_by(f->driver_limit);
}

/* Burstable memory (issue 35): the request, limit and grant, the loans and the arbiter's changes. */
static void text_qos(struct out *o, const struct gpc_ledger_dev *d)
{
    struct gpc_ledger_qos q;
    gpc_ledger_qos_of(d, &q);
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], e[GPC_SIZE_TEXT];
    if (q.burstable)
        put(o, "  %-17s request %s, limit %s, grant %s (loaned %s)\n", "burstable", gpc_format_size(q.request, a, sizeof a),
            gpc_format_size(q.limit, b, sizeof b), gpc_format_size(q.grant, c, sizeof c),
            gpc_format_size(q.loaned, e, sizeof e));
    if (q.burstable || q.loan_asks || q.arbiter_changes)
        put(o, "  %-17s %u asked of the arbiter, peak loaned %s, %u grant change%s by the arbiter (%u taken back)\n",
            "loans", q.loan_asks, gpc_format_size(q.loaned_peak, a, sizeof a), q.arbiter_changes,
            q.arbiter_changes == 1 ? "" : "s", q.arbiter_lowerings);
}

/* "qos":{...} of a burstable device (or one that asked the arbiter), else "qos":null. */
static void json_qos(struct out *o, const struct gpc_ledger_dev *d)
{
    struct gpc_ledger_qos q;
    gpc_ledger_qos_of(d, &q);
    if (!q.burstable && !q.loan_asks && !q.arbiter_changes) {
        put(o, "\"qos\":null,");
        return;
    }
    put(o, "\"qos\":{\"burstable\":%s,", q.burstable ? "true" : "false");
    if (q.burstable)
        put(o, "\"request\":%llu,\"limit\":%llu,\"grant\":%llu,\"loaned\":%llu,", (unsigned long long)q.request,
            (unsigned long long)q.limit, (unsigned long long)q.grant, (unsigned long long)q.loaned);
    put(o, "\"loaned_peak\":%llu,\"loan_asks\":%u,\"arbiter_changes\":%u,\"arbiter_lowerings\":%u},",
        (unsigned long long)q.loaned_peak, q.loan_asks, q.arbiter_changes, q.arbiter_lowerings);
}

static void text_device(struct out *o, const struct gpc_ledger_dev *d, const struct figures *f, bool audit,
                        const struct gpc_report_device *named)
{
    char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], when[40], who[160] = "";
    gpc_uuid_format(d->uuid, uuid);
    if (named && named->index >= 0)
        snprintf(who, sizeof who, " (GPU %d%s%s)", named->index, named->name[0] ? ", " : "", named->name);
    if (f->limit == GPC_UNLIMITED)
        put(o, "device %s%s: no budget, card %s\n", uuid, who, gpc_format_size(d->physical, b, sizeof b));
    else
        put(o, "device %s%s: budget %s of %s\n", uuid, who, gpc_format_size(f->limit, a, sizeof a),
            gpc_format_size(d->physical, b, sizeof b));
    const char *why = audit ? " (audit mode: gpucap denied nothing)" : f->limit == GPC_UNLIMITED ? " (no budget)" : "";
    if (f->driver_limit) {
        char lim[GPC_SIZE_TEXT];
        put(o, "  %-17s %s (the driver's limit %s)%s\n", "enforced by", enforcer(f, audit),
            gpc_format_size(f->driver_limit, lim, sizeof lim), why);
    } else {
        put(o, "  %-17s %s%s\n", "enforced by", enforcer(f, audit), why);
    }
    text_size(o, "peak", f->peak, audit ? ": the budget this job needs" : "");
    text_size(o, "in use at end", f->used, "");
    text_size(o, "held at exit", f->held_at_exit, f->held_at_exit ? ": still allocated when its process exited" : "");
    put(o, "  %-17s %llu\n", "allocations", (unsigned long long)f->allocs);
    put(o, "  %-17s %llu\n", "frees", (unsigned long long)f->frees);
    put(o, "  %-17s %llu%s\n", "denials", (unsigned long long)f->denials,
        audit && f->denials ? " (would have been denied; admitted in audit mode)" : "");
    put(o, "  %-17s %llu%s\n", "driver refusals", (unsigned long long)f->refused,
        f->refused ? " (the driver had no memory for them; not in the peak)" : "");
    put(o, "  %-17s %llu\n", "context reserves", (unsigned long long)f->contexts);
    if (audit && f->denials)
        text_size_up(o, "sufficient", f->peak, ": a budget of the peak would have denied nothing");
    text_size(o, "largest request", f->largest, "");
    if (f->first_denial_ns) {
        format_time(f->first_denial_ns, when);
        put(o, "  %-17s %s\n", "first denial", when);
    } else {
        put(o, "  %-17s none\n", "first denial");
    }
    text_changes(o, f);
    text_qos(o, d);
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
                        bool audit, const struct gpc_timeline *tl, const struct gpc_report_device *named)
{
    char uuid[GPC_UUID_TEXT], when[40];
    gpc_uuid_format(d->uuid, uuid);
    put(o, "%s{\"uuid\":\"%s\",", first ? "" : ",", uuid);
    if (named && named->index >= 0) {
        put(o, "\"index\":%d,\"name\":", named->index);
        put_json_string(o, named->name);
        put(o, ",");
    }
    put(o, "\"physical\":%llu,", (unsigned long long)d->physical);
    if (f->limit == GPC_UNLIMITED)
        put(o, "\"budget\":null,");
    else
        put(o, "\"budget\":%llu,", (unsigned long long)f->limit);
    put(o, "\"enforced_by\":\"%s\",", enforcer(f, audit));
    if (f->driver_limit)
        put(o, "\"driver_limit\":%llu,", (unsigned long long)f->driver_limit);
    else
        put(o, "\"driver_limit\":null,");
    put(o, "\"peak\":%llu,\"in_use\":%llu,\"held_at_exit\":%llu,\"allocations\":%llu,\"frees\":%llu,"
        "\"denials\":%llu,\"driver_refusals\":%llu,\"context_reserves\":%llu,",
        (unsigned long long)f->peak, (unsigned long long)f->used, (unsigned long long)f->held_at_exit,
        (unsigned long long)f->allocs, (unsigned long long)f->frees, (unsigned long long)f->denials,
        (unsigned long long)f->refused, (unsigned long long)f->contexts);
    if (audit && f->denials)
        put(o, "\"sufficient\":%llu,", (unsigned long long)f->peak);
    else
        put(o, "\"sufficient\":null,");
    put(o, "\"largest\":%llu,", (unsigned long long)f->largest);
    json_qos(o, d);
    json_changes(o, f);
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

/* The run: its command, how it ended, how long it took (what `gpucap run` knows). */
static void text_run(struct out *o, const struct gpc_report_run *run)
{
    put(o, "%-19s ", "command");
    for (int i = 0; i < run->argc; i++) {
        if (i)
            put_bytes(o, " ", 1);
        put_shell_word(o, run->argv[i]);
    }
    put_bytes(o, "\n", 1);
    if (run->signal)
        put(o, "%-19s killed by signal %d (%s)\n", "exit", run->signal, run->signal_name ? run->signal_name : "?");
    else
        put(o, "%-19s status %d\n", "exit", run->status);
    put(o, "%-19s %llu.%03llu s\n", "wall time", (unsigned long long)(run->wall_ns / 1000000000u),
        (unsigned long long)(run->wall_ns / 1000000u % 1000u));
}

static void json_run(struct out *o, const struct gpc_report_run *run)
{
    put(o, "\"command\":[");
    for (int i = 0; i < run->argc; i++) {
        if (i)
            put_bytes(o, ",", 1);
        put_json_string(o, run->argv[i]);
    }
    if (run->signal) {
        put(o, "],\"exit\":{\"status\":null,\"signal\":%d,\"signal_name\":", run->signal);
        put_json_string(o, run->signal_name ? run->signal_name : "");
        put(o, "},");
    } else {
        put(o, "],\"exit\":{\"status\":%d,\"signal\":null,\"signal_name\":null},", run->status);
    }
    put(o, "\"wall_seconds\":%llu.%06llu,", (unsigned long long)(run->wall_ns / 1000000000u),
        (unsigned long long)(run->wall_ns / 1000u % 1000000u));
}

int gpc_report_write_timeline(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit,
                              const struct gpc_timeline *tl, int ntl)
{
    return gpc_report_write_run(fd, l, ledger_fd, json, audit, tl, ntl, NULL);
}

int gpc_report_write_run(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit, const struct gpc_timeline *tl,
                         int ntl, const struct gpc_report_run *run)
{
    struct out o = {.fd = fd};
    int shown = 0;
    if (json) {
        put(&o, "{\"version\":\"%s\",\"mode\":\"%s\",", GPUCAP_VERSION_STRING, audit ? "audit" : "enforce");
        if (run)
            json_run(&o, run);
        put(&o, "\"devices\":[");
    } else {
        put(&o, "gpucap report (gpucap %s)\n", GPUCAP_VERSION_STRING);
        if (run)
            text_run(&o, run);
        put(&o, "%-19s %s\n", "mode", audit ? "audit (nothing was denied: the peak is what the job needs)" : "enforce");
    }
    for (int i = 0; l && i < GPC_LEDGER_DEVICES; i++) {
        const struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1)
            continue;
        struct figures f;
        read_figures(l, ledger_fd, i, &f);
        const struct gpc_timeline *mine = NULL;
        for (int t = 0; t < ntl && !mine; t++)
            if (memcmp(tl[t].uuid, d->uuid, sizeof tl[t].uuid) == 0)
                mine = &tl[t];
        if (json)
            json_device(&o, d, &f, shown == 0, audit, mine, run_device(run, d->uuid));
        else
            text_device(&o, d, &f, audit, run_device(run, d->uuid));
        shown++;
    }
    if (json)
        put(&o, "]}\n");
    else if (!shown)
        put(&o, "no device memory was allocated under a budget\n");
    flush(&o);
    return -o.err;
}

/*
 * The checks of gpc_report_file before anything is written: `path` splits into its directory (opened
 * in *dfd, -1 on failure) and *base; *st and *exists say what is at the name now. 0, or -errno with
 * the reason in why.
 */
static int report_target(const char *path, char *dir, size_t dir_len, const char **base, int *dfd, struct stat *st,
                         bool *exists, char *why, size_t len)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, dir_len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else
        snprintf(dir, dir_len, ".");
    *dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *exists = false;
    if (!**base || strlen(path) >= dir_len) {
        snprintf(why, len, "is not a file name");
        return -EINVAL;
    }
    if (*dfd < 0 || fstat(*dfd, st) != 0) {
        int err = errno;
        snprintf(why, len, "its directory cannot be opened (%s)", strerror(err));
        return -err;
    }
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
        snprintf(why, len, "its directory %s is writable by every user and not sticky: refused", dir);
        return -EPERM;
    }
    if ((*exists = fstatat(*dfd, *base, st, AT_SYMLINK_NOFOLLOW) == 0) && S_ISLNK(st->st_mode)) {
        snprintf(why, len, "is a symbolic link: refused (a report is never written through a link)");
        return -ELOOP;
    }
    if (*exists && !S_ISREG(st->st_mode)) {
        snprintf(why, len, "exists and is not a regular file");
        return -EINVAL;
    }
    return 0;
}

int gpc_report_file_check(const char *path, char *why, size_t len)
{
    char dir[512];
    const char *base;
    int dfd;
    struct stat st;
    bool exists;
    int rc = report_target(path, dir, sizeof dir, &base, &dfd, &st, &exists, why, len);
    if (rc == 0 && faccessat(dfd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        rc = -errno;
        snprintf(why, len, "cannot be created in %s (%s)", dir, strerror(errno));
    }
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int gpc_report_file(const char *path, int (*write)(int fd, void *arg), void *arg, char *why, size_t len)
{
    char dir[512], tmp[600];
    const char *base;
    int fd = -1, dfd;
    struct stat st;
    bool exists;
    int rc = report_target(path, dir, sizeof dir, &base, &dfd, &st, &exists, why, len);
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
