/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.h: what each pointer and handle was charged (track.c).
 */
#ifndef GPUCAP_CORE_TRACK_H
#define GPUCAP_CORE_TRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/locks.h"

/* The kinds of record, each a table of its own, and who records them. */
enum gpc_map_kind {
    GPC_MAP_PTR,      /* charge/charge.c: a device pointer -> bytes charged (charge/pool.c: aux = its pool) */
    GPC_MAP_HANDLE,   /* hooks/vmm.c: a cuMemCreate handle -> bytes charged, refs: its retains and mappings */
    GPC_MAP_MAPPING,  /* hooks/vmm.c: a mapped address -> the handle mapped there (aux) */
    GPC_MAP_ARRAY,    /* hooks/array.c: CUarray / CUmipmappedArray handle -> bytes charged */
    GPC_MAP_CTX,      /* hooks/ctx.c, charge/context.c: CUcontext / CUgreenCtx -> context reserve charged */
    GPC_MAP_POOLPTR,  /* charge/pool.c: pool allocation -> size (not charged itself), aux = pool slot */
    GPC_MAP_POOLKEPT, /* charge/pool.c: pool without a slot -> bytes it keeps (charged), aux = live bytes */
    GPC_MAP_HEAP,     /* charge/context.c: a context's heap sized by cuCtxSetLimit -> bytes charged beyond its default */
    GPC_MAP__COUNT
};
struct gpc_track {
    uint64_t bytes;
    int32_t device;   /* ordinal whose budget was charged */
    int32_t refs;     /* GPC_MAP_HANDLE: references (creation, retains, mappings) */
    uint64_t aux;     /* GPC_MAP_MAPPING: the handle mapped there */
    uint64_t ctx;     /* the context current at allocation (0: none known): its teardown frees it */
};
/* Records key -> *t. 0, or -ENOMEM when no memory could be mapped for the record. */
int gpc_track_add(enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t);
/* Removes key and copies its record to *t: true if it was known. */
bool gpc_track_take(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t);
/* Adds `delta` to the refs of a known key; returns the new count, or -1 if unknown. When the count
 * reaches 0 the record is removed and copied to *t. */
int gpc_track_ref(enum gpc_map_kind kind, uint64_t key, int delta, struct gpc_track *t);
/* Its part of the fork sequence (hooks/init.c), for its locks (core/locks.h: TRACK_SHARD, TRACK_WIDE). */
void gpc_track_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);
/*
 * Removes every record of `kind` whose ctx is `ctx` (a context the driver tore down, which freed
 * them) and calls fn(t, arg) for each, under a map lock: fn must only do arithmetic.
 */
void gpc_track_drain_ctx(enum gpc_map_kind kind, uint64_t ctx, void (*fn)(const struct gpc_track *t, void *arg),
                         void *arg);
/* The records of `kind` and the bytes its tables take (for the table test and bench). */
void gpc_track_stats(enum gpc_map_kind kind, uint64_t *records, uint64_t *bytes);

#endif
