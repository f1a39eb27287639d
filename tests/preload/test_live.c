/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_live.c CASE: budgets changed while processes run (libgpucap/live.c, budget.c).
 *
 * The settings file is rewritten in place, as the node agent does (a subPath mount sees the same
 * inode's new content): the platform file under the lock (TEST_PLATFORM, with the lock-test copy
 * of the library preloaded), else a GPUCAP_CONFIG file. The processes are this one and two forked
 * children, each with two threads, that meet at numbered steps in shared memory.
 *   raise   64 MiB -> 128 MiB with 48 MiB held: every thread of every process is admitted its
 *           part of the new room at once (no wait), cuMemGetInfo, cuDeviceTotalMem and NVML say
 *           128 MiB, above is denied
 *   lower   64 MiB -> 32 MiB with 48 MiB held: NVML's first query applies it (total 32 MiB, used
 *           48, free 0); nothing held is taken away, every process is denied even 1 MiB and reads
 *           total 32 MiB, free 0; the spare is taken back (the
 *           leases add up to what is held); freeing and reallocating the same bytes while above
 *           is denied; once the use is below 32 MiB the room up to it is admitted, no more
 *   tenant  (locked) a tenant writes the ledger's limit, every process's ask and a set-memory
 *           request of 1 GiB: nothing lifts; a later process and a lowered file still apply
 *   asked   (unlocked) a limit posted in the ledger, as `gpucap set-memory` does, is applied by
 *           the running process (raise, then lower below use); a process started later takes it
 *   forked  (unlocked) a fork child made after a live raise carries the budget in force, not the
 *           one its parent started with: the raise stays when the child claims its entry
 *   forkedlow  (unlocked) the same after a lowering: it stays once the parent that applied it left
 *   shrunk  (unlocked) a ledger shrunk after a live lowering: the private budget the process moves
 *           to is the lowered one, not the one it started with
 */
#include "common.h"
#include "fakenvml.h"
#include "ledger_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *settings; /* the file rewritten */
static bool locked;

/* Rewrites `path` in place, as gpucap-agent does: the same inode, never shorter than it was (a
 * reader never sees a shorter file with the old tail), then the mtime moves. */
static void rewrite_in_place(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY);
    REQUIRE(fd >= 0, "open %s", path);
    write_in_place(fd, text);
    close(fd);
}

/* With TEST_GEN=1 the file carries the generation line gpucap inject writes, and a rewrite bumps
 * it once the text is complete, as gpucap-agent does. */
static unsigned long long generation;

