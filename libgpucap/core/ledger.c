/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger.c: the crash-safe record of usage that the processes of one container share.
 *
 * The ledger is a file (GPUCAP_LEDGER; by default /tmp/gpucap-<uid>.ledger: /tmp belongs to one
 * container, so all of its processes meet there without a setting, two containers of a pod do not,
 * and two local users do not either), mapped by every process that touches CUDA. It holds one entry
 * per device, keyed by the device UUID so that processes with different CUDA_VISIBLE_DEVICES agree,
 * and one entry per process with its share of each device.
 *
 * Crash safety: each process holds a lease per device (budget.c), granted and taken back under the
 * device entry's robust mutex, which is its share of the total. If a process dies holding the
 * lock, the next locker gets EOWNERDEAD, finishes a take-back the dead one had journalled, and
 * recomputes the total from the leases. A share is given back when its memory really is, which is
 * never while the process runs code: not at exit (the driver frees memory when the process's
 * device files close, after every destructor), but once it is dead, by gpc_ledger_reap(), which
 * budget.c calls before any denial and the figure queries call rate-limited. A process is dead
 * when its pid is gone or now belongs to a process with another start time, when it is a zombie,
 * or when it exec'd (hooks_exec.c marks the entry; the close-on-exec descriptor the entry names is
 * then gone: gpc_ledger_proc_alive). An exec'd image that calls CUDA takes over its pid's entry
 * from zero. Whenever a process leaves, the device limits are recomputed from those still there;
 * every entry carries its process's own limit, a fork child's included. No wait is longer than
 * LOCK_WAIT_MS (releases take no lock); there is never an exit(). A lock left not recoverable
 * makes the ledger broken: it is rebuilt under a fresh file (repair()). A file that the path no
 * longer names (removed, renamed, replaced) is noticed at the next locked step, and the process
 * moves its share to the file now at the path (relocate()).
 *
 * The file is created whole under a temporary name and moved into place, so no process ever maps
 * a half-initialised ledger. Owner-only by default; GPUCAP_LEDGER_GROUP=1 makes it group-shared. A
 * ledger that cannot be used (corrupted, truncated, another layout version, foreign, open to other
 * users, with a second name, not writable) is one error line naming the file and the reason, and
 * the process then has a private budget. Under the platform's lock the ledger is the platform's
 * (gpucap inject makes it, 0666, owned by the platform file's owner): the library never creates
 * or rebuilds one and never falls back to a private budget, and an unusable one is the error line
 * and then a denial of every allocation (a private budget per process would multiply the cap).
 *
 * Whoever can write the file can also shrink it, and touching a shared mapping past the end of its
 * file raises SIGBUS. From attach on, a SIGBUS handler guards the mapping (and only it: other faults
 * go to the handler the process had before): it maps zero pages over the ledger so that the access
 * is retried on private memory, and the next budget call or figure moves this process to a private
 * budget charged with exactly what it holds (gpc_ledger_recover), with one error line.
 */
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "gpucap.h"

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
#include <sys/types.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_WAIT_MS 200
/* A process entry without a start time counts as alive this long (a claim in progress). */
#define CLAIM_GRACE_MS 1000
/* Figures are reported after dead processes are reaped, at most this often per process. */
#define REAP_EVERY_MS 100

struct gpc_ledger *gpc_ledger;
bool gpc_ledger_shared;
static char ledger_path[512];
static int my_proc = -1; /* under me_lock; gpc_ledger_entry points at it for the allocation path */
struct gpc_ledger_proc *_Atomic gpc_ledger_entry;
static pthread_mutex_t me_lock = PTHREAD_MUTEX_INITIALIZER;

atomic_bool gpc_ledger_broken;
/* Under the platform's lock the ledger was refused: every budget denies. */
static atomic_bool ledger_refused;
/* What this process registered, kept outside the mapping: enough to rebuild its budget privately
 * (`limit`: the smaller of its own and the ledger's then) and to register again (`own`). */
static struct {
    bool known;
    uint8_t uuid[16];
    uint64_t physical;
    _Atomic uint64_t limit, own; /* moved by a live change (gpc_ledger_note_limit) */
} my_devs[GPC_LEDGER_DEVICES];
/* The ledger file's descriptor, kept open close-on-exec (an exec shows as its absence, see
 * gpc_ledger_proc_alive), and the identity of the file it names; the identity of the file mapped
 * now (another one after a move), which the path must still name. */
static int keep_fd = -1;
static uint64_t keep_dev, keep_ino;
/* The mapping of keep_fd's file: only its entries can carry this process's liveness lock. */
static struct gpc_ledger *keep_map;
static _Atomic uint64_t mapped_dev, mapped_ino; /* written under repair_lock, read by any locker */
/* A file found at the path that this process could not move to (logged once). */
static _Atomic uint64_t refused_dev, refused_ino;
/* The mapping the SIGBUS handler repairs (0: none), and the handler that was there before. */
static _Atomic uintptr_t guarded;
static struct sigaction prev_sigbus;

/* ---- locking ---- */

/*
 * A take-back of spare (budget.c, take_back) journalled in entry d and not finished, whoever was
 * doing it: finishes it. The generation of the victim's spare tells whether the compare-and-swap
 * was done (only lock holders move it), its lease whether the lease was lowered after it.
 */
static void finish_take_back(struct gpc_ledger *l, struct gpc_ledger_dev *d, int id)
{
    int32_t victim = atomic_load(&d->victim);
    if (victim <= 0 || victim > GPC_LEDGER_PROCS) {
        atomic_store(&d->victim, 0);
        return;
    }
    struct gpc_ledger_share *s = &l->proc[victim - 1].share[id];
    uint64_t before = atomic_load(&d->victim_spare), after = atomic_load(&d->victim_spare_after);
    uint64_t lease = atomic_load(&d->victim_lease), took = (before & GPC_SPARE_MASK) - (after & GPC_SPARE_MASK);
    if ((atomic_load(&s->spare) >> GPC_SPARE_BITS) == (after >> GPC_SPARE_BITS) && atomic_load(&s->lease) == lease)
        atomic_store(&s->lease, lease >= took ? lease - took : 0);
    atomic_store(&d->victim, 0);
}

/*
 * Device entry d after its lock's owner died inside it: a journalled take-back is finished, every
 * generation left odd is made even (only a lock holder leaves one so), and the total is rebuilt
 * from the leases. Also used on a ledger copied from a broken one.
 */
static void settle_device(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    int id = (int)(d - l->dev);
    finish_take_back(l, d, id);
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_share *s = &l->proc[i].share[id];
        if ((atomic_load(&s->spare) >> GPC_SPARE_BITS) & 1)
            atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
        /* Never spare above the lease (a writer of the file, or a layout of an older version, may
         * have left one): it would admit past the lease, and a take-back would take the lease
         * below zero. A compare-and-swap: the owner may be freeing into it now. */
        uint64_t lease = atomic_load(&s->lease), w = atomic_load(&s->spare);
        while ((w & GPC_SPARE_MASK) > lease &&
               !atomic_compare_exchange_weak(&s->spare, &w, (w & ~GPC_SPARE_MASK) | lease))
            ;
        if (atomic_load(&l->proc[i].pid) != 0)
            sum += lease;
    }
    atomic_store(&d->slot.leased, sum);
}

