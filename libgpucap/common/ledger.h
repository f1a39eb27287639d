/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger.h: the layout of the shared ledger file, read by the library (ledger.c) and by
 * `gpucap status` (tools/). Fixed size, no pointers; atomics and process-shared robust mutexes only.
 * Any change to it must bump GPC_LEDGER_VERSION.
 */
#ifndef GPUCAP_LEDGER_H
#define GPUCAP_LEDGER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GPC_LEDGER_MAGIC 0x5247444c43504721ULL /* "!GPCLDGR" */
#define GPC_LEDGER_VERSION 7u
#define GPC_LEDGER_DEVICES 32
#define GPC_LEDGER_PROCS 1024

/*
 * A budget: what admission works on, one per device entry, in the shared ledger and in a private
 * budget alike. Processes do not admit against `leased` one allocation at a time: each holds a
 * lease (struct gpc_ledger_share) granted from it under the entry's lock, and admits inside its
 * lease without any lock (budget.c). What is in use is what the processes admitted, the sum that
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
     * dropped below `leased` and what the processes hold keeps it there (budget.c). Under `lock`. */
    _Atomic uint32_t closed;
    uint8_t uuid[16];           /* cuDeviceGetUuid_v2: the same card whatever its ordinal */
    uint64_t physical;          /* bytes, as the driver reports them */
    struct gpc_slot slot;
    pthread_mutex_t lock;       /* robust, process-shared: leases granted and taken back */
    /* The journal of a lease being taken back from process `victim - 1` (0: none), so that the
     * next locker completes it exactly if the taker dies half-way (budget.c, ledger.c). */
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
};
/* Who changed a limit while processes ran (gpc_ledger_dev.limit_by). */
#define GPC_LIMIT_BY_PLATFORM 1u /* the platform settings file was rewritten (the node agent) */
#define GPC_LIMIT_BY_CLI 2u      /* `gpucap set-memory` on a ledger of unlocked settings */
#define GPC_LIMIT_BY_MASK 0xffu
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
 * change it (budget.c: closed while the device's limit is below its leases). The bytes are the low
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
    /* A close-on-exec descriptor the process keeps open (its ledger file), and the identity of the
     * file it names: gone from /proc/<pid>/fd once an exec went through, as the driver's are. */
    _Atomic int32_t exec_fd;
    _Atomic uint32_t took_set; /* v7: 1 when it took a budget held by `gpucap set-memory` (GPC_LIMIT_HELD) */
    _Atomic uint64_t exec_fd_dev, exec_fd_ino;
    /* 1 while this process holds its liveness lock (GPC_LEDGER_ALIVE_AT); 0: it holds none (a
     * writer of an earlier gpucap, which left this padding 0, a file without record locks, an entry
     * moved to another file): readers cannot tell from the file. Same layout: a padding word. */
    _Atomic uint32_t alive_lock;
    char pad2[20];              /* the shares start on a cache line of their own */
    struct gpc_ledger_share share[GPC_LEDGER_DEVICES];
} __attribute__((aligned(64)));

/*
 * The liveness lock of process entry `i`: a POSIX record lock (fcntl F_SETLK, F_RDLCK) of one byte
 * at this offset of the file, taken by the process that holds the entry, on the close-on-exec
 * descriptor it keeps. The kernel drops it when the process dies or execs, a fork child does not
 * inherit it, and any reader of the file sees it (F_OFD_GETLK), whatever its PID namespace: a
 * reader that cannot check the entry's pid (gpucap-exporter, on the node) tells a dead process by
 * it (gpc_ledger_proc_locked).
 */
#define GPC_LEDGER_ALIVE_AT(i) \
    ((off_t)(offsetof(struct gpc_ledger, proc) + (size_t)(i) * sizeof(struct gpc_ledger_proc)))

/*
 * Who the ledger belongs to (v3): the GPUCAP_POD_* and GPUCAP_CONTAINER_NAME settings, which the
 * webhook fills from the downward API, and the writer's gpucap version. Written by each process
 * that attaches, under table_lock (gpc_ledger_identify); `seq` is odd while a write is under way, so
 * a reader that takes no lock (gpucap-exporter) can tell a torn copy. gpucap writes NUL-terminated
 * strings; readers bound them by the field size all the same (the file is the tenant's).
 * `mode` took the place of a padding word that every writer left 0, so the layout and its version
 * are unchanged and 0 reads as "not recorded".
 */
#define GPC_IDENTITY_NAME 64  /* namespace, container name, pod UID: at most 63 characters */
#define GPC_IDENTITY_POD 256  /* pod name: at most 253 characters */
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
    char reserved[120];
    struct gpc_ledger_identity identity;
    struct gpc_ledger_dev dev[GPC_LEDGER_DEVICES];
    struct gpc_ledger_proc proc[GPC_LEDGER_PROCS];
};

