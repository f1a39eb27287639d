/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_file.c: this process's mapping of the crash-safe record of usage that the processes of one
 * container share (the ledger module's files: core/ledger_int.h; its contract: core/ledger_map.h).
 *
 * The ledger is a file (GPUCAP_LEDGER; by default /tmp/gpucap-<uid>.ledger: /tmp belongs to one
 * container, so all of its processes meet there without a setting, two containers of a pod do not,
 * and two local users do not either), mapped by every process that touches CUDA. It holds one entry
 * per device, keyed by the device UUID so that processes with different CUDA_VISIBLE_DEVICES agree,
 * and one entry per process with its share of each device (core/lease.c says how shares work).
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
 * budget charged with exactly what it holds (gpc_ledger_recover), with one error line. A rebuilt
 * ledger (ledger_lock.c) is written here too: a fresh file holding the figures of the broken one.
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

struct gpc_ledger *gpc_ledger;
bool gpc_ledger_shared;
char gpc_ledger_file[512];
int gpc_ledger_my_proc = -1;
struct gpc_ledger_proc *_Atomic gpc_ledger_entry;
atomic_bool gpc_ledger_broken;
atomic_bool gpc_ledger_refused;
struct gpc_ledger_mine gpc_ledger_mine[GPC_LEDGER_DEVICES];
bool gpc_ledger_continued;
int gpc_ledger_keep_fd = -1;
uint64_t gpc_ledger_keep_dev, gpc_ledger_keep_ino;
_Atomic uint64_t gpc_ledger_mapped_dev, gpc_ledger_mapped_ino;
/* The mapping the SIGBUS handler repairs (0: none), and the handler that was there before. */
static _Atomic uintptr_t guarded;
static struct sigaction prev_sigbus;
/* A second mapping guarded alike (gpc_ledger_guard_also), its length and the flag a fault sets. */
static _Atomic uintptr_t also_base;
static _Atomic size_t also_len;
static atomic_bool *_Atomic also_hit;
/* One move to a private budget at a time. */
static pthread_mutex_t recover_lock = PTHREAD_MUTEX_INITIALIZER;

void gpc_ledger_recover_fork(enum gpc_fork_step step)
{
    gpc_fork_mutex(&recover_lock, step);
}

/* ---- attaching ---- */

static void use_private(const char *why)
{
    if (why)
        gpc_log(GPC_LOG_ERROR, "ledger %s: %s; this process has a private budget (not shared with other "
                "processes) until it is fixed; see `gpucap status`", gpc_ledger_file, why);
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
    uintptr_t also = atomic_load(&also_base);
    size_t len = atomic_load(&also_len);
    if (also && (uintptr_t)si->si_addr - also < len) {
        int saved = errno;
        void *m = mmap((void *)also, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        errno = saved;
        atomic_bool *hit = atomic_load(&also_hit);
        if (m != MAP_FAILED) {
            if (hit)
                atomic_store(hit, true);
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

/* Installs the handler (want) or puts the old one back (once neither mapping is guarded). */
static void install(bool want)
{
    static bool installed;
    if (!want && installed && !atomic_load(&guarded) && !atomic_load(&also_base)) {
        sigaction(SIGBUS, &prev_sigbus, NULL);
        installed = false;
    } else if (want && !installed) {
        struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_RESTART};
        sigemptyset(&sa.sa_mask);
        installed = sigaction(SIGBUS, &sa, &prev_sigbus) == 0;
    }
}

/* Guards the mapping at `l`, installing the handler; NULL (at attach only): puts the old one back. */
void gpc_ledger_guard(struct gpc_ledger *l)
{
    atomic_store(&guarded, (uintptr_t)l);
    install(l != NULL);
}

void gpc_ledger_guard_also(const void *base, size_t len, atomic_bool *hit)
{
    atomic_store(&also_hit, hit);
    atomic_store(&also_len, len);
    atomic_store(&also_base, (uintptr_t)base);
    install(base != NULL);
}

void gpc_ledger_recover(uint64_t (*held_of)(int id))
{
    gpc_lock(&recover_lock, GPC_LOCK_LEDGER_RECOVER);
    if (!gpc_ledger_shared)
        goto out;
    if (gpc_config.locked) {
        /* No private budget under the lock: the zero pages stay, every limit reads 0, all is denied. */
        gpc_ledger_shared = false;
        gpc_log(GPC_LOG_ERROR, "ledger %s: the file was shrunk under this process (by another process that can "
                "write it); under the platform's lock every allocation of this process is denied from here on",
                gpc_ledger_file);
        goto out;
    }
    struct gpc_ledger *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t held = 0;
    if (m != MAP_FAILED) {
        /* Same entry indices: the budget ids that device.c handed out stay valid. */
        gpc_ledger_format(m);
        for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
            if (!gpc_ledger_mine[i].known)
                continue;
            struct gpc_ledger_dev *d = &m->dev[i];
            /* What this process holds, by its own count: the spare was lost with the file, and a
             * share charged its lease would keep that spare charged for good. */
            uint64_t mine = held_of(i);
            memcpy(d->uuid, gpc_ledger_mine[i].uuid, 16);
            d->physical = gpc_ledger_mine[i].physical;
            gpc_lease_device_start(d, gpc_ledger_mine[i].limit);
            atomic_store(&d->state, 1);
            gpc_lease_share_private(d, gpc_ledger_my_proc >= 0 ? &m->proc[gpc_ledger_my_proc].share[i] : NULL, mine);
            if (gpc_ledger_my_proc >= 0)
                atomic_store(&m->proc[gpc_ledger_my_proc].share[i].limit, gpc_ledger_mine[i].own);
            held += mine;
        }
        if (gpc_ledger_my_proc >= 0) {
            atomic_store(&m->proc[gpc_ledger_my_proc].pid, getpid());
            atomic_store(&m->procs_used, (uint32_t)gpc_ledger_my_proc + 1);
        }
        gpc_ledger = m;
        if (gpc_ledger_my_proc >= 0)
            atomic_store(&gpc_ledger_entry, &m->proc[gpc_ledger_my_proc]);
    }
    /* Without memory for a new one the zeroed mapping stays: every limit reads 0, all is denied. */
    gpc_ledger_shared = false;
    gpc_log(GPC_LOG_ERROR, "ledger %s: the file was shrunk under this process (by another process that can "
            "write it); this process has a private budget from here on, charged with the %llu bytes it holds; "
            "see `gpucap status`", gpc_ledger_file, (unsigned long long)held);
out:
    gpc_unlock(&recover_lock, GPC_LOCK_LEDGER_RECOVER);
}

void gpc_ledger_probe(void)
{
    struct gpc_ledger *l = gpc_ledger;
    if (l && gpc_ledger_shared) {
        /* The last byte first: a file shrunk at all has lost it. The SIGBUS guard does the rest. */
        (void)*(volatile const char *)((const char *)l + sizeof *l - 1);
        (void)*(volatile const uint64_t *)&l->magic;
    }
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
            "private budget: every allocation is denied until the platform's ledger is back", gpc_ledger_file, why);
    gpc_ledger = NULL;
    gpc_ledger_shared = false;
    atomic_store(&gpc_ledger_refused, true);
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
    if (gpc_ledger_path(&gpc_config, gpc_ledger_file, sizeof gpc_ledger_file) == -ENOENT) {
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
        fd = open(gpc_ledger_file, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
            deny_all(open_failure_locked(errno, why, sizeof why));
            return;
        }
    }
    for (int attempt = 0; !locked && attempt < 3 && fd < 0; attempt++) {
        fd = open(gpc_ledger_file, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 || errno != ENOENT)
            break;
        int rc = gpc_ledger_write_file(mode, NULL);
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
    if (!no && locked && gpc_config.platform_mounted && gpc_path_own_mount(gpc_ledger_file, fd) == 0)
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
    gpc_ledger_guard(l);
    if (fstat(fd, &st) != 0)
        st.st_size = 0;
    struct gpc_ledger_problem problem;
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, &problem) ? problem.text : NULL;
    if (atomic_load(&gpc_ledger_broken))
        bad = "shrunk while it was being opened";
    if (bad) {
        close(fd);
        gpc_ledger_guard(NULL);
        munmap(l, sizeof *l);
        atomic_store(&gpc_ledger_broken, false);
        unusable(bad);
        return;
    }
    gpc_ledger_mapped_dev = (uint64_t)st.st_dev;
    gpc_ledger_mapped_ino = (uint64_t)st.st_ino;
    /* Kept open (close-on-exec), never locked: the descriptor through which this process asks whose
     * entries are held (gpc_ledger_entry_live). */
    gpc_ledger_keep_fd = fd;
    gpc_ledger_keep_dev = (uint64_t)st.st_dev;
    gpc_ledger_keep_ino = (uint64_t)st.st_ino;
    gpc_ledger = l;
    gpc_ledger_shared = true;
}

/* ---- the locks that hold process entries ---- */

/* The description holding this process's entry lock, whose process, and of which file. */
static int lock_fd = -1;
static pid_t lock_pid;
static uint64_t lock_ino;

/* The ledger file (dev, ino) opened anew: through the descriptor this process keeps of it where it is
 * that file (a working directory changed since does not matter), else at the path if the path still
 * names it. Its descriptor, or -1. */
static int reopen(uint64_t dev, uint64_t ino, int flags)
{
    int fd = -1, keep = __atomic_load_n(&gpc_ledger_keep_fd, __ATOMIC_ACQUIRE);
    if (keep >= 0 && __atomic_load_n(&gpc_ledger_keep_dev, __ATOMIC_RELAXED) == dev &&
        __atomic_load_n(&gpc_ledger_keep_ino, __ATOMIC_RELAXED) == ino) {
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", keep);
        fd = open(self, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    }
    if (fd < 0)
        fd = open(gpc_ledger_file, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int gpc_ledger_reader_fd(void)
{
    return gpc_ledger_shared ? gpc_ledger_probe_fd() : -1;
}

int gpc_ledger_probe_fd(void)
{
    uint64_t dev = atomic_load(&gpc_ledger_mapped_dev), ino = atomic_load(&gpc_ledger_mapped_ino);
    int keep = __atomic_load_n(&gpc_ledger_keep_fd, __ATOMIC_ACQUIRE);
    if (keep >= 0 && __atomic_load_n(&gpc_ledger_keep_dev, __ATOMIC_RELAXED) == dev &&
        __atomic_load_n(&gpc_ledger_keep_ino, __ATOMIC_RELAXED) == ino)
        return keep;
    /* The ledger moved to another file (a rebuild, a file replaced at the path): ask that one. The
     * old descriptor stays open (another thread may be asking through it). */
    int fd = reopen(dev, ino, O_RDONLY);
    if (fd >= 0) {
        __atomic_store_n(&gpc_ledger_keep_dev, dev, __ATOMIC_RELAXED);
        __atomic_store_n(&gpc_ledger_keep_ino, ino, __ATOMIC_RELAXED);
        __atomic_store_n(&gpc_ledger_keep_fd, fd, __ATOMIC_RELEASE);
    }
    return fd;
}

int gpc_ledger_lock_entry(struct gpc_ledger *l, int i, uint64_t dev, uint64_t ino)
{
    pid_t me = getpid();
    /* A description of this process's own for the file: a fork child's inherited one holds its
     * parent's lock, and keeps holding it (as it keeps its parent's device files). */
    if (lock_fd < 0 || lock_pid != me || lock_ino != ino) {
        int fd = reopen(dev, ino, O_RDWR);
        if (fd < 0)
            return -1;
        if (lock_fd >= 0 && lock_pid == me)
            close(lock_fd); /* this process's lock on a file it left: it has moved */
        lock_fd = fd;
        lock_pid = me;
        lock_ino = ino;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)GPC_LEDGER_LOCK_AT(i), .l_len = 1};
    if (fcntl(lock_fd, F_OFD_SETLK, &fl) != 0)
        return -1; /* no OFD locks here, or the entry's lock is held: the pid rules apply */
    atomic_store(&l->proc[i].locked, 1);
    return 0;
}

/* ---- fresh files, and the copy of a broken one ---- */

#define CARRY(f) atomic_store(&n->f, atomic_load(&o->f));
void gpc_ledger_carry_owner(struct gpc_ledger_proc *n, const struct gpc_ledger_proc *o) { GPC_LEDGER_PROC_CARRIED(CARRY) }
static void carry_share(struct gpc_ledger_share *n, const struct gpc_ledger_share *o) { GPC_LEDGER_SHARE_CARRIED(CARRY) }

/* The figures of `old` into the fresh, not yet visible ledger l, settled (core/lease.c). */
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
        memcpy((void *)n->changes, (const void *)o->changes, sizeof n->changes);
        GPC_LEDGER_DEV_CARRIED(CARRY)
        atomic_store(&n->state, 1);
    }
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *o = &old->proc[i];
        struct gpc_ledger_proc *n = &l->proc[i];
        GPC_LEDGER_PROC_CARRIED(CARRY)
        atomic_store(&n->execing, atomic_load(&o->execing));
        for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
            const struct gpc_ledger_share *os = &o->share[d];
            struct gpc_ledger_share *ns = &n->share[d];
            carry_share(ns, os);
        }
        atomic_store(&n->pid, atomic_load(&o->pid));
    }
    atomic_store(&l->procs_used, atomic_load(&old->procs_used));
    atomic_store(&l->live_gen, atomic_load(&old->live_gen));
    /* Whatever the broken locks were in the middle of is settled in the copy. */
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        gpc_lease_settle(l, &l->dev[d]);
}

