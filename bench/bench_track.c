/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_track.c [LIVE [RUNS]]: the pointer table (libgpucap/track.c, compiled in) with LIVE
 * records held (default one million): ns per add and per take while that many are live, bytes of
 * table per live record, and the slowest single add or take (a table growing is where a call
 * stalls).
 *
 * A call's time for the stall is the smaller of its wall time and the thread's CPU time: being
 * descheduled shows in the wall time only, and on a VM the thread CPU clock sometimes jumps by
 * tens of microseconds inside a call that took one. Even so a busy VM stalls any code now and
 * then (noise_worst_us: the same measure over as many empty intervals), so the same sequence of
 * calls runs RUNS times (default 3, in child processes, then here) and worst_repeat_us is the
 * slowest call counted at its fastest run: what the table does at that call, not what the
 * machine did to it once. worst_call_us and calls_over_100us are the plain figures of this run.
 * Keys look like device pointers (4 KiB apart). Built twice by bench/CMakeLists.txt when asked:
 * against the current track.c and, for a before/after, against any other (TRACK_SOURCE).
 */
#include "core/track.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

struct stamp {
    double wall, cpu;
};

static struct stamp stamp(void)
{
    return (struct stamp){now_ns(), cpu_ns()};
}

/* A call's time in ns for the stall figures: the smaller of its wall and its CPU time. */
static double took(struct stamp a, struct stamp b)
{
    double w = b.wall - a.wall, c = b.cpu - a.cpu;
    return w < c ? w : c;
}

static const struct gpc_track rec = {.bytes = 4096, .device = 0, .refs = 1, .ctx = 0x7f00deadb000ull};

/* This run's figures of the timed calls; best[k]: call k's fastest time over the runs so far. */
struct timed {
    double worst;
    uint64_t over, calls;
    float *best;
};

static void note(struct timed *m, double d)
{
    m->worst = d > m->worst ? d : m->worst;
    m->over += d > 100000;
    if (d < m->best[m->calls])
        m->best[m->calls] = (float)d;
    m->calls++;
}

/*
 * The timed calls: LIVE adds from empty, then LIVE times take the oldest and add a new one.
 * 0, or 1 when a call failed.
 */
static int timed_calls(uint64_t live, struct timed *m)
{
    for (uint64_t i = 0; i < live; i++) {
        struct stamp a = stamp();
        int rc = gpc_track_add(GPC_MAP_PTR, key_of(i), &rec);
        note(m, took(a, stamp()));
        if (rc != 0) {
            fprintf(stderr, "add failed\n");
            return 1;
        }
    }
    for (uint64_t i = 0; i < live; i++) {
        struct gpc_track got;
        struct stamp a = stamp();
        bool ok = gpc_track_take(GPC_MAP_PTR, key_of(i), &got);
        struct stamp b = stamp();
        int rc = gpc_track_add(GPC_MAP_PTR, key_of(live + i), &rec);
        struct stamp c = stamp();
        note(m, took(a, b));
        note(m, took(b, c));
        if (!ok || rc != 0) {
            fprintf(stderr, "take or add failed\n");
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t live = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    size_t ncalls = 3 * live;
    float *best = mmap(NULL, ncalls * sizeof *best, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!live || runs < 1 || best == MAP_FAILED) {
        fprintf(stderr, "usage: bench_track [LIVE [RUNS]]\n");
        return 2;
    }
    for (size_t k = 0; k < ncalls; k++)
        best[k] = INFINITY;
    /* The earlier runs in children (each with a table of its own), the last one here. */
    for (int r = 1; r < runs; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct timed m = {.best = best};
            _exit(timed_calls(live, &m));
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    }
    struct timed m = {.best = best};
    double t0 = now_ns();
    if (timed_calls(live, &m) != 0)
        return 1;
    double timed_ns = (now_ns() - t0) / ncalls; /* with the timer calls: an upper bound */
    double repeat = 0;
    for (size_t k = 0; k < ncalls; k++)
        repeat = best[k] > repeat ? best[k] : repeat;
    uint64_t records, bytes;
    gpc_track_stats(GPC_MAP_PTR, &records, &bytes);
    /* Without timers around each call: take the oldest and add a new one, ns per call. */
    uint64_t first = live, next = 2 * live;
    t0 = now_ns();
    for (uint64_t i = 0; i < live; i++) {
        struct gpc_track got;
        if (!gpc_track_take(GPC_MAP_PTR, key_of(first++), &got) || gpc_track_add(GPC_MAP_PTR, key_of(next++), &rec) != 0) {
            fprintf(stderr, "take or add failed\n");
            return 1;
        }
    }
    double churn = (now_ns() - t0) / live / 2;
    /* Adds and takes apart: batches of LIVE/16 takes of the oldest, then as many adds (between
     * 15/16 and all of LIVE live). */
    uint64_t batch = live / 16 ? live / 16 : 1;
    double add_ns = 0, take_ns = 0;
    for (int round = 0; round < 16; round++) {
        struct gpc_track got;
        t0 = now_ns();
        for (uint64_t i = 0; i < batch; i++)
            if (!gpc_track_take(GPC_MAP_PTR, key_of(first++), &got)) {
                fprintf(stderr, "take failed\n");
                return 1;
            }
        double t1 = now_ns();
        for (uint64_t i = 0; i < batch; i++)
            if (gpc_track_add(GPC_MAP_PTR, key_of(next++), &rec) != 0) {
                fprintf(stderr, "add failed\n");
                return 1;
            }
        take_ns += t1 - t0;
        add_ns += now_ns() - t1;
    }
    /* What the machine adds: as many empty intervals, measured the same way. */
    double noise = 0;
    uint64_t noise_over = 0;
    for (uint64_t i = 0; i < m.calls; i++) {
        struct stamp a = stamp();
        double d = took(a, stamp());
        noise = d > noise ? d : noise;
        noise_over += d > 100000;
    }
    printf("live=%llu timed_call_ns=%.1f add_take_ns=%.1f add_ns=%.1f take_ns=%.1f bytes_per_live=%.1f "
           "worst_repeat_us=%.1f worst_call_us=%.1f calls_over_100us=%llu noise_worst_us=%.1f "
           "noise_over_100us=%llu runs=%d\n",
           (unsigned long long)live, timed_ns, churn, add_ns / (16.0 * batch), take_ns / (16.0 * batch),
           records ? (double)bytes / records : 0.0, repeat / 1000, m.worst / 1000, (unsigned long long)m.over,
           noise / 1000, (unsigned long long)noise_over, runs);
    return 0;
}