/* Writes the header and initialises the locks of a fresh (zero) ledger mapping. */
void gpc_ledger_format(struct gpc_ledger *l);
/*
 * Makes a whole, fresh ledger file at `path` with permissions `mode` (the umask does not apply):
 * written under a temporary name first, so nothing ever sees half a ledger. 0, -EEXIST when
 * something is at the path already (left as it is), or another -errno.
 */
int gpc_ledger_create(const char *path, unsigned mode);

/*
 * Checks a mapped ledger of `file_size` bytes: NULL if it is usable, else the reason, e.g.
 * "truncated", "not a gpucap ledger", "layout version 2, this gpucap reads 1". It reads the header
 * and the device entries only (all before `proc`).
 */
const char *gpc_ledger_check(const struct gpc_ledger *l, uint64_t file_size, char *buf, unsigned len);
/* What gpc_ledger_check() found, for a reader that acts on it (not on its text). */
enum gpc_ledger_fault {
    GPC_LEDGER_USABLE,
    GPC_LEDGER_TRUNCATED,     /* shorter than its header, or than a ledger */
    GPC_LEDGER_NOT_LEDGER,    /* another magic number */
    GPC_LEDGER_OTHER_VERSION, /* another layout version */
    GPC_LEDGER_CORRUPT,       /* sizes or device states that no gpucap writes */
};
/* gpc_ledger_check(), with what it found in *fault as well. */
const char *gpc_ledger_check_fault(const struct gpc_ledger *l, uint64_t file_size, char *buf, unsigned len,
                                   enum gpc_ledger_fault *fault);

/*
 * Reads /proc/<pid>/<file> (one read: the start of a longer file) into `buf` of `len` (> 0) bytes,
 * NUL-terminated: the bytes read, or -errno (buf then "").
 */
int gpc_proc_read(int32_t pid, const char *file, char *buf, size_t len);
/* Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 if unreadable. */
uint64_t gpc_proc_start_time(int32_t pid);

/*
 * What one process has in use under share `s`: its lease less its spare, read so that a lease and
 * a spare that change together are never paired torn (bounded retries).
 */
uint64_t gpc_ledger_share_in_use(const struct gpc_ledger_share *s);
/* What the processes of ledger `l` have in use on device entry `dev`: the sum of their shares. */
uint64_t gpc_ledger_in_use(const struct gpc_ledger *l, int dev);
/* The same, without the shares of processes that are dead (gpc_ledger_proc_alive: /proc reads;
 * for a reader in the processes' PID namespace, at a report) but that no library reaped yet. */
uint64_t gpc_ledger_in_use_live(const struct gpc_ledger *l, int dev);
/* The peak of device entry `dev`: the highest of the sums seen, of each process's own peak and of
 * what is in use now (a lower bound when several processes share it: see the README). */
uint64_t gpc_ledger_peak(const struct gpc_ledger *l, int dev);

/*
 * True if the process of a ledger entry still holds what it was charged: pid and start time both
 * match (an entry without a start time is not alive), it is not dead waiting to be reaped (a
 * zombie: its device files are closed, so is its memory), and, when `p` says an exec is under way,
 * the image that held the share still has its close-on-exec descriptor. Unknowable is alive.
 */
int gpc_ledger_proc_alive(int32_t pid, uint64_t start_time, const struct gpc_ledger_proc *p);
/*
 * Whether the process of entry `i` of the ledger open at `fd` (any mode) still holds its liveness
 * lock (GPC_LEDGER_ALIVE_AT): 1 yes, 0 no (the process is gone, or exec'd), -1 cannot tell (no
 * record locks on that file system). Meaningful only for an entry whose alive_lock is 1. Takes no
 * lock and changes nothing.
 */
int gpc_ledger_proc_locked(int fd, int i);
/*
 * True when entry `i` of `l` (a copy or mapping of the ledger open at `fd`) belongs to a process
 * that is gone, as a reader in any PID namespace can tell: it said it held its liveness lock, and
 * the lock is not there. An entry that never said so cannot be told: false. What such a process
 * held is not in use any more (its memory went with it).
 */
bool gpc_ledger_proc_gone(const struct gpc_ledger *l, int i, int fd);
/*
 * Whether `path` is a file mounted on its own (a bind mount, as the webhook mounts the platform file
 * and the ledger): 1 yes, 0 no, -1 cannot tell (a kernel without statx's mount id, or no such path).
 * With `fd`, the file found at `path` must also be the one `fd` holds (0 otherwise). The file is
 * looked up in its directory, opened first: a directory renamed meanwhile changes nothing.
 */
int gpc_path_own_mount(const char *path, int fd);

struct gpc_settings;
/*
 * ledger_check.c: the ledger's path by the settings `s` (GPUCAP_LEDGER, ini `ledger`), else
 * /tmp/gpucap-<euid>.ledger, into buf. 0, or -ENOENT when it is "off" (a budget private to each
 * process: no file).
 */
int gpc_ledger_path(const struct gpc_settings *s, char *buf, size_t len);

#endif
