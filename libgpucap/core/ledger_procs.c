/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_procs.c: this process's entry in the ledger and the others': claiming it (again after fork, from
 * zero after an exec), its limits, the mark around an exec, and taking dead processes' shares back.
 *
 * A share is given back when its memory really is, which is never while the process runs code:
 * not at exit (the driver frees memory when the process's device files close, after every
 * destructor), but once it is dead, by gpc_ledger_reap(), which budget.c calls before any denial
 * and the figure queries call rate-limited. A process is dead when no process holds its entry's
 * lock (common/ledger.h: gone at an exit, a kill, an exec; kept by a fork or raw clone child that
 * keeps its descriptors), or, where the kernel cannot say, when its pid is gone or now belongs to a
 * process with another start time, or it is a zombie. An exec'd image that calls CUDA takes over its
 * pid's entry from zero, unless a fork child still holds it. Whenever a process leaves, the device
 * limits are recomputed from those still there; every entry carries its process's ask, a fork
 * child's included (the limit in force when it claims, after a change its copy predates).
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/proc.h"
#include "common/units.h"
#include "core/lease.h"
#include "core/ledger_int.h"
#include "core/ledger_map.h"
#include "core/locks.h"
#include "core/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Figures are reported after dead processes are reaped, at most this often per process. */
#define REAP_EVERY_MS 100

/* Claims of this process's entry, one at a time. */
static pthread_mutex_t me_lock = PTHREAD_MUTEX_INITIALIZER;

/* A lock of a private budget, in a fork child: whatever the parent's threads held is free. */
static void reinit_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

/* In a fork child, after its locks were made fresh. */
static void forget_me(void)
{
    /* A fork child is another process: it claims its own entry when it first needs one, carrying
     * the limit in force for its parent now (its parent's entry, still gpc_ledger_entry here),
     * which a live change may have moved since the parent registered. */
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        gpc_ledger_note_limit(d);
    gpc_ledger_my_proc = -1;
    atomic_store(&gpc_ledger_entry, NULL);
    struct gpc_ledger *l = gpc_ledger;
    if (gpc_ledger_shared || !l)
        return;
    /* A private budget is this process's alone: the child's copy of it holds the parent's entry,
     * which nothing would ever drop. The child starts from its own use: no entry, nothing leased,
     * no context reserve, no peak, and locks that no thread of the parent may hold. */
    uint32_t used = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < used && i < GPC_LEDGER_PROCS; i++)
        memset(&l->proc[i], 0, sizeof l->proc[i]);
    atomic_store(&l->procs_used, 0);
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        struct gpc_ledger_dev *dev = &l->dev[d];
        reinit_lock(&dev->lock);
        gpc_lease_device_reset(dev);
        atomic_store(&dev->slot.peak, 0);
        atomic_store(&dev->slot.contexts, 0);
    }
}

void gpc_ledger_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_LEDGER_CLAIM) {
        gpc_fork_mutex(&me_lock, step);
        if (step == GPC_FORK_CHILD)
            forget_me();
    } else if (rank == GPC_LOCK_LEDGER_REPAIR) {
        gpc_ledger_repair_fork(step);
    } else if (rank == GPC_LOCK_LEDGER_RECOVER) {
        gpc_ledger_recover_fork(step);
    }
}

/* The device limit becomes the smallest that a process holding an entry asks for, applied at once
 * (core/lease.c); none: unchanged. Under the device's lock. */
static void recompute_limit(int d)
{
    struct gpc_ledger *l = gpc_ledger;
    uint64_t lowest = gpc_ledger_lowest_limit(l, d, -1, 0, false);
    struct gpc_ledger_dev *dev = &l->dev[d];
    uint64_t cur = atomic_load(&dev->slot.limit);
    /* The last process left: a figure set by `gpucap set-memory` no longer holds for the next. */
    if (!lowest)
        atomic_fetch_and(&dev->limit_by, ~GPC_LIMIT_HELD);
    if (lowest && lowest != cur) {
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
        gpc_lease_set_limit(l, dev, lowest);
        gpc_log(GPC_LOG_INFO, "ledger %s: device entry %d: the limit is now %s (was %s), the smallest of the live "
                "processes", gpc_ledger_file, d, gpc_format_size(lowest, a, sizeof a), gpc_format_size(cur, b, sizeof b));
    }
}

