/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger.h: the shared ledger file: its layout, what a rebuild carries of it, and its read side
 * (ledger_read.c: the path, the check, the one copy routine, the figures, whether a process is
 * alive; ledger_make.c: a fresh one). The library maps it (core/ledger_*.c); the tools (`gpucap
 * status`, the exporter, the agent) copy it with gpc_ledger_copy. Fixed size, no pointers; atomics
 * and process-shared robust mutexes only. Any change to the layout must bump GPC_LEDGER_VERSION,
 * and a new field must join one of the lists below it (a _Static_assert checks that they cover it).
 */
#ifndef GPUCAP_LEDGER_H
#define GPUCAP_LEDGER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"

#define GPC_LEDGER_MAGIC 0x5247444c43504721ULL /* "!GPCLDGR" */
#define GPC_LEDGER_VERSION 8u
#define GPC_LEDGER_DEVICES 32
#define GPC_LEDGER_PROCS 1024
#define GPC_LEDGER_CHANGES 8 /* live changes of a device's budget kept for the report */

/*
 * A budget: what admission works on, one per device entry, in the shared ledger and in a private
 * budget alike. Processes do not admit against `leased` one allocation at a time: each holds a
 * lease (struct gpc_ledger_share) granted from it under the entry's lock, and admits inside its
 * lease without any lock (core/lease.c). What is in use is what the processes admitted, the sum that
 * gpc_ledger_in_use() computes, never `leased` (which counts their spare too).
 */
struct gpc_slot {
    _Atomic uint64_t limit;   /* GPC_UNLIMITED for no budget */
    _Atomic uint64_t leased;  /* the sum of the processes' leases: never above limit (but in audit mode) */
    _Atomic uint64_t peak;    /* highest in use seen; see gpc_ledger_peak() */
    _Atomic uint64_t allocs;  /* requests carried out (not context reserves); batched per thread */
    _Atomic uint64_t frees;
    _Atomic uint64_t denials;
    _Atomic uint64_t largest;           /* largest single request seen (not a context reserve) */
    _Atomic uint64_t first_denial_ns;   /* CLOCK_REALTIME of the first denial, 0 if none */
    _Atomic uint64_t contexts;          /* of what is in use: the reserves charged for contexts */
};

