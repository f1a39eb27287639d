/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeline.h: usage over time (timeline.c), recorded only when a report is asked for.
 */
#ifndef GPUCAP_CORE_TIMELINE_H
#define GPUCAP_CORE_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/report.h"
#include "core/locks.h"

extern bool gpc_timeline_on;
/* At start-up: records from now on if GPUCAP_REPORT or GPUCAP_TIMELINE is set. */
void gpc_timeline_start(void);
/* Records `used`, the figure of budget `id` now (and a denial): for budget.c, when gpc_timeline_on. */
void gpc_timeline_record(int id, uint64_t used, bool denied);
/* Copies up to `max` buckets of budget `id`, in time order: how many. */
int gpc_timeline_points(int id, struct gpc_tl_point *out, int max);
/* This process's timeline of each device, for its report at exit: how many (*out set). */
int gpc_timeline_collect(const struct gpc_timeline **out);
/* At exit, with GPUCAP_TIMELINE=DIR: writes DIR/timeline.<pid>. */
void gpc_timeline_write_file(void);
/* Its part of the fork sequence (hooks/init.c), for its lock (core/locks.h: TIMELINE). */
void gpc_timeline_fork(enum gpc_fork_step step, enum gpc_lock_rank rank);

#endif
