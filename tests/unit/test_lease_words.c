/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lease_words.c: the lease protocol (libgpucap/core/lease.c, compiled in, with its crash
 * points) on a ledger in memory, without the library, the driver or a file lock: the test takes a
 * mutex of its own where the library takes the device entry's lock.
 *
 *  - steps: a share starts closed, opens at its first grow, admits from its spare without the lock
 *    and never past its lease; a grow is checked against the limit (unchecked passes it); a
 *    lowering under the leases closes every share and takes every spare back, and the shares open
 *    again only once frees brought the leases under the limit; a release never lifts a spare
 *    above its lease; a carry moves a share exactly; clearing a share gives its whole lease back.
 *  - crashes: a process killed at each step of a grow, a take-back and a clear (the crash points
 *    1-13, run in a child of this program that maps the same memory), then the next locker's
 *    settle: generations even, no spare above its lease, the total the sum of the leases, and
 *    nobody's admitted bytes below what they were (a take-back's exactly what they were).
 *  - threads: several admit and release at once from their own shares, growing and giving back
 *    under the mutex, while another lowers and raises the limit: an admission that starts after a
 *    limit is in force never leaves more admitted than it, and under the mutex the total is always
 *    the sum of the leases and the device open only while they fit.
 */
#include "core/lease.h"

#include "common/ledger.h"

#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (UINT64_C(1) << 20)
#define ID 0 /* the device entry (budget id) every case works on */

static struct gpc_ledger *ledger; /* shared with the crash children (MAP_SHARED | MAP_ANONYMOUS) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct gpc_ledger_dev *dev(void)
{
    return &ledger->dev[ID];
}

static struct gpc_ledger_share *share(int p)
{
    return &ledger->proc[p].share[ID];
}

/* A fresh ledger with `procs` live entries on device ID, whose limit is `limit`. */
static void fresh(int procs, uint64_t limit)
{
    memset(ledger, 0, sizeof *ledger);
    for (int p = 0; p < procs; p++) {
        atomic_store(&ledger->proc[p].pid, 1000 + p);
        gpc_lease_share_start(share(p));
    }
    atomic_store(&ledger->procs_used, (uint32_t)procs);
    atomic_store(&dev()->state, 1);
    gpc_lease_device_start(dev(), limit);
}

static uint64_t bytes_of(uint64_t w)
{
    return w & GPC_SPARE_MASK;
}

static uint64_t admitted(int p)
{
    uint64_t lease = atomic_load(&share(p)->lease), spare = bytes_of(atomic_load(&share(p)->spare));
    return lease > spare ? lease - spare : 0;
}

/* Under the mutex: the total is the sum of the leases, no spare is above its lease, no generation
 * is odd, and the device is open only while the leases fit (point 4). */
static void consistent(const char *when)
{
    uint64_t sum = 0;
    uint32_t n = atomic_load(&ledger->procs_used);
    for (uint32_t p = 0; p < n; p++) {
        uint64_t w = atomic_load(&share((int)p)->spare), lease = atomic_load(&share((int)p)->lease);
        CHECK(bytes_of(w) <= lease, "%s: process %u has %llu spare above its lease %llu", when, p,
              (unsigned long long)bytes_of(w), (unsigned long long)lease);
        CHECK(!((w >> GPC_SPARE_BITS) & 1), "%s: process %u's generation is odd", when, p);
        sum += lease;
    }
    uint64_t leased = atomic_load(&dev()->slot.leased), limit = atomic_load(&dev()->slot.limit);
    CHECK(leased == sum, "%s: %llu leased, the leases sum to %llu", when, (unsigned long long)leased,
          (unsigned long long)sum);
    CHECK(atomic_load(&dev()->closed) || leased <= limit, "%s: open with %llu leased over the limit %llu", when,
          (unsigned long long)leased, (unsigned long long)limit);
}

/* An admission as budget.c makes one: the spare without the lock, else a grow under it (after
 * taking every spare back when the budget is leased out). */
