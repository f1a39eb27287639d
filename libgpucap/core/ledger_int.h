/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_int.h: what the files of the ledger module share among themselves, and nobody else:
 * ledger_file.c (this process's mapping), ledger_entry.c (process entries), ledger_lock.c (the
 * robust locks, a rebuild, a move), ledger_procs.c (this process's entry, reaping) and
 * ledger_device.c (device registration, identity), in that order from the bottom: each uses only
 * the ones before it. The module's contract for the other files is core/ledger_map.h.
 */
#ifndef GPUCAP_CORE_LEDGER_INT_H
#define GPUCAP_CORE_LEDGER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/ledger.h"
#include "core/locks.h"

/* No wait for a ledger lock is longer than this (releases take no lock). */
#define LOCK_WAIT_MS 200
/* A process entry without a start time counts as alive this long (a claim in progress). */
#define CLAIM_GRACE_MS 1000
/*
 * Setting a device up happens once per process: a crowd starting at once on two cores can keep a
 * holder of the table lock off the CPU past one bound, so the wait is repeated a few times (quietly
 * but for the last) before the call gives up.
 */
#define SETUP_TRIES 5
#define SETUP_RETRY "this device is tried again at the next call"

/* ---- ledger_file.c: this process's mapping ---- */

/* The ledger's path, as the settings name it (for every message). */
extern char gpc_ledger_file[512];
/* This process's entry index in gpc_ledger (-1: none yet); gpc_ledger_entry points at it. Written
 * under ledger_procs.c's claim lock or ledger_lock.c's repair lock. */
extern int gpc_ledger_my_proc;
/* Under the platform's lock the ledger was refused: every budget denies. */
extern atomic_bool gpc_ledger_refused;
/* What this process registered, kept outside the mapping: enough to rebuild its budget privately
 * (`limit`: the smaller of its own and the ledger's then) and to register again (`own`). */
struct gpc_ledger_mine {
    bool known;
    uint8_t uuid[16];
    uint64_t physical;
    _Atomic uint64_t limit, own; /* moved by a live change (gpc_ledger_note_limit) */
    /* The device entry's change count when `own` was taken: a copy made before a live change (a
     * fork child's, claimed after it) is older than the limit in force and never asked for again. */
    _Atomic uint16_t changes;
};
/* This image continues a process that was on the ledger (it took over its pid's entry after an
 * exec): a figure that `gpucap set-memory` holds for the ledger's processes holds for it too. */
extern bool gpc_ledger_continued;
extern struct gpc_ledger_mine gpc_ledger_mine[GPC_LEDGER_DEVICES];
/* A descriptor of the ledger file, kept open close-on-exec and never locked (it asks whose entries
 * are held), and the identity of its file; the identity of the file mapped now (another one after a
 * move), which the path must still name. */
extern int gpc_ledger_keep_fd;
extern uint64_t gpc_ledger_keep_dev, gpc_ledger_keep_ino;
/* A descriptor of the file mapped now that holds no lock (gpc_ledger_entry_live's), -1 if none. */
int gpc_ledger_probe_fd(void);
/*
 * Locks entry i of ledger l (its file: dev, ino) for this process, with an OFD lock on a description
 * of its own (made now if it has none for that file: a fork child's inherited one holds its parent's
 * lock), and marks the entry held by its lock. 0, or -1 (no OFD locks, the file not at the path, the
 * lock held by someone else): the entry's liveness is then left to pid and start time.
 */
int gpc_ledger_lock_entry(struct gpc_ledger *l, int i, uint64_t dev, uint64_t ino);
extern _Atomic uint64_t gpc_ledger_mapped_dev, gpc_ledger_mapped_ino; /* written under the repair lock */
/* The fork sequence's part for the recovery lock (core/locks.h: LEDGER_RECOVER). */
void gpc_ledger_recover_fork(enum gpc_fork_step step);
/* Guards the mapping at `l` against SIGBUS, installing the handler; NULL (at attach only): puts
 * the old handler back. */
void gpc_ledger_guard(struct gpc_ledger *l);
/*
 * Writes a whole ledger under a temporary name and moves it to the path: 0 or -errno. With `old`
 * NULL a fresh one, never over another file; else one holding the figures of `old`, over the
 * broken file at the path. No process ever maps a half-written ledger.
 */
int gpc_ledger_write_file(mode_t mode, const struct gpc_ledger *old);
/*
 * The ledger now at the path if it is usable, not broken and another one than `old` (by creation
 * time), else NULL; its file's identity in *dev, *ino. `why` (may be NULL) gets the reason a file
 * there is not usable, NULL when there is no file.
 */
struct gpc_ledger *gpc_ledger_map_fresh(const struct gpc_ledger *old, uint64_t *dev, uint64_t *ino,
                                        const char **why);
/* Who holds process entry `o`, carried into `n` (common/ledger.h: GPC_LEDGER_PROC_CARRIED). */
void gpc_ledger_carry_owner(struct gpc_ledger_proc *n, const struct gpc_ledger_proc *o);

/* ---- ledger_entry.c: process entries ---- */

/* A monotonic clock in milliseconds (coarse: no system call). */
uint64_t gpc_ledger_now_ms(void);
/*
 * Entry i of ledger l, now this process's (its pid stored): nothing leased, spares closed, this
 * process's own limits (a fork child's set-up is its parent's, done before the fork), and the
 * close-on-exec descriptor that tells readers whether its image is still there.
 */
void gpc_ledger_fill_entry(struct gpc_ledger *l, int i, uint64_t start);
/* A free entry of ledger l, claimed for this process (pid and start time): its index, or -1. */
int gpc_ledger_claim_free(struct gpc_ledger *l, int32_t pid, uint64_t start);
/* Whether the process of entry i (pid, start time, the entry) is alive: gpc_ledger_proc_alive (the
 * holder of its token found is noted in the entry, a hint for the next look), and an entry without
 * a start time only for CLAIM_GRACE_MS after this process first saw it so. */
bool gpc_ledger_entry_alive(int i, int32_t pid, uint64_t start, struct gpc_ledger_proc *p);
/*
 * The smallest limit among `mine` (0: none) and those of the processes on device entry d of l but
 * entry `me`, or 0 when nobody has one. With check_alive, an entry whose limit is below the lowest
 * so far counts only if its process is alive (a crowd of equal settings costs no system call).
 */
uint64_t gpc_ledger_lowest_limit(struct gpc_ledger *l, int d, int me, uint64_t mine, bool check_alive);

/* ---- ledger_lock.c: the robust locks ---- */

/* A set-up lock (the table lock, a device entry's at registration): the wait repeated SETUP_TRIES
 * times, logged at the last. 0 or -errno. */
int gpc_ledger_lock_setup(pthread_mutex_t *m);
/* Moves this process off `old` (broken): rebuilds the file if no other process did. 0 or -errno. */
int gpc_ledger_repair(struct gpc_ledger *old);
/* The fork sequence's part for the repair lock (core/locks.h: LEDGER_REPAIR). */
void gpc_ledger_repair_fork(enum gpc_fork_step step);

#endif
