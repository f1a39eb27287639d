/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lock_order.c: the check of lock order (libgpucap/core/locks.c, compiled in as in a debug
 * build): locks taken in increasing rank pass, two device entries' locks may be held at once (a
 * move), a trylock out of order passes (it cannot deadlock), and a lock waited for below a rank
 * held aborts with one line naming both (each case in a child: the abort is the result).
 */
#include "core/locks.h"

#include "check.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;

static void right_order(void)
{
    gpc_lock(&a, GPC_LOCK_SETUP);
    gpc_lock(&b, GPC_LOCK_TIMELINE);
    gpc_unlock(&b, GPC_LOCK_TIMELINE);
    gpc_unlock(&a, GPC_LOCK_SETUP);
    gpc_lock(&b, GPC_LOCK_TIMELINE); /* released before: nothing is held now */
    gpc_unlock(&b, GPC_LOCK_TIMELINE);
    gpc_lock(&a, GPC_LOCK_SETUP);
    gpc_unlock(&a, GPC_LOCK_SETUP);
}

static void two_devices(void)
{
    gpc_lock(&a, GPC_LOCK_LEDGER_DEV);
    gpc_lock(&b, GPC_LOCK_LEDGER_DEV);
    gpc_unlock(&b, GPC_LOCK_LEDGER_DEV);
    gpc_unlock(&a, GPC_LOCK_LEDGER_DEV);
}

static void trylock_down(void)
{
    gpc_lock(&b, GPC_LOCK_TIMELINE);
    if (gpc_trylock(&a, GPC_LOCK_SETUP) == 0)
        gpc_unlock(&a, GPC_LOCK_SETUP);
    gpc_unlock(&b, GPC_LOCK_TIMELINE);
}

static void wrong_order(void)
{
    gpc_lock(&b, GPC_LOCK_TIMELINE);
    gpc_lock(&a, GPC_LOCK_SETUP);
}

static void wrong_after_trylock(void)
{
    if (gpc_trylock(&b, GPC_LOCK_TRACK_SHARD) == 0)
        gpc_lock(&a, GPC_LOCK_POOL); /* what a trylock holds counts for the locks after it */
}

/* The case's child: true when it ended as `abort` says (SIGABRT, or exit 0). */
static bool ends(void (*fn)(void), bool abort_expected)
{
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    return abort_expected ? WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT : WIFEXITED(status) && !WEXITSTATUS(status);
}

int main(void)
{
    CHECK(ends(right_order, false), "locks in increasing rank were refused");
    CHECK(ends(two_devices, false), "two device entries' locks (a move) were refused");
    CHECK(ends(trylock_down, false), "a trylock below a rank held was refused");
    CHECK(ends(wrong_order, true), "a lock waited for below a rank held did not abort");
    CHECK(ends(wrong_after_trylock, true), "a lock waited for below a trylocked rank did not abort");
    return test_result();
}
