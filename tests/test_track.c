/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_track.c: the pointer table (libgpucap/core/track.c, compiled in) against a reference.
 *
 * Random adds, takes, replacements, reference counts and context drains at scale (hundreds of
 * thousands of live records, so every shard grows several times, with takes landing while records
 * still move to the bigger table), each result compared with a plain array that knows what is in,
 * on records of every shape the table packs and of those it keeps whole in its side store. Then
 * reference counts across the packed range, then threads working on keys of their own at once
 * while another drains a context none of them uses, and at the end the table must be empty.
 */
#include "core/track.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 400000 /* distinct keys */
#define OPS 3000000

static int failures;
#define CHECK(cond, ...)                                                                                          \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                                                         \
            fputc('\n', stderr);                                                                                  \
            if (++failures > 10)                                                                                  \
                exit(1);                                                                                          \
        }                                                                                                         \
    } while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Key i looks like a device pointer: aligned, clustered, distinct for each i. */
static uint64_t key_of(uint64_t i)
{
    return 0x7f0000000000ull + (i % 1000) * 0x100000000ull + (i / 1000) * 512;
}

struct ref {
    bool in;
    struct gpc_track t;
};
static struct ref ref[N];

/*
 * Records of every shape the table packs differently: context only, aux only, both small enough to
 * share a word, a count with neither, and those that go whole to the side store (a context and an
 * aux both large, a size past 2^48, a device or a count out of the packed range).
 */
static const uint64_t ctxs[] = {0, 3, 0x7f00deadb000ull, 0xffffff0000000000ull, 0x10000};
#define NCTX (sizeof ctxs / sizeof ctxs[0])
static struct gpc_track value(uint64_t i, uint64_t salt)
{
    static const int32_t refs[] = {1, 1, 1, 15, 16, 100, -1, 0};
    static const int32_t devs[] = {0, 1, 7, 63, -1, 127, 128, -129};
    uint64_t aux = 0;
    switch ((salt / NCTX) % 5) {
    case 1: aux = salt & 0xffff; break;
    case 2: aux = (salt * 0x10001) & 0xffffffffffffull; break;
    case 3: aux = salt | 1ull << 63; break;
    case 4: aux = salt; break;
    }
    return (struct gpc_track){.bytes = i * 7 + salt + (salt % 11 == 0 ? 1ull << 50 : 0),
                              .device = (salt / 3) % 4 ? (int32_t)(i % 8) : devs[(salt / 7) % 8],
                              .refs = refs[(salt / 13) % 8], .aux = aux, .ctx = ctxs[salt % NCTX]};
}

static bool same(const struct gpc_track *a, const struct gpc_track *b)
{
    return a->bytes == b->bytes && a->device == b->device && a->refs == b->refs && a->aux == b->aux &&
           a->ctx == b->ctx;
}

static uint64_t live;

struct drained {
    uint64_t ctx, n, bytes, aux;
    bool other; /* a record of another context came out */
};

static void count_drained(const struct gpc_track *t, void *arg)
{
    struct drained *d = arg;
    d->n++;
    d->bytes += t->bytes;
    d->aux += t->aux;
    d->other |= t->ctx != d->ctx;
}

static void single(void)
{
    for (uint64_t op = 0; op < OPS; op++) {
        uint64_t r = next();
        uint64_t i = (r >> 8) % N;
        /* Mostly adds early, mostly takes late: the table grows to most of N, then empties. */
        bool grow = op < OPS / 2 ? (r & 0xff) < 190 : (r & 0xff) < 60;
        struct gpc_track got;
        if ((r & 0xf00) == 0x100) {
            /* Reference counts. */
            int delta = (r & 0x1000) ? 1 : -1;
            int refs = gpc_track_ref(GPC_MAP_PTR, key_of(i), delta, &got);
            if (!ref[i].in) {
                CHECK(refs == -1, "ref of absent key %llu gave %d", (unsigned long long)i, refs);
            } else {
                int want = ref[i].t.refs + delta;
                if (want <= 0) {
                    CHECK(refs == 0, "ref to zero gave %d", refs);
                    ref[i].t.refs = want;
                    CHECK(same(&got, &ref[i].t), "removed record differs");
                    ref[i].in = false;
                    live--;
                } else {
                    CHECK(refs == want, "ref gave %d, want %d", refs, want);
                    ref[i].t.refs = want;
                }
            }
        } else if (grow) {
            struct gpc_track t = value(i, op);
            CHECK(gpc_track_add(GPC_MAP_PTR, key_of(i), &t) == 0, "add failed");
            if (!ref[i].in)
                live++;
            ref[i].in = true; /* an add of a key held replaces its record */
            ref[i].t = t;
        } else {
            bool known = gpc_track_take(GPC_MAP_PTR, key_of(i), &got);
            CHECK(known == ref[i].in, "take of %llu: known %d, reference %d", (unsigned long long)i, known, ref[i].in);
            if (known) {
                CHECK(same(&got, &ref[i].t), "take of %llu: record differs", (unsigned long long)i);
                ref[i].in = false;
                live--;
            }
        }
        if (op % 500000 == 250000) {
            /* A context's teardown: exactly its records go, and the rest stay findable. */
            struct drained want = {.ctx = ctxs[op / 500000 % NCTX]}, got = {.ctx = want.ctx};
            for (uint64_t k = 0; k < N; k++)
                if (ref[k].in && ref[k].t.ctx == want.ctx) {
                    want.n++, want.bytes += ref[k].t.bytes, want.aux += ref[k].t.aux;
                    ref[k].in = false;
                }
            gpc_track_drain_ctx(GPC_MAP_PTR, want.ctx, count_drained, &got);
            CHECK(got.n == want.n && got.bytes == want.bytes && got.aux == want.aux && !got.other,
                  "drain of context %llx: %llu records, want %llu", (unsigned long long)want.ctx,
                  (unsigned long long)got.n, (unsigned long long)want.n);
            live -= want.n;
        }
        if (op % 100000 == 0) {
            uint64_t records, bytes;
            gpc_track_stats(GPC_MAP_PTR, &records, &bytes);
            CHECK(records == live, "table holds %llu records, reference %llu", (unsigned long long)records,
                  (unsigned long long)live);
        }
    }
    /* Every record still findable, with its value; then the table is empty. */
    for (uint64_t i = 0; i < N; i++) {
        struct gpc_track got;
        bool known = gpc_track_take(GPC_MAP_PTR, key_of(i), &got);
        CHECK(known == ref[i].in, "final take of %llu: known %d, reference %d", (unsigned long long)i, known,
              ref[i].in);
        if (known)
            CHECK(same(&got, &ref[i].t), "final take of %llu: record differs", (unsigned long long)i);
    }
    uint64_t records, bytes;
    gpc_track_stats(GPC_MAP_PTR, &records, &bytes);
    CHECK(records == 0, "%llu records left", (unsigned long long)records);
}