/* The owner died inside the critical section: the total is rebuilt from the leases. */
static void recover_device(struct gpc_ledger *l, struct gpc_ledger_dev *d)
{
    settle_device(l, d);
    gpc_log(GPC_LOG_WARN, "ledger %s: a process died holding device entry %d; its total was rebuilt (%llu bytes "
            "leased)", ledger_path, (int)(d - l->dev), (unsigned long long)atomic_load(&d->slot.leased));
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

/* Locks a robust mutex of the ledger, recovering a dead owner's device entry: 0 or -errno
 * (-ETIMEDOUT after LOCK_WAIT_MS, -ENOTRECOVERABLE for a broken lock), logged with `consequence`. */
static int lock_robust(pthread_mutex_t *m, struct gpc_ledger *l, struct gpc_ledger_dev *d, const char *consequence)
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
    if (rc == 0 || !consequence) {
        /* quiet: the caller says what follows */
    } else if (rc == ETIMEDOUT) {
        int32_t tid, pid = lock_holder(m, &tid);
        if (pid > 0 && pid != tid)
            gpc_log(GPC_LOG_ERROR, "ledger %s: process %d (thread %d) has held a lock for more than %d ms; %s",
                    ledger_path, (int)pid, (int)tid, LOCK_WAIT_MS, consequence);
        else if (pid > 0)
            gpc_log(GPC_LOG_ERROR, "ledger %s: process %d has held a lock for more than %d ms; %s", ledger_path,
                    (int)pid, LOCK_WAIT_MS, consequence);
        else
            gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was not obtained within %d ms; %s", ledger_path, LOCK_WAIT_MS,
                    consequence);
    } else if (rc == ENOTRECOVERABLE) {
        /* A broken ledger: the caller rebuilds it and says so (repair()). */
    } else if (rc != 0) {
        gpc_log(GPC_LOG_ERROR, "ledger %s: lock failed (%s); %s", ledger_path, strerror(rc), consequence);
    }
    return -rc;
}

static int write_file(mode_t mode, const struct gpc_ledger *old);
static int repair(struct gpc_ledger *old);
static void relock(void);
static void relocate(struct gpc_ledger *old);
static int lock_setup(pthread_mutex_t *m);
static void guard(struct gpc_ledger *l);

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
    if (stat(ledger_path, &st) != 0)
        return errno == ENOENT;
    uint64_t dev = (uint64_t)st.st_dev, ino = (uint64_t)st.st_ino;
    return !(dev == mapped_dev && ino == mapped_ino) && !(dev == refused_dev && ino == refused_ino);
}

struct gpc_ledger_dev *gpc_ledger_lock_dev(int id, const char *consequence)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct gpc_ledger *l = gpc_ledger;
        struct gpc_ledger_dev *d = &l->dev[id];
        int rc = lock_robust(&d->lock, l, d, consequence);
        if (rc == 0 && gpc_likely(!atomic_load_explicit(&l->broken, memory_order_relaxed))) {
            /* The file at the path is the one every process meets: move there first. */
            if (attempt == 2 || gpc_likely(!path_moved()))
                return d;
            pthread_mutex_unlock(&d->lock);
            relocate(l);
            continue;
        }
        if (rc == 0)
            pthread_mutex_unlock(&d->lock);
        else if (rc != -ENOTRECOVERABLE)
            return NULL;
        /* This file was rebuilt elsewhere, or its lock is beyond repair: move to the fresh one. */
        if (repair(l) != 0)
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
    if (rc != 0)
        return NULL;
    if (gpc_unlikely(atomic_load_explicit(&l->broken, memory_order_relaxed))) {
        pthread_mutex_unlock(&d->lock);
        return NULL;
    }
    return d;
}

void gpc_ledger_unlock(struct gpc_ledger_dev *d)
{
    pthread_mutex_unlock(&d->lock);
}

/* ---- attaching ---- */

static void use_private(const char *why)
{
    if (why)
        gpc_log(GPC_LOG_ERROR, "ledger %s: %s; this process has a private budget (not shared with other "
                "processes) until it is fixed; see `gpucap status`", ledger_path, why);
    void *m = mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        /* Nowhere to count: every budget of this process denies (never uncapped). */
        static struct gpc_ledger *none;
        gpc_log(GPC_LOG_ERROR, "no memory for a budget; every allocation is denied");
        gpc_ledger = none;
        return;
    }
    gpc_ledger_format(m);
    gpc_ledger = m;
    gpc_ledger_shared = false;
}

/* ---- the SIGBUS guard ---- */

/*
 * A fault inside the ledger mapping: the file was shrunk under us. Zero pages replace the whole
 * ledger (mmap is a plain system call, safe here) and the access is retried on them. Any other
 * fault is the process's own business: the previous handler, or the default action, which the
 * retried access then takes.
 */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t base = atomic_load(&guarded);
    if (base && (uintptr_t)si->si_addr - base < sizeof(struct gpc_ledger)) {
        int saved = errno;
        void *m = mmap((void *)base, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        errno = saved;
        if (m != MAP_FAILED) {
            atomic_store(&gpc_ledger_broken, true);
            return;
        }
    }
    if (prev_sigbus.sa_flags & SA_SIGINFO) {
        prev_sigbus.sa_sigaction(sig, si, uc);
    } else if (prev_sigbus.sa_handler == SIG_DFL || prev_sigbus.sa_handler == SIG_IGN) {
        /* A synchronous SIGBUS cannot be ignored: the kernel would deliver it again forever. */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(SIGBUS, &dfl, NULL);
    } else {
        prev_sigbus.sa_handler(sig);
    }
}

/* Guards the mapping at `l`, installing the handler; NULL (at attach only): puts the old one back. */
static void guard(struct gpc_ledger *l)
{
    static bool installed;
    atomic_store(&guarded, (uintptr_t)l);
    if (!l && installed) {
        sigaction(SIGBUS, &prev_sigbus, NULL);
        installed = false;
    } else if (l && !installed) {
        struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESTART};
        sigemptyset(&sa.sa_mask);
        installed = sigaction(SIGBUS, &sa, &prev_sigbus) == 0;
    }
}