static void write_settings(const char *limit_line)
{
    char text[1024];
    bool gen = getenv("TEST_GEN") && strcmp(getenv("TEST_GEN"), "1") == 0;
    snprintf(text, sizeof text, "%s[gpucap]\ncontext_reserve = 0\n%s\n%s%s%s",
             gen ? "; generation = 00000000000000000\n" : "", limit_line, locked ? "lock = true\n" : "",
             locked ? "ledger = " : "", locked ? getenv("GPUCAP_LEDGER") : "");
    if (gen) {
        char old[40]; /* the generation it had, until the text is complete */
        snprintf(old, sizeof old, "; generation = %017llx", generation);
        memcpy(text, old, 32);
    }
    if (locked)
        strcat(text, "\n");
    if (access(settings, F_OK) == 0) {
        rewrite_in_place(settings, text);
        if (gen) {
            char line[40];
            int n = snprintf(line, sizeof line, "; generation = %017llx\n", ++generation);
            int fd = open(settings, O_WRONLY);
            REQUIRE(fd >= 0 && pwrite(fd, line, (size_t)n, 0) == n, "bump the generation");
            close(fd);
        }
        return;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", settings);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 0755);
    FILE *f = fopen(settings, "w");
    REQUIRE(f, "create %s", settings);
    fputs(text, f);
    fclose(f);
}

/* ---- processes and threads meeting at steps ---- */

#define WORKERS 3 /* this process and two children */
struct shared {
    _Atomic int step;            /* set by the parent */
    _Atomic int done[WORKERS];   /* the last step each finished */
    _Atomic int failed;
};
static struct shared *sh;
static int me; /* 0 parent, 1 and 2 children */

static void wait_step(int step)
{
    for (int i = 0; atomic_load(&sh->step) < step; i++) {
        REQUIRE(i < 20000, "worker %d: step %d never came", me, step);
        usleep(1000);
    }
}

static void finish(int step)
{
    atomic_store(&sh->done[me], step);
}

/* The parent: step `step` begins, and waits until every child finished it. */
static void run_step_wait(int step)
{
    atomic_store(&sh->step, step);
    finish(step);
    for (int w = 1; w < WORKERS; w++)
        for (int i = 0; atomic_load(&sh->done[w]) < step; i++) {
            REQUIRE(i < 20000, "child %d did not finish step %d", w, step);
            usleep(1000);
        }
}

static CUresult alloc(CUdeviceptr *p, uint64_t bytes)
{
    return cuMemAlloc_v2(p, bytes);
}

static void info(size_t *free_b, size_t *total)
{
    REQUIRE(cuMemGetInfo_v2(free_b, total) == CUDA_SUCCESS, "cuMemGetInfo_v2");
}

/* What NVML says of device 0 (as nvidia-smi and pynvml read it). */
static nvmlMemory_t nvml_info(void)
{
    nvmlDevice_t d;
    nvmlMemory_t m = {0};
    REQUIRE(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS, "NVML");
    REQUIRE(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS, "nvmlDeviceGetMemoryInfo");
    return m;
}

/* Two threads of a process allocating `each` bytes: how many were admitted. */
struct thread_arg {
    uint64_t bytes;
    CUcontext ctx;
    CUdeviceptr p;
    CUresult rc;
};
static void *thread_alloc(void *arg)
{
    struct thread_arg *a = arg;
    cuCtxSetCurrent(a->ctx);
    a->rc = alloc(&a->p, a->bytes);
    return NULL;
}
static int two_threads(CUcontext ctx, uint64_t bytes, CUdeviceptr out[2])
{
    pthread_t t[2];
    struct thread_arg a[2] = {{bytes, ctx, 0, 0}, {bytes, ctx, 0, 0}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, thread_alloc, &a[i]);
    int ok = 0;
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        out[i] = a[i].p;
        ok += a[i].rc == CUDA_SUCCESS;
    }
    return ok;
}

static void start_workers(void (*child)(CUcontext))
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sh != MAP_FAILED, "mmap");
    for (int w = 1; w < WORKERS; w++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            me = w;
            CUcontext ctx = make_context(0);
            child(ctx);
            finish(1000);
            _exit(failures ? 1 : 0);
        }
    }
}