/*
 * Takes the whole share of entry `p` (process `pid` started at `start`) back from the totals,
 * device by device under each lock; `limits`: also forgets its limits and recomputes each
 * device's. 0 when nothing is left, 1 when a lock was not obtained (something is left), -1 when
 * the entry changed hands meanwhile (another reaper freed it and a new process claimed it: its
 * share is not ours to take).
 */
static int clear_share(int i, int32_t pid, uint64_t start, bool limits, const char *consequence)
{
    int rc = 0;
    for (int d = 0; d < GPC_LEDGER_DEVICES && rc >= 0; d++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        if (atomic_load(&p->share[d].lease) == 0 && (!limits || atomic_load(&p->share[d].limit) == 0))
            continue;
        struct gpc_ledger_dev *dev = gpc_ledger_lock_dev(d, consequence);
        if (!dev) {
            rc = 1;
            continue;
        }
        p = &gpc_ledger->proc[i]; /* the ledger may have moved to a rebuilt file */
        struct gpc_ledger_share *s = &p->share[d];
        if (atomic_load(&p->pid) != pid || atomic_load(&p->start_time) != start) {
            rc = -1;
        } else {
            /* Lease and spare to zero together (core/lease.c), the total down by the lease. */
            gpc_lease_clear(dev, s);
            /* Context reserves are counted per device, not per process: the part of them that left
             * with this share is not known, but they can never be more than what is in use. */
            uint64_t in_use = gpc_ledger_in_use(gpc_ledger, d);
            if (atomic_load(&dev->slot.contexts) > in_use)
                atomic_store(&dev->slot.contexts, in_use);
            /* Its peak stays in the device's. */
            uint64_t peak = atomic_exchange(&s->peak, 0), cur = atomic_load(&dev->slot.peak);
            if (peak > cur)
                atomic_store(&dev->slot.peak, peak);
            if (limits && atomic_exchange(&s->limit, 0) != 0)
                recompute_limit(d);
            /* Spares closed under a lowered limit open again once the leases fit under it. */
            if (atomic_load(&dev->closed))
                gpc_lease_set_limit(gpc_ledger, dev, atomic_load(&dev->slot.limit));
        }
        gpc_ledger_unlock(dev);
    }
    return rc;
}

/* True when some entry has a pid and no start time. */
static bool unstarted_entries(void)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&gpc_ledger->proc[i].pid) != 0 && atomic_load(&gpc_ledger->proc[i].start_time) == 0)
            return true;
    return false;
}

/* This process's own limits, on the devices it set up before a fork, applied to the ledger: the
 * device's limit is the smallest of the live processes' (core/lease.c takes spare back at once). */
static void apply_own_limits(void)
{
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (!gpc_ledger_mine[d].known || !gpc_ledger_mine[d].own || !gpc_ledger_shared)
            continue;
        struct gpc_ledger_dev *dev = gpc_ledger_lock_dev(d, "this process's limit applies from its next allocation");
        if (!dev)
            continue;
        struct gpc_ledger *l = gpc_ledger;
        /* What the entry asks (gpc_ledger_fill_entry: the copy, or the limit a later change left). */
        uint64_t ask = atomic_load(&l->proc[gpc_ledger_my_proc].share[d].limit);
        uint64_t lowest = gpc_ledger_lowest_limit(l, d, gpc_ledger_my_proc, ask ? ask : gpc_ledger_mine[d].own, true);
        if (lowest != atomic_load(&dev->slot.limit))
            gpc_lease_set_limit(l, dev, lowest);
        gpc_ledger_unlock(dev);
    }
}

