/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_read.c: the read side of the shared ledger, what the library and every tool (`gpucap
 * status`, the exporter, the agent) share about a file that any process on it can write: its path
 * by the settings, whether a copy or a mapping is a usable ledger (a kind of fault and a line of
 * text), the one way to copy one (pread, never a mapping a tenant can shrink; the identity block
 * whole by its seqlock), what is in use on a device, and whether the process of an entry is alive.
 */
#include "common/ledger.h"

#include "common/options.h"
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gpc_ledger_path(const struct gpc_settings *s, char *buf, size_t len)
{
    const char *named = gpc_opt_string(s, GPC_OPT_LEDGER);
    if (named && named[0])
        snprintf(buf, len, "%s", named);
    else
        snprintf(buf, len, "/tmp/gpucap-%u.ledger", (unsigned)geteuid());
    return strcmp(buf, "off") == 0 ? -ENOENT : 0;
}

/* Sets *why (optional) to `fault` and its text; returns the fault. */
__attribute__((format(printf, 3, 4))) static enum gpc_ledger_fault fault(struct gpc_ledger_problem *why,
                                                                        enum gpc_ledger_fault f, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
        why->fault = f;
    }
    return f;
}

enum gpc_ledger_fault gpc_ledger_check(const struct gpc_ledger *l, uint64_t file_size, struct gpc_ledger_problem *why)
{
    if (file_size < sizeof(uint64_t) * 2)
        return fault(why, GPC_LEDGER_TRUNCATED, "truncated (shorter than its header)");
    if (l->magic != GPC_LEDGER_MAGIC)
        return fault(why, GPC_LEDGER_NOT_LEDGER, "not a gpucap ledger (wrong magic number)");
    if (l->version != GPC_LEDGER_VERSION)
        return fault(why, GPC_LEDGER_OTHER_VERSION, "layout version %u, this gpucap reads version %u", l->version,
                     GPC_LEDGER_VERSION);
    if (file_size < sizeof *l)
        return fault(why, GPC_LEDGER_TRUNCATED, "truncated (%llu bytes, a ledger has %zu)",
                     (unsigned long long)file_size, sizeof *l);
    if (l->size != sizeof *l || l->ndevices != GPC_LEDGER_DEVICES || l->nprocs != GPC_LEDGER_PROCS)
        return fault(why, GPC_LEDGER_CORRUPT, "corrupted header (sizes do not match this layout)");
    /* used may pass limit legitimately (audit mode, a limit lowered by a later process). */
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++)
        if (atomic_load(&l->dev[i].state) > 1)
            return fault(why, GPC_LEDGER_CORRUPT, "corrupted device entry %d", i);
    return fault(why, GPC_LEDGER_USABLE, "usable");
}

/* The identity's seqlock word as the file holds it now, read alone (a pread of 4 bytes). */
static int read_seq(int fd, uint32_t *seq)
{
    return pread(fd, seq, sizeof *seq, offsetof(struct gpc_ledger, identity.seq)) == sizeof *seq ? 0 : -EIO;
}

/* Reads len bytes at off into dst: what it got (short when the file ends first), or -1. */
static ssize_t read_at(int fd, void *dst, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)dst + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* What a ledger holds before its process entries: the header, the identity, the device entries. */
#define LEDGER_HEAD offsetof(struct gpc_ledger, proc)

/*
 * The readers' one copy: the head first (checked, with the file's size), then either the rest of
 * the file (`whole`) or the process entries below the head's procs_used (clamped to the table),
 * the only ones that may hold a share. Whatever the file lacks reads as zero.
 */