static void reap_workers(void)
{
    int status;
    while (wait(&status) > 0)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child failed (status %d)", status);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- raise ---- */

/* Children: 16 MiB held each (two threads of 8); after the raise, 16 more each (two threads of 8). */
static void raise_child(CUcontext ctx)
{
    CUdeviceptr p[2], q[2], big;
    CHECK(two_threads(ctx, 8 * MiB, p) == 2, "child %d: 16 MiB", me);
    finish(1);
    wait_step(2);
    CHECK(alloc(&big, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "child %d: 32 MiB more than 64 MiB", me);
    finish(2);
    wait_step(3); /* the file says 128 MiB now */
    double t0 = now_s();
    CHECK(two_threads(ctx, 8 * MiB, q) == 2, "child %d: both threads admitted after the raise", me);
    CHECK(now_s() - t0 < 1.0, "child %d: the raise took %.2f s to apply", me, now_s() - t0);
    size_t f, t;
    info(&f, &t);
    CHECK(t == 128 * MiB, "child %d: total %zu after the raise", me, t);
    finish(3);
    wait_step(4);
}

static void case_raise(void)
{
    write_settings("memory_limit = 64MiB");
    start_workers(raise_child);
    make_context(0);
    CUdeviceptr p, big;
    REQUIRE(alloc(&p, 16 * MiB) == CUDA_SUCCESS, "parent 16 MiB");
    run_step_wait(1);
    run_step_wait(2);
    CHECK(alloc(&big, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "parent: 32 MiB more under 64 MiB");
    write_settings("memory_limit = 128MiB");
    run_step_wait(3);
    /* 48 + 32 held: 48 more fit, 49 do not. */
    size_t f, t;
    info(&f, &t);
    CHECK(t == 128 * MiB && f == 48 * MiB, "parent: total %zu free %zu after the raise", t, f);
    size_t total = 0;
    cuDeviceTotalMem_v2(&total, 0);
    CHECK(total == 128 * MiB, "cuDeviceTotalMem_v2 %zu", total);
    nvmlMemory_t m = nvml_info();
    CHECK(m.total == 128 * MiB && m.used == 80 * MiB, "NVML after the raise: total %llu used %llu", m.total, m.used);
    CHECK(alloc(&big, 49 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "above the new budget");
    CHECK(alloc(&big, 48 * MiB) == CUDA_SUCCESS, "up to the new budget");
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].limit_was) == 64 * MiB && atomic_load(&l->dev[0].limit_by) == GPC_LIMIT_BY_PLATFORM &&
              atomic_load(&l->dev[0].limit_changed_s) != 0,
          "the change is recorded: was %llu by %u", (unsigned long long)atomic_load(&l->dev[0].limit_was),
          atomic_load(&l->dev[0].limit_by));
    atomic_store(&sh->step, 4);
    reap_workers();
}

/* ---- lower ---- */

/* Children: 16 MiB each (two threads of 8); after the lowering to 32 MiB with 48 held, all denied;
 * child 1 frees 16 (use 32: still nothing), child 2 then frees 8 (use 24: 8 fit, no more). */
static void lower_child(CUcontext ctx)
{
    CUdeviceptr p[2], q;
    CHECK(two_threads(ctx, 8 * MiB, p) == 2, "child %d: 16 MiB", me);
    finish(1);
    wait_step(2); /* lowered to 32 MiB */
    uint64_t held = fakecuda_outstanding(0);
    size_t f, t;
    info(&f, &t);
    CHECK(t == 32 * MiB && f == 0, "child %d: total %zu free %zu after the lowering", me, t, f);
    CHECK(two_threads(ctx, 1 * MiB, (CUdeviceptr[2]){0}) == 0, "child %d: admitted above a lowered budget", me);
    CHECK(fakecuda_outstanding(0) == held && held == 16 * MiB, "child %d: memory was taken away (%llu)", me,
          (unsigned long long)fakecuda_outstanding(0));
    finish(2);
    wait_step(3);
    if (me == 1) {
        /* Freed and taken again while above: denied (what is freed goes back to the total). */
        CHECK(cuMemFree_v2(p[0]) == CUDA_SUCCESS, "free");
        CHECK(alloc(&q, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "child 1: reallocated its freed 8 MiB above the budget");
        CHECK(cuMemFree_v2(p[1]) == CUDA_SUCCESS, "free");
    }
    finish(3);
    wait_step(4);
    if (me == 2) {
        CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "child 2: admitted at the budget (use 32 MiB)");
        CHECK(cuMemFree_v2(p[0]) == CUDA_SUCCESS, "free");
        CHECK(alloc(&q, 8 * MiB) == CUDA_SUCCESS, "child 2: 8 MiB below the lowered budget");
        CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "child 2: above the lowered budget");
    }
    finish(4);
    wait_step(5);
}