struct gpc_ledger_dev {
    _Atomic uint32_t state;     /* 0 free, 1 in use */
    /* v7: 1 while the processes' spares are closed to admission without the lock: the limit
     * dropped below `leased` and what the processes hold keeps it there (core/lease.c). Under `lock`. */
    _Atomic uint32_t closed;
    uint8_t uuid[16];           /* cuDeviceGetUuid_v2: the same card whatever its ordinal */
    uint64_t physical;          /* bytes, as the driver reports them */
    struct gpc_slot slot;
    pthread_mutex_t lock;       /* robust, process-shared: leases granted and taken back */
    /* The journal of a lease being taken back from process `victim - 1` (0: none), so that the
     * next locker completes it exactly if the taker dies half-way (core/lease.c). */
    _Atomic int32_t victim;
    uint32_t pad2;
    _Atomic uint64_t victim_spare, victim_spare_after, victim_lease;
    /* v5: the NVIDIA driver's own limit for this container on this card, as a process saw it in
     * force (drvlimit.h), 0 when none was seen: then only gpucap enforces. The budget (slot.limit)
     * is never above it: min(gpucap's own, the driver's). */
    _Atomic uint64_t driver_limit;
    /* v5: figures of the report (zero in a file of v4: none counted). */
    _Atomic uint64_t refused_driver;  /* requests gpucap admitted and the driver refused */
    _Atomic uint64_t context_count;   /* context reserves charged (not in allocs, largest) */
    _Atomic uint64_t held_at_exit;    /* bytes processes still held when they exited normally */
    /* v6: live budget changes (charge/live.c, core/budget.c), zero in a file of v5: never changed.
     * Written under `lock`, except `limit_asked`, which `gpucap set-memory` posts and the process
     * that applies it clears. */
    _Atomic uint64_t limit_was;         /* the limit before the last change */
    _Atomic uint64_t limit_asked;       /* a new limit asked by `gpucap set-memory` (unlocked settings); 0: none */
    _Atomic uint32_t limit_changed_s;   /* CLOCK_REALTIME seconds of the last change; 0: never changed */
    _Atomic uint16_t limit_changes;     /* how many changes (mod 2^16): a process that sees it move looks again */
    _Atomic uint16_t limit_by;          /* who made the last change: GPC_LIMIT_BY_*, and GPC_LIMIT_HELD */
    /* v8: a request of `gpucap set-memory` (limit_asked: GPC_ASK_* encoded) is posted with
     * ask_seq + 1; the process that applies it, under `lock`, sets ask_done to that seq: the change
     * is in force then, and the command says so. */
    _Atomic uint32_t ask_seq, ask_done;
    /* v8: the highest in use seen since the last live change (the peak of the budget period now). */
    _Atomic uint64_t period_peak;
    /* v8: the figure the settings file gives the processes whose limit is the file's, as last
     * applied (0: not known): a rewrite moves every ask of that figure, whoever applies it (a
     * process that started after the rewrite asks the new one already). Under `lock`. */
    _Atomic uint64_t limit_file;
    /* v8 (issue 35, burstable memory): the request R and the limit L resolved for this device, the
     * grant G of the node arbiter as last applied from the platform settings file (0: none); the
     * budget in force is min(L, max(R, G)) when qos_flags has GPC_QOS_BURSTABLE, else L. loan_asks
     * counts the datagrams sent to the arbiter, loaned_peak the most in use above R at once. Written
     * under `lock` (loan_asks, loaned_peak: atomically, by any process). */
    _Atomic uint64_t qos_request;
    _Atomic uint64_t qos_limit;
    _Atomic uint64_t qos_grant;
    _Atomic uint32_t qos_flags;
    _Atomic uint32_t loan_asks;
    _Atomic uint64_t loaned_peak;
    /* v8: the last GPC_LEDGER_CHANGES live changes, change number n (limit_changes counts them) at
     * changes[(n - 1) % GPC_LEDGER_CHANGES]: for the report and `gpucap status`. Under `lock`. */
    struct gpc_limit_change {
        _Atomic uint64_t t_ns;          /* CLOCK_REALTIME */
        _Atomic uint64_t from, to;      /* the limit in force before and after */
        _Atomic uint64_t peak;          /* the peak of the budget period that the change ended */
        _Atomic uint32_t by;            /* GPC_LIMIT_BY_* */
        uint32_t pad;
    } changes[GPC_LEDGER_CHANGES];
};
/* limit_asked: a size in bytes, or with GPC_ASK_PERCENT a share of the card in parts per million
 * (resolved by the library as at start-up: against the driver's limit where it is in force). */
#define GPC_ASK_PERCENT (UINT64_C(1) << 63)
/* gpc_ledger_dev.qos_flags: the container is burstable (its platform settings have memory_request). */
#define GPC_QOS_BURSTABLE 1u
/* Who changed a limit while processes ran (gpc_ledger_dev.limit_by). */
#define GPC_LIMIT_BY_PLATFORM 1u /* the platform settings file was rewritten (the node agent) */
#define GPC_LIMIT_BY_CLI 2u      /* `gpucap set-memory` on a ledger of unlocked settings */
#define GPC_LIMIT_BY_SETTINGS 3u /* a figure set-memory held ended: the settings of a process that joined a
                                  * ledger that no other process was on */
#define GPC_LIMIT_BY_ARBITER 4u  /* the node arbiter moved the grant (memory_grant) of a burstable container */
#define GPC_LIMIT_BY_MASK 0xffu
/* With GPC_LIMIT_BY_PLATFORM, to gpc_budget_set_limit (never stored): the figure is the settings
 * file's own (not a lower one of the process's environment). */
#define GPC_LIMIT_FROM_FILE 0x200u
/* With GPC_LIMIT_BY_CLI: the figure set holds for processes that join the ledger until the last
 * process on it leaves (a later run's own settings apply again). */
#define GPC_LIMIT_HELD 0x100u

