/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c: the fake card's physical truth. Per physical device it keeps capacity, outstanding
 * bytes, peak and allocation/free counts; per process a slot (pid + start time, so a reused pid
 * is not mistaken for the old process) with the bytes and contexts that process holds. The
 * record lives in the FAKECUDA_RECORD file (mmap MAP_SHARED, one card for every process that
 * names it) or in a shared anonymous map (still shared with fork() children).
 *
 * A process that execs starts from zero: the old image's memory goes back to the card at the exec,
 * as a real driver's does when its close-on-exec device files close. Each slot names a close-on-exec
 * descriptor of its process (a pipe's read end, the fake's "device file"): once /proc/<pid>/fd no
 * longer has it, the image is gone, whether the new one ever calls CUDA or not; a new image that
 * does takes over the slot. A process that dies, even by SIGKILL, gets its memory back as on a
 * real card (a zombie has closed its files): its slot is reaped lazily, when an allocation would not fit and on every inspection; with
 * FAKECUDA_EAGER_REAP=1 also before every allocation, so that the peak never counts the memory
 * of a process that already died (crash tests compare that peak with a budget). The record's lock is
 * a process-shared robust mutex; a holder that died mid-update is repaired by recomputing the
 * device totals from the live slots.
 *
 * A device file is held by whoever has its descriptor: a fork or raw clone child keeps its parent's
 * (and so its parent's memory on the card) until it exits or execs, as on a real card (holders.c); a
 * raw clone child, which no fork handler told, notices at its first record call that its pid is not
 * its slot's and takes a slot of its own.
 *
 * The driver-limited container (FAKECUDA_DRIVER_LIMIT): the processes that name a limit form one
 * container (their slots are marked `limited`); what they hold together on a device may not pass
 * the limit, as the driver enforces a cgroup's hard limit (dmem.max) at allocation time, counting
 * every allocation of the container, contexts included. The card's record stays the whole truth.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_internal.h"

#define FK_MAGIC 0x4144554345414b46ull /* "FAKECUDA" */
#define FK_REC_VERSION 3u
#define FK_SLOTS 256

struct fk_slot {
    int32_t pid; /* 0: free */
    uint32_t limited; /* 1: the process is in the driver-limited container (FAKECUDA_DRIVER_LIMIT) */
    uint64_t start; /* /proc/<pid>/stat field 22 */
    int32_t fd;  /* the process's close-on-exec "device file" (-1: none) */
    int32_t holder; /* the last other process seen holding it (holders.c), 0: none */
    uint64_t fd_ino; /* the inode that descriptor names */
    uint64_t holder_start;
    uint64_t bytes[FK_MAX_DEV];
    uint32_t ctxs[FK_MAX_DEV];
};

struct fk_devrec {
    uint64_t capacity, outstanding, peak, allocs, frees;
};

struct fk_record {
    uint64_t magic;
    uint32_t version, ndev;
    pthread_mutex_t mu;
    struct fk_devrec dev[FK_MAX_DEV];
    struct fk_slot slot[FK_SLOTS];
};

static struct fk_record *R;
static int attach_err;
static pthread_once_t attach_once = PTHREAD_ONCE_INIT;
/* This process's slot; read and written only under R->mu (and by the fork child handler). */
static int my_slot = -1;

/* Reads a small file into buf[size], NUL-terminated: its length, or -1 when it cannot be read. */
static ssize_t read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

int fk_proc_stat(pid_t pid, char *state, long *threads, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    /* The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'. */
    const char *rest = read_text(path, buf, sizeof buf) > 0 ? strrchr(buf, ')') : NULL;
    long nthreads;
    unsigned long long started;
    /* Field 3, sixteen skipped, 20, one skipped, 22. */
    if (!rest || sscanf(rest + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %ld %*s %llu",
                        state, &nthreads, &started) != 3)
        return -1;
    if (threads)
        *threads = nthreads;
    *start = started;
    return 0;
}

/* Whether the slot's own process still holds its memory: it runs, and has its device file. */
static bool owner_holds(const struct fk_slot *s)
{
    char state;
    long threads = 1;
    uint64_t start;
    if (fk_proc_stat(s->pid, &state, &threads, &start) < 0)
        return kill(s->pid, 0) == 0 || errno == EPERM;
    /* A zombie's memory is already back on a real card (a leader that ended while other threads
     * run is a zombie with more than one thread: alive). */
    if (((state == 'Z' || state == 'X') && threads <= 1) || start != s->start)
        return false;
    /* Its device file closed: the image that held the memory exec'd. */
    if (s->fd >= 0) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)s->pid, (int)s->fd);
        if (stat(path, &st) != 0 ? errno == ENOENT : (uint64_t)st.st_ino != s->fd_ino)
            return false;
    }
    return true;
}

