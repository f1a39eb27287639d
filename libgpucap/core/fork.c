/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork.c: the locks a fork() must not leave held in the child.
 *
 * Another thread may hold a lock at the moment a thread forks; the child has only the forking
 * thread, so such a lock would stay held there forever. Each module registers its locks here in a
 * group instead of writing its own prepare, parent and child handlers: one pthread_atfork handler
 * (registered at the first group) takes every group's locks before fork() and releases them
 * after, in the parent, and initialises them afresh in the child.
 */
#include "core/fork.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

struct group {
    pthread_mutex_t *lock[GPC_FORK_LOCKS];
    int n;
    void (*child)(void);
};

static struct group groups[GPC_FORK_GROUPS];
static atomic_int ngroups; /* published after the group is written */

static void prepare(void)
{
    for (int g = atomic_load_explicit(&ngroups, memory_order_acquire) - 1; g >= 0; g--)
        for (int i = 0; i < groups[g].n; i++)
            pthread_mutex_lock(groups[g].lock[i]);
}

static void parent(void)
{
    int n = atomic_load_explicit(&ngroups, memory_order_acquire);
    for (int g = 0; g < n; g++)
        for (int i = groups[g].n - 1; i >= 0; i--)
            pthread_mutex_unlock(groups[g].lock[i]);
}

static void child(void)
{
    int n = atomic_load_explicit(&ngroups, memory_order_acquire);
    for (int g = 0; g < n; g++) {
        for (int i = 0; i < groups[g].n; i++)
            pthread_mutex_init(groups[g].lock[i], NULL);
        if (groups[g].child)
            groups[g].child();
    }
}

int gpc_fork_guard(pthread_mutex_t *const locks[], int n, void (*child_fn)(void))
{
    int g = atomic_load_explicit(&ngroups, memory_order_relaxed);
    if (g == GPC_FORK_GROUPS || n < 0 || n > GPC_FORK_LOCKS)
        return -ENOSPC;
    for (int i = 0; i < n; i++)
        groups[g].lock[i] = locks[i];
    groups[g].n = n;
    groups[g].child = child_fn;
    if (g == 0)
        pthread_atfork(prepare, parent, child);
    atomic_store_explicit(&ngroups, g + 1, memory_order_release);
    return 0;
}
