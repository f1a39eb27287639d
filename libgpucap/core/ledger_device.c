/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_device.c: the device entries of the ledger, registered by UUID (the smallest limit among the
 * live processes wins, applied at once; a figure set by `gpucap set-memory` holds for the processes
 * that join until the last one leaves), and the identity block: who the ledger belongs to.
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/lease.h"
#include "core/locks.h"
#include "core/ledger_int.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "gpucap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/*
 * Whether every process that a figure set by `gpucap set-memory` on ledger l held for has left: no
 * process but this one is on the ledger alive (dead ones not reaped yet are gone: a share stays
 * until its process is dead, its memory went), and this one is not an image that continues a
 * process that was there (an exec keeps the run going). Then a new run's own settings apply again.
 */
static bool held_figure_left(struct gpc_ledger *l)
{
    if (gpc_ledger_continued)
        return false;
    uint32_t used = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < used && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load(&p->pid);
        if ((int)i == gpc_ledger_my_proc || pid == 0)
            continue;
        if (gpc_ledger_entry_alive((int)i, pid, atomic_load(&p->start_time), p))
            return false;
    }
    return true;
}

int gpc_ledger_device(const uint8_t uuid[16], uint64_t physical, uint64_t limit, int ordinal)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l)
        return atomic_load(&gpc_ledger_refused) ? -EACCES : -ENOMEM;
    /* Only the claim of an entry is under the table lock: it stays short however many processes start. */
    int lrc = gpc_ledger_shared ? gpc_ledger_lock_setup(&l->table_lock) : 0;
    if (lrc == 0 && gpc_ledger_shared && atomic_load(&l->broken)) {
        gpc_unlock(&l->table_lock, GPC_LOCK_LEDGER_TABLE);
        lrc = -ENOTRECOVERABLE;
    }
    if (lrc == -ENOTRECOVERABLE && gpc_ledger_repair(l) == 0) {
        l = gpc_ledger;
        lrc = gpc_ledger_lock_setup(&l->table_lock);
    }
    if (lrc != 0)
        return -EAGAIN;
    int found = -1, free_entry = -1;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        if (atomic_load(&l->dev[i].state) == 1 && memcmp(l->dev[i].uuid, uuid, 16) == 0) {
            found = i;
            break;
        }
        if (free_entry < 0 && atomic_load(&l->dev[i].state) == 0)
            free_entry = i;
    }
    bool created = false;
    if (found < 0 && free_entry >= 0) {
        struct gpc_ledger_dev *d = &l->dev[free_entry];
        memcpy(d->uuid, uuid, 16);
        d->physical = physical;
        gpc_lease_device_start(d, limit);
        atomic_store(&d->state, 1);
        found = free_entry;
        created = true;
    }
    if (gpc_ledger_shared)
        gpc_unlock(&l->table_lock, GPC_LOCK_LEDGER_TABLE);
    if (found < 0)
        return -ENOSPC;
    if (!gpc_ledger_shared)
        return found;
    struct gpc_ledger_proc *me = gpc_ledger_me();
    if (!me)
        return -EAGAIN;
    /* A limit set live by `gpucap set-memory` is this ledger's budget now: a process that starts
     * later takes it, not the figure its environment still carries, until the last process on the
     * ledger leaves (unlocked settings only; under the lock the platform file, which the later
     * process read, is the authority). */
    bool ended_held = false;
    if (!created && !gpc_config.locked && (atomic_load(&l->dev[found].limit_by) & GPC_LIMIT_HELD) &&
        held_figure_left(l)) {
        atomic_fetch_and(&l->dev[found].limit_by, (uint16_t)~GPC_LIMIT_HELD);
        ended_held = true;
    }
    if (!created && !gpc_config.locked && (atomic_load(&l->dev[found].limit_by) & GPC_LIMIT_HELD)) {
        uint64_t set = atomic_load(&l->dev[found].slot.limit);
        if (set != limit) {
            char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
            gpc_log(GPC_LOG_WARN, "device %d: the ledger %s's budget was set to %s by gpucap set-memory; it applies "
                    "here instead of this process's setting (%s)", ordinal, gpc_ledger_file,
                    gpc_format_size(set, a, sizeof a), gpc_format_size(limit, b, sizeof b));
        }
        limit = set;
        atomic_store(&me->took_set, 1);
    }
    /* Our limit goes into our entry first, then the device's limit is recomputed under its lock:
     * of two processes registering at once, the second to lock sees both limits. */
    atomic_store(&me->share[found].limit, limit);
    /* Kept here too, for a private budget if the file is broken later (the smaller limit), for a
     * fork child's entry and for a move to another file (our own). */
    uint64_t now = atomic_load(&l->dev[found].slot.limit);
    memcpy(gpc_ledger_mine[found].uuid, uuid, 16);
    gpc_ledger_mine[found].physical = physical;
    gpc_ledger_mine[found].limit = now < limit ? now : limit;
    gpc_ledger_mine[found].own = limit;
    atomic_store(&gpc_ledger_mine[found].changes, atomic_load(&l->dev[found].limit_changes));
    gpc_ledger_mine[found].known = true;
    if (created)
        return found;
    struct gpc_ledger_dev *d = NULL;
    for (int attempt = 0; attempt < SETUP_TRIES && !d; attempt++)
        d = gpc_ledger_lock_dev(found, attempt < SETUP_TRIES - 1 ? NULL : SETUP_RETRY);
    if (!d)
        return -EAGAIN;
    l = gpc_ledger;
    /* Settings disagree between processes: the smallest limit of the live ones wins, applied at
     * once (a lower one takes spare back before anything more is admitted: core/lease.c). */
    uint64_t cur = atomic_load(&d->slot.limit);
    uint64_t lowest = gpc_ledger_lowest_limit(l, found, gpc_ledger_my_proc, limit, true);
    /* The limit was set by another process (it differs from ours) that is still alive. */
    bool others = lowest < limit || (cur != limit && gpc_ledger_lowest_limit(l, found, gpc_ledger_my_proc, 0, true) == cur);
    if (lowest != cur)
        gpc_lease_set_limit(l, d, lowest);
    /* The figure set-memory held is over: this run's settings are a change of the budget too. */
    if (ended_held && lowest != cur)
        gpc_lease_note_change(d, cur, lowest, GPC_LIMIT_BY_SETTINGS, gpc_ledger_in_use(l, found));
    gpc_ledger_unlock(d);
    if (others && limit != cur) {
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
        gpc_log(GPC_LOG_WARN, "device %d: settings disagree: this process asks for a limit of %s, the ledger %s "
                "held %s for other live processes; the smaller, %s, applies to all", ordinal,
                gpc_format_size(limit, a, sizeof a), gpc_ledger_file, gpc_format_size(cur, b, sizeof b),
                gpc_format_size(lowest, c, sizeof c));
    }
    return found;
}