struct gpc_ledger_proc *gpc_ledger_claim(void)
{
    gpc_lock(&me_lock, GPC_LOCK_LEDGER_CLAIM);
    bool fresh = gpc_ledger_my_proc < 0;
    int32_t pid = getpid();
    uint64_t start = gpc_proc_start_time(pid);
    /* Our pid and start time already in the ledger: this process before an exec. The new image
     * cannot reach the old one's memory and the driver freed it: start from zero in that entry. */
    for (int i = 0; gpc_ledger_my_proc < 0 && start && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        if (atomic_load(&p->pid) != pid || atomic_load(&p->start_time) != start)
            continue;
        /* The old image's lock still held: a fork child of it keeps its device files, and its
         * memory with them. That entry stays the old image's (taken back when the child is gone);
         * this image takes a free one. */
        if (atomic_load(&p->locked) && gpc_ledger_lock_held(gpc_ledger_probe_fd(), i) == 1)
            continue;
        /* Its share only: the process did not leave the ledger, so the limits stay as they are
         * (the new image asks its own when it registers a device; a figure `gpucap set-memory`
         * holds for the ledger holds for it too). */
        if (clear_share(i, pid, start, false, "the share of the image before exec stays charged") >= 0) {
            gpc_ledger_fill_entry(gpc_ledger, i, start);
            gpc_ledger_my_proc = i;
            gpc_ledger_continued = true;
        }
    }
    for (int pass = 0; pass < 3 && gpc_ledger_my_proc < 0; pass++) {
        gpc_ledger_my_proc = gpc_ledger_claim_free(gpc_ledger, pid, start);
        if (gpc_ledger_my_proc >= 0)
            break;
        if (pass == 1) {
            /* Entries without a start time are taken back once they stayed so past the grace. */
            if (!unstarted_entries())
                break;
            struct timespec ts = {CLAIM_GRACE_MS / 1000, (CLAIM_GRACE_MS % 1000 + 20) * 1000000L};
            nanosleep(&ts, NULL);
        }
        gpc_ledger_reap();
    }
    if (gpc_ledger_my_proc < 0) {
        int live = 0;
        for (int i = 0; i < GPC_LEDGER_PROCS; i++)
            live += atomic_load(&gpc_ledger->proc[i].pid) != 0;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the process table is full (%d of %d entries held by live processes); "
                "allocations of this process are denied until one leaves", gpc_ledger_file, live, GPC_LEDGER_PROCS);
    }
    struct gpc_ledger_proc *me = gpc_ledger_my_proc >= 0 ? &gpc_ledger->proc[gpc_ledger_my_proc] : NULL;
    if (fresh && me)
        apply_own_limits();
    me = gpc_ledger_my_proc >= 0 ? &gpc_ledger->proc[gpc_ledger_my_proc] : NULL; /* the ledger may have moved meanwhile */
    atomic_store_explicit(&gpc_ledger_entry, me, memory_order_release);
    gpc_unlock(&me_lock, GPC_LOCK_LEDGER_CLAIM);
    return me;
}