static void case_lower(void)
{
    write_settings("memory_limit = 64MiB");
    start_workers(lower_child);
    make_context(0);
    CUdeviceptr p, q;
    REQUIRE(alloc(&p, 16 * MiB) == CUDA_SUCCESS, "parent 16 MiB");
    run_step_wait(1);
    write_settings("memory_limit = 32MiB");
    nvmlMemory_t m = nvml_info(); /* a query applies it */
    CHECK(m.total == 32 * MiB && m.used == 48 * MiB && m.free == 0, "NVML after the lowering: total %llu used %llu "
          "free %llu", m.total, m.used, m.free);
    size_t f, t;
    info(&f, &t);
    CHECK(t == 32 * MiB && f == 0, "parent: total %zu free %zu after the lowering", t, f);
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].slot.limit) == 32 * MiB, "ledger limit %llu",
          (unsigned long long)atomic_load(&l->dev[0].slot.limit));
    /* The spare is taken back: the leases are what is held. */
    CHECK(leases_sum(l, 0) == 48 * MiB && atomic_load(&l->dev[0].slot.leased) == 48 * MiB,
          "leases %llu leased %llu, 48 MiB held", (unsigned long long)leases_sum(l, 0),
          (unsigned long long)atomic_load(&l->dev[0].slot.leased));
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "parent admitted above a lowered budget");
    CHECK(fakecuda_outstanding(0) == 16 * MiB, "parent: memory taken away");
    run_step_wait(2);
    run_step_wait(3); /* child 1 freed 16: use 32 */
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "parent admitted at the budget");
    run_step_wait(4); /* child 2 freed 8 and took 8 */
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "parent admitted above the budget");
    info(&f, &t);
    CHECK(t == 32 * MiB && f == 0, "parent: total %zu free %zu at the budget", t, f);
    atomic_store(&sh->step, 5);
    reap_workers();
    (void)p;
}

/* Runs this program again as a later process in `mode`, to its end: a failure is one of this case's. */
static void later_process(const char *mode)
{
    int status = run_self("test_live", mode);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the later process %s (status %d)", mode, status);
}

/* ---- tenant ---- */