/* ---- identity ---- */

/* Copies setting `opt` into `field` when it is set and valid; an unset or bad one leaves it. */
static void put_identity(char *field, size_t size, enum gpc_opt opt)
{
    const struct gpc_value *v = &gpc_config.opt[opt];
    if (!v->set || v->bad)
        return;
    size_t n = strnlen(v->text, size - 1);
    memcpy(field, v->text, n);
    memset(field + n, 0, size - n);
}

void gpc_ledger_identify(void)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l || !gpc_ledger_shared || gpc_ledger_lock_setup(&l->table_lock) != 0)
        return;
    struct gpc_ledger_identity *id = &l->identity;
    /* A seqlock for readers without the lock: odd while the fields change. */
    atomic_fetch_add_explicit(&id->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    put_identity(id->pod_namespace, sizeof id->pod_namespace, GPC_OPT_POD_NAMESPACE);
    put_identity(id->pod_name, sizeof id->pod_name, GPC_OPT_POD_NAME);
    put_identity(id->pod_uid, sizeof id->pod_uid, GPC_OPT_POD_UID);
    put_identity(id->container_name, sizeof id->container_name, GPC_OPT_CONTAINER_NAME);
    memset(id->gpucap_version, 0, sizeof id->gpucap_version);
    snprintf(id->gpucap_version, sizeof id->gpucap_version, "%s", GPUCAP_VERSION_STRING);
    id->mode = gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT ? GPC_IDENTITY_MODE_AUDIT
                                                                         : GPC_IDENTITY_MODE_ENFORCE;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    id->written_ns = (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
    atomic_fetch_add_explicit(&id->seq, 1, memory_order_release);
    gpc_unlock(&l->table_lock, GPC_LOCK_LEDGER_TABLE);
}
