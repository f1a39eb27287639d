/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_lock.c: the ledger's robust locks, and what a locker finds behind one: a dead owner, a broken
 * file, a file the path no longer names.
 *
 * A lease is granted and taken back under its device entry's robust, process-shared mutex
 * (core/lease.c). No wait is longer than LOCK_WAIT_MS; there is never an exit(). If a process dies
 * holding the lock, the next locker gets EOWNERDEAD and settles the entry (gpc_lease_settle: a
 * journalled take-back finished, the total recomputed from the leases). A lock left not
 * recoverable makes the ledger broken: it is rebuilt under a fresh file (gpc_ledger_repair). A
 * file that the path no longer names (removed, renamed, replaced) is noticed at the next locked
 * step, and the process moves its share to the file now at the path (relocate()). Either way the
 * process carries its own share over exactly.
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/proc.h"
#include "core/lease.h"
#include "core/locks.h"
#include "core/ledger_int.h"
#include "core/ledger_map.h"
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

/* A file found at the path that this process could not move to (logged once). */
static _Atomic uint64_t refused_dev, refused_ino;

/* The owner died inside the critical section: the total is rebuilt from the leases. */
static void recover_device(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    gpc_lease_settle(l, d);
    gpc_log(GPC_LOG_WARN, "ledger %s: a process died holding device entry %d; its total was rebuilt (%llu bytes "
            "leased)", gpc_ledger_file, (int)(d - l->dev), (unsigned long long)atomic_load(&d->slot.leased));
}

/*
 * The process holding a lock, from the owner's thread id that glibc keeps in the mutex (a robust
 * mutex's futex word names its owner), mapped to its process through /proc; 0 if unknown. Only
 * called after a wait timed out.
 */
static int32_t lock_holder(pthread_mutex_t *m, int32_t *tid_out)
{
    int32_t tid = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) & 0x3fffffff;
    *tid_out = tid;
    if (tid <= 0)
        return 0;
    char buf[512];
    gpc_proc_read(tid, "status", buf, sizeof buf);
    const char *t = strstr(buf, "\nTgid:");
    return t ? (int32_t)strtol(t + 7, NULL, 10) : tid;
}

/*
 * glibc marks a robust mutex released without pthread_mutex_consistent by this owner value; after
 * one locker has been told ENOTRECOVERABLE, later ones may only see it busy (and time out).
 */
#define GLIBC_MUTEX_NOTRECOVERABLE 0x7ffffffe

static bool left_unrecoverable(pthread_mutex_t *m)
{
    return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) == GLIBC_MUTEX_NOTRECOVERABLE;
}

/*
 * pthread_mutex_timedlock, but for ThreadSanitizer, which does not follow a dead owner that
 * timedlock reports (EOWNERDEAD: it then takes the unlock for one of a mutex never locked): there
 * the wait is trylock polled until the deadline, which it follows. Same answers either way.
 */
static int timed_lock(pthread_mutex_t *m, const struct timespec *deadline)
{
#if defined(__SANITIZE_THREAD__)
    for (;;) {
        int rc = pthread_mutex_trylock(m);
        if (rc != EBUSY)
            return rc;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
            return ETIMEDOUT;
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    }
#else
    return pthread_mutex_timedlock(m, deadline);
#endif
}

/* Locks a robust mutex of the ledger (of `rank`: core/locks.h), recovering a dead owner's device
 * entry d (NULL: none): 0 or -errno (-ETIMEDOUT after LOCK_WAIT_MS, -ENOTRECOVERABLE for a broken
 * lock), logged with `consequence` (NULL: quiet). Released with gpc_unlock. */
