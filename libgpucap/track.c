/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.c: what each device pointer, VMM handle and VMM mapping was charged, so a free releases
 * exactly that.
 *
 * One flat open-addressing table per shard (the shards split the keys so that threads allocating
 * at once rarely meet), each behind a small spinlock held only for the table operation (never
 * across a driver call). Records sit inline in the table (key and charge, 40 bytes), are found by
 * linear probing from the key's home slot, and are removed by backward-shift deletion, so a table
 * never fills with tombstones. Tables are mmap'ed: the allocation path never calls malloc (the host
 * process may be inside its own allocator, or be a malloc interposer) and reads no thread-local
 * variable. A table that passes 3/4 full gets one of twice the size, and the records move over a
 * few slots per later operation (incremental growth: no call waits for a whole table to be
 * copied); until then a lookup checks both. Old tables are unmapped once emptied.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
#define FIRST_BITS 6 /* 64 slots */
#define MOVE_STEP 16 /* old slots moved per operation while a table grows */
#define EMPTY 0u     /* a free slot (no pointer or handle is 0) */
#define GONE UINT64_MAX /* a record taken out of a table that is being emptied */

struct slot {
    uint64_t key;
    struct gpc_track t;
};

/*
 * While a table grows, `old` holds the records not moved yet: those at or after `cursor`. Slots
 * before the cursor were moved (they read as empty) but count as occupied for a probe that crosses
 * them, and taking a record out of `old` leaves GONE, so no probe chain in `old` is ever cut.
 * `count` is the records in both tables.
 */
struct shard {
    atomic_flag lock;
    uint8_t bits, old_bits; /* log2 of the slots of tab / old; 0: no table */
    uint32_t count, cursor;
    struct slot *tab, *old;
} __attribute__((aligned(64)));

static struct shard shards[GPC_MAP__COUNT][NSHARDS];