int gpc_ledger_reap(void)
{
    if (!gpc_ledger_shared)
        return 0;
    int reaped = 0;
    /* Before this image claimed its entry, one of its pid is its own before an exec: the claim
     * takes it over (limits and all), the reaper leaves it. */
    int32_t self = gpc_ledger_my_proc < 0 ? getpid() : 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        int32_t pid = atomic_load(&p->pid);
        uint64_t start = atomic_load(&p->start_time);
        if (pid == 0 || i == gpc_ledger_my_proc || pid == self || gpc_ledger_entry_alive(i, pid, start, p))
            continue;
        uint64_t took = 0;
        for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
            took += gpc_ledger_share_in_use(&p->share[d]);
        /* Share by share under each device's lock: taking one twice takes nothing the second time.
         * An entry is freed only once it holds nothing. Its start time goes first: a process
         * claiming the entry next is "claiming" until it writes its own. */
        int rc = clear_share(i, pid, start, true, "a dead process's share is taken back later");
        p = &gpc_ledger->proc[i];
        if (rc == 0) {
            /* Both by compare-and-swap: another reaper may have freed the entry already and a new
             * process claimed it; its start time must not be cleared (it would look dead). */
            uint64_t seen = start;
            int32_t want = pid;
            if (atomic_compare_exchange_strong(&p->start_time, &seen, 0)) {
                if (atomic_compare_exchange_strong(&p->pid, &want, 0)) {
                    reaped++;
                } else {
                    seen = 0;
                    atomic_compare_exchange_strong(&p->start_time, &seen, start);
                }
            }
        }
        if (took && rc == 0)
            gpc_log(GPC_LOG_INFO, "ledger %s: took back %llu bytes of dead process %d", gpc_ledger_file,
                    (unsigned long long)took, (int)pid);
    }
    return reaped;
}

void gpc_ledger_reap_lazy(void)
{
    static _Atomic uint64_t last_ms;
    if (!gpc_ledger_shared)
        return;
    uint64_t now = gpc_ledger_now_ms(), last = atomic_load_explicit(&last_ms, memory_order_relaxed);
    if (now - last < REAP_EVERY_MS || !atomic_compare_exchange_strong(&last_ms, &last, now))
        return;
    gpc_ledger_reap();
}

bool gpc_ledger_exec_begin(void)
{
    struct gpc_ledger_proc *p = atomic_load(&gpc_ledger_entry);
    /* No entry: this process never touched CUDA (or a private budget, which goes with the image). */
    if (!p || !gpc_ledger_shared || gpc_ledger_keep_fd < 0)
        return false;
    /* A vfork child runs on its parent's memory: the entry is the parent's, not to be marked. */
    if (atomic_load(&p->pid) != getpid())
        return false;
    atomic_store(&p->execing, 1);
    return true;
}

void gpc_ledger_exec_end(bool marked)
{
    struct gpc_ledger_proc *p = atomic_load(&gpc_ledger_entry);
    if (marked && p)
        atomic_store(&p->execing, 0);
}

void gpc_ledger_note_limit(int d)
{
    struct gpc_ledger_proc *me = atomic_load(&gpc_ledger_entry);
    if (d < 0 || d >= GPC_LEDGER_DEVICES || !gpc_ledger_mine[d].known || !me || !gpc_ledger_shared)
        return;
    /* Under the lock this process's own limit is the platform file's (never what a tenant wrote in
     * the entry); else its entry's, which follows every change, whoever applied it. */
    uint64_t own = gpc_config.locked ? gpc_lease_own_limit(d) : atomic_load(&me->share[d].limit);
    if (!own || own == GPC_UNLIMITED)
        return;
    uint64_t now = atomic_load(&gpc_ledger->dev[d].slot.limit);
    atomic_store(&gpc_ledger_mine[d].own, own);
    atomic_store(&gpc_ledger_mine[d].limit, now < own ? now : own);
    atomic_store(&gpc_ledger_mine[d].changes, atomic_load(&gpc_ledger->dev[d].limit_changes));
}

bool gpc_ledger_pid_changed(void)
{
    int i = gpc_ledger_my_proc;
    struct gpc_ledger_proc *p = atomic_load(&gpc_ledger_entry);
    return gpc_ledger_shared && p && i >= 0 && atomic_load(&p->pid) != getpid();
}

void gpc_ledger_forget(void)
{
    gpc_lock(&me_lock, GPC_LOCK_LEDGER_CLAIM);
    forget_me();
    gpc_unlock(&me_lock, GPC_LOCK_LEDGER_CLAIM);
}
