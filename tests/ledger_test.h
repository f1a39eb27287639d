/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_test.h: what the tests that look inside the ledger file share (after common.h): the
 * mapping of this test's ledger (GPUCAP_LEDGER) and the sum of the processes' leases, which the
 * device's total must equal.
 */
#ifndef GPUCAP_TESTS_LEDGER_TEST_H
#define GPUCAP_TESTS_LEDGER_TEST_H

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ledger.h"

/* Maps the ledger of this test, read-write (tests forge entries in it). */
static inline struct gpc_ledger *map_ledger(void)
{
    int fd = open(getenv("GPUCAP_LEDGER"), O_RDWR);
    REQUIRE(fd >= 0, "open ledger: %s", strerror(errno));
    void *m = mmap(NULL, sizeof(struct gpc_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    REQUIRE(m != MAP_FAILED, "mmap ledger");
    return m;
}

/* The leases of the live entries on device entry `dev`. */
static inline uint64_t leases_sum(const struct gpc_ledger *l, int dev)
{
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0)
            sum += atomic_load(&l->proc[i].share[dev].lease);
    return sum;
}

/* Posts a limit of `bytes` on device entry `dev` as `gpucap set-memory` does (the request, its
 * number, then the ledger's live signal); returns the request's number (ask_done reaches it once a
 * process applied it). */
static inline uint32_t post_ask(struct gpc_ledger *l, int dev, uint64_t bytes)
{
    atomic_store(&l->dev[dev].limit_asked, bytes);
    uint32_t seq = atomic_fetch_add(&l->dev[dev].ask_seq, 1) + 1;
    atomic_fetch_add(&l->live_gen, 1);
    return seq;
}

/* Whether the request `seq` on device entry `dev` (or a later one) was applied. */
static inline bool ask_done(const struct gpc_ledger *l, int dev, uint32_t seq)
{
    return (int32_t)(atomic_load(&l->dev[dev].ask_done) - seq) >= 0;
}

#endif