void gpc_ledger_recover(void)
{
    static pthread_mutex_t recover_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&recover_lock);
    if (!gpc_ledger_shared)
        goto out;
    if (gpc_config.locked) {
        /* No private budget under the lock: the zero pages stay, every limit reads 0, all is denied. */
        gpc_ledger_shared = false;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the file was shrunk under this process (by another process that can "
                "write it); under the platform's lock every allocation of this process is denied from here on",
                ledger_path);
        goto out;
    }
    struct gpc_ledger *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t held = 0;
    if (m != MAP_FAILED) {
        /* Same entry indices: the budget ids that device.c handed out stay valid. */
        gpc_ledger_format(m);
        for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
            if (!my_devs[i].known)
                continue;
            struct gpc_ledger_dev *d = &m->dev[i];
            /* What this process holds, by its own count: the spare was lost with the file, and a
             * share charged its lease would keep that spare charged for good. */
            uint64_t mine = gpc_budget_held(i);
            memcpy(d->uuid, my_devs[i].uuid, 16);
            d->physical = my_devs[i].physical;
            atomic_store(&d->slot.limit, my_devs[i].limit);
            atomic_store(&d->slot.leased, mine);
            atomic_store(&d->slot.peak, mine);
            atomic_store(&d->state, 1);
            if (my_proc >= 0) {
                atomic_store(&m->proc[my_proc].share[i].lease, mine);
                atomic_store(&m->proc[my_proc].share[i].spare, GPC_SPARE_OPEN);
                atomic_store(&m->proc[my_proc].share[i].limit, my_devs[i].own);
            }
            held += mine;
        }
        if (my_proc >= 0) {
            atomic_store(&m->proc[my_proc].pid, getpid());
            atomic_store(&m->procs_used, (uint32_t)my_proc + 1);
        }
        gpc_ledger = m;
        if (my_proc >= 0)
            atomic_store(&gpc_ledger_entry, &m->proc[my_proc]);
    }
    /* Without memory for a new one the zeroed mapping stays: every limit reads 0, all is denied. */
    gpc_ledger_shared = false;
    gpc_log(GPC_LOG_ERROR, "ledger %s: the file was shrunk under this process (by another process that can "
            "write it); this process has a private budget from here on, charged with the %llu bytes it holds; "
            "see `gpucap status`", ledger_path, (unsigned long long)held);
out:
    pthread_mutex_unlock(&recover_lock);
}

/* ---- who may share a ledger ---- */

static bool in_my_groups(gid_t gid)
{
    if (gid == getegid())
        return true;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/*
 * Why an open ledger file must not be used, or NULL. Whoever can write it can read and stall the
 * budget of every process that maps it: only its owner, or with group mode a group of this
 * process, may share it; no permission for others; and one name only (a second name, a hard link
 * made elsewhere, may be in another user's hands).
 */
static const char *refused(const struct stat *st, bool group, char *why, size_t len)
{
    if (!S_ISREG(st->st_mode))
        return "is not a regular file";
    bool owner = st->st_uid == geteuid();
    if (!owner && !group) {
        snprintf(why, len, "belongs to uid %u, not to this user (set GPUCAP_LEDGER_GROUP=1 to share it with a "
                 "group)", (unsigned)st->st_uid);
        return why;
    }
    if (!owner && !(in_my_groups(st->st_gid) && (st->st_mode & 0060) == 0060)) {
        snprintf(why, len, "belongs to uid %u and group %u: neither this user nor a group of this process that "
                 "can write it", (unsigned)st->st_uid, (unsigned)st->st_gid);
        return why;
    }
    if (st->st_mode & 0007) {
        snprintf(why, len, "is open to every user (mode %04o); a ledger must give others no permission",
                 (unsigned)(st->st_mode & 07777));
        return why;
    }
    if (st->st_nlink != 1) {
        snprintf(why, len, "has %lu names (hard links); a ledger must have one", (unsigned long)st->st_nlink);
        return why;
    }
    return NULL;
}


/*
 * Why a ledger file must not be used under the platform's lock, or NULL. The platform made it
 * (`gpucap inject --ledgers`): a regular file with one name, owned by the platform's uid (the owner
 * of the platform file, which the tenant cannot write), mode 0666 so that every user of the
 * container counts in it. A file of anyone else, or with another mode, is not the platform's.
 */
static const char *refused_locked(const struct stat *st, char *why, size_t len)
{
    if (!S_ISREG(st->st_mode))
        return "is not a regular file";
    uid_t owner = gpc_config.platform_uid;
    if (owner == GPC_NO_UID)
        return "cannot be checked: the owner of the platform file is unknown";
    if (st->st_uid != owner) {
        snprintf(why, len, "belongs to uid %u, not to the platform (uid %u, the owner of the platform file)",
                 (unsigned)st->st_uid, (unsigned)owner);
        return why;
    }
    if ((st->st_mode & 07777) != 0666) {
        snprintf(why, len, "has mode %04o, the platform's ledger has mode 0666", (unsigned)(st->st_mode & 07777));
        return why;
    }
    if (st->st_nlink != 1) {
        snprintf(why, len, "has %lu names (hard links); a ledger must have one", (unsigned long)st->st_nlink);
        return why;
    }
    return NULL;
}

/* Why the platform's ledger could not be opened, from open()'s errno. */
static const char *open_failure_locked(int err, char *why, size_t len)
{
    switch (err) {
    case ENOENT:
        return "is missing (under the platform's lock only the platform makes it: gpucap inject --ledgers)";
    case ELOOP:
        return "is a symbolic link";
    case EISDIR:
        return "is a directory";
    case ENXIO: /* a socket, or a device node without its device: never a regular file */
        return "is not a regular file";
    default:
        snprintf(why, len, "cannot be opened for reading and writing (%s)", strerror(err));
        return why;
    }
}

/*
 * Under the platform's lock an unusable ledger is not replaced by one of this process: a private
 * budget per process would multiply the cap by the number of processes. Every budget denies
 * (gpc_ledger_device answers -EACCES), after this one line.
 */
static void deny_all(const char *why)
{
    gpc_log(GPC_LOG_ERROR, "ledger %s: %s; under the platform's lock the library makes no ledger and keeps no "
            "private budget: every allocation is denied until the platform's ledger is back", ledger_path, why);
    gpc_ledger = NULL;
    gpc_ledger_shared = false;
    atomic_store(&ledger_refused, true);
}

/* The ledger cannot be used: a denial under the lock, else a private budget. */
static void unusable(const char *why)
{
    if (gpc_config.locked)
        deny_all(why);
    else
        use_private(why);
}

void gpc_ledger_attach(void)
{
    if (gpc_ledger_path(&gpc_config, ledger_path, sizeof ledger_path) == -ENOENT) {
        /* "off": a budget private to each process, chosen by whoever set it (the platform, if locked). */
        use_private(NULL);
        return;
    }
    bool locked = gpc_config.locked;
    bool group = gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP);
    mode_t mode = group ? 0660 : 0600;
    char why[160];

    int fd = -1;
    if (locked) {
        /* Never created here; O_NONBLOCK: a FIFO planted in its place must not hang the process. */
        fd = open(ledger_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
            deny_all(open_failure_locked(errno, why, sizeof why));
            return;
        }
    }
    for (int attempt = 0; !locked && attempt < 3 && fd < 0; attempt++) {
        fd = open(ledger_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 || errno != ENOENT)
            break;
        int rc = write_file(mode, NULL);
        if (rc != 0 && rc != -EEXIST) {
            snprintf(why, sizeof why, "cannot be created (%s)", strerror(-rc));
            use_private(why);
            return;
        }
    }
    if (fd < 0) {
        snprintf(why, sizeof why, "cannot be opened for writing (%s)", strerror(errno));
        use_private(why);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        unusable("is not a regular file");
        return;
    }
    /* A creator without renameat2 holds a second name for an instant: wait that out (bounded). */
    for (int i = 0; !locked && i < 20 && S_ISREG(st.st_mode) && st.st_nlink == 2; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        if (fstat(fd, &st) != 0)
            break;
    }
    const char *no = locked ? refused_locked(&st, why, sizeof why) : refused(&st, group, why, sizeof why);
    /* The webhook mounts the platform file and the ledger each on its own: a ledger that is no mount
     * there is a file someone put in its place (a directory above the mount renamed away). */
    if (!no && locked && gpc_config.platform_mounted && gpc_path_own_mount(ledger_path, fd) == 0)
        no = "is not the file the platform mounted (no mount of its own, as the platform file is: a directory "
             "above it was replaced)";
    if (no) {
        close(fd);
        unusable(no);
        return;
    }
    struct gpc_ledger *l = st.st_size >= 16 ? mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE,
                                                   MAP_SHARED, fd, 0)
                                            : MAP_FAILED;
    if (l == MAP_FAILED) {
        close(fd);
        unusable("truncated (shorter than its header)");
        return;
    }
    /* Guarded before the first read; the size is taken again now that it is mapped. */
    guard(l);
    if (fstat(fd, &st) != 0)
        st.st_size = 0;
    char buf[128];
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, buf, sizeof buf);
    if (atomic_load(&gpc_ledger_broken))
        bad = "shrunk while it was being opened";
    if (bad) {
        close(fd);
        guard(NULL);
        munmap(l, sizeof *l);
        atomic_store(&gpc_ledger_broken, false);
        unusable(bad);
        return;
    }
    /* Kept open (close-on-exec): its absence after an exec tells readers the image is gone. */
    keep_fd = fd;
    keep_dev = mapped_dev = (uint64_t)st.st_dev;
    keep_ino = mapped_ino = (uint64_t)st.st_ino;
    keep_map = l;
    gpc_ledger = l;
    gpc_ledger_shared = true;
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