/*
 * One process's part of one device's budget. `lease` is granted from the device's `leased` and
 * changes only under the device entry's lock; `spare` is the part of the lease not admitted, which
 * the process's allocations take from and its frees give back to without a lock. Its top 16 bits
 * are a generation that only lock holders change: odd while the lease and the spare change
 * together, so a reader that takes no lock can tell a torn pair (gpc_ledger_share_in_use). Bit 47
 * (GPC_SPARE_OPEN) says that the spare may be admitted from without the lock; only lock holders
 * change it (core/lease.c: closed while the device's limit is below its leases). The bytes are the low
 * 47 bits.
 */
#define GPC_SPARE_BITS 48
#define GPC_SPARE_MASK ((UINT64_C(1) << (GPC_SPARE_BITS - 1)) - 1)
#define GPC_SPARE_OPEN (UINT64_C(1) << (GPC_SPARE_BITS - 1))
#define GPC_SPARE_GEN (UINT64_C(1) << GPC_SPARE_BITS)
struct gpc_ledger_share {
    _Atomic uint64_t lease;
    _Atomic uint64_t spare;     /* generation << 48 | bytes */
    _Atomic uint64_t peak;      /* the most this process had in use at once */
    _Atomic uint64_t limit;     /* the limit this process asked for (0: none) */
};

struct gpc_ledger_proc {
    _Atomic int32_t pid;        /* 0: free */
    /* v7: 1 from just before this process calls exec until the call returns (it failed): a reader
     * then checks whether the image that held the share is gone (gpc_ledger_proc_alive). */
    _Atomic uint32_t execing;
    _Atomic uint64_t start_time; /* /proc/<pid>/stat field 22: tells a reused pid from its owner */
    /* v8: 1 when the entry is held by its lock (gpc_ledger_entry_live): the process holds an open
     * file description of the ledger file, close-on-exec, with an OFD lock on byte
     * GPC_LEDGER_LOCK_AT(index). The lock lives exactly as long as the driver's device files do: it
     * goes at an exit, a kill or an exec (a raw one too), and a fork or raw clone child that keeps
     * the descriptor keeps it, as it keeps its parent's device memory. 0: pid and start time say
     * (a kernel without OFD locks, a file just rebuilt). */
    _Atomic uint32_t locked;
    _Atomic uint32_t took_set; /* v7: 1 when it took a budget held by `gpucap set-memory` (GPC_LIMIT_HELD) */
    char pad2[40];              /* the shares start on a cache line of their own */
    struct gpc_ledger_share share[GPC_LEDGER_DEVICES];
} __attribute__((aligned(64)));

/*
 * Who the ledger belongs to (v3): the GPUCAP_POD_* and GPUCAP_CONTAINER_NAME settings, which the
 * webhook fills from the downward API, and the writer's gpucap version. Written by each process
 * that attaches, under table_lock (gpc_ledger_identify); `seq` is odd while a write is under way, so
 * a reader that takes no lock (gpucap-exporter) can tell a torn copy. gpucap writes NUL-terminated
 * strings; readers bound them by the field size all the same (the file is the tenant's).
 * `mode` took the place of a padding word that every writer left 0, so the layout and its version
 * are unchanged and 0 reads as "not recorded".
 */
#define GPC_IDENTITY_MODE_UNKNOWN 0 /* a writer before the field was used (it was padding, always 0) */
#define GPC_IDENTITY_MODE_ENFORCE 1
#define GPC_IDENTITY_MODE_AUDIT 2
struct gpc_ledger_identity {
    _Atomic uint32_t seq;
    uint32_t mode;              /* GPC_IDENTITY_MODE_*: GPUCAP_MODE of the last writer */
    uint64_t written_ns;        /* CLOCK_REALTIME of the last write */
    char pod_namespace[GPC_IDENTITY_NAME];
    char pod_name[GPC_IDENTITY_POD];
    char pod_uid[GPC_IDENTITY_NAME];
    char container_name[GPC_IDENTITY_NAME];
    char gpucap_version[32];    /* GPUCAP_VERSION_STRING of the last writer */
};