static int lock_robust(pthread_mutex_t *m, enum gpc_lock_rank rank, struct gpc_ledger *l, struct gpc_ledger_dev *d,
                       const char *consequence)
{
    int rc = pthread_mutex_trylock(m);
    if (rc == EBUSY && left_unrecoverable(m))
        rc = ENOTRECOVERABLE;
    if (rc == EBUSY) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += LOCK_WAIT_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        rc = timed_lock(m, &ts);
        if (rc == ETIMEDOUT && left_unrecoverable(m))
            rc = ENOTRECOVERABLE;
    }
    if (rc == EOWNERDEAD) {
        if (d)
            recover_device(l, d);
        pthread_mutex_consistent(m);
        rc = 0;
    }
    if (rc == 0)
        gpc_witness_take(rank, false);
    if (rc == 0 || !consequence) {
        /* quiet: the caller says what follows */
    } else if (rc == ETIMEDOUT) {
        int32_t tid, pid = lock_holder(m, &tid);
        if (pid > 0 && pid != tid)
            gpc_log(GPC_LOG_ERROR, "ledger %s: process %d (thread %d) has held a lock for more than %d ms; %s",
                    gpc_ledger_file, (int)pid, (int)tid, LOCK_WAIT_MS, consequence);
        else if (pid > 0)
            gpc_log(GPC_LOG_ERROR, "ledger %s: process %d has held a lock for more than %d ms; %s", gpc_ledger_file,
                    (int)pid, LOCK_WAIT_MS, consequence);
        else
            gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was not obtained within %d ms; %s", gpc_ledger_file, LOCK_WAIT_MS,
                    consequence);
    } else if (rc == ENOTRECOVERABLE) {
        /* A broken ledger: the caller rebuilds it and says so (gpc_ledger_repair()). */
    } else if (rc != 0) {
        gpc_log(GPC_LOG_ERROR, "ledger %s: lock failed (%s); %s", gpc_ledger_file, strerror(rc), consequence);
    }
    return -rc;
}

int gpc_ledger_lock_setup(pthread_mutex_t *m)
{
    int rc = -ETIMEDOUT;
    for (int attempt = 0; attempt < SETUP_TRIES && rc == -ETIMEDOUT; attempt++)
        rc = lock_robust(m, GPC_LOCK_LEDGER_TABLE, NULL, NULL, attempt < SETUP_TRIES - 1 ? NULL : SETUP_RETRY);
    return rc;
}

static void relocate(struct gpc_ledger *old);

/*
 * True when the path no longer names the file mapped now: removed, renamed away, or replaced by
 * another file (one stat, on the locked path only). A file this process already failed to move to
 * is not reported again.
 */
static bool path_moved(void)
{
    if (!gpc_ledger_shared)
        return false;
    struct stat st;
    if (stat(gpc_ledger_file, &st) != 0)
        return errno == ENOENT;
    uint64_t dev = (uint64_t)st.st_dev, ino = (uint64_t)st.st_ino;
    return !(dev == gpc_ledger_mapped_dev && ino == gpc_ledger_mapped_ino) && !(dev == refused_dev && ino == refused_ino);
}

struct gpc_ledger_dev *gpc_ledger_lock_dev(int id, const char *consequence)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct gpc_ledger *l = gpc_ledger;
        struct gpc_ledger_dev *d = &l->dev[id];
        int rc = lock_robust(&d->lock, GPC_LOCK_LEDGER_DEV, l, d, consequence);
        if (rc == 0 && gpc_likely(!atomic_load_explicit(&l->broken, memory_order_relaxed))) {
            /* The file at the path is the one every process meets: move there first. */
            if (attempt == 2 || gpc_likely(!path_moved()))
                return d;
            gpc_unlock(&d->lock, GPC_LOCK_LEDGER_DEV);
            relocate(l);
            continue;
        }
        if (rc == 0)
            gpc_unlock(&d->lock, GPC_LOCK_LEDGER_DEV);
        else if (rc != -ENOTRECOVERABLE)
            return NULL;
        /* This file was rebuilt elsewhere, or its lock is beyond repair: move to the fresh one. */
        if (gpc_ledger_repair(l) != 0)
            return NULL;
    }
    return NULL;
}

struct gpc_ledger_dev *gpc_ledger_trylock_dev(int id)
{
    struct gpc_ledger *l = gpc_ledger;
    struct gpc_ledger_dev *d = &l->dev[id];
    int rc = pthread_mutex_trylock(&d->lock);
    if (rc == EOWNERDEAD) {
        recover_device(l, d);
        pthread_mutex_consistent(&d->lock);
        rc = 0;
    }
    if (gpc_witness_tried(rc, GPC_LOCK_LEDGER_DEV) != 0)
        return NULL;
    if (gpc_unlikely(atomic_load_explicit(&l->broken, memory_order_relaxed))) {
        gpc_unlock(&d->lock, GPC_LOCK_LEDGER_DEV);
        return NULL;
    }
    return d;
}

void gpc_ledger_unlock(struct gpc_ledger_dev *d)
{
    gpc_unlock(&d->lock, GPC_LOCK_LEDGER_DEV);
}

/* ---- a broken ledger: rebuilt under a fresh file ---- */

/*
 * A lock left not recoverable (taken after its owner died and released without
 * pthread_mutex_consistent) can never be taken again: the file is broken for good. The first
 * process to meet it marks it broken, writes a fresh ledger holding the same figures under a
 * temporary name and renames it into place; every process then moves to the file at the path at
 * its next lock, carrying its own share over exactly. Entries keep their indices, so budget ids
 * and this process's entry stay valid. The old mapping is never unmapped (a thread may still be
 * reading it).
 */
