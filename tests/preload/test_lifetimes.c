/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lifetimes.c CASE: gpucap's figures against the fake card's record over the lifetimes of
 * contexts and processes (issue: exact accounting over every lifetime). After each step
 * cuMemGetInfo's free must be the budget less what the card really holds for the tenant, and
 * gpucap's `used` must be what the card holds. Run with a 256 MiB budget, with the shared ledger
 * (ledger.*) and with private budgets (GPUCAP_LEDGER=off, private.*) where the case allows.
 *   ctxdestroy  two rounds of create / allocate 200 MiB (plain, pitch, pool) / cuCtxDestroy, then
 *               100 MiB allocations still fit;
 *   primary     cuDevicePrimaryCtxReset and the last cuDevicePrimaryCtxRelease free the primary
 *               context's allocations;
 *   poolfree    cuMemFree on memory from cuMemAllocAsync settles its pool (no slot leaks: 300
 *               pools one after another stay within the budget, and the card with them);
 *   poolmany    with more pools than gpucap keeps slots for, a pool that keeps 200 MiB after
 *               cuMemFreeAsync stays charged for them until it is trimmed (never under-charged);
 *   exit        a child that allocates 200 MiB and returns from main stops counting at once;
 *   kill        a child killed holding 200 MiB stops counting at the next figure (cuMemGetInfo,
 *               NVML, gpucap status);
 *   exec        200 MiB allocated before exec are not charged to the new image;
 *   limit       a 64 MiB process that has left no longer caps a 256 MiB one;
 *   lockheld    another process holds the device lock and stops: a cuMemFree and an allocation
 *               inside this process's lease take no lock and are counted at once; one beyond the
 *               lease is denied after the bound, the log naming the holder's pid;
 *   sparse      sparse and deferred-mapping arrays are not charged (their memory is mapped in later);
 *               an ordinary array is charged what the card holds for it;
 *   failafter   GPUCAP_FAIL_AFTER=3 admits three allocations, whatever contexts were made; a context
 *               on a device that does not exist gets the driver's error;
 *   forkctx     fork() while another thread retains and releases primary contexts: the child's
 *               hooks never hang;
 *   unrecoverable  a device lock left not recoverable (taken after its owner died, released without
 *               repair) by a co-tenant: the ledger is rebuilt under a fresh file with the same
 *               figures, said in one line, and this process and a new one keep allocating;
 *   startzero   a process table filled with pid 1 / start time 0 (a hostile co-tenant) does not
 *               keep a new process from allocating.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_test.h"

#define LIMIT (256 * MiB)

static const char *self;

static uint64_t nvml_used(void);
static uint64_t status_used(void);

/*
 * cuMemGetInfo, gpucap's `used`, NVML's used and (with the shared ledger) `gpucap status` against
 * the card's record (this tenant is alone on the card).
 */
