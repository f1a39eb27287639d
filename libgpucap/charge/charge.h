/* SPDX-License-Identifier: Apache-2.0 */
/*
 * charge.h: the common "reserve, call the driver, commit or roll back" steps of hooks (charge.c).
 */
#ifndef GPUCAP_CHARGE_CHARGE_H
#define GPUCAP_CHARGE_CHARGE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/track.h"
#include "driver/resolve.h"

struct gpc_charge {
    int budget;            /* GPC_BUDGET_NONE: not counted (no budget, pass-through) */
    int device;
    uint64_t bytes;
    bool context;         /* not an allocation call (a context): fault injection skips it */
    bool have_ctx;         /* ctx was read at begin (device < 0) */
    uint64_t ctx;          /* the calling thread's current context then */
};
/*
 * Reserves `bytes` on device `device` (or the current context's device when device < 0).
 * CUDA_SUCCESS (c->budget GPC_BUDGET_NONE: nothing to count) or CUDA_ERROR_OUT_OF_MEMORY after logging
 * the denial; the caller must then not call the driver.
 */
CUresult gpc_charge_begin(struct gpc_charge *c, int device, uint64_t bytes, const char *call);
/*
 * The driver answered CUDA_ERROR_OUT_OF_MEMORY to the allocation charged by `c`: when it is within
 * the request and a node arbiter is there, asks it to take loans back (charge/loan.c) and waits a
 * step; true while the caller should call the driver again (up to reclaim_grace + 1 s). `n` is the
 * wait's state, zeroed before the first call. Only after a refusal: nothing on the fast path.
 */
struct gpc_loan_need;
bool gpc_charge_need(const struct gpc_charge *c, struct gpc_loan_need *n);
/* gpc_charge_begin for what is not an allocation call (a context reserve): no fault is injected. */
CUresult gpc_charge_begin_context(struct gpc_charge *c, int device, uint64_t bytes, const char *call);
/*
 * After the driver call: on failure gives the reservation back, counted as a refusal by the driver
 * (false); on success keeps it (the peak follows), notes
 * a context's reserve in the figures (a gpc_charge_begin_context charge) and returns true, with
 * nothing recorded: for the primary context, which the caller counts by device.
 */
bool gpc_charge_commit(struct gpc_charge *c, CUresult rc);
/* For hooks that record by themselves: the driver carried out the charge `c` (the peak follows). */
void gpc_charge_admitted(const struct gpc_charge *c);
/* For hooks that record by themselves: the driver refused charge `c`; it is taken back and counted
 * as a refusal by the driver, not as an allocation and a free. */
void gpc_charge_refused(const struct gpc_charge *c);
/* gpc_charge_commit, then on success records `key`. */
void gpc_charge_end(struct gpc_charge *c, CUresult rc, enum gpc_map_kind kind, uint64_t key);
/*
 * For calls whose size is known only afterwards (pitch, arrays), charged with an estimate: after a
 * successful driver call, settles the charge to `actual` bytes and records `key`. Returns
 * CUDA_ERROR_OUT_OF_MEMORY, with nothing charged or recorded, when the difference does not fit:
 * the caller must then free what the driver made. Admitted bytes never pass the budget meanwhile.
 */
CUresult gpc_charge_settle(struct gpc_charge *c, uint64_t actual, enum gpc_map_kind kind, uint64_t key,
                           const char *call);
/*
 * Frees are "take the record, call the driver, then release or put the record back": the record
 * leaves the map before the driver can hand the same address out again to another thread.
 * gpc_free_begin returns true when the key was charged (and copies its record to *t).
 */
bool gpc_free_begin(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t);
void gpc_free_end(bool known, enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t, CUresult rc);
/* Gives back `bytes` charged on device `device` (`context`: a context's reserve, noted apart). */
void gpc_charge_release(int device, uint64_t bytes, bool context);
/*
 * A pointer counted per pointer because its pool has no slot (GPC_MAP_PTR with aux = the pool)
 * was freed: gpc_free_end hands its record to the step registered here (pool.c, at start-up),
 * which keeps its bytes charged as memory the pool keeps. Without one, the bytes are released.
 */
typedef void gpc_keep_fn(const struct gpc_track *t);
void gpc_charge_keeper(gpc_keep_fn *fn);
/* At exit (the exit sequence, hooks/init.c): audit mode's one line per budget that would have
 * denied: how many allocations, under which limit, and the budget (the peak) that would have done. */
void gpc_charge_audit_summary(void);

#endif
