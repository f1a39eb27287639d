/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_entry.c: the process entries of the ledger: claiming a free one and filling it for this process,
 * whether an entry's process is alive (a claim in progress counts for a grace period), and the
 * smallest of the limits the processes on a device asked for (the rule of the ledger's limit:
 * the smallest ask of the live processes wins), and a live change of those asks.
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "core/lease.h"
#include "core/ledger_int.h"
#include "core/ledger_map.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/*
 * An entry without a start time is a process between claiming it and writing its start time
 * (two stores): alive only for CLAIM_GRACE_MS after this process first saw it so. A writer that
 * leaves pid 1 with start time 0 does not hold an entry for good.
 */
static _Atomic int32_t zero_pid[GPC_LEDGER_PROCS];
static _Atomic uint64_t zero_since_ms[GPC_LEDGER_PROCS];

uint64_t gpc_ledger_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool gpc_ledger_entry_alive(int i, int32_t pid, uint64_t start, struct gpc_ledger_proc *p)
{
    if (start != 0)
        return p == &gpc_ledger->proc[i] ? gpc_ledger_entry_live(gpc_ledger, i, gpc_ledger_probe_fd())
                                         : gpc_ledger_proc_alive(pid, start, p);
    uint64_t now = gpc_ledger_now_ms();
    if (atomic_load(&zero_pid[i]) != pid) {
        atomic_store(&zero_pid[i], pid);
        atomic_store(&zero_since_ms[i], now);
        return true;
    }
    return now - atomic_load(&zero_since_ms[i]) < CLAIM_GRACE_MS;
}

/*
 * Entry i of ledger l, now this process's (its pid stored): nothing leased, spares closed, this
 * process's own limits (a fork child's set-up is its parent's, done before the fork), and the
 * close-on-exec descriptor that tells readers whether its image is still there.
 */
void gpc_ledger_fill_entry(struct gpc_ledger *l, int i, uint64_t start)
{
    struct gpc_ledger_proc *p = &l->proc[i];
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        struct gpc_ledger_share *s = &p->share[d];
        gpc_lease_share_start(s); /* nothing leased, closed */
        atomic_store(&s->peak, 0);
        /* A fork child's copy of its parent's ask, unless a live change came after the copy: then
         * the limit that change left in force (no older value comes back through a late claim). */
        uint64_t ask = gpc_ledger_mine[d].known ? gpc_ledger_mine[d].own : 0;
        if (ask && atomic_load(&l->dev[d].limit_changes) != atomic_load(&gpc_ledger_mine[d].changes)) {
            uint64_t now = atomic_load(&l->dev[d].slot.limit);
            if (now && now != GPC_UNLIMITED)
                ask = now;
        }
        atomic_store(&s->limit, ask);
    }
    atomic_store(&p->execing, 0);
    atomic_store(&p->took_set, 0);
    atomic_store(&p->locked, 0);
    /* Held by its lock from now on, where the kernel has OFD locks; the start time after it, so
     * that no reader sees a started entry that no lock holds. */
    if (l == gpc_ledger)
        gpc_ledger_lock_entry(l, i, atomic_load(&gpc_ledger_mapped_dev), atomic_load(&gpc_ledger_mapped_ino));
    atomic_store(&p->start_time, start);
    /* Readers scan the entries below procs_used. */
    uint32_t used = atomic_load(&l->procs_used);
    while (used < (uint32_t)i + 1 && !atomic_compare_exchange_weak(&l->procs_used, &used, i + 1))
        ;
}

/* A free entry of ledger l, claimed for this process (pid and start time): its index, or -1. */
int gpc_ledger_claim_free(struct gpc_ledger *l, int32_t pid, uint64_t start)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        int32_t zero = 0;
        if (atomic_load(&p->pid) != 0 || !atomic_compare_exchange_strong(&p->pid, &zero, pid))
            continue;
        gpc_ledger_fill_entry(l, i, start);
        return i;
    }
    return -1;
}

/*
 * The smallest limit among `mine` (0: none) and those of the processes on device entry d of l but
 * entry `me`, or 0 when nobody has one. With check_alive, an entry whose limit is below the lowest
 * so far counts only if its process is alive (a crowd of equal settings costs no system call).
 */
uint64_t gpc_ledger_lowest_limit(struct gpc_ledger *l, int d, int me, uint64_t mine, bool check_alive)
{
    uint64_t lowest = mine ? mine : UINT64_MAX;
    uint32_t used = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < used && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        uint64_t theirs = atomic_load(&p->share[d].limit);
        int32_t pid = atomic_load(&p->pid);
        if ((int)i == me || theirs == 0 || pid == 0 || theirs >= lowest)
            continue;
        if (check_alive && !gpc_ledger_entry_alive((int)i, pid, atomic_load(&p->start_time), p))
            continue;
        lowest = theirs;
    }
    return lowest == UINT64_MAX ? 0 : lowest;
}

uint64_t gpc_ledger_asks_set(struct gpc_ledger *l, int id, int me, uint64_t old, uint64_t old_file, uint64_t limit,
                             bool all)
{
    uint64_t lowest = limit;
    uint32_t n = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < n && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_share *s = &l->proc[i].share[id];
        if (atomic_load(&l->proc[i].pid) == 0)
            continue;
        uint64_t theirs = atomic_load(&s->limit);
        if (theirs == 0)
            continue;
        if ((int)i == me || all || theirs == old || (old_file && theirs == old_file))
            atomic_store(&s->limit, theirs = limit);
        if (theirs < lowest)
            lowest = theirs;
    }
    return lowest;
}