static pthread_mutex_t repair_lock = PTHREAD_MUTEX_INITIALIZER;

void gpc_ledger_repair_fork(enum gpc_fork_step step)
{
    gpc_fork_mutex(&repair_lock, step);
}

/*
 * Moves this process's leases, as the old file holds them, into entry `to` of `l`. The old spare
 * is emptied as it is read: an admission that still reads the old file finds none there and goes
 * to the lock (which is the new file's), and a release that still lands there is lost to the new
 * file, which then charges those bytes until the process leaves (never under-charged). Each
 * device's limit is then applied on the new file (its own processes' and this one's).
 */
static void carry_my_share(struct gpc_ledger *l, struct gpc_ledger *old, int to, uint64_t dev, uint64_t ino)
{
    if (gpc_ledger_my_proc < 0 || to < 0)
        return;
    struct gpc_ledger_proc *o = &old->proc[gpc_ledger_my_proc], *n = &l->proc[to];
    gpc_ledger_carry_owner(n, o);
    /* Held by its lock on the new file too (nobody holds the locks of a file just made). */
    atomic_store(&n->locked, 0);
    gpc_ledger_lock_entry(l, to, dev, ino);
    atomic_store(&n->pid, atomic_load(&o->pid));
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (atomic_load(&l->dev[d].state) != 1)
            continue;
        /* The old lock, where it still works, so that no lease changes on the old file meanwhile. */
        int orc = lock_robust(&old->dev[d].lock, GPC_LOCK_LEDGER_DEV, NULL, NULL, NULL);
        const char *why = "this process's share on this device is not carried over";
        if (lock_robust(&l->dev[d].lock, GPC_LOCK_LEDGER_DEV, l, &l->dev[d], why) == 0) {
            struct gpc_ledger_share *os = &o->share[d], *ns = &n->share[d];
            gpc_lease_carry(&l->dev[d], ns, os);
            uint64_t own = atomic_load(&os->limit);
            atomic_store(&ns->limit, own);
            uint64_t limit = gpc_ledger_lowest_limit(l, d, to, own, true);
            gpc_lease_set_limit(l, &l->dev[d], limit ? limit : atomic_load(&l->dev[d].slot.limit));
            gpc_unlock(&l->dev[d].lock, GPC_LOCK_LEDGER_DEV);
        }
        if (orc == 0)
            gpc_unlock(&old->dev[d].lock, GPC_LOCK_LEDGER_DEV);
    }
}

/* Moves this process off `old` (broken): rebuilds the file if no other process did. 0 or -errno. */
int gpc_ledger_repair(struct gpc_ledger *old)
{
    int rc = 0;
    gpc_lock(&repair_lock, GPC_LOCK_LEDGER_REPAIR);
    if (gpc_ledger != old)
        goto out; /* another thread of this process moved already */
    uint32_t zero = 0;
    struct gpc_ledger *l = NULL;
    uint64_t dev = 0, ino = 0;
    if (gpc_config.locked) {
        /* Under the lock only the platform makes ledgers: a broken one stays broken (and denies). */
        rc = -EPERM;
        gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was left unrecoverable; under the platform's lock the library does "
                "not rebuild the ledger: allocations on it are denied", gpc_ledger_file);
        goto out;
    }
    if (atomic_compare_exchange_strong(&old->broken, &zero, 1)) {
        rc = gpc_ledger_write_file(gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP) ? 0660 : 0600, old);
        if (rc == 0)
            l = gpc_ledger_map_fresh(old, &dev, &ino, NULL);
        if (l)
            gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was left unrecoverable (taken after its owner died, released "
                    "without repair); the ledger was rebuilt under a fresh file with the same figures", gpc_ledger_file);
    } else {
        /* Another process is rebuilding: its file appears at the path within a moment. */
        for (int i = 0; i < LOCK_WAIT_MS / 10 && !(l = gpc_ledger_map_fresh(old, &dev, &ino, NULL)); i++) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (!l) {
        if (rc == 0)
            rc = -ENOENT;
        gpc_log(GPC_LOG_ERROR, "ledger %s: broken and not rebuilt (%s); allocations on it are denied", gpc_ledger_file,
                strerror(-rc));
        goto out;
    }
    carry_my_share(l, old, gpc_ledger_my_proc, dev, ino);
    gpc_ledger_mapped_dev = dev;
    gpc_ledger_mapped_ino = ino;
    __atomic_store_n(&gpc_ledger, l, __ATOMIC_RELEASE);
    if (gpc_ledger_my_proc >= 0)
        atomic_store(&gpc_ledger_entry, &l->proc[gpc_ledger_my_proc]);
out:
    gpc_unlock(&repair_lock, GPC_LOCK_LEDGER_REPAIR);
    return rc;
}