static bool admit(int p, uint64_t bytes)
{
    uint64_t after;
    if (gpc_lease_take(share(p), bytes, &after))
        return true;
    pthread_mutex_lock(&lock);
    bool ok = gpc_lease_take(share(p), bytes, &after) || gpc_lease_grow(dev(), share(p), ID, bytes, false, true);
    if (!ok) {
        gpc_lease_take_all(ledger, dev());
        ok = gpc_lease_grow(dev(), share(p), ID, bytes, false, true);
    }
    gpc_lease_reopen(ledger, dev());
    pthread_mutex_unlock(&lock);
    return ok;
}

/* A release as budget.c makes one: into the spare, and what passes what the process keeps goes
 * back to the total if the mutex is free. */
static void release(int p, uint64_t bytes)
{
    uint64_t spare = gpc_lease_release(share(p), bytes);
    if (spare <= gpc_lease_keep(ID) || pthread_mutex_trylock(&lock) != 0)
        return;
    uint64_t limit = gpc_lease_limit(dev(), ID);
    bool over = gpc_lease_keep(ID) == 0;
    gpc_lease_take_back(dev(), share(p), p, over ? 0 : gpc_lease_chunk(limit));
    if (over && atomic_load(&dev()->slot.leased) <= limit)
        gpc_lease_keep_set(ID, limit, false);
    gpc_lease_reopen(ledger, dev());
    pthread_mutex_unlock(&lock);
}

/* A live lowering or raise as budget.c applies one, under the mutex. */
static void set_limit(uint64_t limit)
{
    pthread_mutex_lock(&lock);
    gpc_lease_set_limit(ledger, dev(), limit);
    gpc_lease_take_all(ledger, dev());
    gpc_lease_keep_set(ID, limit, atomic_load(&dev()->slot.leased) > limit);
    consistent("after a change of the limit");
    pthread_mutex_unlock(&lock);
}

/* ---- steps ---- */