/*
 * What a rebuilt file carries over, field by field (atomic on both sides): CARRY(f) stores field
 * `f` of the old entry `o` into the new entry `n`. Of a device entry in use, its figures; of a
 * process entry, who holds it (also carried by a move to the file now at the path) and its shares.
 */
#define CARRY(f) atomic_store(&n->f, atomic_load(&o->f));
#define CARRIED_DEV(X)                                                                                 \
    X(slot.limit) X(slot.leased) X(slot.peak) X(slot.allocs) X(slot.frees) X(slot.denials)             \
    X(slot.largest) X(slot.first_denial_ns) X(slot.contexts) X(victim_spare) X(victim_spare_after)    \
    X(victim_lease) X(victim) X(limit_was) X(limit_changed_s) X(limit_asked) X(limit_changes) X(limit_by)     \
    X(closed) X(driver_limit) X(refused_driver) X(context_count) X(held_at_exit)
#define CARRIED_OWNER(X) X(start_time) X(exec_fd) X(exec_fd_dev) X(exec_fd_ino) X(took_set)
#define CARRIED_SHARE(X) X(lease) X(spare) X(peak) X(limit)

static void carry_owner(struct gpc_ledger_proc *n, const struct gpc_ledger_proc *o) { CARRIED_OWNER(CARRY) }
static void carry_share(struct gpc_ledger_share *n, const struct gpc_ledger_share *o) { CARRIED_SHARE(CARRY) }

static void copy_figures(struct gpc_ledger *l, const struct gpc_ledger *old)
{
    /* Whose ledger it is goes along (the fresh file is not yet visible: no seqlock needed). */
    memcpy(&l->identity, &old->identity, sizeof l->identity);
    atomic_store(&l->identity.seq, atomic_load(&old->identity.seq) & ~1u);
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        const struct gpc_ledger_dev *o = &old->dev[d];
        struct gpc_ledger_dev *n = &l->dev[d];
        if (atomic_load(&o->state) != 1)
            continue;
        memcpy(n->uuid, o->uuid, sizeof n->uuid);
        n->physical = o->physical;
        CARRIED_DEV(CARRY)
        atomic_store(&n->state, 1);
    }
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *o = &old->proc[i];
        struct gpc_ledger_proc *n = &l->proc[i];
        carry_owner(n, o);
        atomic_store(&n->execing, atomic_load(&o->execing));
        for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
            carry_share(&n->share[d], &o->share[d]);
        atomic_store(&n->pid, atomic_load(&o->pid));
    }
    atomic_store(&l->procs_used, atomic_load(&old->procs_used));
    /* Whatever the broken locks were in the middle of is settled in the copy. */
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        settle_device(l, &l->dev[d]);
}

/*
 * Writes a whole ledger under a temporary name and moves it to the path: 0 or -errno. With `old`
 * NULL a fresh one, never over another file; else one holding the figures of `old`, over the
 * broken file at the path. No process ever maps a half-written ledger.
 */
static int write_file(mode_t mode, const struct gpc_ledger *old)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.%s", ledger_path, (int)getpid(), old ? "rebuild" : "tmp");
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    fchmod(fd, mode);
    int rc = 0;
    void *m = MAP_FAILED;
    if (ftruncate(fd, sizeof(struct gpc_ledger)) != 0 ||
        (m = mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        rc = -errno;
    } else {
        gpc_ledger_format(m);
        if (old)
            copy_figures(m, old);
        munmap(m, sizeof(struct gpc_ledger));
        if (old) {
            if (rename(tmp, ledger_path) != 0)
                rc = -errno;
        } else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, ledger_path, RENAME_NOREPLACE) != 0) {
            /* renameat2 keeps one name at every instant; link+unlink (file systems without it)
             * shows two names for a moment, which attach waits out. */
            if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
                rc = link(tmp, ledger_path) != 0 ? -errno : 0;
            else
                rc = -errno;
        }
    }
    close(fd);
    unlink(tmp); /* gone already after a rename */
    return rc;
}

