/*
 * ledger.c: the crash-safe record of usage that the processes of one container share.
 *
 * The ledger is a file (GPUCAP_LEDGER; by default /tmp/gpucap-<uid>.ledger: /tmp belongs to one
 * container, so all of its processes meet there without a setting, two containers of a pod do not,
 * and two local users do not either), mapped by every process that touches CUDA. It holds one entry
 * per device, keyed by the device UUID so that processes with different CUDA_VISIBLE_DEVICES agree,
 * and one entry per process with its share of each device.
 *
 * Crash safety: admission and release happen under the device entry's robust mutex, and a process
 * records its own share with the total. If a process dies holding the lock, the next locker gets
 * EOWNERDEAD and recomputes the total from the shares. A dead process's share is taken back (it was
 * freed on the card when it died) by gpc_ledger_reap(), which budget.c calls before any denial; a
 * process is dead when its pid is gone or now belongs to a process with another start time. No
 * wait is longer than LOCK_WAIT_MS; there is never an exit().
 *
 * The file is created whole under a temporary name and moved into place, so no process ever maps
 * a half-initialised ledger. Owner-only by default; GPUCAP_LEDGER_GROUP=1 makes it group-shared. A
 * ledger that cannot be used (corrupted, truncated, another layout version, foreign, open to other
 * users, with a second name, not writable) is one error line naming the file and the reason, and
 * the process then has a private budget.
 *
 * Whoever can write the file can also shrink it, and touching a shared mapping past the end of its
 * file raises SIGBUS. From attach on, a SIGBUS handler guards the mapping (and only it: other faults
 * go to the handler the process had before): it maps zero pages over the ledger so that the access
 * is retried on private memory, and the next budget call moves this process to a private budget
 * charged with what it holds (gpc_ledger_recover), with one error line.
 */
#include "internal.h"
#include "gpucap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_WAIT_MS 200

struct gpc_ledger *gpc_ledger;
bool gpc_ledger_shared;
static char ledger_path[512];
static int my_proc = -1;
static pthread_mutex_t me_lock = PTHREAD_MUTEX_INITIALIZER;

atomic_bool gpc_ledger_broken;
_Atomic uint64_t gpc_ledger_mine[GPC_LEDGER_DEVICES];
/* What this process registered, kept outside the mapping: enough to rebuild its budget privately. */
static struct {
    bool known;
    uint8_t uuid[16];
    uint64_t physical, limit;
} my_devs[GPC_LEDGER_DEVICES];
/* The mapping the SIGBUS handler repairs (0: none), and the handler that was there before. */
static _Atomic uintptr_t guarded;
static struct sigaction prev_sigbus;

/* ---- locking ---- */

static void init_robust(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

/* The owner died inside the critical section: the total is rebuilt from the shares. */
static void recover_device(struct gpc_ledger_dev *d)
{
    int id = (int)(d - gpc_ledger->dev);
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&gpc_ledger->proc[i].pid) != 0)
            sum += atomic_load(&gpc_ledger->proc[i].used[id]);
    atomic_store(&d->slot.used, sum);
    gpc_log(GPC_LOG_WARN, "ledger %s: a process died holding device entry %d; its total was rebuilt (%llu bytes)",
            ledger_path, id, (unsigned long long)sum);
}

static int lock_robust(pthread_mutex_t *m, struct gpc_ledger_dev *d)
{
    int rc = pthread_mutex_trylock(m);
    if (rc == EBUSY) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += LOCK_WAIT_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        rc = pthread_mutex_timedlock(m, &ts);
    }
    if (rc == EOWNERDEAD) {
        if (d)
            recover_device(d);
        pthread_mutex_consistent(m);
        rc = 0;
    }
    if (rc != 0)
        gpc_log(GPC_LOG_ERROR, "ledger %s: lock not obtained within %d ms (%s); the allocation is denied",
                ledger_path, LOCK_WAIT_MS, strerror(rc));
    return rc;
}

