/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_check.c: what the library (ledger.c) and the tools share about a ledger: its path, a fresh
 * one (the platform's, made by `gpucap inject`), whether a mapped file is a usable ledger, what is in
 * use on a device, and whether the process of an entry is alive (by /proc, in its PID namespace; by
 * its liveness lock, in any).
 */
#include "common/ledger.h"
#include "common/options.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

int gpc_ledger_path(const struct gpc_settings *s, char *buf, size_t len)
{
    const char *named = gpc_opt_string(s, GPC_OPT_LEDGER);
    if (named && named[0])
        snprintf(buf, len, "%s", named);
    else
        snprintf(buf, len, "/tmp/gpucap-%u.ledger", (unsigned)geteuid());
    return strcmp(buf, "off") == 0 ? -ENOENT : 0;
}

static void init_robust(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

/* `l` is fresh memory from mmap (anonymous, or a file just extended by ftruncate): already zero,
 * so only what is not zero is written (a megabyte of zeros would be touched for nothing). */
void gpc_ledger_format(struct gpc_ledger *l)
{
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

int gpc_ledger_create(const char *path, unsigned mode)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%d.new", path, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int rc = 0;
    void *m = MAP_FAILED;
    if (fchmod(fd, mode) != 0 || ftruncate(fd, sizeof(struct gpc_ledger)) != 0 ||
        (m = mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        rc = -errno;
    } else {
        gpc_ledger_format(m);
        munmap(m, sizeof(struct gpc_ledger));
        /* link() never replaces: whatever is at the path already stays (and is reported). */
        if (link(tmp, path) != 0)
            rc = -errno;
    }
    close(fd);
    unlink(tmp);
    return rc;
}

const char *gpc_ledger_check_fault(const struct gpc_ledger *l, uint64_t file_size, char *buf, unsigned len,
                                   enum gpc_ledger_fault *fault)
{
    *fault = GPC_LEDGER_TRUNCATED;
    if (file_size < sizeof(uint64_t) * 2)
        return "truncated (shorter than its header)";
    *fault = GPC_LEDGER_NOT_LEDGER;
    if (l->magic != GPC_LEDGER_MAGIC)
        return "not a gpucap ledger (wrong magic number)";
    *fault = GPC_LEDGER_OTHER_VERSION;
    if (l->version != GPC_LEDGER_VERSION) {
        snprintf(buf, len, "layout version %u, this gpucap reads version %u", l->version, GPC_LEDGER_VERSION);
        return buf;
    }
    *fault = GPC_LEDGER_TRUNCATED;
    if (file_size < sizeof *l) {
        snprintf(buf, len, "truncated (%llu bytes, a ledger has %zu)", (unsigned long long)file_size, sizeof *l);
        return buf;
    }
    *fault = GPC_LEDGER_CORRUPT;
    if (l->size != sizeof *l || l->ndevices != GPC_LEDGER_DEVICES || l->nprocs != GPC_LEDGER_PROCS)
        return "corrupted header (sizes do not match this layout)";
    /* used may pass limit legitimately (audit mode, a limit lowered by a later process). */
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        uint32_t st = atomic_load(&l->dev[i].state);
        if (st > 1) {
            snprintf(buf, len, "corrupted device entry %d", i);
            return buf;
        }
    }
    *fault = GPC_LEDGER_USABLE;
    return NULL;
}

const char *gpc_ledger_check(const struct gpc_ledger *l, uint64_t file_size, char *buf, unsigned len)
{
    enum gpc_ledger_fault fault;
    return gpc_ledger_check_fault(l, file_size, buf, len, &fault);
}

uint64_t gpc_ledger_share_in_use(const struct gpc_ledger_share *s)
{
    uint64_t lease = 0, spare = 0;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t w = atomic_load_explicit(&s->spare, memory_order_acquire);
        lease = atomic_load_explicit(&s->lease, memory_order_acquire);
        uint64_t again = atomic_load_explicit(&s->spare, memory_order_acquire);
        spare = again & GPC_SPARE_MASK;
        /* The generation moved or is odd: a lock holder is changing both; read again. */
        if (!((w ^ again) >> GPC_SPARE_BITS) && !((again >> GPC_SPARE_BITS) & 1))
            break;
    }
    return lease > spare ? lease - spare : 0;
}

static uint32_t procs_used(const struct gpc_ledger *l)
{
    uint32_t n = atomic_load_explicit(&l->procs_used, memory_order_acquire);
    return n < GPC_LEDGER_PROCS ? n : GPC_LEDGER_PROCS;
}

uint64_t gpc_ledger_in_use(const struct gpc_ledger *l, int dev)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, n = procs_used(l); i < n; i++)
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0)
            sum += gpc_ledger_share_in_use(&l->proc[i].share[dev]);
    return sum;
}

uint64_t gpc_ledger_in_use_live(const struct gpc_ledger *l, int dev)
{
    uint64_t sum = 0;
    for (uint32_t i = 0, n = procs_used(l); i < n; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
        uint64_t in_use = pid ? gpc_ledger_share_in_use(&p->share[dev]) : 0;
        if (in_use && gpc_ledger_proc_alive(pid, atomic_load(&p->start_time), p))
            sum += in_use;
    }
    return sum;
}