struct gpc_ledger {
    uint64_t magic;
    uint32_t version;
    uint32_t size;              /* sizeof(struct gpc_ledger) */
    uint32_t ndevices, nprocs;
    uint64_t created_ns;
    pthread_mutex_t table_lock; /* robust, process-shared: claiming device entries */
    _Atomic uint32_t broken;    /* 1: a lock of this file was left unrecoverable and the ledger was
                                 * rebuilt under a fresh file at the same path: move there */
    _Atomic uint32_t procs_used; /* entries below this index may be held: readers scan no further */
    /* v8: bumped by `gpucap set-memory` once it posted a request: every process on the ledger
     * compares it with the value it last saw before each admission (core/budget.c) and looks. */
    _Atomic uint64_t live_gen;
    char reserved[112];
    struct gpc_ledger_identity identity;
    struct gpc_ledger_dev dev[GPC_LEDGER_DEVICES];
    struct gpc_ledger_proc proc[GPC_LEDGER_PROCS];
};

/*
 * What a ledger rebuilt under a fresh file carries over from the broken one (core/ledger_file.c),
 * and what a process moving to the file now at the path carries of its own entry
 * (core/ledger_lock.c), field by field, each as an atomic load and store. The other fields are
 * written by the rebuild itself, in the order its readers need. Every field of the device and
 * process entries is in exactly one list of its entry: the assertions below fail when a field is
 * added to the layout without a word on what a rebuild does with it.
 */
#define GPC_LEDGER_DEV_CARRIED(X)                                                                      \
    X(slot.limit) X(slot.leased) X(slot.peak) X(slot.allocs) X(slot.frees) X(slot.denials)             \
    X(slot.largest) X(slot.first_denial_ns) X(slot.contexts) X(victim_spare) X(victim_spare_after)    \
    X(victim_lease) X(victim) X(limit_was) X(limit_changed_s) X(limit_asked) X(limit_changes)         \
    X(limit_by) X(closed) X(driver_limit) X(refused_driver) X(context_count) X(held_at_exit)          \
    X(ask_seq) X(ask_done) X(period_peak) X(limit_file) X(qos_request) X(qos_limit) X(qos_grant)        \
    X(qos_flags) X(loan_asks) X(loaned_peak)
/* Set by the rebuild: the card and the record of changes (copied whole), a fresh lock, the state last
 * (it publishes the entry). */
#define GPC_LEDGER_DEV_SET(X) X(uuid) X(physical) X(changes) X(lock) X(pad2) X(state)
/* Who holds a process entry: carried by a rebuild and by a move. */
#define GPC_LEDGER_PROC_CARRIED(X) X(start_time) X(took_set)
/* Set apart: the shares (GPC_LEDGER_SHARE_CARRIED, each under its device's lock in a move), the exec
 * mark (a rebuild only: a process that moves is not in an exec), the lock's flag (0 in a rebuilt
 * file, whose locks nobody holds yet: each process that moves there locks its entry and sets it),
 * the pid last (it publishes the entry). */
#define GPC_LEDGER_PROC_SET(X) X(share) X(execing) X(locked) X(pad2) X(pid)
#define GPC_LEDGER_SHARE_CARRIED(X) X(lease) X(spare) X(peak) X(limit)

#define GPC_LEDGER_FIELD_SIZE_(type, f) +sizeof(((type *)0)->f)
#define GPC_LEDGER_DEV_SIZE_(f) GPC_LEDGER_FIELD_SIZE_(struct gpc_ledger_dev, f)
#define GPC_LEDGER_PROC_SIZE_(f) GPC_LEDGER_FIELD_SIZE_(struct gpc_ledger_proc, f)
#define GPC_LEDGER_SHARE_SIZE_(f) GPC_LEDGER_FIELD_SIZE_(struct gpc_ledger_share, f)
_Static_assert(0 GPC_LEDGER_DEV_CARRIED(GPC_LEDGER_DEV_SIZE_) GPC_LEDGER_DEV_SET(GPC_LEDGER_DEV_SIZE_) ==
                   sizeof(struct gpc_ledger_dev),
               "a field of struct gpc_ledger_dev is in neither GPC_LEDGER_DEV_CARRIED nor GPC_LEDGER_DEV_SET");
_Static_assert(0 GPC_LEDGER_PROC_CARRIED(GPC_LEDGER_PROC_SIZE_) GPC_LEDGER_PROC_SET(GPC_LEDGER_PROC_SIZE_) ==
                   sizeof(struct gpc_ledger_proc),
               "a field of struct gpc_ledger_proc is in neither GPC_LEDGER_PROC_CARRIED nor GPC_LEDGER_PROC_SET");