/* Whether the slot's memory is still held: by its process, or by one that inherited its device
 * file (a fork or raw clone child that neither exited nor exec'd). Under R->mu. */
static bool slot_alive(struct fk_slot *s)
{
    return owner_holds(s) || fk_device_file_held(s->pid, s->fd, s->fd_ino, &s->holder, &s->holder_start);
}

/* This image's "device file": a close-on-exec descriptor that the slot names (see slot_alive). */
static void open_device_file(struct fk_slot *s)
{
    static int fd = -1;
    static pid_t owner;
    struct stat st;
    if (fd < 0 || owner != getpid()) {
        int p[2];
        fd = -1;
        if (pipe2(p, O_CLOEXEC) == 0) {
            close(p[1]);
            fd = p[0];
            owner = getpid();
        }
    }
    s->fd = fd >= 0 && fstat(fd, &st) == 0 ? fd : -1;
    s->fd_ino = s->fd >= 0 ? (uint64_t)st.st_ino : 0;
}

/* Frees the slots of dead processes; with `recount`, rebuilds device totals from live slots. */
static void reap(bool recount)
{
    for (int i = 0; i < FK_SLOTS; i++) {
        struct fk_slot *s = &R->slot[i];
        if (s->pid == 0 || i == my_slot || slot_alive(s))
            continue;
        for (uint32_t d = 0; d < R->ndev && !recount; d++) {
            uint64_t b = s->bytes[d] < R->dev[d].outstanding ? s->bytes[d] : R->dev[d].outstanding;
            R->dev[d].outstanding -= b;
        }
        memset(s, 0, sizeof *s);
    }
    if (!recount)
        return;
    for (uint32_t d = 0; d < R->ndev; d++) {
        uint64_t sum = 0;
        for (int i = 0; i < FK_SLOTS; i++)
            sum += R->slot[i].pid ? R->slot[i].bytes[d] : 0;
        R->dev[d].outstanding = sum;
        if (sum > R->dev[d].peak)
            R->dev[d].peak = sum;
    }
}

static void rec_lock(void)
{
    /* Polled rather than slept on: a holder killed between its unlock and the wake-up of the
     * waiters (a crowd killed at random moments) would leave them asleep on a free lock. trylock,
     * unlike timedlock, reports a dead owner in a way ThreadSanitizer follows. */
    int rc;
    for (unsigned tries = 0; (rc = pthread_mutex_trylock(&R->mu)) == EBUSY; tries++) {
        if (tries < 64)
            sched_yield();
        else
            usleep(100);
    }
    if (rc == EOWNERDEAD) {
        reap(true);
        pthread_mutex_consistent(&R->mu);
    }
}

static void rec_unlock(void)
{
    pthread_mutex_unlock(&R->mu);
}

/* This process's slot, claimed on first use; NULL when all slots hold live processes. */
static struct fk_slot *mine(void)
{
    /* A raw clone child still on its parent's slot (no fork handler ran): another process. */
    if (my_slot >= 0 && R->slot[my_slot].pid != getpid())
        my_slot = -1;
    if (my_slot >= 0)
        return &R->slot[my_slot];
    char state;
    uint64_t start = 0;
    fk_proc_stat(getpid(), &state, NULL, &start);
    /* A slot with our pid and start time is this process before an exec: the new image cannot
     * reach the old one's memory, and the driver frees it (the address space it lived in is gone).
     * The new image starts from zero in that slot. */
    for (int i = 0; i < FK_SLOTS; i++) {
        struct fk_slot *s = &R->slot[i];
        if (s->pid != getpid() || s->start != start)
            continue;
        /* A fork child of the old image still has its device file: that memory stays on the card
         * (the slot is the old image's until the child is gone); this image takes a free slot. */
        if (fk_device_file_held(s->pid, s->fd, s->fd_ino, &s->holder, &s->holder_start))
            continue;
        for (uint32_t d = 0; d < R->ndev; d++)
            R->dev[d].outstanding -= s->bytes[d] < R->dev[d].outstanding ? s->bytes[d] : R->dev[d].outstanding;
        memset(s->bytes, 0, sizeof s->bytes);
        memset(s->ctxs, 0, sizeof s->ctxs);
        open_device_file(s);
        s->limited = fk_config()->limited;
        my_slot = i;
        return s;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < FK_SLOTS; i++) {
            struct fk_slot *s = &R->slot[i];
            if (s->pid == 0) {
                memset(s, 0, sizeof *s);
                s->pid = getpid();
                s->start = start;
                open_device_file(s);
                s->limited = fk_config()->limited;
                my_slot = i;
                return s;
            }
        }
        reap(false);
    }
    return NULL;
}