static enum gpc_ledger_fault copy(int fd, struct gpc_ledger *c, struct gpc_ledger_problem *why, bool whole)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fault(why, GPC_LEDGER_UNREADABLE, "cannot be read (%s)", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fault(why, GPC_LEDGER_NOT_REGULAR, "is not a regular file");
    if ((uint64_t)st.st_size > sizeof *c)
        return fault(why, GPC_LEDGER_TOO_LARGE, "is larger than a ledger (%llu bytes): not one",
                     (unsigned long long)st.st_size);
    char *dst = (char *)c;
    for (int attempt = 0; attempt < GPC_LEDGER_COPY_TRIES; attempt++) {
        uint32_t before = 1, after = 1;
        bool have_seq = read_seq(fd, &before) == 0;
        ssize_t got = read_at(fd, dst, LEDGER_HEAD, 0);
        if (got < 0)
            return fault(why, GPC_LEDGER_UNREADABLE, "cannot be read (%s)", strerror(errno));
        memset(dst + got, 0, LEDGER_HEAD - (size_t)got);
        /* A file truncated while it is read reads short: the check says "truncated". */
        uint64_t size = (size_t)got < LEDGER_HEAD ? (uint64_t)got : (uint64_t)st.st_size;
        enum gpc_ledger_fault f = gpc_ledger_check(c, size, why);
        if (f != GPC_LEDGER_USABLE)
            return f;
        size_t rest = sizeof *c - LEDGER_HEAD;
        if (!whole) {
            uint32_t used = atomic_load(&c->procs_used);
            if (used > GPC_LEDGER_PROCS)
                used = GPC_LEDGER_PROCS;
            atomic_store(&c->procs_used, used);
            rest = used * sizeof c->proc[0];
        }
        got = read_at(fd, dst + LEDGER_HEAD, rest, (off_t)LEDGER_HEAD);
        if (got < 0)
            return fault(why, GPC_LEDGER_UNREADABLE, "cannot be read (%s)", strerror(errno));
        if ((size_t)got < rest) {
            memset(dst + LEDGER_HEAD + got, 0, rest - (size_t)got);
            if ((f = gpc_ledger_check(c, LEDGER_HEAD + (uint64_t)got, why)) != GPC_LEDGER_USABLE)
                return f;
        }
        /* A whole copy: its identity is whole when no write began or ended during it. */
        if (have_seq && read_seq(fd, &after) == 0 && before == after && !(before & 1) &&
            atomic_load(&c->identity.seq) == before)
            return GPC_LEDGER_USABLE;
    }
    return fault(why, GPC_LEDGER_TORN, "its identity block was being written during each of %d copies",
                 GPC_LEDGER_COPY_TRIES);
}

enum gpc_ledger_fault gpc_ledger_copy(int fd, struct gpc_ledger *c, struct gpc_ledger_problem *why)
{
    return copy(fd, c, why, true);
}

enum gpc_ledger_fault gpc_ledger_copy_used(int fd, struct gpc_ledger *c, struct gpc_ledger_problem *why)
{
    return copy(fd, c, why, false);
}

uint64_t gpc_ledger_share_in_use(const struct gpc_ledger_share *s)
{
    uint64_t lease = 0, spare = 0;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t w = atomic_load_explicit(&s->spare, memory_order_acquire);
        lease = atomic_load_explicit(&s->lease, memory_order_acquire);
        uint64_t again = atomic_load_explicit(&s->spare, memory_order_acquire);
        spare = again & GPC_SPARE_MASK;
        /* The generation moved or is odd: a lock holder is changing both; read again. */
        if (!((w ^ again) >> GPC_SPARE_BITS) && !((again >> GPC_SPARE_BITS) & 1))
            break;
    }
    return lease > spare ? lease - spare : 0;
}

static uint32_t procs_used(const struct gpc_ledger *l)
{
    uint32_t n = atomic_load_explicit(&l->procs_used, memory_order_acquire);
    return n < GPC_LEDGER_PROCS ? n : GPC_LEDGER_PROCS;
}

uint64_t gpc_ledger_in_use(const struct gpc_ledger *l, int dev)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, n = procs_used(l); i < n; i++)
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0)
            sum += gpc_ledger_share_in_use(&l->proc[i].share[dev]);
    return sum;
}

uint64_t gpc_ledger_in_use_live(const struct gpc_ledger *l, int dev, int fd)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, n = procs_used(l); i < n; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
        uint64_t in_use = pid ? gpc_ledger_share_in_use(&p->share[dev]) : 0;
        if (in_use && gpc_ledger_entry_live(l, (int)i, fd))
            sum += in_use;
    }
    return sum;
}

const char *gpc_limit_by_name(unsigned by)
{
    switch (by & GPC_LIMIT_BY_MASK) {
    case GPC_LIMIT_BY_PLATFORM: return "platform";
    case GPC_LIMIT_BY_CLI: return "set-memory";
    case GPC_LIMIT_BY_SETTINGS: return "settings";
    case GPC_LIMIT_BY_ARBITER: return "arbiter";
    }
    return "unknown";
}