int gpc_ledger_lock(struct gpc_ledger_dev *d)
{
    return lock_robust(&d->lock, d);
}

void gpc_ledger_unlock(struct gpc_ledger_dev *d)
{
    pthread_mutex_unlock(&d->lock);
}

/* ---- attaching ---- */

static void default_path(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/gpucap-%u.ledger", (unsigned)geteuid());
}

static void init_ledger(struct gpc_ledger *l)
{
    memset(l, 0, sizeof *l);
    l->version = GPC_LEDGER_VERSION;
    l->size = sizeof *l;
    l->ndevices = GPC_LEDGER_DEVICES;
    l->nprocs = GPC_LEDGER_PROCS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    l->created_ns = (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
    init_robust(&l->table_lock);
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++)
        init_robust(&l->dev[i].lock);
    atomic_thread_fence(memory_order_release);
    l->magic = GPC_LEDGER_MAGIC;
}

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
    init_ledger(m);
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
    struct gpc_ledger *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t held = 0;
    if (m != MAP_FAILED) {
        /* Same entry indices: the budget ids that device.c handed out stay valid. */
        init_ledger(m);
        for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
            if (!my_devs[i].known)
                continue;
            struct gpc_ledger_dev *d = &m->dev[i];
            uint64_t mine = atomic_load(&gpc_ledger_mine[i]);
            memcpy(d->uuid, my_devs[i].uuid, 16);
            d->physical = my_devs[i].physical;
            atomic_store(&d->slot.limit, my_devs[i].limit);
            atomic_store(&d->slot.used, mine);
            atomic_store(&d->slot.peak, mine);
            atomic_store(&d->state, 1);
            held += mine;
        }
        gpc_ledger = m;
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

/* Creates the file whole under a temporary name, then moves it into place (never over another). */
static int create_file(mode_t mode)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", ledger_path, (int)getpid());
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
        init_ledger(m);
        munmap(m, sizeof(struct gpc_ledger));
        /* renameat2 keeps one name at every instant; link+unlink (file systems without it) shows
         * two names for a moment, which attach waits out. */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, ledger_path, RENAME_NOREPLACE) != 0) {
            if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
                rc = link(tmp, ledger_path) != 0 ? -errno : 0;
            else
                rc = -errno;
        }
    }
    close(fd);
    unlink(tmp);
    return rc;
}

void gpc_ledger_attach(void)
{
    const struct gpc_value *v = &gpc_settings.opt[GPC_OPT_LEDGER];
    if (v->set && !v->bad && v->text[0])
        snprintf(ledger_path, sizeof ledger_path, "%s", v->text);
    else
        default_path(ledger_path, sizeof ledger_path);
    if (strcmp(ledger_path, "off") == 0) {
        use_private(NULL);
        return;
    }
    bool group = gpc_settings.opt[GPC_OPT_LEDGER_GROUP].set && gpc_settings.opt[GPC_OPT_LEDGER_GROUP].u.b;
    mode_t mode = group ? 0660 : 0600;

    int fd = -1;
    for (int attempt = 0; attempt < 3 && fd < 0; attempt++) {
        fd = open(ledger_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 || errno != ENOENT)
            break;
        int rc = create_file(mode);
        if (rc != 0 && rc != -EEXIST) {
            char why[128];
            snprintf(why, sizeof why, "cannot be created (%s)", strerror(-rc));
            use_private(why);
            return;
        }
    }
    char why[160];
    if (fd < 0) {
        snprintf(why, sizeof why, "cannot be opened for writing (%s)", strerror(errno));
        use_private(why);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        use_private("is not a regular file");
        return;
    }
    /* A creator without renameat2 holds a second name for an instant: wait that out (bounded). */
    for (int i = 0; i < 20 && S_ISREG(st.st_mode) && st.st_nlink == 2; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        if (fstat(fd, &st) != 0)
            break;
    }
    const char *no = refused(&st, group, why, sizeof why);
    if (no) {
        close(fd);
        use_private(no);
        return;
    }
    struct gpc_ledger *l = st.st_size >= 16 ? mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE,
                                                   MAP_SHARED, fd, 0)
                                            : MAP_FAILED;
    if (l == MAP_FAILED) {
        close(fd);
        use_private("truncated (shorter than its header)");
        return;
    }
    /* Guarded before the first read; the size is taken again now that it is mapped. */
    guard(l);
    if (fstat(fd, &st) != 0)
        st.st_size = 0;
    close(fd);
    char buf[128];
    const char *bad = gpc_ledger_check(l, (uint64_t)st.st_size, buf, sizeof buf);
    if (atomic_load(&gpc_ledger_broken))
        bad = "shrunk while it was being opened";
    if (bad) {
        guard(NULL);
        munmap(l, sizeof *l);
        atomic_store(&gpc_ledger_broken, false);
        use_private(bad);
        return;
    }
    gpc_ledger = l;
    gpc_ledger_shared = true;
}

