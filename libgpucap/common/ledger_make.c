/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_make.c: a fresh ledger: the header and the robust locks of a new mapping (the library's
 * own files and private budgets), and a whole file made under a temporary name (the platform's,
 * made by `gpucap inject`).
 */
#include "common/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