void gpc_ledger_qos_of(const struct gpc_ledger_dev *d, struct gpc_ledger_qos *q)
{
    memset(q, 0, sizeof *q);
    q->burstable = atomic_load(&d->qos_flags) & GPC_QOS_BURSTABLE;
    q->loan_asks = atomic_load(&d->loan_asks);
    uint16_t n = atomic_load(&d->limit_changes);
    int kept = n < GPC_LEDGER_CHANGES ? n : GPC_LEDGER_CHANGES;
    for (int k = 1; k <= kept; k++) {
        const struct gpc_limit_change *c = &d->changes[(uint16_t)(n - k) % GPC_LEDGER_CHANGES];
        if ((atomic_load(&c->by) & GPC_LIMIT_BY_MASK) == GPC_LIMIT_BY_ARBITER) {
            q->arbiter_changes++;
            q->arbiter_lowerings += atomic_load(&c->to) < atomic_load(&c->from);
        }
    }
    if (!q->burstable)
        return;
    q->request = atomic_load(&d->qos_request);
    q->limit = atomic_load(&d->qos_limit);
    q->grant = atomic_load(&d->qos_grant);
    /* The file is the tenant's: figures are bounded as the library bounds them. */
    if (q->grant > q->limit)
        q->grant = q->limit;
    if (q->request > q->limit)
        q->request = 0;
    q->loaned = q->grant > q->request ? q->grant - q->request : 0;
    q->loaned_peak = atomic_load(&d->loaned_peak);
}

uint64_t gpc_ledger_pending_limit(const struct gpc_ledger_dev *d)
{
    if (atomic_load(&d->ask_seq) == atomic_load(&d->ask_done))
        return 0;
    uint64_t asked = atomic_load(&d->limit_asked), drv = atomic_load(&d->driver_limit);
    if (drv >= d->physical && d->physical)
        drv = 0; /* a "limit" at or above the card limits nothing */
    uint64_t base = drv ? drv : d->physical, want = asked;
    if (asked & GPC_ASK_PERCENT) {
        uint64_t ppm = asked & ~GPC_ASK_PERCENT;
        want = ppm > 1000000 ? 0 : (uint64_t)((unsigned __int128)base * ppm / 1000000);
    }
    return drv && want > drv ? drv : want;
}

uint64_t gpc_ledger_peak(const struct gpc_ledger *l, int dev)
{
    uint64_t peak = atomic_load_explicit(&l->dev[dev].slot.peak, memory_order_relaxed);
    for (uint32_t i = 0, n = procs_used(l); i < n; i++) {
        uint64_t theirs = atomic_load_explicit(&l->proc[i].share[dev].peak, memory_order_relaxed);
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0 && theirs > peak)
            peak = theirs;
    }
    /* Processes each below their own peak can be above it together: never below what is in use. */
    uint64_t in_use = gpc_ledger_in_use(l, dev);
    return in_use > peak ? in_use : peak;
}

int gpc_ledger_lock_held(int fd, int i)
{
    if (fd < 0)
        return -1;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)GPC_LEDGER_LOCK_AT(i), .l_len = 1};
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

int gpc_ledger_entry_live(const struct gpc_ledger *l, int i, int fd)
{
    const struct gpc_ledger_proc *p = &l->proc[i];
    int32_t pid = atomic_load(&p->pid);
    uint64_t start = atomic_load(&p->start_time);
    if (pid <= 0 || start == 0)
        return gpc_ledger_proc_alive(pid, start, p);
    if (atomic_load(&p->locked)) {
        int held = gpc_ledger_lock_held(fd, i);
        if (held >= 0)
            return held;
    }
    return gpc_ledger_proc_alive(pid, start, p);
}

int gpc_ledger_entry_held(const struct gpc_ledger *l, int i, int fd)
{
    const struct gpc_ledger_proc *p = &l->proc[i];
    if (atomic_load(&p->pid) == 0)
        return 0;
    int held = atomic_load(&p->locked) ? gpc_ledger_lock_held(fd, i) : -1;
    return held != 0;
}

uint64_t gpc_ledger_in_use_held(const struct gpc_ledger *l, int dev, int fd)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, n = procs_used(l); i < n; i++) {
        uint64_t in_use = atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed)
                              ? gpc_ledger_share_in_use(&l->proc[i].share[dev])
                              : 0;
        if (in_use && gpc_ledger_entry_held(l, (int)i, fd))
            sum += in_use;
    }
    return sum;
}

int gpc_ledger_proc_alive(int32_t pid, uint64_t start_time, const struct gpc_ledger_proc *p)
{
    if (pid <= 0)
        return 0;
    /* No start time: a claim in progress, or an entry forged to look alive forever (pid 1). The
     * library gives claims a grace period of its own (ledger.c); nothing else counts it alive. */
    if (start_time == 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char state = 0;
    long threads = 1;
    uint64_t now = 0;
    if (gpc_proc_stat(pid, &state, &threads, &now) != 0)
        return 1; /* unknown: alive, the safe side (charged, never over-admitted) */
    if (now != start_time)
        return 0;
    /* A zombie has closed its files: its memory went with them. A thread-group leader that ended
     * while other threads run is a zombie too, with more than one thread: alive. An entry marked
     * "exec under way" stays alive here (whether the exec went through only its lock can tell). */
    (void)p;
    return (state == 'Z' || state == 'X') && threads <= 1 ? 0 : 1;
}
