/*
 * track.c: what each device pointer, VMM handle and VMM mapping was charged, so a free releases
 * exactly that.
 *
 * uthash tables, split into shards by key so that threads allocating at once rarely meet, each
 * shard behind a small spinlock held only for the table operation (never across a driver call).
 * Records come from per-shard free lists refilled by mmap in 64 KiB chunks, and uthash's bucket
 * arrays are mmap'ed too: the allocation path never calls malloc (the host process may be inside
 * its own allocator, or be a malloc interposer). Memory here is never returned to the system.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

/* uthash, configured for a preloaded library: mmap-backed memory, no exit() on failure. */
static void *arena_alloc(size_t n);
static void arena_free(void *p, size_t n);
#define uthash_malloc(sz) arena_alloc(sz)
#define uthash_free(ptr, sz) arena_free(ptr, sz)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (oom_flag = true)
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = mix64(*(const uint64_t *)(keyptr)))
static __thread bool oom_flag;

static inline unsigned mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (unsigned)k;
}

#include <uthash.h>

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
#define CHUNK (64 * 1024)

struct record {
    uint64_t key;
    struct gpc_track t;
    UT_hash_handle hh;
    struct record *next_free;
};

struct shard {
    atomic_flag lock;
    struct record *table;
    struct record *free_list;
} __attribute__((aligned(64)));

static struct shard shards[GPC_MAP__COUNT][NSHARDS];

static void *arena_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void arena_free(void *p, size_t n)
{
    munmap(p, n);
}

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

static struct shard *shard_of(enum gpc_map_kind kind, uint64_t key)
{
    /* Device addresses are aligned: skip the low bits before mixing. */
    return &shards[kind][(mix64(key >> 8) >> 7) & (NSHARDS - 1)];
}

static struct record *get_record(struct shard *s)
{
    if (!s->free_list) {
        char *chunk = arena_alloc(CHUNK);
        if (!chunk)
            return NULL;
        for (size_t off = 0; off + sizeof(struct record) <= CHUNK; off += sizeof(struct record)) {
            struct record *r = (struct record *)(chunk + off);
            r->next_free = s->free_list;
            s->free_list = r;
        }
    }
    struct record *r = s->free_list;
    s->free_list = r->next_free;
    return r;
}

int gpc_track_add(enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t)
{
    struct shard *s = shard_of(kind, key);
    lock(s);
    struct record *old;
    HASH_FIND(hh, s->table, &key, sizeof key, old);
    if (old) {
        /* The driver handed out a key we still hold: it was freed behind our back. Replace it. */
        HASH_DEL(s->table, old);
        old->next_free = s->free_list;
        s->free_list = old;
    }
    struct record *r = get_record(s);
    if (!r) {
        unlock(s);
        return -ENOMEM;
    }
    if (!s->table) {
        /* A sentinel that is never removed: uthash frees its bucket array when a table empties,
         * and a shard going 0 -> 1 -> 0 records on every alloc/free pair would mmap each time. */
        static const uint64_t sentinel = UINT64_MAX;
        struct record *z = get_record(s);
        if (z) {
            z->key = sentinel;
            memset(&z->t, 0, sizeof z->t);
            oom_flag = false;
            HASH_ADD(hh, s->table, key, sizeof z->key, z);
        }
    }
    r->key = key;
    r->t = *t;
    oom_flag = false;
    HASH_ADD(hh, s->table, key, sizeof key, r);
    if (oom_flag) {
        r->next_free = s->free_list;
        s->free_list = r;
        unlock(s);
        return -ENOMEM;
    }
    unlock(s);
    return 0;
}

bool gpc_track_take(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t)
{
    struct shard *s = shard_of(kind, key);
    lock(s);
    struct record *r;
    HASH_FIND(hh, s->table, &key, sizeof key, r);
    if (r) {
        *t = r->t;
        HASH_DEL(s->table, r);
        r->next_free = s->free_list;
        s->free_list = r;
    }
    unlock(s);
    return r != NULL;
}

int gpc_track_ref(enum gpc_map_kind kind, uint64_t key, int delta, struct gpc_track *t)
{
    struct shard *s = shard_of(kind, key);
    lock(s);
    struct record *r;
    HASH_FIND(hh, s->table, &key, sizeof key, r);
    int refs = -1;
    if (r) {
        refs = r->t.refs += delta;
        if (refs <= 0) {
            refs = 0;
            *t = r->t;
            HASH_DEL(s->table, r);
            r->next_free = s->free_list;
            s->free_list = r;
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
    for (unsigned i = 0; i < NSHARDS; i++) {
        struct shard *s = &shards[kind][i];
        lock(s);
        struct record *r, *tmp;
        HASH_ITER(hh, s->table, r, tmp) {
            if (r->key == UINT64_MAX || r->t.ctx != ctx)
                continue;
            fn(&r->t, arg);
            HASH_DEL(s->table, r);
            r->next_free = s->free_list;
            s->free_list = r;
        }
        unlock(s);
    }
}