/*
 * Writes a whole ledger under a temporary name and moves it to the path: 0 or -errno. With `old`
 * NULL a fresh one, never over another file; else one holding the figures of `old`, over the
 * broken file at the path. No process ever maps a half-written ledger.
 */
int gpc_ledger_write_file(mode_t mode, const struct gpc_ledger *old)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.%s", gpc_ledger_file, (int)getpid(), old ? "rebuild" : "tmp");
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
            if (rename(tmp, gpc_ledger_file) != 0)
                rc = -errno;
        } else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, gpc_ledger_file, RENAME_NOREPLACE) != 0) {
            /* renameat2 keeps one name at every instant; link+unlink (file systems without it)
             * shows two names for a moment, which attach waits out. */
            if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
                rc = link(tmp, gpc_ledger_file) != 0 ? -errno : 0;
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
struct gpc_ledger *gpc_ledger_map_fresh(const struct gpc_ledger *old, uint64_t *dev, uint64_t *ino, const char **why)
{
    static char buf[160];
    if (why)
        *why = NULL;
    int fd = open(gpc_ledger_file, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
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
    static struct gpc_ledger_problem problem; /* under repair_lock */
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, &problem) ? problem.text : NULL;
    if (bad || atomic_load(&l->broken) || l->created_ns == old->created_ns) {
        if (why)
            *why = bad ? bad : atomic_load(&l->broken) ? "broken" : "a copy of the ledger in use";
        munmap(l, sizeof *l);
        return NULL;
    }
    return l;
}