/*
 * The ledger now at the path if it is usable, not broken and another one than `old` (by creation
 * time), else NULL; its file's identity in *dev, *ino. `why` (may be NULL) gets the reason a file
 * there is not usable, NULL when there is no file.
 */
static struct gpc_ledger *map_fresh(const struct gpc_ledger *old, uint64_t *dev, uint64_t *ino, const char **why)
{
    static char buf[160];
    if (why)
        *why = NULL;
    int fd = open(ledger_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (why && errno != ENOENT)
            *why = "cannot be opened for writing";
        return NULL;
    }
    struct stat st;
    struct gpc_ledger *l = MAP_FAILED;
    const char *no = fstat(fd, &st) != 0 ? "cannot be read"
                     : gpc_config.locked ? refused_locked(&st, buf, sizeof buf)
                                         : refused(&st, gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP), buf, sizeof buf);
    if (!no && st.st_size >= (off_t)sizeof *l)
        l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    if (l == MAP_FAILED) {
        if (why)
            *why = no ? no : "truncated";
        return NULL;
    }
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, buf, sizeof buf);
    if (bad || atomic_load(&l->broken) || l->created_ns == old->created_ns) {
        if (why)
            *why = bad ? bad : atomic_load(&l->broken) ? "broken" : "a copy of the ledger in use";
        munmap(l, sizeof *l);
        return NULL;
    }
    return l;
}

static uint64_t lowest_limit(struct gpc_ledger *l, int d, int me, uint64_t mine, bool check_alive);

/*
 * Moves this process's leases, as the old file holds them, into entry `to` of `l`. The old spare
 * is emptied as it is read: an admission that still reads the old file finds none there and goes
 * to the lock (which is the new file's), and a release that still lands there is lost to the new
 * file, which then charges those bytes until the process leaves (never under-charged). Each
 * device's limit is then applied on the new file (its own processes' and this one's).
 */
static void carry_my_share(struct gpc_ledger *l, struct gpc_ledger *old, int to)
{
    if (my_proc < 0 || to < 0)
        return;
    struct gpc_ledger_proc *o = &old->proc[my_proc], *n = &l->proc[to];
    carry_owner(n, o);
    atomic_store(&n->pid, atomic_load(&o->pid));
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (atomic_load(&l->dev[d].state) != 1)
            continue;
        /* The old lock, where it still works, so that no lease changes on the old file meanwhile. */
        int orc = lock_robust(&old->dev[d].lock, NULL, NULL, NULL);
        const char *why = "this process's share on this device is not carried over";
        if (lock_robust(&l->dev[d].lock, l, &l->dev[d], why) == 0) {
            struct gpc_ledger_share *os = &o->share[d], *ns = &n->share[d];
            uint64_t w = atomic_load(&os->spare);
            while (!atomic_compare_exchange_weak(&os->spare, &w, (w & ~GPC_SPARE_MASK) + 2 * GPC_SPARE_GEN))
                ;
            uint64_t lease = atomic_load(&os->lease), had = atomic_load(&ns->lease);
            uint64_t leased = atomic_load(&l->dev[d].slot.leased);
            leased = leased >= had ? leased - had : 0;
            atomic_fetch_add(&ns->spare, GPC_SPARE_GEN);
            atomic_store(&ns->lease, lease);
            atomic_store(&l->dev[d].slot.leased, leased + lease);
            uint64_t nw = atomic_load(&ns->spare);
            atomic_store(&ns->spare, (nw & ~GPC_SPARE_MASK) + GPC_SPARE_GEN + (w & GPC_SPARE_MASK));
            uint64_t own = atomic_load(&os->limit);
            atomic_store(&ns->limit, own);
            uint64_t limit = lowest_limit(l, d, to, own, true);
            gpc_budget_limit_locked(l, &l->dev[d], limit ? limit : atomic_load(&l->dev[d].slot.limit));
            pthread_mutex_unlock(&l->dev[d].lock);
        }
        if (orc == 0)
            pthread_mutex_unlock(&old->dev[d].lock);
    }
}

/* Moves this process off `old` (broken): rebuilds the file if no other process did. 0 or -errno. */
static int repair(struct gpc_ledger *old)
{
    int rc = 0;
    pthread_mutex_lock(&repair_lock);
    if (gpc_ledger != old)
        goto out; /* another thread of this process moved already */
    uint32_t zero = 0;
    struct gpc_ledger *l = NULL;
    uint64_t dev = 0, ino = 0;
    if (gpc_config.locked) {
        /* Under the lock only the platform makes ledgers: a broken one stays broken (and denies). */
        rc = -EPERM;
        gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was left unrecoverable; under the platform's lock the library does "
                "not rebuild the ledger: allocations on it are denied", ledger_path);
        goto out;
    }
    if (atomic_compare_exchange_strong(&old->broken, &zero, 1)) {
        rc = write_file(gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP) ? 0660 : 0600, old);
        if (rc == 0)
            l = map_fresh(old, &dev, &ino, NULL);
        if (l)
            gpc_log(GPC_LOG_ERROR, "ledger %s: a lock was left unrecoverable (taken after its owner died, released "
                    "without repair); the ledger was rebuilt under a fresh file with the same figures", ledger_path);
    } else {
        /* Another process is rebuilding: its file appears at the path within a moment. */
        for (int i = 0; i < LOCK_WAIT_MS / 10 && !(l = map_fresh(old, &dev, &ino, NULL)); i++) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (!l) {
        if (rc == 0)
            rc = -ENOENT;
        gpc_log(GPC_LOG_ERROR, "ledger %s: broken and not rebuilt (%s); allocations on it are denied", ledger_path,
                strerror(-rc));
        goto out;
    }
    carry_my_share(l, old, my_proc);
    mapped_dev = dev;
    mapped_ino = ino;
    __atomic_store_n(&gpc_ledger, l, __ATOMIC_RELEASE);
    if (my_proc >= 0)
        atomic_store(&gpc_ledger_entry, &l->proc[my_proc]);
out:
    relock(); /* map_fresh() may have closed a descriptor of this very file */
    pthread_mutex_unlock(&repair_lock);
    return rc;
}

/* ---- processes ---- */

/* A lock of a private budget, in a fork child: whatever the parent's threads held is free. */
static void reinit_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

static void forget_me(void)
{
    /* A fork child is another process: it claims its own entry when it first needs one, carrying
     * the limit in force for its parent now (its parent's entry, still gpc_ledger_entry here),
     * which a live change may have moved since the parent registered. */
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        gpc_ledger_note_limit(d);
    my_proc = -1;
    atomic_store(&gpc_ledger_entry, NULL);
    pthread_mutex_init(&me_lock, NULL);
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
        atomic_store(&dev->closed, 0);
        atomic_store(&dev->victim, 0);
        atomic_store(&dev->slot.leased, 0);
        atomic_store(&dev->slot.peak, 0);
        atomic_store(&dev->slot.contexts, 0);
    }
}