_Static_assert(0 GPC_LEDGER_SHARE_CARRIED(GPC_LEDGER_SHARE_SIZE_) == sizeof(struct gpc_ledger_share),
               "a field of struct gpc_ledger_share is not in GPC_LEDGER_SHARE_CARRIED");
_Static_assert(0 GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, limit) GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, leased)
                       GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, peak) GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, allocs)
                           GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, frees) GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, denials)
                               GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, largest)
                                   GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, first_denial_ns)
                                       GPC_LEDGER_FIELD_SIZE_(struct gpc_slot, contexts) == sizeof(struct gpc_slot),
               "a field of struct gpc_slot is not in GPC_LEDGER_DEV_CARRIED");

/* The name of a live change's origin (GPC_LIMIT_BY_*, the low bits of `by`): "platform", "set-memory",
 * "settings", "arbiter", else "unknown". */
const char *gpc_limit_by_name(unsigned by);

/*
 * A device entry's burstable figures (issue 35) as the tools show them (`gpucap status`, the
 * report, the exporter): R, L, G as last applied, loaned = G - R above 0 (what the arbiter lends
 * now), the peak in use above R, the datagrams sent to the arbiter, and of the live changes kept the
 * arbiter's (grant changes) and how many of them lowered the budget (a loan taken back).
 */
struct gpc_ledger_qos {
    bool burstable;
    uint64_t request, limit, grant, loaned, loaned_peak;
    uint32_t loan_asks;
    unsigned arbiter_changes, arbiter_lowerings;
};
void gpc_ledger_qos_of(const struct gpc_ledger_dev *d, struct gpc_ledger_qos *q);

/* ---- a fresh ledger (ledger_make.c) ---- */

/* Writes the header and initialises the locks of a fresh (zero) ledger mapping. */
void gpc_ledger_format(struct gpc_ledger *l);
/*
 * Makes a whole, fresh ledger file at `path` with permissions `mode` (the umask does not apply):
 * written under a temporary name first, so nothing ever sees half a ledger. 0, -EEXIST when
 * something is at the path already (left as it is), or another -errno.
 */
int gpc_ledger_create(const char *path, unsigned mode);

/* ---- the read side (ledger_read.c) ---- */

/*
 * Why a ledger file or mapping is not usable: one value per kind (the exporter counts skipped
 * files by kind), with a line of text for people in gpc_ledger_problem.text ("truncated (shorter
 * than its header)", "layout version 2, this gpucap reads version 7", ...).
 */
enum gpc_ledger_fault {
    GPC_LEDGER_USABLE = 0,
    GPC_LEDGER_UNREADABLE,    /* fstat or read failed */
    GPC_LEDGER_NOT_REGULAR,   /* not a regular file */
    GPC_LEDGER_TOO_LARGE,     /* larger than a ledger: not one */
    GPC_LEDGER_TRUNCATED,     /* shorter than a ledger */
    GPC_LEDGER_NOT_LEDGER,    /* the wrong magic number */
    GPC_LEDGER_OTHER_VERSION, /* another layout version */
    GPC_LEDGER_CORRUPT,       /* header sizes, or a device entry's state, this layout cannot have */
    GPC_LEDGER_TORN,          /* the identity block was being written during every copy */
};
struct gpc_ledger_problem {
    enum gpc_ledger_fault fault;
    char text[160];
};
/* Checks a mapped or copied ledger of `file_size` bytes: the fault (GPC_LEDGER_USABLE if none),
 * also in *why (optional) with its text. */
enum gpc_ledger_fault gpc_ledger_check(const struct gpc_ledger *l, uint64_t file_size, struct gpc_ledger_problem *why);
/*
 * The one way a reader copies a ledger: the open file `fd` into *copy with pread(2) (never a
 * mapping: a file shrunk under a mapping raises SIGBUS; whatever the file lacks reads as zero),
 * then gpc_ledger_check; the identity block is whole when its seqlock did not move during the
 * copy, else the copy is made again, GPC_LEDGER_COPY_TRIES times at most (GPC_LEDGER_TORN: the
 * copy's figures are whole, its identity may not be). The fault, also in *why (optional).
 */