static void lock(struct shard *s)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        } else {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

static void unlock(struct shard *s)
{
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

static inline uint64_t hash(uint64_t key)
{
    /* Device addresses are aligned (low bits zero): fold the high bits down, then multiply. */
    return (key ^ (key >> 29)) * 0x9e3779b97f4a7c15ull;
}

static inline struct shard *shard_of(enum gpc_map_kind kind, uint64_t h)
{
    return &shards[kind][h >> (64 - SHARD_BITS)];
}

/* The key's first slot in a table of 2^bits slots: the hash bits below the shard's. */
static inline uint32_t home(uint64_t h, unsigned bits)
{
    return (uint32_t)((h << SHARD_BITS) >> (64 - bits));
}

static struct slot *map_table(unsigned bits)
{
    void *p = mmap(NULL, sizeof(struct slot) << bits, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Puts a record that is in neither table into s->tab, which has a free slot. */
static void put(struct shard *s, uint64_t key, uint64_t h, const struct gpc_track *t)
{
    uint32_t mask = (1u << s->bits) - 1;
    uint32_t i = home(h, s->bits);
    while (s->tab[i].key != EMPTY)
        i = (i + 1) & mask;
    s->tab[i].key = key;
    s->tab[i].t = *t;
}

/* Moves up to n slots of s->old into s->tab; unmaps s->old when it is empty. */
static void move_some(struct shard *s, uint32_t n)
{
    uint32_t cap = 1u << s->old_bits;
    for (; n && s->cursor < cap; n--, s->cursor++) {
        struct slot *o = &s->old[s->cursor];
        if (o->key != EMPTY && o->key != GONE)
            put(s, o->key, hash(o->key), &o->t);
    }
    if (s->cursor == cap) {
        munmap(s->old, sizeof(struct slot) << s->old_bits);
        s->old = NULL;
        s->old_bits = 0;
    }
}

static struct slot *find_new(struct shard *s, uint64_t key, uint64_t h)
{
    if (!s->tab)
        return NULL;
    uint32_t mask = (1u << s->bits) - 1;
    for (uint32_t i = home(h, s->bits);; i = (i + 1) & mask) {
        if (s->tab[i].key == key)
            return &s->tab[i];
        if (s->tab[i].key == EMPTY)
            return NULL;
    }
}

static struct slot *find_old(struct shard *s, uint64_t key, uint64_t h)
{
    uint32_t cap = 1u << s->old_bits, mask = cap - 1, i = home(h, s->old_bits);
    for (uint32_t n = 0; n < cap; n++, i = (i + 1) & mask) {
        if (i < s->cursor) {
            /* Moved slots: the chain went on through them. */
            n += s->cursor - i - 1;
            i = s->cursor - 1;
            continue;
        }
        if (s->old[i].key == key)
            return &s->old[i];
        if (s->old[i].key == EMPTY)
            return NULL;
    }
    return NULL;
}

/* Takes the record at r (in tab or old) out. */
static void remove_at(struct shard *s, struct slot *r)
{
    s->count--;
    if (s->old && r >= s->old && r < s->old + (1u << s->old_bits)) {
        r->key = GONE;
        return;
    }
    /* Backward shift: pull later records of the chain into the hole unless that would put one
     * before its home slot. */
    uint32_t mask = (1u << s->bits) - 1;
    uint32_t i = (uint32_t)(r - s->tab);
    for (uint32_t j = (i + 1) & mask; s->tab[j].key != EMPTY; j = (j + 1) & mask) {
        uint32_t h = home(hash(s->tab[j].key), s->bits);
        if (((j - h) & mask) >= ((j - i) & mask)) {
            s->tab[i] = s->tab[j];
            i = j;
        }
    }
    s->tab[i].key = EMPTY;
}

static struct slot *find(struct shard *s, uint64_t key, uint64_t h)
{
    struct slot *r = find_new(s, key, h);
    return r || !s->old ? r : find_old(s, key, h);
}

/* Room for one more record in s->tab: 0, or -ENOMEM. */
static int make_room(struct shard *s)
{
    if (!s->tab) {
        if (!(s->tab = map_table(FIRST_BITS)))
            return -ENOMEM;
        s->bits = FIRST_BITS;
        return 0;
    }
    if ((uint64_t)(s->count + 1) * 4 <= (3ull << s->bits))
        return 0;
    if (s->old)
        move_some(s, UINT32_MAX); /* not reached in practice: growth is far ahead of the moves */
    struct slot *bigger = s->bits < 31 ? map_table(s->bits + 1u) : NULL;
    if (!bigger)
        return s->count + 1 < (1u << s->bits) ? 0 : -ENOMEM; /* fuller, still correct */
    s->old = s->tab;
    s->old_bits = s->bits;
    s->cursor = 0;
    s->tab = bigger;
    s->bits++;
    return 0;
}

int gpc_track_add(enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t)
{
    if (key == EMPTY || key == GONE)
        return -EINVAL;
    uint64_t h = hash(key);
    struct shard *s = shard_of(kind, h);
    int rc = 0;
    lock(s);
    if (s->old)
        move_some(s, MOVE_STEP);
    /* One probe finds the key or, s->tab holding no GONE, the free slot it would go to. */
    struct slot *r = NULL;
    if (s->tab) {
        uint32_t mask = (1u << s->bits) - 1;
        uint32_t i = home(h, s->bits);
        while (s->tab[i].key != key && s->tab[i].key != EMPTY)
            i = (i + 1) & mask;
        r = &s->tab[i];
    }
    if (!(r && r->key == key) && s->old) {
        struct slot *o = find_old(s, key, h);
        r = o ? o : r;
    }
    if (r && r->key == key) {
        /* The driver handed out a key we still hold: it was freed behind our back. Replace it. */
        r->t = *t;
    } else if (r && (uint64_t)(s->count + 1) * 4 <= (3ull << s->bits)) {
        r->key = key;
        r->t = *t;
        s->count++;
    } else if ((rc = make_room(s)) == 0) {
        put(s, key, h, t);
        s->count++;
    }
    unlock(s);
    return rc;
}

bool gpc_track_take(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t)
{
    uint64_t h = hash(key);
    struct shard *s = shard_of(kind, h);
    lock(s);
    if (s->old)
        move_some(s, MOVE_STEP);
    struct slot *r = key == EMPTY || key == GONE ? NULL : find(s, key, h);
    if (r) {
        *t = r->t;
        remove_at(s, r);
    }
    unlock(s);
    return r != NULL;
}

int gpc_track_ref(enum gpc_map_kind kind, uint64_t key, int delta, struct gpc_track *t)
{
    uint64_t h = hash(key);
    struct shard *s = shard_of(kind, h);
    lock(s);
    struct slot *r = key == EMPTY || key == GONE ? NULL : find(s, key, h);
    int refs = -1;
    if (r) {
        refs = r->t.refs += delta;
        if (refs <= 0) {
            refs = 0;
            *t = r->t;
            remove_at(s, r);
        }
    }
    unlock(s);
    return refs;
}

static void lock_all(void)
{
    for (int k = 0; k < GPC_MAP__COUNT; k++)
        for (unsigned i = 0; i < NSHARDS; i++)
            lock(&shards[k][i]);
}

static void unlock_all(void)
{
    for (int k = 0; k < GPC_MAP__COUNT; k++)
        for (unsigned i = 0; i < NSHARDS; i++)
            unlock(&shards[k][i]);
}

void gpc_track_atfork(void)
{
    /* A child must not inherit a shard lock that another thread of the parent held at fork(). */
    pthread_atfork(lock_all, unlock_all, unlock_all);
}

void gpc_track_drain_ctx(enum gpc_map_kind kind, uint64_t ctx, void (*fn)(const struct gpc_track *t, void *arg),
                         void *arg)
{
    for (unsigned k = 0; k < NSHARDS; k++) {
        struct shard *s = &shards[kind][k];
        lock(s);
        if (s->old)
            move_some(s, UINT32_MAX);
        /* A removal pulls a later record into slot i, so i is looked at again; records pulled
         * across the end land in slots already looked at, and none of those matched. */
        for (uint32_t i = 0; s->tab && i < (1u << s->bits);) {
            struct slot *r = &s->tab[i];
            if (r->key == EMPTY || r->t.ctx != ctx) {
                i++;
                continue;
            }
            fn(&r->t, arg);
            remove_at(s, r);
        }
        unlock(s);
    }
}

/* ---- for the table test (tests/test_track.c): the shape of the tables ---- */

void gpc_track_stats(enum gpc_map_kind kind, uint64_t *records, uint64_t *bytes)
{
    *records = *bytes = 0;
    for (unsigned k = 0; k < NSHARDS; k++) {
        struct shard *s = &shards[kind][k];
        lock(s);
        *records += s->count;
        *bytes += s->tab ? sizeof(struct slot) << s->bits : 0;
        *bytes += s->old ? sizeof(struct slot) << s->old_bits : 0;
        unlock(s);
    }
}