static bool entry_alive(int i, int32_t pid, uint64_t start, const struct gpc_ledger_proc *p);

/*
 * The smallest limit among `mine` (0: none) and those of the processes on device entry d of l but
 * entry `me`, or 0 when nobody has one. With check_alive, an entry whose limit is below the lowest
 * so far counts only if its process is alive (a crowd of equal settings costs no system call).
 */
static uint64_t lowest_limit(struct gpc_ledger *l, int d, int me, uint64_t mine, bool check_alive)
{
    uint64_t lowest = mine ? mine : UINT64_MAX;
    uint32_t used = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < used && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        uint64_t theirs = atomic_load(&p->share[d].limit);
        int32_t pid = atomic_load(&p->pid);
        if ((int)i == me || theirs == 0 || pid == 0 || theirs >= lowest)
            continue;
        if (check_alive && !entry_alive((int)i, pid, atomic_load(&p->start_time), p))
            continue;
        lowest = theirs;
    }
    return lowest == UINT64_MAX ? 0 : lowest;
}

/* The device limit becomes the smallest that a process holding an entry asks for, applied at once
 * (budget.c); none: unchanged. Under the device's lock. */
static void recompute_limit(int d)
{
    struct gpc_ledger *l = gpc_ledger;
    uint64_t lowest = lowest_limit(l, d, -1, 0, false);
    struct gpc_ledger_dev *dev = &l->dev[d];
    uint64_t cur = atomic_load(&dev->slot.limit);
    /* The last process left: a figure set by `gpucap set-memory` no longer holds for the next. */
    if (!lowest)
        atomic_fetch_and(&dev->limit_by, ~GPC_LIMIT_HELD);
    if (lowest && lowest != cur) {
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
        gpc_budget_limit_locked(l, dev, lowest);
        gpc_log(GPC_LOG_INFO, "ledger %s: device entry %d: the limit is now %s (was %s), the smallest of the live "
                "processes", ledger_path, d, gpc_format_size(lowest, a, sizeof a), gpc_format_size(cur, b, sizeof b));
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
            /* Lease and spare to zero together (the generation odd meanwhile, for readers), the
             * spare first: killed half-way, the entry never has spare above its lease (a take-back
             * of that spare would take the lease below zero and the total with it). */
            atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
            GPC_CRASH_POINT(10);
            uint64_t w = atomic_load(&s->spare);
            while (!atomic_compare_exchange_weak(&s->spare, &w, w & ~GPC_SPARE_MASK))
                ;
            GPC_CRASH_POINT(11);
            uint64_t share = atomic_exchange(&s->lease, 0);
            atomic_fetch_add(&s->spare, GPC_SPARE_GEN);
            GPC_CRASH_POINT(12);
            uint64_t leased = atomic_load(&dev->slot.leased);
            atomic_store(&dev->slot.leased, leased >= share ? leased - share : 0);
            GPC_CRASH_POINT(13);
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
                gpc_budget_limit_locked(gpc_ledger, dev, atomic_load(&dev->slot.limit));
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

/*
 * The liveness lock of entry i of ledger l (common/ledger.h, GPC_LEDGER_ALIVE_AT), on the descriptor
 * kept open: what tells a reader in another PID namespace (gpucap-exporter) that this process is
 * alive. A POSIX record lock belongs to the process: the kernel drops it at death and at exec (the
 * descriptor is close-on-exec), a fork child does not inherit it, and closing any descriptor of the
 * file drops it too (map_fresh() may: relock()). Only on keep_fd's own file; alive_lock says
 * whether it is held, so a reader never counts an entry dead for a lock it never had.
 */
static void take_alive_lock(struct gpc_ledger *l, int i)
{
    struct gpc_ledger_proc *p = &l->proc[i];
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = GPC_LEDGER_ALIVE_AT(i), .l_len = 1};
    bool held = l == keep_map && keep_fd >= 0 && fcntl(keep_fd, F_SETLK, &fl) == 0;
    atomic_store(&p->alive_lock, held ? 1u : 0u);
}

/* This process's liveness lock again, where a descriptor of its file was closed meanwhile. */
static void relock(void)
{
    if (my_proc >= 0 && gpc_ledger == keep_map && atomic_load(&keep_map->proc[my_proc].alive_lock))
        take_alive_lock(keep_map, my_proc);
}

/*
 * Entry i of ledger l, now this process's (its pid stored): nothing leased, spares closed, this
 * process's own limits (a fork child's set-up is its parent's, done before the fork), and the
 * close-on-exec descriptor that tells readers whether its image is still there.
 */
static void fill_entry(struct gpc_ledger *l, int i, uint64_t start)
{
    struct gpc_ledger_proc *p = &l->proc[i];
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        struct gpc_ledger_share *s = &p->share[d];
        atomic_store(&s->lease, 0);
        /* Closed: only a lock holder opens a share, while the device's leases fit its limit. */
        uint64_t w = atomic_load(&s->spare);
        atomic_store(&s->spare, w & ~GPC_SPARE_MASK & ~GPC_SPARE_GEN & ~GPC_SPARE_OPEN);
        atomic_store(&s->peak, 0);
        atomic_store(&s->limit, my_devs[d].known ? my_devs[d].own : 0);
    }
    atomic_store(&p->execing, 0);
    atomic_store(&p->took_set, 0);
    atomic_store(&p->exec_fd, keep_fd);
    atomic_store(&p->exec_fd_dev, keep_dev);
    atomic_store(&p->exec_fd_ino, keep_ino);
    atomic_store(&p->start_time, start);
    take_alive_lock(l, i);
    /* Readers scan the entries below procs_used. */
    uint32_t used = atomic_load(&l->procs_used);
    while (used < (uint32_t)i + 1 && !atomic_compare_exchange_weak(&l->procs_used, &used, i + 1))
        ;
}

/* A free entry of ledger l, claimed for this process (pid and start time): its index, or -1. */
static int claim_free(struct gpc_ledger *l, int32_t pid, uint64_t start)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        int32_t zero = 0;
        if (atomic_load(&p->pid) != 0 || !atomic_compare_exchange_strong(&p->pid, &zero, pid))
            continue;
        fill_entry(l, i, start);
        return i;
    }
    return -1;
}

/* This process's own limits, on the devices it set up before a fork, applied to the ledger: the
 * device's limit is the smallest of the live processes' (budget.c takes spare back at once). */