static void test_steps(void)
{
    fresh(2, 64 * MiB);
    uint64_t after;
    CHECK(!gpc_lease_take(share(0), 1, &after), "a fresh share admits nothing without the lock (it is closed)");
    CHECK(admit(0, 4 * MiB) && admitted(0) == 4 * MiB, "the first grow admits: %llu", (unsigned long long)admitted(0));
    CHECK(atomic_load(&share(0)->spare) & GPC_SPARE_OPEN, "the share opened at its grow");
    /* A grow takes as much again as the process holds, up to a chunk: now there is spare. */
    CHECK(admit(0, 4 * MiB) && admitted(0) == 8 * MiB, "a second admission: %llu", (unsigned long long)admitted(0));
    uint64_t lease = atomic_load(&share(0)->lease), spare = bytes_of(atomic_load(&share(0)->spare));
    CHECK(spare > 0 && gpc_lease_take(share(0), spare, &after), "the spare (%llu) admits without the lock",
          (unsigned long long)spare);
    CHECK(!gpc_lease_take(share(0), 1, &after), "never past the lease (%llu)", (unsigned long long)lease);
    CHECK(gpc_lease_release(share(0), 100 * MiB) == lease, "a release is clamped at the lease");
    CHECK(bytes_of(atomic_load(&share(0)->spare)) == lease, "the spare is the whole lease after it");
    consistent("steps");

    /* The limit: a checked grow never passes it, an unchecked one does. */
    fresh(2, 16 * MiB);
    CHECK(admit(0, 12 * MiB), "12 MiB under 16");
    pthread_mutex_lock(&lock);
    CHECK(!gpc_lease_grow(dev(), share(1), ID, 8 * MiB, false, true), "8 MiB more does not fit 16");
    CHECK(gpc_lease_grow(dev(), share(1), ID, 8 * MiB, true, true), "unchecked, it is admitted");
    CHECK(atomic_load(&dev()->slot.leased) == 20 * MiB, "leased %llu", (unsigned long long)atomic_load(&dev()->slot.leased));
    pthread_mutex_unlock(&lock);

    /* A lowering under the leases: closed, every spare taken back, open again once they fit. */
    fresh(2, 64 * MiB);
    for (int i = 0; i < 4; i++)
        CHECK(admit(0, 4 * MiB) && admit(1, 4 * MiB), "admissions under 64 MiB");
    set_limit(8 * MiB);
    CHECK(atomic_load(&dev()->closed), "closed: 32 MiB held under a limit of 8");
    for (int p = 0; p < 2; p++)
        CHECK(bytes_of(atomic_load(&share(p)->spare)) == 0 && admitted(p) == 16 * MiB, "process %d: spare %llu, "
              "admitted %llu", p, (unsigned long long)bytes_of(atomic_load(&share(p)->spare)), (unsigned long long)admitted(p));
    CHECK(!admit(0, 1 * MiB), "nothing is admitted while the leases pass the limit");
    /* A free while another holds the lock stays in the share, closed: no admission from it. */
    pthread_mutex_lock(&lock);
    release(0, 2 * MiB);
    CHECK(bytes_of(atomic_load(&share(0)->spare)) == 2 * MiB, "the freed bytes stay spare while the lock is busy");
    CHECK(!gpc_lease_take(share(0), 1 * MiB, &after), "a closed spare admits nothing without the lock");
    pthread_mutex_unlock(&lock);
    release(0, 10 * MiB);
    release(1, 14 * MiB); /* now 4 + 2 held: the frees went back to the total (keep is 0) */
    CHECK(!atomic_load(&dev()->closed), "open again once the leases fit (%llu leased)",
          (unsigned long long)atomic_load(&dev()->slot.leased));
    CHECK(admit(0, 2 * MiB), "2 MiB more fits 8 (6 held)");
    CHECK(!admit(1, 1 * MiB), "1 MiB more does not (8 held)");
    consistent("after a lowering");

    /* A carry and a clear. */
    fresh(3, 64 * MiB);
    CHECK(admit(0, 4 * MiB) && admit(0, 4 * MiB), "admissions");
    uint64_t before = admitted(0), lease0 = atomic_load(&share(0)->lease);
    pthread_mutex_lock(&lock);
    gpc_lease_carry(dev(), share(2), share(0));
    CHECK(admitted(2) == before && atomic_load(&share(2)->lease) == lease0, "the carry moves the share exactly");
    CHECK(bytes_of(atomic_load(&share(0)->spare)) == 0, "the old spare is emptied");
    atomic_store(&share(0)->lease, 0); /* the old file's share is that file's: leave it out of this one */
    atomic_store(&dev()->slot.leased, lease0);
    uint64_t back = gpc_lease_clear(dev(), share(2));
    CHECK(back == lease0 && atomic_load(&dev()->slot.leased) == 0 && admitted(2) == 0, "a clear gives the lease back");
    consistent("after a clear");
    pthread_mutex_unlock(&lock);
}

/* ---- crashes ---- */

/* In the child: the locked operations, crash points 1-13 on the way (GPC_TEST_CRASH_AT). */
static void crash_child(void)
{
    gpc_lease_grow(dev(), share(0), ID, 4 * MiB, false, true);
    gpc_lease_take_back(dev(), share(1), 1, 0);
    gpc_lease_clear(dev(), share(2));
    _exit(0);
}

static void test_crashes(void)
{
    for (int at = 1; at <= 13; at++) {
        fresh(3, 512 * MiB);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 3; i++)
                REQUIRE(admit(p, 8 * MiB), "set-up admissions");
        release(1, 4 * MiB); /* spare for the take-back */
        uint64_t had[3] = {admitted(0), admitted(1), admitted(2)};
        pid_t child = fork();
        REQUIRE(child >= 0, "fork");
        if (child == 0) {
            char n[8];
            snprintf(n, sizeof n, "%d", at);
            setenv("GPC_TEST_CRASH_AT", n, 1);
            crash_child();
        }
        int status;
        waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child reached crash point %d", at);
        /* The next locker, told EOWNERDEAD, settles the entry. */
        gpc_lease_settle(ledger, dev());
        char when[48];
        snprintf(when, sizeof when, "settled after a crash at point %d", at);
        consistent(when);
        CHECK(admitted(0) >= had[0], "point %d: a grow left less admitted than before", at);
        CHECK(admitted(1) == had[1], "point %d: a take-back changed what was admitted: %llu, was %llu", at,
              (unsigned long long)admitted(1), (unsigned long long)had[1]);
        CHECK(at >= 10 || admitted(2) == had[2], "point %d: a share not yet cleared changed", at);
    }
}

