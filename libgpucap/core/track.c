/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.c: what each device pointer, VMM handle and VMM mapping was charged, so a free releases
 * exactly that.
 *
 * One flat open-addressing table per shard (the shards split the keys so that threads allocating
 * at once rarely meet), each behind a small spinlock held only for the table operation (never
 * across a driver call). Records sit inline in the table, 24 bytes each (the key and two packed
 * words, see pack()), are found by linear probing from the key's home slot, and are removed by
 * backward-shift deletion, so a table never fills with tombstones. A record whose values do not
 * pack (a pool allocation's pool and context both, a size past 2^48, a device outside -128..127,
 * a reference count outside -16..15 with a context or an aux) keeps its whole struct gpc_track
 * in a side store of its kind and the index of it in the slot: nothing is ever cut short. Tables
 * are mmap'ed: the allocation path never calls malloc (the host process may be inside its own
 * allocator, or be a malloc interposer) and reads no thread-local variable. A table that passes
 * 3/4 full gets one of twice the size (so a table is 3/8 to 3/4 full: at most 64 bytes per record
 * but for the short while a shard holds both), and the records move over a few slots per later
 * operation (incremental growth: no call waits for a whole table to be copied); until then a
 * lookup checks both, and the old table is unmapped piece by piece behind the moves (one munmap
 * of a large table stalls the call that makes it: about 100 us per MiB on a VM).
 *
 * add and take have a fast path for the common case (the lock free at first try, no growth under
 * way, a record that packs plainly) with no call and one locked instruction (the lock); any
 * other case gives up before changing anything and starts again on the general path.
 */
#include "core/track.h"
#include "core/locks.h"

#include "common/defs.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
#define FIRST_BITS 7  /* 128 slots, 3 KiB */
#define MAX_BITS 31
#define MOVE_STEP 8   /* old slots moved per operation while a table grows */
#define UNMAP_STEP (64u << 10) /* the moved part of an old table is unmapped this much at a time */
#define EMPTY 0u      /* a free slot (no pointer or handle is 0) */
#define GONE UINT64_MAX /* a record taken out of a table that is being emptied */

/*
 * A slot's first word: device (bits 0-7, signed), form (8-10), refs (11-15, signed: -16 to 15),
 * bytes (16-63), so that taking a plain record apart is a byte load, a shift or two and one test.
 * The form says what the second word holds:
 *   CTX      ctx (aux 0)                    the plain allocation: cuMemAlloc, arrays, contexts
 *   AUX      aux (ctx 0)                    mappings, the memory a pool keeps
 *   CTX_AUX  ctx (low 48 bits), aux (16)    a pool allocation: context and pool slot
 *   AUX_CTX  aux (low 48 bits), ctx (16)
 *   REFS     refs (ctx and aux 0; the 5-bit field unused): handles with any count
 *   WIDE     the index of the whole record in the kind's side store
 */
#define BYTES_MASK ((UINT64_C(1) << 48) - 1)
#define FORM_SHIFT 8
#define FORM_MASK (UINT64_C(7) << FORM_SHIFT)
#define REFS_SHIFT 11
#define BYTES_SHIFT 16
enum form { CTX, AUX, CTX_AUX, AUX_CTX, REFS, WIDE = 7 };

/* Whether device and refs fit their fields (8 and 5 bits, signed). */
static inline bool small_fields(int32_t device, int32_t refs)
{
    return (((uint32_t)device + 128u) | (uint64_t)((uint32_t)refs + 16u) << 3) < 256;
}

/* The first word of a record of form f. */
static inline uint64_t word_a(uint64_t bytes, int32_t device, enum form f, int32_t refs)
{
    return bytes << BYTES_SHIFT | (uint16_t)((uint32_t)refs << REFS_SHIFT) | (uint64_t)f << FORM_SHIFT |
           (uint8_t)device;
}

struct slot {
    uint64_t key, a, b;
};

/*
 * While a table grows, `old` holds the records not moved yet: those at or after `cursor`. Slots
 * before the cursor were moved (they are never read again, and their pages are unmapped in
 * UNMAP_STEP pieces: `old_gone` bytes from the start) but count as occupied for a probe that
 * crosses them, and taking a record out of `old` leaves GONE, so no probe chain in `old` is ever
 * cut. `count` is the records in both tables. `limit` is how many records `tab` takes before it
 * grows, and 0 while there is no table or an old one is still being emptied: the one test that
 * sends every unusual case to the slow path.
 */
