/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fini_blocker.c: preloaded after libgpucap by test_escapes exit_thread (initialised before it), so
 * that its destructor runs after gpucap's at exit. It tells the test's worker thread that exit has reached it, then
 * waits (at most 2 s) for the worker to have tried its allocation: memory taken then is outside
 * any budget gpucap still counts.
 */
#include <stdatomic.h>
#include <time.h>

atomic_int fini_blocker_state; /* 0, 1: our destructor runs, 2: the worker is done */

__attribute__((destructor)) static void hold_exit(void)
{
    atomic_store(&fini_blocker_state, 1);
    for (int i = 0; i < 200 && atomic_load(&fini_blocker_state) != 2; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
}