static void apply_own_limits(void)
{
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (!my_devs[d].known || !my_devs[d].own || !gpc_ledger_shared)
            continue;
        struct gpc_ledger_dev *dev = gpc_ledger_lock_dev(d, "this process's limit applies from its next allocation");
        if (!dev)
            continue;
        struct gpc_ledger *l = gpc_ledger;
        uint64_t lowest = lowest_limit(l, d, my_proc, my_devs[d].own, true);
        if (lowest != atomic_load(&dev->slot.limit))
            gpc_budget_limit_locked(l, dev, lowest);
        gpc_ledger_unlock(dev);
    }
}

struct gpc_ledger_proc *gpc_ledger_claim(void)
{
    pthread_mutex_lock(&me_lock);
    static bool atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, forget_me);
        atfork_done = true;
    }
    bool fresh = my_proc < 0;
    int32_t pid = getpid();
    uint64_t start = gpc_proc_start_time(pid);
    /* Our pid and start time already in the ledger: this process before an exec. The new image
     * cannot reach the old one's memory and the driver freed it: start from zero in that entry. */
    for (int i = 0; my_proc < 0 && start && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        if (atomic_load(&p->pid) != pid || atomic_load(&p->start_time) != start)
            continue;
        if (clear_share(i, pid, start, true, "the share of the image before exec stays charged") >= 0) {
            fill_entry(gpc_ledger, i, start);
            my_proc = i;
        }
    }
    for (int pass = 0; pass < 3 && my_proc < 0; pass++) {
        my_proc = claim_free(gpc_ledger, pid, start);
        if (my_proc >= 0)
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
    if (my_proc < 0) {
        int live = 0;
        for (int i = 0; i < GPC_LEDGER_PROCS; i++)
            live += atomic_load(&gpc_ledger->proc[i].pid) != 0;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the process table is full (%d of %d entries held by live processes); "
                "allocations of this process are denied until one leaves", ledger_path, live, GPC_LEDGER_PROCS);
    }
    struct gpc_ledger_proc *me = my_proc >= 0 ? &gpc_ledger->proc[my_proc] : NULL;
    if (fresh && me)
        apply_own_limits();
    me = my_proc >= 0 ? &gpc_ledger->proc[my_proc] : NULL; /* the ledger may have moved meanwhile */
    atomic_store_explicit(&gpc_ledger_entry, me, memory_order_release);
    pthread_mutex_unlock(&me_lock);
    return me;
}

/*
 * An entry without a start time is a process between claiming it and writing its start time
 * (two stores): alive only for CLAIM_GRACE_MS after this process first saw it so. A writer that
 * leaves pid 1 with start time 0 does not hold an entry for good.
 */
static _Atomic int32_t zero_pid[GPC_LEDGER_PROCS];
static _Atomic uint64_t zero_since_ms[GPC_LEDGER_PROCS];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool entry_alive(int i, int32_t pid, uint64_t start, const struct gpc_ledger_proc *p)
{
    if (start != 0)
        return gpc_ledger_proc_alive(pid, start, p);
    uint64_t now = now_ms();
    if (atomic_load(&zero_pid[i]) != pid) {
        atomic_store(&zero_pid[i], pid);
        atomic_store(&zero_since_ms[i], now);
        return true;
    }
    return now - atomic_load(&zero_since_ms[i]) < CLAIM_GRACE_MS;
}

int gpc_ledger_reap(void)
{
    if (!gpc_ledger_shared)
        return 0;
    int reaped = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        int32_t pid = atomic_load(&p->pid);
        uint64_t start = atomic_load(&p->start_time);
        if (pid == 0 || i == my_proc || entry_alive(i, pid, start, p))
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
            gpc_log(GPC_LOG_INFO, "ledger %s: took back %llu bytes of dead process %d", ledger_path,
                    (unsigned long long)took, (int)pid);
    }
    return reaped;
}

void gpc_ledger_probe(void)
{
    struct gpc_ledger *l = gpc_ledger;
    if (l && gpc_ledger_shared) {
        /* The last byte first: a file shrunk at all has lost it. The SIGBUS guard does the rest. */
        (void)*(volatile const char *)((const char *)l + sizeof *l - 1);
        (void)*(volatile const uint64_t *)&l->magic;
    }
    gpc_ledger_check_broken();
}

void gpc_ledger_reap_lazy(void)
{
    static _Atomic uint64_t last_ms;
    gpc_ledger_probe();
    if (!gpc_ledger_shared)
        return;
    uint64_t now = now_ms(), last = atomic_load_explicit(&last_ms, memory_order_relaxed);
    if (now - last < REAP_EVERY_MS || !atomic_compare_exchange_strong(&last_ms, &last, now))
        return;
    gpc_ledger_reap();
}

bool gpc_ledger_exec_begin(void)
{
    struct gpc_ledger_proc *p = atomic_load(&gpc_ledger_entry);
    /* No entry: this process never touched CUDA (or a private budget, which goes with the image). */
    if (!p || !gpc_ledger_shared || keep_fd < 0)
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
    if (d < 0 || d >= GPC_LEDGER_DEVICES || !my_devs[d].known || !me || !gpc_ledger_shared)
        return;
    /* Under the lock this process's own limit is the platform file's (never what a tenant wrote in
     * the entry); else its entry's, which follows every change, whoever applied it. */
    uint64_t own = gpc_config.locked ? gpc_budget_own_limit(d) : atomic_load(&me->share[d].limit);
    if (!own || own == GPC_UNLIMITED)
        return;
    uint64_t now = atomic_load(&gpc_ledger->dev[d].slot.limit);
    atomic_store(&my_devs[d].own, own);
    atomic_store(&my_devs[d].limit, now < own ? now : own);
}

/* ---- a file that the path no longer names ---- */

/*
 * This process's devices registered in ledger l (another file, now at the path) at the same entry
 * indices, which budget ids are: 0, or -1 when an index holds another card there (logged).
 */