static void figures(const char *step)
{
    size_t free_b = 0, total = 0;
    CHECK_RC(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    uint64_t held = fakecuda_outstanding(0);
    uint64_t want = held >= LIMIT ? 0 : LIMIT - held;
    CHECK(total == LIMIT, "%s: total %zu", step, total);
    CHECK(free_b == want, "%s: cuMemGetInfo free %llu MiB, the card holds %llu MiB of a %llu MiB budget", step,
          (unsigned long long)(free_b / MiB), (unsigned long long)(held / MiB), LIMIT / MiB);
    struct gpucap_usage u = usage(0);
    CHECK(u.used == held, "%s: gpucap counts %llu MiB in use, the card holds %llu MiB", step,
          (unsigned long long)(u.used / MiB), (unsigned long long)(held / MiB));
    uint64_t nv = nvml_used();
    CHECK(nv == UINT64_MAX || nv == held, "%s: NVML says %llu MiB used, the card holds %llu MiB", step,
          (unsigned long long)(nv / MiB), (unsigned long long)(held / MiB));
    const char *ledger = getenv("GPUCAP_LEDGER");
    if (ledger && strcmp(ledger, "off") != 0) {
        uint64_t st = status_used();
        CHECK(st == held, "%s: gpucap status says %llu MiB in use, the card holds %llu MiB", step,
              (unsigned long long)(st / MiB), (unsigned long long)(held / MiB));
    }
}

static void case_ctxdestroy(void)
{
    CUcontext primary = make_context(0);
    for (int round = 0; round < 2; round++) {
        CUcontext c;
        REQUIRE(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
        CUdeviceptr a, b, p;
        size_t pitch;
        CHECK_RC(cuMemAlloc_v2(&a, 100 * MiB), CUDA_SUCCESS);
        CHECK_RC(cuMemAllocPitch_v2(&b, &pitch, 1 * MiB, 50, 4), CUDA_SUCCESS);
        CHECK_RC(cuMemAllocAsync(&p, 40 * MiB, NULL), CUDA_SUCCESS);
        figures("allocated in a context");
        CHECK_RC(cuCtxDestroy_v2(c), CUDA_SUCCESS);
        CHECK_RC(cuCtxSetCurrent(primary), CUDA_SUCCESS);
        figures("after cuCtxDestroy");
    }
    CUdeviceptr x, y;
    CHECK_RC(cuMemAlloc_v2(&x, 100 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&y, 100 * MiB), CUDA_SUCCESS);
    figures("after two rounds");
}

static void case_primary(void)
{
    for (int how = 0; how < 2; how++) {
        make_context(0);
        CUdeviceptr a, p;
        CHECK_RC(cuMemAlloc_v2(&a, 150 * MiB), CUDA_SUCCESS);
        CHECK_RC(cuMemAllocAsync(&p, 50 * MiB, NULL), CUDA_SUCCESS);
        figures("allocated in the primary context");
        if (how == 0)
            CHECK_RC(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
        else
            CHECK_RC(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
        CHECK(fakecuda_outstanding(0) == 0, "the fake kept %llu bytes", (unsigned long long)fakecuda_outstanding(0));
        make_context(0);
        figures(how == 0 ? "after cuDevicePrimaryCtxReset" : "after the last cuDevicePrimaryCtxRelease");
        CHECK_RC(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    }
}

/* A pool on device 0 that keeps everything it reserves (release threshold UINT64_MAX). */
static CUmemoryPool new_pool(void)
{
    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    REQUIRE(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS, "cuMemPoolCreate");
    cuuint64_t keep = UINT64_MAX;
    CHECK_RC(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    return pool;
}

static void case_poolfree(void)
{
    make_context(0);
    for (int i = 0; i < 300; i++) {
        CUmemoryPool pool = new_pool();
        CUdeviceptr p;
        CHECK_RC(cuMemAllocFromPoolAsync(&p, 100 * MiB, pool, NULL), CUDA_SUCCESS);
        /* Legal: cuMemFree on stream-ordered memory. */
        CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
        CHECK_RC(cuMemPoolDestroy(pool), CUDA_SUCCESS);
        if (failures)
            break;
    }
    figures("300 pools freed by cuMemFree");
    /* A pool that keeps what it reserved after cuMemFreeAsync stays charged for it. */
    CUmemoryPool pool = new_pool();
    CUdeviceptr p, q;
    CHECK_RC(cuMemAllocFromPoolAsync(&p, 200 * MiB, pool, NULL), CUDA_SUCCESS);
    CHECK_RC(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&q, 200 * MiB), CUDA_SUCCESS); /* fits only after the pool is trimmed */
    figures("a kept pool trimmed for an allocation");
    CHECK(fakecuda_peak(0) <= LIMIT, "the card reached %llu MiB under a %llu MiB budget",
          (unsigned long long)(fakecuda_peak(0) / MiB), LIMIT / MiB);
}

static void case_poolmany(void)
{
    make_context(0);
    CUmemoryPool pools[300];
    for (int i = 0; i < 300; i++)
        pools[i] = new_pool();
    CUmemoryPool pool = pools[299];
    CUdeviceptr p, q;
    CHECK_RC(cuMemAllocFromPoolAsync(&p, 200 * MiB, pool, NULL), CUDA_SUCCESS);
    figures("an allocation from a pool without a slot");
    CHECK_RC(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_RC(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    figures("the pool keeps what it reserved");
    CHECK_RC(cuMemAlloc_v2(&q, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_peak(0) <= LIMIT, "the card reached %llu MiB under a %llu MiB budget",
          (unsigned long long)(fakecuda_peak(0) / MiB), LIMIT / MiB);
    /* The pool serves its next allocation from what it keeps: no second charge. */
    CHECK_RC(cuMemAllocFromPoolAsync(&p, 200 * MiB, pool, NULL), CUDA_SUCCESS);
    figures("reused from the pool");
    CHECK_RC(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_RC(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    figures("the pool trimmed");
    CHECK_RC(cuMemAlloc_v2(&q, 100 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK_RC(cuMemAllocFromPoolAsync(&p, 100 * MiB, pool, NULL), CUDA_SUCCESS);
    CHECK_RC(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    for (int i = 0; i < 300; i++)
        CHECK_RC(cuMemPoolDestroy(pools[i]), CUDA_SUCCESS);
    figures("the pools destroyed");
}

/* A child that allocates `mib` and then returns (0), is killed (1) or execs `then` (2). */
static pid_t holder(uint64_t mib, int how, int ready_fd, const char *then)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    make_context(0);
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, mib * MiB) != CUDA_SUCCESS)
        _exit(3);
    if (how == 2)
        execl(self, self, then, (char *)NULL);
    if (how == 1) {
        char c = 1;
        if (write(ready_fd, &c, 1) != 1)
            _exit(4);
        pause();
    }
    exit(0); /* a normal exit: destructors run */
}

static int wait_status(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* NVML's used figure for device 0, through the fake NVML; UINT64_MAX when unavailable. */
static uint64_t nvml_used(void)
{
    static int (*info)(void *, unsigned long long *);
    static void *dev;
    if (!info) {
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return UINT64_MAX;
        int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
        int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
        typedef int (*info_fn)(void *, unsigned long long *);
        info_fn f = (info_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
        if (!init || !get || !f || init() != 0 || get(0, &dev) != 0)
            return UINT64_MAX;
        info = f;
    }
    unsigned long long m[3];
    return info(dev, m) == 0 ? m[2] : UINT64_MAX;
}

/* `gpucap status --json`'s in_use of the first device; UINT64_MAX when it cannot be read. */
static uint64_t status_used(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD %s/tools/gpucap/gpucap status --json", getenv("TEST_BUILD"));
    FILE *f = popen(cmd, "r");
    if (!f)
        return UINT64_MAX;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    pclose(f);
    buf[n] = 0;
    const char *u = strstr(buf, "\"in_use\":");
    return u ? strtoull(u + 9, NULL, 10) : UINT64_MAX;
}

static void case_exit(void)
{
    make_context(0);
    CHECK(wait_status(holder(200, 0, -1, NULL)) == 0, "the child failed");
    figures("after a child's normal exit");
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 200 * MiB), CUDA_SUCCESS);
}

static void case_kill(void)
{
    make_context(0);
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    pid_t pid = holder(200, 1, fds[1], NULL);
    char c;
    REQUIRE(read(fds[0], &c, 1) == 1, "the child did not allocate");
    figures("a child holds 200 MiB");
    kill(pid, SIGKILL);
    wait_status(pid);
    /* Figures reap dead processes at most every 100 ms per process: the first one above just did. */
    usleep(150 * 1000);
    figures("after the holder was killed");
}

static void case_exec(void)
{
    make_context(0);
    CHECK(wait_status(holder(200, 2, -1, "exec_child")) == 0, "the exec'd image failed");
    figures("after the exec'd image left");
}

/* The image after exec: the old one's 200 MiB are not its own. */
static void case_exec_child(void)
{
    context_holding(0, 200 * MiB);
    figures("in the exec'd image");
}

static void case_limit(void)
{
    CUdeviceptr p = context_holding(0, 1 * MiB);
    /* The small process, while this one is registered: another image, with its own setting. */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("GPUCAP_MEMORY_LIMIT", "64MiB", 1);
        execl(self, self, "limit_small", (char *)NULL);
        _exit(5);
    }
    CHECK(wait_status(pid) == 0, "the 64 MiB process failed");
    CHECK_RC(cuMemAlloc_v2(&p, 200 * MiB), CUDA_SUCCESS);
    CHECK(usage(0).limit == LIMIT, "limit %llu MiB", (unsigned long long)(usage(0).limit / MiB));
}

static void case_limit_small(void)
{
    context_holding(0, 32 * MiB);
    CHECK(usage(0).limit == 64 * MiB, "the smaller limit does not apply: %llu MiB",
          (unsigned long long)(usage(0).limit / MiB));
}

/* The log lines written to stderr while fn() runs. */
static void capture_log(void (*fn)(void *), void *arg, char *text, size_t len)
{
    char logpath[] = "/tmp/gpucap-test-log-XXXXXX";
    int logfd = mkstemp(logpath);
    int saved = dup(2);
    dup2(logfd, 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    memset(text, 0, len);
    if (pread(logfd, text, len - 1, 0) < 0)
        text[0] = '\0';
    close(logfd);
    unlink(logpath);
}

static void free_it(void *arg)
{
    CHECK_RC(cuMemFree_v2(*(CUdeviceptr *)arg), CUDA_SUCCESS);
}

static void alloc_beyond_lease(void *arg)
{
    CHECK_RC(cuMemAlloc_v2((CUdeviceptr *)arg, 200 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}

static void case_lockheld(void)
{
    CUdeviceptr p = context_holding(0, 100 * MiB);
    struct gpc_ledger *l = map_ledger();
    int fds[2], back[2];
    REQUIRE(pipe(fds) == 0 && pipe(back) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        /* A co-tenant that takes the device lock and stops. */
        pthread_mutex_lock(&l->dev[0].lock);
        char c = 1;
        if (write(fds[1], &c, 1) != 1 || read(back[0], &c, 1) != 1)
            _exit(1);
        pthread_mutex_unlock(&l->dev[0].lock);
        _exit(0);
    }
    char c;
    REQUIRE(read(fds[0], &c, 1) == 1, "the lock holder did not start");
    /* A free takes no lock: it is counted at once, and nothing waits or is logged. */
    char text[4096];
    capture_log(free_it, &p, text, sizeof text);
    CHECK(text[0] == '\0', "a free under a held lock logged: %s", text);
    figures("a free while another process holds the lock");
    /* An allocation inside this process's lease takes no lock either. */
    CHECK_RC(cuMemAlloc_v2(&p, 50 * MiB), CUDA_SUCCESS);
    figures("an allocation inside the lease while another process holds the lock");
    /* One beyond it needs the lock: denied after the bound, naming the holder. */
    CUdeviceptr q;
    capture_log(alloc_beyond_lease, &q, text, sizeof text);
    char want[64];
    snprintf(want, sizeof want, "process %d", (int)pid);
    CHECK(strstr(text, want) != NULL, "the log does not name the holder (%s): %s", want, text);
    CHECK(strstr(text, "allocation is denied") != NULL, "the denial does not say so: %s", text);
    c = 1;
    CHECK(write(back[1], &c, 1) == 1, "release the holder");
    wait_status(pid);
    CHECK_RC(cuMemAlloc_v2(&q, 200 * MiB), CUDA_SUCCESS);
    figures("after the holder let go");
    CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    figures("at the end");
    munmap(l, sizeof *l);
}

static void case_sparse(void)
{
    make_context(0);
    unsigned flags[] = {CUDA_ARRAY3D_SPARSE, CUDA_ARRAY3D_DEFERRED_MAPPING, 0};
    for (int i = 0; i < 3; i++) {
        /* 4096 x 4096 x 4 floats: 256 MiB, the whole budget. */
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4,
                                     .Flags = flags[i]};
        CUarray a;
        CHECK_RC(cuArray3DCreate_v2(&a, &d), CUDA_SUCCESS);
        figures(i == 2 ? "an ordinary array" : "a sparse or deferred-mapping array");
        if (i < 2) {
            CUdeviceptr p;
            CHECK_RC(cuMemAlloc_v2(&p, 200 * MiB), CUDA_SUCCESS);
            CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
        }
        CHECK_RC(cuArrayDestroy(a), CUDA_SUCCESS);
    }
    figures("arrays destroyed");
}

static void case_failafter(void)
{
    /* GPUCAP_FAIL_AFTER=3: a context retain and a context creation are not allocations. */
    make_context(0);
    CUcontext c;
    /* A caller's garbage ordinal (an uninitialised CUdevice after a failed cuDeviceGet) gets the
     * driver's answer, not a denial for "device 11317975". */
    CHECK_RC(cuCtxCreate_v2(&c, 0, 11317975), CUDA_ERROR_INVALID_DEVICE);
    CHECK_RC(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
    CUdeviceptr p;
    int admitted = 0;
    for (int i = 0; i < 5; i++)
        admitted += cuMemAlloc_v2(&p, 1 * MiB) == CUDA_SUCCESS;
    CHECK(admitted == 3, "GPUCAP_FAIL_AFTER=3 admitted %d allocations", admitted);
}

static atomic_bool stop_churn;

static void *retain_churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_churn)) {
        CUcontext c;
        if (cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS)
            cuDevicePrimaryCtxRelease_v2(0);
    }
    return NULL;
}

static void case_forkctx(void)
{
    make_context(0);
    pthread_t t;
    pthread_create(&t, NULL, retain_churn, NULL);
    for (int i = 0; i < 100 && !failures; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10); /* a hang is a failure, never a stuck suite */
            CUcontext c;
            _exit(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS ? 0 : 2);
        }
        int st = wait_status(pid);
        CHECK(st == 0, "fork child %d ended with %d", i, st);
    }
    atomic_store(&stop_churn, true);
    pthread_join(t, NULL);
}

/* Runs `fn` in a child process and waits for it. */
static void in_child(void (*fn)(struct gpc_ledger *), struct gpc_ledger *l)
{
    pid_t pid = fork();
    if (pid == 0) {
        fn(l);
        _exit(0);
    }
    wait_status(pid);
}

static void die_holding(struct gpc_ledger *l)
{
    pthread_mutex_lock(&l->dev[0].lock);
}

static void unlock_unrepaired(struct gpc_ledger *l)
{
    if (pthread_mutex_lock(&l->dev[0].lock) == EOWNERDEAD)
        pthread_mutex_unlock(&l->dev[0].lock); /* no pthread_mutex_consistent: not recoverable */
}

static void case_unrecoverable(void)
{
    make_context(0);
    CUdeviceptr p, q;
    CHECK_RC(cuMemAlloc_v2(&p, 50 * MiB), CUDA_SUCCESS);
    struct gpc_ledger *l = map_ledger();
    /* Figures nothing in this case changes, planted to be seen again in the rebuilt file: the
     * report's, and the driver's limit that a live change must not pass. */
    atomic_store(&l->dev[0].refused_driver, 3);
    atomic_store(&l->dev[0].held_at_exit, 5 * MiB);
    atomic_store(&l->dev[0].driver_limit, 4096 * MiB);
    uint64_t contexts = atomic_load(&l->dev[0].context_count);
    in_child(die_holding, l);
    in_child(unlock_unrepaired, l);
    CHECK(pthread_mutex_trylock(&l->dev[0].lock) == ENOTRECOVERABLE, "the lock is not left unrecoverable");
    char logpath[] = "/tmp/gpucap-test-log-XXXXXX";
    int logfd = mkstemp(logpath);
    int saved = dup(2);
    dup2(logfd, 2);
    CHECK_RC(cuMemAlloc_v2(&q, 100 * MiB), CUDA_SUCCESS);
    /* A process started after the rebuild shares the rebuilt ledger. */
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "unrecoverable_child", (char *)NULL);
        _exit(5);
    }
    CHECK(wait_status(pid) == 0, "a new process could not use the rebuilt ledger");
    dup2(saved, 2);
    close(saved);
    char text[8192] = {0};
    CHECK(pread(logfd, text, sizeof text - 1, 0) > 0, "no log line");
    close(logfd);
    unlink(logpath);
    CHECK(strstr(text, "rebuilt") != NULL, "the rebuild is not said: %s", text);
    CHECK(strstr(text, "timed out") == NULL, "a broken lock reported as a timeout: %s", text);
    CHECK(usage(0).used == 150 * MiB, "the figures were not carried over: %llu MiB in use",
          (unsigned long long)(usage(0).used / MiB));
    struct gpc_ledger *r = map_ledger();
    CHECK(r != l && atomic_load(&r->dev[0].refused_driver) == 3 && atomic_load(&r->dev[0].held_at_exit) >= 5 * MiB &&
              atomic_load(&r->dev[0].driver_limit) == 4096 * MiB && atomic_load(&r->dev[0].context_count) >= contexts,
          "the rebuilt ledger lost figures: refused by the driver %llu, held at exit %llu, driver limit %llu, "
          "contexts %llu (was %llu)",
          (unsigned long long)atomic_load(&r->dev[0].refused_driver),
          (unsigned long long)atomic_load(&r->dev[0].held_at_exit),
          (unsigned long long)atomic_load(&r->dev[0].driver_limit),
          (unsigned long long)atomic_load(&r->dev[0].context_count), (unsigned long long)contexts);
    munmap(r, sizeof *r);
    CHECK_RC(cuMemFree_v2(q), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "%llu bytes left in use", (unsigned long long)usage(0).used);
    munmap(l, sizeof *l);
}

static void case_unrecoverable_child(void)
{
    context_holding(0, 50 * MiB);
    CHECK(usage(0).used == 200 * MiB, "the new process sees %llu MiB in use, not 200",
          (unsigned long long)(usage(0).used / MiB));
}

static void case_startzero(void)
{
    /* The ledger exists and belongs to this user: fill its process table as a hostile writer would. */
    pid_t pid = fork();
    if (pid == 0) {
        make_context(0); /* creates the ledger, then leaves at exit */
        exit(0);
    }
    wait_status(pid);
    struct gpc_ledger *l = map_ledger();
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        atomic_store(&l->proc[i].start_time, 0);
        atomic_store(&l->proc[i].pid, 1);
    }
    context_holding(0, 100 * MiB);
    figures("after a table full of forged entries");
    munmap(l, sizeof *l);
}

int main(int argc, char **argv)
{
    self = argv[0];
    const char *c = argc > 1 ? argv[1] : "";
    static const struct test_case cases[] = {
        {"ctxdestroy", case_ctxdestroy},
        {"primary", case_primary},
        {"poolfree", case_poolfree},
        {"poolmany", case_poolmany},
        {"exit", case_exit},
        {"kill", case_kill},
        {"exec", case_exec},
        {"exec_child", case_exec_child},
        {"limit", case_limit},
        {"limit_small", case_limit_small},
        {"lockheld", case_lockheld},
        {"unrecoverable", case_unrecoverable},
        {"unrecoverable_child", case_unrecoverable_child},
        {"sparse", case_sparse},
        {"failafter", case_failafter},
        {"forkctx", case_forkctx},
        {"startzero", case_startzero},
    };
    RUN_CASE(cases, c);
    return test_result();
}