/* ---- processes ---- */

static void forget_me(void)
{
    /* A fork child is another process: it claims its own entry when it first needs one. */
    my_proc = -1;
    pthread_mutex_init(&me_lock, NULL);
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        atomic_store(&gpc_ledger_mine[d], 0);
}

int gpc_ledger_me(void)
{
    if (gpc_likely(my_proc >= 0))
        return my_proc;
    pthread_mutex_lock(&me_lock);
    static bool atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, forget_me);
        atfork_done = true;
    }
    int32_t pid = getpid();
    for (int pass = 0; pass < 2 && my_proc < 0; pass++) {
        for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
            struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
            int32_t zero = 0;
            if (atomic_load(&p->pid) != 0 || !atomic_compare_exchange_strong(&p->pid, &zero, pid))
                continue;
            for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
                atomic_store(&p->used[d], 0);
                atomic_store(&p->peak[d], 0);
                atomic_store(&p->limit[d], 0);
            }
            atomic_store(&p->start_time, gpc_proc_start_time(pid));
            my_proc = i;
            break;
        }
        if (my_proc < 0)
            gpc_ledger_reap();
    }
    if (my_proc < 0)
        gpc_log(GPC_LOG_ERROR, "ledger %s: all %d process entries are taken by live processes; allocations "
                "are denied", ledger_path, GPC_LEDGER_PROCS);
    pthread_mutex_unlock(&me_lock);
    return my_proc;
}

int gpc_ledger_reap(void)
{
    if (!gpc_ledger_shared)
        return 0;
    int reaped = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        struct gpc_ledger_proc *p = &gpc_ledger->proc[i];
        int32_t pid = atomic_load(&p->pid);
        if (pid == 0 || i == my_proc || gpc_ledger_proc_alive(pid, atomic_load(&p->start_time)))
            continue;
        /* Share by share under each device's lock: taking one twice takes nothing the second time. */
        uint64_t took = 0;
        bool left = false;
        for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
            if (atomic_load(&p->used[d]) == 0)
                continue;
            if (gpc_ledger_lock(&gpc_ledger->dev[d]) != 0) {
                left = true;
                continue;
            }
            uint64_t share = atomic_exchange(&p->used[d], 0);
            uint64_t used = atomic_load(&gpc_ledger->dev[d].slot.used);
            atomic_store(&gpc_ledger->dev[d].slot.used, used >= share ? used - share : 0);
            gpc_ledger_unlock(&gpc_ledger->dev[d]);
            took += share;
        }
        /* An entry is freed only once it holds nothing. Its start time goes first: a process
         * claiming the entry next is "alive, still claiming" until it writes its own. */
        if (!left) {
            atomic_store(&p->start_time, 0);
            if (atomic_compare_exchange_strong(&p->pid, &pid, 0))
                reaped++;
        }
        if (took)
            gpc_log(GPC_LOG_INFO, "ledger %s: took back %llu bytes of dead process %d", ledger_path,
                    (unsigned long long)took, (int)pid);
    }
    return reaped;
}

