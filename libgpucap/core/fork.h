/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork.h: the locks a fork() must not leave held in the child (fork.c), registered in groups.
 */
#ifndef GPUCAP_CORE_FORK_H
#define GPUCAP_CORE_FORK_H

#include <pthread.h>

#define GPC_FORK_GROUPS 8 /* groups of locks */
#define GPC_FORK_LOCKS 2  /* locks in one group */

/*
 * Registers a group of `n` locks: before fork() they are taken in the order given, the groups in
 * reverse order of registration (as pthread_atfork orders its handlers: a group registered later
 * holds locks taken before those of earlier groups); after it the parent releases them and the
 * child initialises them afresh and then runs `child` (NULL: nothing more), which must only reset
 * memory. Registrations run one at a time (at start-up, or under a module's pthread_once after
 * it). 0, or -ENOSPC when the table is full (nothing registered).
 */
int gpc_fork_guard(pthread_mutex_t *const locks[], int n, void (*child)(void));

#endif