uint64_t gpc_ledger_peak(const struct gpc_ledger *l, int dev)
{
    uint64_t peak = atomic_load_explicit(&l->dev[dev].slot.peak, memory_order_relaxed);
    for (uint32_t i = 0, n = procs_used(l); i < n; i++) {
        uint64_t theirs = atomic_load_explicit(&l->proc[i].share[dev].peak, memory_order_relaxed);
        if (atomic_load_explicit(&l->proc[i].pid, memory_order_relaxed) != 0 && theirs > peak)
            peak = theirs;
    }
    /* Processes each below their own peak can be above it together: never below what is in use. */
    uint64_t in_use = gpc_ledger_in_use(l, dev);
    return in_use > peak ? in_use : peak;
}

int gpc_proc_read(int32_t pid, const char *file, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    return (int)n;
}

/*
 * Fields 3 (state), 20 (threads) and 22 (start time in clock ticks since boot) of
 * /proc/<pid>/stat: 0, or -1 when it cannot be read.
 */
static int proc_stat(int32_t pid, char *state, long *threads, uint64_t *start)
{
    char buf[1024];
    if (gpc_proc_read(pid, "stat", buf, sizeof buf) <= 0)
        return -1;
    /* The command name may hold spaces and parentheses: count fields after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    *state = p[2];
    for (int field = 2; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 19)
            *threads = strtol(p + 1, NULL, 10);
    }
    if (!p)
        return -1;
    *start = strtoull(p + 1, NULL, 10);
    return 0;
}

uint64_t gpc_proc_start_time(int32_t pid)
{
    char state;
    long threads;
    uint64_t start;
    return proc_stat(pid, &state, &threads, &start) == 0 ? start : 0;
}

/* Whether descriptor `fd` of process `pid` still names the file (dev, ino): 0 no, 1 yes, -1 unknown. */
static int fd_names(int32_t pid, int32_t fd, uint64_t dev, uint64_t ino)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    return (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
}

int gpc_ledger_proc_alive(int32_t pid, uint64_t start_time, const struct gpc_ledger_proc *p)
{
    if (pid <= 0)
        return 0;
    /* No start time: a claim in progress, or an entry forged to look alive forever (pid 1). The
     * library gives claims a grace period of its own (ledger.c); nothing else counts it alive. */
    if (start_time == 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char state = 0;
    long threads = 1;
    uint64_t now = 0;
    if (proc_stat(pid, &state, &threads, &now) != 0)
        return 1; /* unknown: alive, the safe side (charged, never over-admitted) */
    if (now != start_time)
        return 0;
    /* A zombie has closed its files: its memory went with them. A thread-group leader that ended
     * while other threads run is a zombie too, with more than one thread: alive. */
    if ((state == 'Z' || state == 'X') && threads <= 1)
        return 0;
    if (p && atomic_load_explicit(&p->execing, memory_order_acquire) &&
        fd_names(pid, atomic_load(&p->exec_fd), atomic_load(&p->exec_fd_dev), atomic_load(&p->exec_fd_ino)) == 0)
        return 0; /* the exec went through: the old image and its memory are gone */
    return 1;
}

int gpc_ledger_proc_locked(int fd, int i)
{
    if (fd < 0 || i < 0 || i >= GPC_LEDGER_PROCS)
        return -1;
    /* The question a writer would ask: whose lock stands in the way of a write lock of that byte.
     * F_OFD_GETLK: whatever locks this process holds itself, the answer is about the others. */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = GPC_LEDGER_ALIVE_AT(i), .l_len = 1};
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

bool gpc_ledger_proc_gone(const struct gpc_ledger *l, int i, int fd)
{
    const struct gpc_ledger_proc *p = &l->proc[i];
    return atomic_load(&p->pid) != 0 && atomic_load(&p->alive_lock) == 1 && gpc_ledger_proc_locked(fd, i) == 0;
}


#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_INO
#define STATX_INO 0x00000100U
#endif

int gpc_path_own_mount(const char *path, int fd)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash || slash[1] == '\0' || (size_t)(slash - path) >= sizeof dir)
        return -1;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    /* The system call: glibc's statx wrapper is newer than the library's glibc floor. */
    struct statx d, f;
    unsigned want = STATX_MNT_ID | STATX_INO;
    int rc = -1;
    if (syscall(SYS_statx, dfd, "", AT_EMPTY_PATH, want, &d) == 0 &&
        syscall(SYS_statx, dfd, slash + 1, AT_SYMLINK_NOFOLLOW, want, &f) == 0) {
        struct stat held;
        if (fd >= 0 && (fstat(fd, &held) != 0 || held.st_ino != f.stx_ino ||
                        held.st_dev != (dev_t)makedev(f.stx_dev_major, f.stx_dev_minor)))
            rc = 0;
        else if (d.stx_mask & f.stx_mask & STATX_MNT_ID)
            rc = d.stx_mnt_id != f.stx_mnt_id;
    }
    close(dfd);
    return rc;
}