/* ---- devices ---- */

int gpc_ledger_device(const uint8_t uuid[16], uint64_t physical, uint64_t limit, int ordinal)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l)
        return -1;
    if (gpc_ledger_shared && lock_robust(&l->table_lock, NULL) != 0)
        return -1;
    int found = -1, free_entry = -1;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        if (atomic_load(&l->dev[i].state) == 1 && memcmp(l->dev[i].uuid, uuid, 16) == 0) {
            found = i;
            break;
        }
        if (free_entry < 0 && atomic_load(&l->dev[i].state) == 0)
            free_entry = i;
    }
    if (found < 0 && free_entry >= 0) {
        struct gpc_ledger_dev *d = &l->dev[free_entry];
        memcpy(d->uuid, uuid, 16);
        d->physical = physical;
        atomic_store(&d->slot.limit, limit);
        atomic_store(&d->state, 1);
        found = free_entry;
    } else if (found >= 0) {
        /* Settings disagree between processes: the smallest limit of the live ones wins. */
        struct gpc_ledger_dev *d = &l->dev[found];
        uint64_t cur = atomic_load(&d->slot.limit);
        bool others = false;
        uint64_t lowest = limit;
        for (int i = 0; gpc_ledger_shared && i < GPC_LEDGER_PROCS; i++) {
            struct gpc_ledger_proc *p = &l->proc[i];
            uint64_t theirs = atomic_load(&p->limit[found]);
            if (i == my_proc || theirs == 0 || !gpc_ledger_proc_alive(atomic_load(&p->pid), atomic_load(&p->start_time)))
                continue;
            others = true;
            if (theirs < lowest)
                lowest = theirs;
        }
        uint64_t now = others ? lowest : limit;
        if (now != cur)
            atomic_store(&d->slot.limit, now);
        if (others && limit != cur) {
            char a[32], b[32], c[32];
            gpc_log(GPC_LOG_WARN, "device %d: settings disagree: this process asks for a limit of %s, the ledger %s "
                    "held %s for other live processes; the smaller, %s, applies to all", ordinal,
                    gpc_format_size(limit, a, sizeof a), ledger_path, gpc_format_size(cur, b, sizeof b),
                    gpc_format_size(now, c, sizeof c));
        }
    }
    if (gpc_ledger_shared)
        pthread_mutex_unlock(&l->table_lock);
    if (found >= 0 && gpc_ledger_shared) {
        int me = gpc_ledger_me();
        if (me >= 0)
            atomic_store(&l->proc[me].limit[found], limit);
        /* Kept here too, for a private budget if the file is broken later (the smaller limit). */
        uint64_t now = atomic_load(&l->dev[found].slot.limit);
        memcpy(my_devs[found].uuid, uuid, 16);
        my_devs[found].physical = physical;
        my_devs[found].limit = now < limit ? now : limit;
        my_devs[found].known = true;
    }
    return found;
}

/* ---- identity ---- */

/* Copies setting `opt` into `field` when it is set and valid; an unset or bad one leaves it. */
static void put_identity(char *field, size_t size, enum gpc_opt opt)
{
    const struct gpc_value *v = &gpc_settings.opt[opt];
    if (!v->set || v->bad)
        return;
    size_t n = strnlen(v->text, size - 1);
    memcpy(field, v->text, n);
    memset(field + n, 0, size - n);
}

void gpc_ledger_identify(void)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l || !gpc_ledger_shared || lock_robust(&l->table_lock, NULL) != 0)
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
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    id->written_ns = (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
    atomic_fetch_add_explicit(&id->seq, 1, memory_order_release);
    pthread_mutex_unlock(&l->table_lock);
}
