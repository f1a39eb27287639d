/* SPDX-License-Identifier: Apache-2.0 */
/*
 * locks.c: the check of lock order (debug builds only; locks.h has the ranks and says why).
 *
 * Each thread keeps the ranks it holds, in the order it took them. Taking a lock (not trying it)
 * whose rank is not above every rank held is a wrong order, which could deadlock with a thread
 * taking the same two the right way: one line naming both, then an abort (GPC_ASSERT's). Two locks
 * of LEDGER_DEV may be held at once, in a move (the old file's, then the new file's). A trylock
 * cannot deadlock: it is not checked, but what it holds counts for the locks taken after it.
 */
#include "core/locks.h"

#ifdef GPC_DEBUG
#include "common/log.h"

#include <stdlib.h>

#define HELD_MAX 32

static const char *const rank_names[GPC_LOCK__COUNT] = {
#define GPC_LOCK_RANK_NAME(rank, fork, doc) [GPC_LOCK_##rank] = #rank,
    GPC_LOCK_RANKS(GPC_LOCK_RANK_NAME)
#undef GPC_LOCK_RANK_NAME
};

static __thread struct {
    unsigned char rank[HELD_MAX];
    int n;
} held __attribute__((tls_model("initial-exec")));

void gpc_witness_take(enum gpc_lock_rank rank, bool trying)
{
    for (int i = 0; !trying && i < held.n; i++) {
        enum gpc_lock_rank h = (enum gpc_lock_rank)held.rank[i];
        if (h < rank || (h == rank && rank == GPC_LOCK_LEDGER_DEV))
            continue;
        gpc_log_line(GPC_LOG_ERROR, "lock order: %s (rank %d) taken while %s (rank %d) is held", rank_names[rank],
                     (int)rank, rank_names[h], (int)h);
        gpc_assert_fail("a lock taken in increasing rank only (core/locks.h)", __FILE__, __LINE__);
    }
    if (held.n < HELD_MAX)
        held.rank[held.n++] = (unsigned char)rank;
}

void gpc_witness_drop(enum gpc_lock_rank rank)
{
    for (int i = held.n - 1; i >= 0; i--) {
        if (held.rank[i] != rank)
            continue;
        for (int j = i; j + 1 < held.n; j++)
            held.rank[j] = held.rank[j + 1];
        held.n--;
        return;
    }
}

void gpc_witness_fork_child(void)
{
    held.n = 0;
}
#endif
