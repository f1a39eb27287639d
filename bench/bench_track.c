/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_track.c [LIVE]: the pointer table (libgpucap/track.c, compiled in) with LIVE records held
 * (default one million): ns per add and per take while that many are live, bytes of table per
 * live record, and the slowest single add or take seen (a table growing is where a call stalls),
 * in the thread's own CPU time, so that on a busy machine being descheduled does not count.
 * Keys look like device pointers (4 KiB apart). Built twice by bench/CMakeLists.txt when asked:
 * against the current track.c and, for a before/after, against any other (TRACK_SOURCE).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t key_of(uint64_t i)
{
    return 0x7f0000000000ull + i * 4096;
}

int main(int argc, char **argv)
{
    uint64_t live = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    struct gpc_track t = {.bytes = 4096, .device = 0, .refs = 1, .ctx = 1};
    double worst = 0, t0 = now_ns();
    uint64_t over = 0; /* calls above 100 us */
    for (uint64_t i = 0; i < live; i++) {
        double a = cpu_ns();
        if (gpc_track_add(GPC_MAP_PTR, key_of(i), &t) != 0) {
            fprintf(stderr, "add failed\n");
            return 1;
        }
        double b = cpu_ns();
        if (b - a > worst)
            worst = b - a;
        over += b - a > 100000;
    }
    double fill = (now_ns() - t0) / live; /* with the timer calls: an upper bound */
    uint64_t records, bytes;
    gpc_track_stats(GPC_MAP_PTR, &records, &bytes);
    /* Steady state at LIVE records: take the oldest, add a new one. */
    uint64_t n = live, next = live;
    t0 = now_ns();
    for (uint64_t i = 0; i < n; i++) {
        struct gpc_track got;
        double a = cpu_ns();
        bool ok = gpc_track_take(GPC_MAP_PTR, key_of(i), &got);
        double b = cpu_ns();
        int rc = gpc_track_add(GPC_MAP_PTR, key_of(next++), &t);
        double c = cpu_ns();
        if (!ok || rc != 0) {
            fprintf(stderr, "take or add failed\n");
            return 1;
        }
        if (b - a > worst)
            worst = b - a;
        if (c - b > worst)
            worst = c - b;
        over += (b - a > 100000) + (c - b > 100000);
    }
    (void)t0;
    /* The same without timers around each call: ns per add and per take. */
    t0 = now_ns();
    for (uint64_t i = n; i < 2 * n; i++) {
        struct gpc_track got;
        if (!gpc_track_take(GPC_MAP_PTR, key_of(i), &got) || gpc_track_add(GPC_MAP_PTR, key_of(next++), &t) != 0) {
            fprintf(stderr, "take or add failed\n");
            return 1;
        }
    }
    double churn = (now_ns() - t0) / n / 2;
    printf("live=%llu fill_add_ns_with_timer=%.1f steady_add_take_ns=%.1f bytes_per_live=%.1f worst_call_us=%.1f calls_over_100us=%llu\n",
           (unsigned long long)live, fill, churn, records ? (double)bytes / records : 0.0, worst / 1000,
           (unsigned long long)over);
    return 0;
}