struct shard {
    atomic_flag lock;
    uint8_t bits, old_bits; /* log2 of the slots of tab / old; 0: no table */
    uint8_t shift;          /* a key's home slot in tab: (hash >> shift) & mask */
    uint32_t count, limit, mask, cursor;
    struct slot *tab, *old;
    size_t old_gone;
} __attribute__((aligned(64)));

static struct shard shards[GPC_MAP__COUNT][NSHARDS];

/*
 * The side store of a kind: whole records, in chunks mapped as needed (chunk c holds 64 << c),
 * never unmapped. An entry belongs to the slot that holds its index, so it is read and written
 * under that slot's shard lock; `lock` guards only the free list and the chunks, and is taken
 * after a shard lock, never before one.
 */
#define WIDE_CHUNKS 25 /* up to 2^31 entries */
struct wide {
    atomic_flag lock;
    uint32_t free; /* first free entry + 1; 0: none */
    uint32_t used; /* entries ever handed out */
    struct gpc_track *_Atomic chunk[WIDE_CHUNKS];
};

static struct wide wides[GPC_MAP__COUNT];

static void spin(atomic_flag *f)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(f, memory_order_acquire)) {
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

static inline void lock(struct shard *s)
{
    gpc_witness_take(GPC_LOCK_TRACK_SHARD, false);
    if (gpc_unlikely(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)))
        spin(&s->lock);
}