/* ---- threads ---- */

#define THREADS 4
#define ROUNDS 20000
static _Atomic uint64_t total;         /* admitted, a lower bound: added after, taken before */
static _Atomic uint64_t phase;         /* odd while the limit changes */
static _Atomic uint64_t in_force;      /* the limit once phase is even */
static atomic_bool stop;
static _Atomic int violations;

static void *admitter(void *arg)
{
    int p = (int)(intptr_t)arg;
    uint64_t held[64] = {0}, rng = 0x9e3779b97f4a7c15ull * (uint64_t)(p + 1);
    int n = 0;
    for (int r = 0; r < ROUNDS; r++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        if (n < 64 && (rng & 3)) {
            uint64_t bytes = (1 + (rng >> 8) % 8) * 256 * 1024;
            uint64_t p1 = atomic_load(&phase), limit = atomic_load(&in_force);
            if (!admit(p, bytes))
                continue;
            uint64_t now = atomic_fetch_add(&total, bytes) + bytes;
            /* Begun and ended with the same limit in force: nothing past it. */
            if (!(p1 & 1) && atomic_load(&phase) == p1 && now > limit && atomic_fetch_add(&violations, 1) < 5)
                fprintf(stderr, "FAIL: %llu admitted under a limit of %llu\n", (unsigned long long)now,
                        (unsigned long long)limit);
            held[n++] = bytes;
        } else if (n) {
            uint64_t bytes = held[--n];
            atomic_fetch_sub(&total, bytes);
            release(p, bytes);
        }
    }
    while (n) {
        uint64_t bytes = held[--n];
        atomic_fetch_sub(&total, bytes);
        release(p, bytes);
    }
    return NULL;
}

static void *changer(void *arg)
{
    (void)arg;
    static const uint64_t limits[] = {48 * MiB, 8 * MiB, 24 * MiB, 4 * MiB, 64 * MiB, 12 * MiB};
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        uint64_t limit = limits[i % (sizeof limits / sizeof limits[0])];
        atomic_fetch_add(&phase, 1);
        set_limit(limit);
        atomic_store(&in_force, limit);
        atomic_fetch_add(&phase, 1);
        usleep(200);
    }
    return NULL;
}

static void test_threads(void)
{
    fresh(THREADS, 48 * MiB);
    atomic_store(&in_force, 48 * MiB);
    gpc_lease_keep_set(ID, 48 * MiB, false);
    pthread_t t[THREADS], c;
    REQUIRE(pthread_create(&c, NULL, changer, NULL) == 0, "thread");
    for (int i = 0; i < THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, admitter, (void *)(intptr_t)i) == 0, "thread");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, true);
    pthread_join(c, NULL);
    CHECK(atomic_load(&violations) == 0, "%d admissions passed the limit in force", atomic_load(&violations));
    pthread_mutex_lock(&lock);
    consistent("after the threads");
    gpc_lease_take_all(ledger, dev());
    for (int p = 0; p < THREADS; p++)
        CHECK(admitted(p) == 0, "process %d still holds %llu after freeing everything", p, (unsigned long long)admitted(p));
    CHECK(atomic_load(&dev()->slot.leased) == 0, "%llu still leased", (unsigned long long)atomic_load(&dev()->slot.leased));
    pthread_mutex_unlock(&lock);
}

int main(void)
{
    ledger = mmap(NULL, sizeof *ledger, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(ledger != MAP_FAILED, "mmap");
    unsetenv("GPC_TEST_CRASH_AT");
    test_steps();
    test_crashes();
    test_threads();
    return test_result();
}