/* Counts that leave the packed range (past 15) and come back, on records of every shape. */
static void counts(void)
{
    for (uint64_t salt = 0; salt < 400; salt++) {
        uint64_t key = key_of(salt);
        struct gpc_track t = value(salt, salt), got;
        t.refs = t.refs > 0 ? t.refs : 1;
        CHECK(gpc_track_add(GPC_MAP_HANDLE, key, &t) == 0, "add failed");
        int want = t.refs;
        for (int k = 0; k < 40; k++) {
            int refs = gpc_track_ref(GPC_MAP_HANDLE, key, +1, &got);
            CHECK(refs == ++want, "count %d, want %d", refs, want);
        }
        while (want > 1) {
            int refs = gpc_track_ref(GPC_MAP_HANDLE, key, -1, &got);
            CHECK(refs == --want, "count %d, want %d", refs, want);
        }
        CHECK(gpc_track_ref(GPC_MAP_HANDLE, key, -1, &got) == 0, "last reference kept the record");
        t.refs = 0;
        CHECK(same(&got, &t), "record of salt %llu changed on the way", (unsigned long long)salt);
        CHECK(gpc_track_ref(GPC_MAP_HANDLE, key, +1, &got) == -1, "record still there");
    }
    uint64_t records, bytes;
    gpc_track_stats(GPC_MAP_HANDLE, &records, &bytes);
    CHECK(records == 0, "%llu records left", (unsigned long long)records);
}

#define THREADS 4
#define PER 50000

/* Each thread on keys of its own: adds, counts up and down, takes, with records of every shape. */
static void *worker(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * PER;
    for (uint64_t round = 0; round < 3; round++) {
        for (uint64_t i = base; i < base + PER; i++) {
            struct gpc_track t = value(i, i * 3 + round), got;
            if (gpc_track_add(GPC_MAP_ARRAY, key_of(i), &t) != 0)
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            if (t.refs > 0 && (gpc_track_ref(GPC_MAP_ARRAY, key_of(i), +1, &got) != t.refs + 1 ||
                               gpc_track_ref(GPC_MAP_ARRAY, key_of(i), -1, &got) != t.refs))
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        }
        for (uint64_t i = base; i < base + PER; i++) {
            struct gpc_track got, want = value(i, i * 3 + round);
            if (!gpc_track_take(GPC_MAP_ARRAY, key_of(i), &got) || !same(&got, &want))
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static int working;

/* Meanwhile, teardowns of a context no record has: every shard locked and walked, nothing taken. */
static void *drainer(void *arg)
{
    struct drained d = {.ctx = 0x1234567};
    while (__atomic_load_n(&working, __ATOMIC_ACQUIRE))
        gpc_track_drain_ctx(GPC_MAP_ARRAY, d.ctx, count_drained, &d);
    if (d.n)
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    return arg;
}

int main(void)
{
    single();
    counts();
    pthread_t t[THREADS], d;
    working = 1;
    pthread_create(&d, NULL, drainer, NULL);
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&working, 0, __ATOMIC_RELEASE);
    pthread_join(d, NULL);
    uint64_t records, bytes;
    gpc_track_stats(GPC_MAP_ARRAY, &records, &bytes);
    CHECK(records == 0, "threads left %llu records", (unsigned long long)records);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