static inline void unlock(struct shard *s)
{
    gpc_witness_drop(GPC_LOCK_TRACK_SHARD);
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

/* The side store's lock: after a shard lock, never before one. */
static inline void wide_lock(struct wide *w)
{
    gpc_witness_take(GPC_LOCK_TRACK_WIDE, false);
    spin(&w->lock);
}

static inline void wide_unlock(struct wide *w)
{
    gpc_witness_drop(GPC_LOCK_TRACK_WIDE);
    atomic_flag_clear_explicit(&w->lock, memory_order_release);
}

static inline uint64_t hash(uint64_t key)
{
    /* Device addresses are aligned (low bits zero): fold the high bits down, then multiply. */
    return (key ^ (key >> 29)) * 0x9e3779b97f4a7c15ull;
}

static inline struct shard *shard_of(enum gpc_map_kind kind, uint64_t h)
{
    struct shard *s = &shards[kind][h >> (64 - SHARD_BITS)];
    /* An opaque pointer from here on: otherwise GCC keeps kind, the shard index and the array's
     * address in three registers to rebuild it at each use, and the fast paths run out of them. */
    __asm__("" : "+r"(s));
    return s;
}

/* The kind whose shard s is (the fast paths pass only s on to the slow ones). */
static inline enum gpc_map_kind kind_of(const struct shard *s)
{
    return (enum gpc_map_kind)((size_t)(s - &shards[0][0]) >> SHARD_BITS);
}

/* The key's first slot in a table of 2^bits slots: the hash bits below the shard's. */
static inline uint32_t home(uint64_t h, unsigned bits)
{
    return (uint32_t)((h << SHARD_BITS) >> (64 - bits));
}

static inline bool bad_key(uint64_t key)
{
    return key - 1 >= GONE - 1; /* EMPTY or GONE */
}

/* ---- packing a record into two words ---- */

static inline enum form form_of(uint64_t a)
{
    return (enum form)((a & FORM_MASK) >> FORM_SHIFT);
}

/* Packs *t into a slot's words: true, or false when it needs the side store. */
static inline bool pack(const struct gpc_track *t, uint64_t *a, uint64_t *b)
{
    if ((t->bytes >> 48) || !small_fields(t->device, 0))
        return false;
    enum form f;
    if (!(t->ctx | t->aux)) {
        *a = word_a(t->bytes, t->device, REFS, 0);
        *b = (uint32_t)t->refs;
        return true;
    } else if (!small_fields(t->device, t->refs)) {
        return false;
    } else if (!t->aux) {
        f = CTX, *b = t->ctx;
    } else if (!t->ctx) {
        f = AUX, *b = t->aux;
    } else if (!(t->ctx >> 48) && !(t->aux >> 16)) {
        f = CTX_AUX, *b = t->ctx | t->aux << 48;
    } else if (!(t->aux >> 48) && !(t->ctx >> 16)) {
        f = AUX_CTX, *b = t->aux | t->ctx << 48;
    } else {
        return false;
    }
    *a = word_a(t->bytes, t->device, f, t->refs);
    return true;
}

/* The record packed in a, b (not WIDE). */
static inline void unpack(uint64_t a, uint64_t b, struct gpc_track *t)
{
    t->bytes = a >> BYTES_SHIFT;
    t->device = (int8_t)a;
    t->refs = (int16_t)a >> REFS_SHIFT;
    t->ctx = b;
    t->aux = 0;
    if (gpc_likely(!(a & FORM_MASK))) /* CTX */
        return;
    enum form f = form_of(a);
    if (f == AUX) {
        t->aux = b, t->ctx = 0;
    } else if (f == CTX_AUX) {
        t->ctx = b & BYTES_MASK, t->aux = b >> 48;
    } else if (f == AUX_CTX) {
        t->aux = b & BYTES_MASK, t->ctx = b >> 48;
    } else if (f == REFS) {
        t->refs = (int32_t)(uint32_t)b, t->ctx = 0;
    }
}

/* ---- the side store ---- */

static struct gpc_track *wide_entry(struct wide *w, uint64_t i)
{
    uint64_t j = i + 64;
    unsigned c = 63 - (unsigned)__builtin_clzll(j) - 6;
    return atomic_load_explicit(&w->chunk[c], memory_order_acquire) + (j - (UINT64_C(64) << c));
}

/* Stores *t in a free entry of w: its index, or -ENOMEM. */
static int64_t wide_put(struct wide *w, const struct gpc_track *t)
{
    int64_t i;
    wide_lock(w);
    if (w->free) {
        i = w->free - 1;
        w->free = (uint32_t)wide_entry(w, (uint64_t)i)->bytes;
    } else {
        i = w->used;
        unsigned c = 63 - (unsigned)__builtin_clzll((uint64_t)i + 64) - 6;
        if (c < WIDE_CHUNKS && !atomic_load_explicit(&w->chunk[c], memory_order_relaxed)) {
            void *p = mmap(NULL, sizeof(struct gpc_track) << (c + 6), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED)
                atomic_store_explicit(&w->chunk[c], p, memory_order_release);
        }
        if (c < WIDE_CHUNKS && atomic_load_explicit(&w->chunk[c], memory_order_relaxed))
            w->used++;
        else
            i = -ENOMEM;
    }
    if (i >= 0)
        *wide_entry(w, (uint64_t)i) = *t;
    wide_unlock(w);
    return i;
}

static void wide_drop(struct wide *w, uint64_t i)
{
    wide_lock(w);
    wide_entry(w, i)->bytes = w->free;
    w->free = (uint32_t)i + 1;
    wide_unlock(w);
}

/* The record in slot words a, b, wherever it lives (under the slot's shard lock). */
static void read_record(enum gpc_map_kind kind, uint64_t a, uint64_t b, struct gpc_track *t)
{
    if (form_of(a) == WIDE)
        *t = *wide_entry(&wides[kind], b);
    else
        unpack(a, b, t);
}

/* ---- the tables ---- */

static struct slot *map_table(unsigned bits)
{
    void *p = mmap(NULL, sizeof(struct slot) << bits, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* How many records a table of 2^bits slots takes before it grows: 3/4. */
static inline uint32_t limit_of(unsigned bits)
{
    return (uint32_t)((3ull << bits) / 4);
}

static void use_table(struct shard *s, struct slot *tab, unsigned bits)
{
    s->tab = tab;
    s->bits = (uint8_t)bits;
    s->shift = (uint8_t)(64 - SHARD_BITS - bits);
    s->mask = (1u << bits) - 1;
    s->limit = s->old ? 0 : limit_of(bits);
}

/* Puts a record that is in neither table into s->tab, which has a free slot. */
static void put(struct shard *s, const struct slot *r, uint64_t h)
{
    uint32_t i = (uint32_t)(h >> s->shift) & s->mask;
    while (s->tab[i].key != EMPTY)
        i = (i + 1) & s->mask;
    s->tab[i] = *r;
}

/* Moves up to n slots of s->old into s->tab, unmapping the moved part as it goes. */
static void move_some(struct shard *s, uint32_t n)
{
    uint32_t cap = 1u << s->old_bits;
    for (; n && s->cursor < cap; n--, s->cursor++) {
        const struct slot *o = &s->old[s->cursor];
        if (o->key != EMPTY && o->key != GONE)
            put(s, o, hash(o->key));
    }
    size_t size = sizeof(struct slot) << s->old_bits;
    size_t done = s->cursor == cap ? size : ((size_t)s->cursor * sizeof(struct slot)) & ~(size_t)(UNMAP_STEP - 1);
    if (done > s->old_gone) {
        munmap((char *)s->old + s->old_gone, done - s->old_gone);
        s->old_gone = done;
    }
    if (s->cursor == cap) {
        s->old = NULL;
        s->old_bits = 0;
        s->limit = limit_of(s->bits);
    }
}

static struct slot *find_new(struct shard *s, uint64_t key, uint64_t h)
{
    if (!s->tab)
        return NULL;
    for (uint32_t i = (uint32_t)(h >> s->shift) & s->mask;; i = (i + 1) & s->mask) {
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

static struct slot *find(struct shard *s, uint64_t key, uint64_t h)
{
    struct slot *r = find_new(s, key, h);
    return r || !s->old ? r : find_old(s, key, h);
}

/* Empties slot i of a table (mask and shift as in struct shard): a backward shift pulls later
 * records of the chain into the hole unless that would put one before its home slot. */
static inline void erase(struct slot *tab, uint32_t mask, unsigned shift, uint32_t i)
{
    for (uint32_t j = (i + 1) & mask; tab[j].key != EMPTY; j = (j + 1) & mask) {
        uint32_t h = (uint32_t)(hash(tab[j].key) >> shift) & mask;
        if (((j - h) & mask) >= ((j - i) & mask)) {
            tab[i] = tab[j];
            i = j;
        }
    }
    tab[i].key = EMPTY;
}

/* Takes the record at r (in tab or old) out; a record in the side store stays there. */
static void remove_at(struct shard *s, struct slot *r)
{
    s->count--;
    if (s->old && r >= s->old && r < s->old + (1u << s->old_bits))
        r->key = GONE;
    else
        erase(s->tab, s->mask, s->shift, (uint32_t)(r - s->tab));
}

/* Room for one more record in s->tab: 0, or -ENOMEM. */
static int make_room(struct shard *s)
{
    if (!s->tab) {
        struct slot *tab = map_table(FIRST_BITS);
        if (!tab)
            return -ENOMEM;
        use_table(s, tab, FIRST_BITS);
        return 0;
    }
    if (s->count + 1 <= limit_of(s->bits))
        return 0;
    if (s->old)
        move_some(s, UINT32_MAX); /* not reached in practice: growth is far ahead of the moves */
    struct slot *bigger = s->bits < MAX_BITS ? map_table(s->bits + 1u) : NULL;
    if (!bigger)
        return s->count + 1 < (1u << s->bits) ? 0 : -ENOMEM; /* fuller, still correct */
    s->old = s->tab;
    s->old_bits = s->bits;
    s->old_gone = 0;
    s->cursor = 0;
    use_table(s, bigger, s->bits + 1u);
    return 0;
}

/* gpc_track_add, every case: 0, -EINVAL, or -ENOMEM. */
static __attribute__((noinline)) int add_slow(struct shard *s, uint64_t key, const struct gpc_track *t)
{
    enum gpc_map_kind kind = kind_of(s);
    if (bad_key(key))
        return -EINVAL;
    struct slot n = {.key = key};
    if (!pack(t, &n.a, &n.b)) {
        int64_t i = wide_put(&wides[kind], t);
        if (i < 0)
            return (int)i;
        n.a = (uint64_t)WIDE << FORM_SHIFT;
        n.b = (uint64_t)i;
    }
    uint64_t h = hash(key), dropped = UINT64_MAX;
    int rc = 0;
    lock(s);
    if (s->old)
        move_some(s, MOVE_STEP);
    struct slot *r = find(s, key, h);
    if (r) {
        /* The driver handed out a key we still hold: it was freed behind our back. Replace it. */
        if (form_of(r->a) == WIDE)
            dropped = r->b;
        r->a = n.a;
        r->b = n.b;
    } else if ((rc = make_room(s)) == 0) {
        put(s, &n, h);
        s->count++;
    }
    unlock(s);
    if (dropped != UINT64_MAX)
        wide_drop(&wides[kind], dropped);
    if (rc != 0 && form_of(n.a) == WIDE)
        wide_drop(&wides[kind], n.b);
    return rc;
}

/*
 * The fast path's table work: a new key into a table with room and no old table, its lock free at
 * the first try. True when done; false, having changed nothing, for anything else (a lock held, a
 * replacement, a growth), which add_slow then does from the top. *b is read after the probe.
 */
static inline __attribute__((always_inline)) bool try_add(struct shard *s, uint64_t key, uint64_t h, uint64_t a,
                                                          const uint64_t *b)
{
    bool fast = !atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire);
    if (gpc_likely(fast)) {
        fast = s->count < s->limit;
        if (gpc_likely(fast)) {
            struct slot *tab = s->tab;
            uint32_t mask = s->mask, i = (uint32_t)(h >> s->shift) & mask;
            while (tab[i].key != key && tab[i].key != EMPTY)
                i = (i + 1) & mask;
            fast = tab[i].key == EMPTY;
            if (gpc_likely(fast)) {
                tab[i].key = key;
                tab[i].a = a;
                tab[i].b = *b;
                __asm__("" : "+r"(s)); /* count loaded again, not kept in a register across the probe */
                s->count++;
            }
        }
        unlock(s);
    }
    return fast;
}

/* gpc_track_add of a record that is not plain (form CTX). */
static __attribute__((noinline)) int add_other(struct shard *s, uint64_t key, const struct gpc_track *t)
{
    struct slot n;
    if (bad_key(key) || !pack(t, &n.a, &n.b))
        return add_slow(s, key, t);
    return try_add(s, key, hash(key), n.a, &n.b) ? 0 : add_slow(s, key, t);
}

/* The fast path: a plain record (form CTX: a cuMemAlloc) goes straight to try_add. */
int gpc_track_add(enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t)
{
    uint64_t h = hash(key), a = word_a(t->bytes, t->device, CTX, t->refs);
    struct shard *s = shard_of(kind, h);
    if (gpc_unlikely(bad_key(key) || ((t->bytes >> 48) | t->aux) || !small_fields(t->device, t->refs)))
        return add_other(s, key, t);
    __asm__("" : "+r"(a)); /* one register across the probe, not the three it is made of */
    return gpc_likely(try_add(s, key, h, a, &t->ctx)) ? 0 : add_slow(s, key, t);
}

/* gpc_track_take, every case. */
static __attribute__((noinline)) bool take_slow(struct shard *s, uint64_t key, struct gpc_track *t)
{
    enum gpc_map_kind kind = kind_of(s);
    if (bad_key(key))
        return false;
    uint64_t h = hash(key);
    struct slot got = {.key = EMPTY};
    lock(s);
    if (s->old)
        move_some(s, MOVE_STEP);
    struct slot *r = find(s, key, h);
    if (r) {
        got = *r;
        remove_at(s, r);
    }
    unlock(s);
    if (got.key == EMPTY)
        return false;
    /* The record is out of the table: its side entry, if any, is this call's alone. */
    read_record(kind, got.a, got.b, t);
    if (form_of(got.a) == WIDE)
        wide_drop(&wides[kind], got.b);
    return true;
}

/* The fast path: no old table, the lock free, a record not in the side store. Otherwise, having
 * changed nothing, take_slow. */
bool gpc_track_take(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t)
{
    uint64_t h = hash(key);
    struct shard *s = shard_of(kind, h);
    bool fast = !bad_key(key) && !atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), found = false;
    if (gpc_likely(fast)) {
        fast = s->limit != 0;
        if (gpc_likely(fast)) {
            struct slot *tab = s->tab;
            uint32_t mask = s->mask, shift = s->shift, i = (uint32_t)(h >> shift) & mask;
            while (tab[i].key != key && tab[i].key != EMPTY)
                i = (i + 1) & mask;
            found = tab[i].key == key;
            fast = !found || (tab[i].a & FORM_MASK) != FORM_MASK; /* not WIDE */
            if (gpc_likely(fast) && found) {
                unpack(tab[i].a, tab[i].b, t);
                s->count--;
                erase(tab, mask, shift, i);
            }
        }
        unlock(s);
    }
    return gpc_likely(fast) ? found : take_slow(s, key, t);
}

/* Sets the refs of the record in slot r (not WIDE) to `refs`, moving it to the side store if it
 * no longer packs: 0, or -ENOMEM (then the slot is unchanged). */
static int set_refs(enum gpc_map_kind kind, struct slot *r, int refs)
{
    struct gpc_track t;
    unpack(r->a, r->b, &t);
    t.refs = refs;
    uint64_t a, b;
    if (!pack(&t, &a, &b)) {
        int64_t i = wide_put(&wides[kind], &t);
        if (i < 0)
            return (int)i;
        a = (uint64_t)WIDE << FORM_SHIFT;
        b = (uint64_t)i;
    }
    r->a = a;
    r->b = b;
    return 0;
}

int gpc_track_ref(enum gpc_map_kind kind, uint64_t key, int delta, struct gpc_track *t)
{
    if (bad_key(key))
        return -1;
    uint64_t h = hash(key);
    struct shard *s = shard_of(kind, h);
    uint64_t dropped = UINT64_MAX;
    lock(s);
    struct slot *r = find(s, key, h);
    int refs = -1;
    if (r) {
        struct gpc_track cur;
        read_record(kind, r->a, r->b, &cur);
        refs = cur.refs + delta;
        if (refs <= 0) {
            cur.refs = refs;
            refs = 0;
            *t = cur;
            if (form_of(r->a) == WIDE)
                dropped = r->b;
            remove_at(s, r);
        } else if (form_of(r->a) == WIDE) {
            wide_entry(&wides[kind], r->b)->refs = refs;
        } else if (set_refs(kind, r, refs) != 0) {
            refs = -1; /* no memory for a count this large on this record: as if unknown, unchanged */
        }
    }
    unlock(s);
    if (dropped != UINT64_MAX)
        wide_drop(&wides[kind], dropped);
    return refs;
}

void gpc_track_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    /* A child must not inherit a lock that another thread of the parent held at fork(): the
     * sequence takes them all (every shard, then every side store), and the child clears them. */
    for (int k = 0; k < GPC_MAP__COUNT; k++) {
        if (rank == GPC_LOCK_TRACK_SHARD) {
            for (unsigned i = 0; i < NSHARDS; i++) {
                if (step == GPC_FORK_PREPARE && atomic_flag_test_and_set_explicit(&shards[k][i].lock, memory_order_acquire))
                    spin(&shards[k][i].lock);
                else if (step != GPC_FORK_PREPARE)
                    atomic_flag_clear_explicit(&shards[k][i].lock, memory_order_release);
            }
        } else if (rank == GPC_LOCK_TRACK_WIDE) {
            if (step == GPC_FORK_PREPARE)
                spin(&wides[k].lock);
            else
                atomic_flag_clear_explicit(&wides[k].lock, memory_order_release);
        }
    }
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
            struct gpc_track t;
            if (r->key == EMPTY) {
                i++;
                continue;
            }
            read_record(kind, r->a, r->b, &t);
            if (t.ctx != ctx) {
                i++;
                continue;
            }
            fn(&t, arg);
            if (form_of(r->a) == WIDE)
                wide_drop(&wides[kind], r->b); /* shard lock, then the side store's: the one order */
            remove_at(s, r);
        }
        unlock(s);
    }
}

/* ---- for the table test (tests/unit/test_track.c): the shape of the tables ---- */

void gpc_track_stats(enum gpc_map_kind kind, uint64_t *records, uint64_t *bytes)
{
    *records = *bytes = 0;
    for (unsigned k = 0; k < NSHARDS; k++) {
        struct shard *s = &shards[kind][k];
        lock(s);
        *records += s->count;
        *bytes += s->tab ? sizeof(struct slot) << s->bits : 0;
        *bytes += s->old ? (sizeof(struct slot) << s->old_bits) - s->old_gone : 0;
        unlock(s);
    }
    struct wide *w = &wides[kind];
    wide_lock(w);
    for (unsigned c = 0; c < WIDE_CHUNKS; c++)
        if (atomic_load_explicit(&w->chunk[c], memory_order_relaxed))
            *bytes += sizeof(struct gpc_track) << (c + 6);
    wide_unlock(w);
}