static int register_devices(struct gpc_ledger *l)
{
    if (lock_setup(&l->table_lock) != 0)
        return -1;
    int rc = 0;
    for (int d = 0; d < GPC_LEDGER_DEVICES && rc == 0; d++) {
        if (!my_devs[d].known)
            continue;
        struct gpc_ledger_dev *dev = &l->dev[d];
        if (atomic_load(&dev->state) == 1) {
            if (memcmp(dev->uuid, my_devs[d].uuid, 16) != 0)
                rc = -1;
            continue;
        }
        memcpy(dev->uuid, my_devs[d].uuid, 16);
        dev->physical = my_devs[d].physical;
        atomic_store(&dev->slot.limit, my_devs[d].own);
        atomic_store(&dev->state, 1);
    }
    pthread_mutex_unlock(&l->table_lock);
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
    pthread_mutex_lock(&repair_lock);
    struct gpc_ledger *l = NULL;
    uint64_t dev = 0, ino = 0;
    const char *why = NULL;
    if (gpc_ledger != old || my_proc < 0)
        goto out;
    mode_t mode = gpc_opt_bool(&gpc_config, GPC_OPT_LEDGER_GROUP) ? 0660 : 0600;
    for (int attempt = 0; attempt < 3 && !l; attempt++) {
        l = map_fresh(old, &dev, &ino, &why);
        if (l || why)
            break;
        if (gpc_config.locked) {
            why = "missing (under the platform's lock only the platform makes it)";
            break;
        }
        int rc = write_file(mode, NULL); /* none there: a fresh one (another process may be first) */
        if (rc != 0 && rc != -EEXIST) {
            why = strerror(-rc);
            break;
        }
    }
    if (l && (dev != mapped_dev || ino != mapped_ino)) {
        int32_t pid = getpid();
        uint64_t start = atomic_load(&old->proc[my_proc].start_time);
        int to = register_devices(l) == 0 ? claim_free(l, pid, start) : -1;
        if (to >= 0) {
            carry_my_share(l, old, to);
            my_proc = to;
            mapped_dev = dev;
            mapped_ino = ino;
            __atomic_store_n(&gpc_ledger, l, __ATOMIC_RELEASE);
            atomic_store(&gpc_ledger_entry, &l->proc[to]);
            guard(l);
            gpc_log(GPC_LOG_WARN, "ledger %s: the path names another file than the one this process used (removed, "
                    "renamed or replaced); its share moved to the file now there", ledger_path);
            goto out;
        }
        why = "its device entries hold other cards at this process's indices, or its tables are full";
    }
    if (l && dev == mapped_dev && ino == mapped_ino)
        why = NULL; /* the same file after all */
    if (l)
        munmap(l, sizeof *l);
    if (why && (dev != refused_dev || ino != refused_ino)) {
        refused_dev = dev;
        refused_ino = ino;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the path names another file than the one this process uses, and this "
                "process cannot move to it (%s); it keeps its budget on the old file", ledger_path, why);
    }
out:
    relock(); /* map_fresh() may have closed a descriptor of this very file */
    pthread_mutex_unlock(&repair_lock);
}

/* ---- devices ---- */

/*
 * Setting a device up happens once per process: a crowd starting at once on two cores can keep a
 * holder of the table lock off the CPU past one bound, so the wait is repeated a few times (quietly
 * but for the last) before this call gives up.
 */
#define SETUP_TRIES 5
#define SETUP_RETRY "this device is tried again at the next call"

static int lock_setup(pthread_mutex_t *m)
{
    int rc = -ETIMEDOUT;
    for (int attempt = 0; attempt < SETUP_TRIES && rc == -ETIMEDOUT; attempt++)
        rc = lock_robust(m, NULL, NULL, attempt < SETUP_TRIES - 1 ? NULL : SETUP_RETRY);
    return rc;
}

/*
 * Whether the last process that took a figure set by `gpucap set-memory` on entry d of l has left:
 * no live process is on it, and a dead one (not reaped yet: a share stays until its process is
 * dead) ran under that figure. Then a new run's own settings apply again.
 */
static bool held_figure_left(struct gpc_ledger *l, int d)
{
    bool took = false;
    uint32_t used = atomic_load(&l->procs_used);
    for (uint32_t i = 0; i < used && i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load(&p->pid);
        uint64_t theirs = atomic_load(&p->share[d].limit);
        if ((int)i == my_proc || pid == 0 || theirs == 0)
            continue;
        if (entry_alive((int)i, pid, atomic_load(&p->start_time), p))
            return false;
        took |= atomic_load(&p->took_set) != 0;
    }
    return took;
}

int gpc_ledger_device(const uint8_t uuid[16], uint64_t physical, uint64_t limit, int ordinal)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l)
        return atomic_load(&ledger_refused) ? -EACCES : -ENOMEM;
    /* Only the claim of an entry is under the table lock: it stays short however many processes start. */
    int lrc = gpc_ledger_shared ? lock_setup(&l->table_lock) : 0;
    if (lrc == 0 && gpc_ledger_shared && atomic_load(&l->broken)) {
        pthread_mutex_unlock(&l->table_lock);
        lrc = -ENOTRECOVERABLE;
    }
    if (lrc == -ENOTRECOVERABLE && repair(l) == 0) {
        l = gpc_ledger;
        lrc = lock_setup(&l->table_lock);
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
        atomic_store(&d->slot.limit, limit);
        atomic_store(&d->state, 1);
        found = free_entry;
        created = true;
    }
    if (gpc_ledger_shared)
        pthread_mutex_unlock(&l->table_lock);
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
    if (!created && !gpc_config.locked && (atomic_load(&l->dev[found].limit_by) & GPC_LIMIT_HELD) &&
        held_figure_left(l, found))
        atomic_fetch_and(&l->dev[found].limit_by, ~GPC_LIMIT_HELD);
    if (!created && !gpc_config.locked && (atomic_load(&l->dev[found].limit_by) & GPC_LIMIT_HELD)) {
        uint64_t set = atomic_load(&l->dev[found].slot.limit);
        if (set != limit) {
            char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
            gpc_log(GPC_LOG_WARN, "device %d: the ledger %s's budget was set to %s by gpucap set-memory; it applies "
                    "here instead of this process's setting (%s)", ordinal, ledger_path,
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
    memcpy(my_devs[found].uuid, uuid, 16);
    my_devs[found].physical = physical;
    my_devs[found].limit = now < limit ? now : limit;
    my_devs[found].own = limit;
    my_devs[found].known = true;
    if (created)
        return found;
    struct gpc_ledger_dev *d = NULL;
    for (int attempt = 0; attempt < SETUP_TRIES && !d; attempt++)
        d = gpc_ledger_lock_dev(found, attempt < SETUP_TRIES - 1 ? NULL : SETUP_RETRY);
    if (!d)
        return -EAGAIN;
    l = gpc_ledger;
    /* Settings disagree between processes: the smallest limit of the live ones wins, applied at
     * once (a lower one takes spare back before anything more is admitted: budget.c). */
    uint64_t cur = atomic_load(&d->slot.limit);
    uint64_t lowest = lowest_limit(l, found, my_proc, limit, true);
    /* The limit was set by another process (it differs from ours) that is still alive. */
    bool others = lowest < limit || (cur != limit && lowest_limit(l, found, my_proc, 0, true) == cur);
    if (lowest != cur)
        gpc_budget_limit_locked(l, d, lowest);
    gpc_ledger_unlock(d);
    if (others && limit != cur) {
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
        gpc_log(GPC_LOG_WARN, "device %d: settings disagree: this process asks for a limit of %s, the ledger %s "
                "held %s for other live processes; the smaller, %s, applies to all", ordinal,
                gpc_format_size(limit, a, sizeof a), ledger_path, gpc_format_size(cur, b, sizeof b),
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
    if (!l || !gpc_ledger_shared || lock_setup(&l->table_lock) != 0)
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
    pthread_mutex_unlock(&l->table_lock);
}