#define GPC_LEDGER_COPY_TRIES 3
enum gpc_ledger_fault gpc_ledger_copy(int fd, struct gpc_ledger *copy, struct gpc_ledger_problem *why);
/*
 * gpc_ledger_copy for a reader of figures that looks only below procs_used (the exporter, the
 * agent): the head (header, identity, device entries) and the process entries below the header's
 * procs_used, clamped to the table and stored clamped in the copy; the entries above it are left as
 * the buffer had them. Some 9 KiB a ledger instead of the whole file.
 */
enum gpc_ledger_fault gpc_ledger_copy_used(int fd, struct gpc_ledger *copy, struct gpc_ledger_problem *why);

/*
 * What one process has in use under share `s`: its lease less its spare, read so that a lease and
 * a spare that change together are never paired torn (bounded retries).
 */
uint64_t gpc_ledger_share_in_use(const struct gpc_ledger_share *s);
/* What the processes of ledger `l` have in use on device entry `dev`: the sum of their shares. */
uint64_t gpc_ledger_in_use(const struct gpc_ledger *l, int dev);
/* The same, without the shares of processes that are dead (gpc_ledger_entry_live, `fd` as there) but
 * that no library reaped yet. */
uint64_t gpc_ledger_in_use_live(const struct gpc_ledger *l, int dev, int fd);
/*
 * The figure a request of `gpucap set-memory` that no process applied yet asks for on device entry
 * d, resolved as the library resolves it (a share of the driver's limit where one is recorded, else
 * of the card; never above that limit); 0 when none is pending.
 */
uint64_t gpc_ledger_pending_limit(const struct gpc_ledger_dev *d);
/* The peak of device entry `dev`: the highest of the sums seen, of each process's own peak and of
 * what is in use now (a lower bound when several processes share it: see the README). */
uint64_t gpc_ledger_peak(const struct gpc_ledger *l, int dev);

/* The byte of a ledger file whose OFD lock holds process entry i (past the file's end: no data). */
#define GPC_LEDGER_LOCK_AT(i) ((int64_t)sizeof(struct gpc_ledger) + (int64_t)(i))
/*
 * Whether byte GPC_LEDGER_LOCK_AT(i) of the ledger file is locked by an open file description other
 * than `fd`'s (fd: a descriptor of the ledger file that holds no lock itself): 1 yes, 0 no, -1 the
 * kernel cannot tell (no OFD locks).
 */
int gpc_ledger_lock_held(int fd, int i);
/*
 * True if the process of entry i of ledger l still holds what it was charged, that is, if some
 * process still holds its device files. An entry held by its lock (p->locked) is alive exactly
 * while the lock is (`fd`: a descriptor of the ledger's file that holds no lock, -1: none): that is
 * a fork or raw clone child that keeps its parent's descriptors as much as the process itself, in
 * any PID namespace. Otherwise, and where the lock cannot be asked, gpc_ledger_proc_alive.
 */
int gpc_ledger_entry_live(const struct gpc_ledger *l, int i, int fd);
/*
 * For a reader outside the processes' PID namespace (the exporter, on the node): entry i is held
 * when its lock is (asked through fd), or, not held by a lock (or the lock not to be asked), when it
 * has a pid: as the ledger records it, since a pid cannot be checked from another namespace.
 */
int gpc_ledger_entry_held(const struct gpc_ledger *l, int i, int fd);
/* What the entries so held have in use on device entry `dev`. */
uint64_t gpc_ledger_in_use_held(const struct gpc_ledger *l, int dev, int fd);
/*
 * The rules by pid, for an entry not held by its lock: pid and start time both match (an entry
 * without a start time is not alive), it is not dead waiting to be reaped (a zombie: its device
 * files are closed, so is its memory), and, when `p` says an exec is under way, the image that held
 * the share still runs (the entry of a process before its exec is gone once that went through).
 * Unknowable is alive.
 */
int gpc_ledger_proc_alive(int32_t pid, uint64_t start_time, const struct gpc_ledger_proc *p);
struct gpc_settings;
/*
 * The ledger's path by the settings `s` (GPUCAP_LEDGER, ini `ledger`), else
 * /tmp/gpucap-<euid>.ledger, into buf. 0, or -ENOENT when it is "off" (a budget private to each
 * process: no file).
 */
int gpc_ledger_path(const struct gpc_settings *s, char *buf, size_t len);

#endif