/* ---- a file that the path no longer names ---- */

/*
 * This process's devices registered in ledger l (another file, now at the path) at the same entry
 * indices, which budget ids are: 0, or -1 when an index holds another card there (logged).
 */
static int register_devices(struct gpc_ledger *l)
{
    if (gpc_ledger_lock_setup(&l->table_lock) != 0)
        return -1;
    int rc = 0;
    for (int d = 0; d < GPC_LEDGER_DEVICES && rc == 0; d++) {
        if (!gpc_ledger_mine[d].known)
            continue;
        struct gpc_ledger_dev *dev = &l->dev[d];
        if (atomic_load(&dev->state) == 1) {
            if (memcmp(dev->uuid, gpc_ledger_mine[d].uuid, 16) != 0)
                rc = -1;
            continue;
        }
        memcpy(dev->uuid, gpc_ledger_mine[d].uuid, 16);
        dev->physical = gpc_ledger_mine[d].physical;
        gpc_lease_device_start(dev, gpc_ledger_mine[d].own);
        atomic_store(&dev->state, 1);
    }
    gpc_unlock(&l->table_lock, GPC_LOCK_LEDGER_TABLE);
    return rc;
}

/*
 * The path names another file than the one mapped (removed, renamed away, replaced): every process
 * must meet on the file at the path, so this one moves there, creating it if there is none, and
 * carries its share over exactly (as after a rebuild), in an entry of its own there. The old
 * mapping stays (a thread may still read it). A file it cannot use is said once, and this process
 * stays where it is.
 */
static void relocate(struct gpc_ledger *old)
{
    gpc_lock(&repair_lock, GPC_LOCK_LEDGER_REPAIR);
    struct gpc_ledger *l = NULL;
    uint64_t dev = 0, ino = 0;
    const char *why = NULL;
    if (gpc_ledger != old || gpc_ledger_my_proc < 0)
        goto out;
    mode_t mode = gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP) ? 0660 : 0600;
    for (int attempt = 0; attempt < 3 && !l; attempt++) {
        l = gpc_ledger_map_fresh(old, &dev, &ino, &why);
        if (l || why)
            break;
        if (gpc_config.locked) {
            why = "missing (under the platform's lock only the platform makes it)";
            break;
        }
        int rc = gpc_ledger_write_file(mode, NULL); /* none there: a fresh one (another process may be first) */
        if (rc != 0 && rc != -EEXIST) {
            why = strerror(-rc);
            break;
        }
    }
    if (l && (dev != gpc_ledger_mapped_dev || ino != gpc_ledger_mapped_ino)) {
        int32_t pid = getpid();
        uint64_t start = atomic_load(&old->proc[gpc_ledger_my_proc].start_time);
        int to = register_devices(l) == 0 ? gpc_ledger_claim_free(l, pid, start) : -1;
        if (to >= 0) {
            carry_my_share(l, old, to, dev, ino);
            gpc_ledger_my_proc = to;
            gpc_ledger_mapped_dev = dev;
            gpc_ledger_mapped_ino = ino;
            __atomic_store_n(&gpc_ledger, l, __ATOMIC_RELEASE);
            atomic_store(&gpc_ledger_entry, &l->proc[to]);
            gpc_ledger_guard(l);
            gpc_log(GPC_LOG_WARN, "ledger %s: the path names another file than the one this process used (removed, "
                    "renamed or replaced); its share moved to the file now there", gpc_ledger_file);
            goto out;
        }
        why = "its device entries hold other cards at this process's indices, or its tables are full";
    }
    if (l && dev == gpc_ledger_mapped_dev && ino == gpc_ledger_mapped_ino)
        why = NULL; /* the same file after all */
    if (l)
        munmap(l, sizeof *l);
    if (why && (dev != refused_dev || ino != refused_ino)) {
        refused_dev = dev;
        refused_ino = ino;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the path names another file than the one this process uses, and this "
                "process cannot move to it (%s); it keeps its budget on the old file", gpc_ledger_file, why);
    }
out:
    gpc_unlock(&repair_lock, GPC_LOCK_LEDGER_REPAIR);
}