static void init_devices(const struct fk_config *cfg)
{
    R->ndev = (uint32_t)cfg->ndev;
    for (int d = 0; d < FK_MAX_DEV; d++) {
        memset(&R->dev[d], 0, sizeof R->dev[d]);
        R->dev[d].capacity = d < cfg->ndev ? cfg->mem[d] : 0;
    }
}

static bool devices_match(const struct fk_config *cfg)
{
    if (R->ndev != (uint32_t)cfg->ndev)
        return false;
    for (int d = 0; d < cfg->ndev; d++)
        if (R->dev[d].capacity != cfg->mem[d])
            return false;
    return true;
}

static int init_fresh(const struct fk_config *cfg)
{
    memset(R, 0, sizeof *R);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&R->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (rc)
        return -rc;
    init_devices(cfg);
    R->version = FK_REC_VERSION;
    __atomic_store_n(&R->magic, FK_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static int attach_file(const struct fk_config *cfg)
{
    int fd = open(cfg->record_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -errno;
    /* The file lock serialises creation only; the robust mutex guards everything after. */
    if (flock(fd, LOCK_EX) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0 || (st.st_size < (off_t)sizeof *R && ftruncate(fd, sizeof *R) < 0))
        rc = -errno;
    void *m = rc ? MAP_FAILED : mmap(NULL, sizeof *R, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!rc && m == MAP_FAILED)
        rc = -errno;
    if (!rc) {
        R = m;
        if (R->magic != FK_MAGIC || R->version != FK_REC_VERSION) {
            rc = init_fresh(cfg);
        } else {
            rec_lock();
            reap(false);
            bool live = false;
            for (int i = 0; i < FK_SLOTS; i++)
                live |= R->slot[i].pid != 0;
            /* A record nobody uses any more takes this process's configuration; a card in use
             * keeps its own (processes joining it adopt it). */
            if (!live && !devices_match(cfg))
                init_devices(cfg);
            rec_unlock();
        }
    }
    flock(fd, LOCK_UN);
    close(fd);
    return rc;
}

static void do_attach(void)
{
    const struct fk_config *cfg = fk_config();
    if (cfg->record_path && *cfg->record_path) {
        attach_err = attach_file(cfg);
    } else {
        void *m = mmap(NULL, sizeof *R, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            attach_err = -errno;
        } else {
            R = m;
            attach_err = init_fresh(cfg);
        }
    }
    if (attach_err) {
        R = NULL;
        fprintf(stderr, "fakecuda: cannot attach the record %s: %s\n",
                cfg->record_path ? cfg->record_path : "(anonymous)", strerror(-attach_err));
    }
}

int fk_record_attach(void)
{
    pthread_once(&attach_once, do_attach);
    return attach_err;
}

int fk_record_ndev(void)
{
    return fk_record_attach() ? 0 : (int)R->ndev;
}

uint64_t fk_record_capacity(int phys)
{
    if (fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return 0;
    return R->dev[phys].capacity;
}

/* What the limited container's live processes hold on `phys`. Under R->mu. */
static uint64_t container_used(int phys)
{
    uint64_t sum = 0;
    for (int i = 0; i < FK_SLOTS; i++)
        if (R->slot[i].pid && R->slot[i].limited)
            sum += R->slot[i].bytes[phys];
    return sum;
}

/* Whether `bytes` more on `phys` would pass this process's driver limit. Under R->mu. */
static bool over_driver_limit(int phys, uint64_t bytes)
{
    uint64_t lim = fk_config()->driver_limit[phys];
    if (!lim)
        return false;
    uint64_t used = container_used(phys);
    return used > lim || bytes > lim - used;
}

uint64_t fk_record_container_used(int phys)
{
    if (fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return 0;
    rec_lock();
    reap(false);
    uint64_t v = container_used(phys);
    rec_unlock();
    return v;
}

CUresult fk_charge(int phys, uint64_t bytes)
{
    if (fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (bytes == 0)
        return CUDA_SUCCESS;
    static int eager = -1;
    if (eager < 0) {
        const char *e = getenv("FAKECUDA_EAGER_REAP");
        eager = e && strcmp(e, "1") == 0;
    }
    rec_lock();
    struct fk_slot *s = mine();
    struct fk_devrec *d = &R->dev[phys];
    bool limited = fk_config()->limited; /* the container check costs nothing outside one */
    if (s && (eager || bytes > d->capacity - d->outstanding || (limited && over_driver_limit(phys, bytes))))
        reap(false);
    if (!s || bytes > d->capacity - d->outstanding || (limited && over_driver_limit(phys, bytes))) {
        rec_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    d->outstanding += bytes;
    s->bytes[phys] += bytes;
    if (d->outstanding > d->peak)
        d->peak = d->outstanding;
    d->allocs++;
    rec_unlock();
    return CUDA_SUCCESS;
}

void fk_uncharge(int phys, uint64_t bytes)
{
    if (bytes == 0 || fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return;
    rec_lock();
    struct fk_slot *s = mine();
    if (s) {
        struct fk_devrec *d = &R->dev[phys];
        if (bytes > s->bytes[phys])
            bytes = s->bytes[phys];
        s->bytes[phys] -= bytes;
        d->outstanding -= bytes < d->outstanding ? bytes : d->outstanding;
        d->frees++;
    }
    rec_unlock();
}

void fk_record_ctx(int phys, int delta)
{
    if (fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return;
    rec_lock();
    struct fk_slot *s = mine();
    if (s && (delta > 0 || s->ctxs[phys] > 0))
        s->ctxs[phys] += (uint32_t)delta;
    rec_unlock();
}

void fk_record_forget_slot(void)
{
    my_slot = -1;
}

/* ---- inspection API ---- */

static bool inspect_begin(int phys)
{
    if (fk_record_attach() || phys < 0 || phys >= (int)R->ndev)
        return false;
    rec_lock();
    reap(false);
    return true;
}

/* A device's figures as of now (the dead reaped first); all zero for a bad device. */
static struct fk_devrec inspect_dev(int phys)
{
    struct fk_devrec d = { 0 };
    if (inspect_begin(phys)) {
        d = R->dev[phys];
        rec_unlock();
    }
    return d;
}

/* The inspection calls that answer one figure of inspect_dev (fakecuda.h). */
#define FK_DEVREC_FIGURE(name, field)                                                   \
    FK_EXPORT uint64_t name(int phys_dev)                                               \
    {                                                                                   \
        return inspect_dev(phys_dev).field;                                             \
    }
FK_DEVREC_FIGURE(fakecuda_outstanding, outstanding)
FK_DEVREC_FIGURE(fakecuda_peak, peak)
FK_DEVREC_FIGURE(fakecuda_alloc_count, allocs)
FK_DEVREC_FIGURE(fakecuda_free_count, frees)
#undef FK_DEVREC_FIGURE

FK_EXPORT uint64_t fakecuda_capacity(int phys_dev)
{
    return fk_record_capacity(phys_dev);
}

FK_EXPORT uint64_t fakecuda_driver_limit(int phys_dev)
{
    if (phys_dev < 0 || phys_dev >= FK_MAX_DEV)
        return 0;
    return fk_config()->driver_limit[phys_dev];
}

FK_EXPORT uint64_t fakecuda_container_used(int phys_dev)
{
    return fk_record_container_used(phys_dev);
}

FK_EXPORT void fakecuda_reset_peak(int phys_dev)
{
    if (!inspect_begin(phys_dev))
        return;
    R->dev[phys_dev].peak = R->dev[phys_dev].outstanding;
    rec_unlock();
}

FK_EXPORT int fakecuda_physical_count(void)
{
    return fk_record_ndev();
}

FK_EXPORT int fakecuda_processes(int phys_dev, struct fakecuda_process *out, int max)
{
    if (!inspect_begin(phys_dev))
        return -1;
    int n = 0;
    for (int i = 0; i < FK_SLOTS; i++) {
        const struct fk_slot *s = &R->slot[i];
        if (s->pid == 0 || (s->bytes[phys_dev] == 0 && s->ctxs[phys_dev] == 0))
            continue;
        if (out && n < max)
            out[n] = (struct fakecuda_process){ (unsigned)s->pid, s->bytes[phys_dev], s->ctxs[phys_dev] };
        n++;
    }
    rec_unlock();
    return n;
}