static void case_tenant(void)
{
    REQUIRE(locked, "the tenant case runs under the lock");
    write_settings("memory_limit = 64MiB");
    make_context(0);
    CUdeviceptr p, q;
    REQUIRE(alloc(&p, 60 * MiB) == CUDA_SUCCESS, "60 MiB");
    struct gpc_ledger *l = map_ledger();
    /* Everything a tenant can write in its ledger to lift its budget. */
    atomic_store(&l->dev[0].slot.limit, 1 * GiB);
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid))
            atomic_store(&l->proc[i].share[0].limit, 1 * GiB);
    post_ask(l, 0, 1 * GiB);
    atomic_fetch_add(&l->dev[0].limit_changes, 1);
    CHECK(alloc(&q, 16 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the ledger's limit field lifted the budget");
    size_t f, t;
    info(&f, &t);
    CHECK(t == 64 * MiB && f == 4 * MiB, "total %zu free %zu with a forged ledger", t, f);
    /* A process started now reads the platform file too. */
    later_process("tenant-child");
    /* The platform still changes it. */
    write_settings("memory_limit = 80MiB");
    CHECK(alloc(&q, 16 * MiB) == CUDA_SUCCESS, "a raise by the platform file");
    CHECK(alloc(&q, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "above the platform's raise");
}

/* The later process of the tenant case: its budget is the platform's, whatever the ledger says. */
static void case_tenant_child(void)
{
    make_context(0);
    CUdeviceptr q;
    size_t t = total_now();
    CHECK(t == 64 * MiB, "later process: total %zu", t);
    CHECK(alloc(&q, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "later process admitted past the platform's budget");
}

/* ---- asked ---- */

static void case_asked(void)
{
    REQUIRE(!locked, "unlocked settings");
    write_settings("memory_limit = 64MiB");
    make_context(0);
    CUdeviceptr p, q;
    REQUIRE(alloc(&p, 16 * MiB) == CUDA_SUCCESS, "16 MiB");
    struct gpc_ledger *l = map_ledger();
    uint32_t seq = post_ask(l, 0, 128 * MiB);
    size_t f, t;
    info(&f, &t);
    CHECK(t == 128 * MiB && f == 112 * MiB, "after a raise asked: total %zu free %zu", t, f);
    CHECK(ask_done(l, 0, seq), "the request is acknowledged once applied");
    CHECK((atomic_load(&l->dev[0].limit_by) & GPC_LIMIT_BY_MASK) == GPC_LIMIT_BY_CLI &&
              atomic_load(&l->dev[0].limit_was) == 64 * MiB,
          "recorded: by %u was %llu", atomic_load(&l->dev[0].limit_by),
          (unsigned long long)atomic_load(&l->dev[0].limit_was));
    CHECK(alloc(&q, 100 * MiB) == CUDA_SUCCESS, "up to the raised budget");
    post_ask(l, 0, 32 * MiB);
    info(&f, &t);
    CHECK(t == 32 * MiB && f == 0, "after a lowering asked: total %zu free %zu", t, f);
    CHECK(alloc(&q, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "above a lowered budget");
    CHECK(fakecuda_outstanding(0) == 116 * MiB, "nothing taken away");
    later_process("asked-child");
    CHECK(atomic_load(&l->dev[0].slot.limit) == 32 * MiB, "a later process dragged the limit to %llu",
          (unsigned long long)atomic_load(&l->dev[0].slot.limit));
    CHECK(atomic_load(&l->dev[0].limit_by) & GPC_LIMIT_HELD, "the figure set holds while a process runs");
}

static void case_asked_child(void)
{
    make_context(0);
    size_t f, t;
    info(&f, &t);
    CHECK(t == 32 * MiB, "a later process: total %zu, not the budget set live", t);
}

/* ---- forked ---- */

/* 16 MiB held by this process, then a limit posted in the ledger as `gpucap set-memory` does,
 * applied at the next query: the ledger. */
static struct gpc_ledger *hold_then_ask(CUdeviceptr *p, uint64_t asked)
{
    make_context(0);
    REQUIRE(alloc(p, 16 * MiB) == CUDA_SUCCESS, "16 MiB");
    struct gpc_ledger *l = map_ledger();
    post_ask(l, 0, asked);
    size_t f, t;
    info(&f, &t);
    REQUIRE(t == asked, "the change applied: total %zu", t);
    return l;
}

static void case_forked(void)
{
    REQUIRE(!locked, "unlocked settings");
    write_settings("memory_limit = 64MiB");
    CUdeviceptr p, q;
    struct gpc_ledger *l = hold_then_ask(&p, 128 * MiB);
    size_t f, t;
    /* A child forked now claims its entry at its first allocation, with the raised limit. */
    pid_t c = fork();
    REQUIRE(c >= 0, "fork");
    if (c == 0) {
        CHECK(alloc(&q, 100 * MiB) == CUDA_SUCCESS, "the fork child was denied 100 MiB of the raised budget");
        info(&f, &t);
        CHECK(t == 128 * MiB, "the fork child reads total %zu, not the raised budget", t);
        _exit(failures ? 1 : 0);
    }
    int status;
    waitpid(c, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child after the raise (status %d)", status);
    CHECK(atomic_load(&l->dev[0].slot.limit) == 128 * MiB, "a fork child took the raised limit back to %llu MiB",
          (unsigned long long)(atomic_load(&l->dev[0].slot.limit) / MiB));
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "free");
}

/* This process never calls CUDA: P applies a lowering, forks C and leaves; C's budget stays the lowered one. */
static void case_forkedlow(void)
{
    REQUIRE(!locked, "unlocked settings");
    write_settings("memory_limit = 64MiB");
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* C, once P exits, is waited for here */
    int ready[2], go[2], status;
    REQUIRE(pipe(ready) == 0 && pipe(go) == 0, "pipe");
    pid_t pp = fork();
    REQUIRE(pp >= 0, "fork");
    if (pp == 0) {
        CUdeviceptr p;
        size_t f, t;
        hold_then_ask(&p, 32 * MiB);
        if (fork() == 0) {
            char b = 0;
            CUdeviceptr x;
            bool ok = alloc(&x, 1 * MiB) == CUDA_SUCCESS; /* claims C's entry */
            if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
                _exit(4);
            /* 1 MiB held once P's 16 MiB went with P: 40 MiB more fits 64 MiB, not 32. */
            CHECK(ok, "C was denied 1 MiB");
            CHECK(alloc(&x, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY,
                  "C was admitted 40 MiB past the lowered budget once P left");
            info(&f, &t);
            CHECK(t == 32 * MiB, "C reads total %zu once P left, not the lowered budget", t);
            _exit(failures ? 1 : 0);
        }
        _exit(0);
    }
    close(ready[1]); /* P failing before C: the read ends */
    char b = 0;
    REQUIRE(read(ready[0], &b, 1) == 1, "C ready");
    waitpid(pp, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "P (status %d)", status);
    REQUIRE(write(go[1], &b, 1) == 1, "go");
    while (wait(&status) > 0)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "C (status %d)", status);
    struct gpc_ledger *l = map_ledger();
    CHECK(atomic_load(&l->dev[0].slot.limit) == 32 * MiB, "the lowered limit went back to %llu MiB",
          (unsigned long long)(atomic_load(&l->dev[0].slot.limit) / MiB));
}

/* ---- shrunk ---- */

static void case_shrunk(void)
{
    REQUIRE(!locked, "unlocked settings");
    /* The file an earlier run shrank (ctest --repeat) would give this run a private budget at once. */
    unlink(getenv("GPUCAP_LEDGER"));
    write_settings("memory_limit = 64MiB");
    CUdeviceptr p, q;
    hold_then_ask(&p, 32 * MiB);
    size_t f, t;
    pid_t c = fork();
    if (c == 0)
        _exit(truncate(getenv("GPUCAP_LEDGER"), 0) == 0 ? 0 : 1);
    int status;
    REQUIRE(waitpid(c, &status, 0) == c && WIFEXITED(status) && WEXITSTATUS(status) == 0, "truncate");
    info(&f, &t);
    CHECK(t == 32 * MiB && f == 16 * MiB, "on the private budget: total %zu free %zu, not the lowered budget", t, f);
    CHECK(alloc(&q, 20 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "admitted 20 MiB past the lowered budget after the shrink");
    CHECK(alloc(&q, 16 * MiB) == CUDA_SUCCESS, "denied what fits the lowered budget after the shrink");
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_live CASE");
    static const struct test_case cases[] = {
        {"raise", case_raise}, {"lower", case_lower}, {"tenant", case_tenant},
        {"tenant-child", case_tenant_child}, {"asked", case_asked}, {"asked-child", case_asked_child},
        {"forked", case_forked}, {"forkedlow", case_forkedlow},
        {"shrunk", case_shrunk},
    };
    static char path[1024];
    locked = getenv("TEST_PLATFORM") != NULL;
    if (locked) {
        settings = getenv("TEST_PLATFORM");
        unsetenv("GPUCAP_CONFIG");
        unsetenv("GPUCAP_CONTEXT_RESERVE");
    } else {
        snprintf(path, sizeof path, "%s.ini", getenv("GPUCAP_LEDGER"));
        settings = path;
        setenv("GPUCAP_CONFIG", path, 1);
    }
    unsetenv("GPUCAP_MEMORY_LIMIT");
    bool child = strstr(argv[1], "-child") != NULL;
    if (!child)
        unlink(settings);
    /* Under the lock the library makes no ledger: the platform does (gpucap inject --ledgers). */
    if (locked && !child) {
        unlink(getenv("GPUCAP_LEDGER"));
        REQUIRE(gpc_ledger_create(getenv("GPUCAP_LEDGER"), 0666) == 0, "the platform's ledger");
    }
    RUN_CASE(cases, argv[1]);
    if (locked && !child)
        unlink(settings); /* the platform file is shared with the other lock tests */
    return test_result();
}
