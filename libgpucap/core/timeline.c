/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeline.c: how each device's usage moved over time, for the report.
 *
 * Off unless a report is asked for (GPUCAP_REPORT, or GPUCAP_TIMELINE, which `gpucap run --report`
 * gives its command): then the budget calls gpc_timeline_record with a device's figure after every
 * change of it and every denial; otherwise that costs the budget one predictable branch. Each change
 * lands in one of TL_BUCKETS buckets, which keep the highest and the last figure seen in them and
 * the denials: buckets start 1 ms wide and, when the run outgrows them, neighbours are merged and
 * the width doubles. So memory is bounded (TL_DEVICES x TL_BUCKETS) however long the run, and the
 * peak is never lost. At exit the buckets go into the library's own JSON report, and with
 * GPUCAP_TIMELINE=DIR into DIR/timeline.<pid>, one line per bucket, which `gpucap run` merges.
 */
#include "core/timeline.h"

#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/report.h"
#include "common/units.h"
#include "core/ledger_map.h"
#include "core/locks.h"
#include "core/state.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TL_DEVICES 16 /* budget ids recorded (ledger entries) */
#define TL_BUCKETS 512
#define TL_FIRST_WIDTH 1000000ull /* 1 ms */

struct tl_bucket {
    uint64_t max, last;
    uint32_t denials;
    bool used;
};

bool gpc_timeline_on;
static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t t0, width = TL_FIRST_WIDTH; /* under tl_lock */
static struct tl_bucket buckets[TL_DEVICES][TL_BUCKETS];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gpc_timeline_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_TIMELINE)
        gpc_fork_mutex(&tl_lock, step);
}

void gpc_timeline_start(void)
{
    const char *r = gpc_opt_string(&gpc_config, GPC_OPT_REPORT);
    const char *t = gpc_opt_string(&gpc_config, GPC_OPT_TIMELINE);
    if (!(r && r[0]) && !(t && t[0]))
        return;
    t0 = now_ns();
    gpc_timeline_on = true;
}

/* Merges neighbouring buckets: the width doubles. Under tl_lock. */
static void coarsen(void)
{
    for (int d = 0; d < TL_DEVICES; d++) {
        struct tl_bucket *b = buckets[d];
        for (int i = 0; i < TL_BUCKETS / 2; i++) {
            struct tl_bucket x = b[2 * i], y = b[2 * i + 1];
            b[i] = (struct tl_bucket){
                .max = x.max > y.max ? x.max : y.max, /* an unused bucket's max is 0 */
                .last = y.used ? y.last : x.last,
                .denials = x.denials + y.denials,
                .used = x.used || y.used,
            };
        }
        memset(&b[TL_BUCKETS / 2], 0, sizeof b[0] * (TL_BUCKETS / 2));
    }
    width *= 2;
}

void gpc_timeline_record(int id, uint64_t used, bool denied)
{
    if (id < 0 || id >= TL_DEVICES)
        return;
    uint64_t t = now_ns();
    gpc_lock(&tl_lock, GPC_LOCK_TIMELINE);
    uint64_t at = t > t0 ? t - t0 : 0;
    while (at / width >= TL_BUCKETS)
        coarsen();
    struct tl_bucket *b = &buckets[id][at / width];
    if (!b->used || used > b->max)
        b->max = used;
    b->last = used;
    b->used = true;
    b->denials += denied;
    gpc_unlock(&tl_lock, GPC_LOCK_TIMELINE);
}

int gpc_timeline_points(int id, struct gpc_tl_point *out, int max)
{
    int n = 0;
    if (!gpc_timeline_on || id < 0 || id >= TL_DEVICES)
        return 0;
    gpc_lock(&tl_lock, GPC_LOCK_TIMELINE);
    for (int i = 0; i < TL_BUCKETS && n < max; i++) {
        const struct tl_bucket *b = &buckets[id][i];
        if (b->used)
            out[n++] = (struct gpc_tl_point){t0 + (uint64_t)i * width, b->max, b->last, b->denials};
    }
    gpc_unlock(&tl_lock, GPC_LOCK_TIMELINE);
    return n;
}

int gpc_timeline_collect(const struct gpc_timeline **out)
{
    static struct gpc_tl_point points[TL_DEVICES][TL_BUCKETS];
    static struct gpc_timeline tl[TL_DEVICES];
    int n = 0;
    for (int id = 0; gpc_ledger && id < TL_DEVICES && id < GPC_LEDGER_DEVICES; id++) {
        tl[n].n = gpc_timeline_points(id, points[n], TL_BUCKETS);
        if (tl[n].n > 0) {
            memcpy(tl[n].uuid, gpc_ledger->dev[id].uuid, sizeof tl[n].uuid);
            tl[n].p = points[n];
            n++;
        }
    }
    *out = tl;
    return n;
}

/* GPUCAP_TIMELINE=DIR: DIR/timeline.<pid>, "<uuid> <t_ns> <max> <last> <denials>" per bucket. */
void gpc_timeline_write_file(void)
{
    const char *dir = gpc_opt_string(&gpc_config, GPC_OPT_TIMELINE);
    if (!gpc_timeline_on || !dir || !dir[0] || !gpc_ledger)
        return;
    char path[600];
    snprintf(path, sizeof path, "%s/timeline.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        gpc_log_line(GPC_LOG_ERROR, "GPUCAP_TIMELINE=%s cannot be written; no timeline", dir);
        return;
    }
    const struct gpc_timeline *tl;
    int n = gpc_timeline_collect(&tl);
    for (int d = 0; d < n; d++) {
        char uuid[GPC_UUID_TEXT];
        gpc_uuid_format(tl[d].uuid, uuid);
        for (int i = 0; i < tl[d].n; i++) {
            const struct gpc_tl_point *p = &tl[d].p[i];
            char line[160];
            int len = snprintf(line, sizeof line, "%s %llu %llu %llu %u\n", uuid, (unsigned long long)p->t_ns,
                               (unsigned long long)p->max, (unsigned long long)p->last, p->denials);
            if (len > 0 && write(fd, line, (size_t)len) < 0)
                break;
        }
    }
    close(fd);
}
