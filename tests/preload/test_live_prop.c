/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_live_prop.c [STEPS]: a property test of the invariant at the head of libgpucap/core/lease.c
 * under live changes. Random interleavings (TEST_SEED, printed) of allocate, free, fork, exec,
 * exit, SIGKILL, lower and raise, over up to 4 worker processes of 2 threads each (an allocation
 * step may run on both threads at once), on one shared ledger, the budget changed by rewriting the
 * settings file as gpucap-agent does (the text, then its generation line). After every step, with
 * the fake driver's record of the card as the truth:
 *   - an allocation admitted leaves the card within the limit in force (nothing admitted past it,
 *     whatever the processes held when it was lowered);
 *   - what the ledger counts for the processes that hold device memory (its entries' locks: fork
 *     children that keep their parent's device files included) is exactly what the card holds;
 *   - the ledger's limit is the one the file says (no fork, exec, claim or reap brings back an
 *     older one).
 * Bounded (STEPS, default 120) so that CI stays fast; TEST_SEED repeats a run.
 */
#include "common.h"
#include "ledger_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4
#define THREADS 2
#define HELD 32

enum op { OP_NONE, OP_ALLOC, OP_FREE, OP_FORK, OP_EXEC, OP_EXIT, OP_QUIT };

struct cell {
    _Atomic int seq, done; /* a command is pending while seq != done */
    _Atomic int op;
    _Atomic uint64_t bytes;
    _Atomic int result; /* 1 admitted / done, 0 denied, -1 failed */
};
struct slot {
    _Atomic int pid;   /* 0: free */
    _Atomic int ready; /* the worker (or its image after an exec) serves its cells */
    struct cell cell[THREADS];
};
struct shared {
    struct slot slot[SLOTS];
};
static struct shared *sh;
static char settings[1024];
static unsigned long long generation;

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

/* ---- the settings file, rewritten as gpucap-agent does ---- */

static void write_limit(uint64_t mib)
{
    char text[256], line[40];
    int n = snprintf(text, sizeof text, "; generation = %017llx\n[gpucap]\ncontext_reserve = 0\nmemory_limit = %lluMiB\n",
                     generation, (unsigned long long)mib);
    int fd = open(settings, O_WRONLY | O_CREAT, 0644);
    REQUIRE(fd >= 0, "open %s", settings);
    struct stat st;
    fstat(fd, &st);
    while (n < st.st_size && n < (int)sizeof text - 2)
        text[n++] = ' '; /* never shorter: blanks on the last line */
    text[n - 1] = '\n';
    REQUIRE(pwrite(fd, text, (size_t)n, 0) == n, "pwrite");
    int m = snprintf(line, sizeof line, "; generation = %017llx\n", ++generation);
    REQUIRE(pwrite(fd, line, (size_t)m, 0) == m, "pwrite generation");
    close(fd);
}

/* ---- workers ---- */

static int my_slot;
static CUcontext ctx;
static CUdeviceptr held[THREADS][HELD];

static void serve(int t)
{
    struct cell *c = &sh->slot[my_slot].cell[t];
    cuCtxSetCurrent(ctx);
    unsigned seed = (unsigned)getpid() * 31u + (unsigned)t;
    for (;;) {
        int seq = atomic_load(&c->seq);
        if (seq == atomic_load(&c->done)) {
            sleep_us(200);
            continue;
        }
        int op = atomic_load(&c->op), result = 1;
        if (op == OP_ALLOC) {
            int k = 0;
            while (k < HELD && held[t][k])
                k++;
            CUdeviceptr p = 0;
            result = k < HELD && cuMemAlloc_v2(&p, atomic_load(&c->bytes)) == CUDA_SUCCESS;
            if (result)
                held[t][k] = p;
        } else if (op == OP_FREE) {
            int n = 0, pick[HELD];
            for (int k = 0; k < HELD; k++)
                if (held[t][k])
                    pick[n++] = k;
            if (n) {
                int k = pick[rand_r(&seed) % n];
                result = cuMemFree_v2(held[t][k]) == CUDA_SUCCESS;
                held[t][k] = 0;
            }
        } else if (op == OP_FORK) {
            /* The child takes the free slot given in `bytes` and serves it, holding nothing of its
             * own (its parent's device files it keeps). */
            int to = (int)atomic_load(&c->bytes);
            pid_t pid = fork();
            if (pid == 0) {
                char arg[16];
                snprintf(arg, sizeof arg, "%d", to);
                execl("/proc/self/exe", "test_live_prop", "worker", arg, (char *)NULL);
                _exit(3);
            }
            result = pid > 0;
        } else if (op == OP_EXEC) {
            atomic_store(&sh->slot[my_slot].ready, 0);
            atomic_store(&c->done, seq);
            char arg[16];
            snprintf(arg, sizeof arg, "%d", my_slot);
            execl("/proc/self/exe", "test_live_prop", "worker", arg, (char *)NULL);
            _exit(3);
        } else if (op == OP_EXIT) {
            atomic_store(&c->result, 1);
            atomic_store(&c->done, seq);
            exit(0); /* holding what it holds: the driver frees it as the process goes */
        }
        atomic_store(&c->result, result);
        atomic_store(&c->done, seq);
    }
}

static void *serve_thread(void *arg)
{
    serve((int)(intptr_t)arg);
    return NULL;
}

/* A worker in `slot` (a fork child, or an image after an exec: it starts from nothing). */
static void worker(int slot)
{
    my_slot = slot;
    signal(SIGCHLD, SIG_IGN); /* its fork children are reaped as they go */
    ctx = make_context(0);
    atomic_store(&sh->slot[slot].pid, getpid());
    for (int t = 0; t < THREADS; t++)
        atomic_store(&sh->slot[slot].cell[t].done, atomic_load(&sh->slot[slot].cell[t].seq));
    atomic_store(&sh->slot[slot].ready, 1);
    pthread_t th;
    pthread_create(&th, NULL, serve_thread, (void *)(intptr_t)1);
    serve(0);
}

/* ---- the coordinator ---- */

static bool wait_ready(int s)
{
    for (int i = 0; i < 20000; i++) {
        if (atomic_load(&sh->slot[s].ready))
            return true;
        sleep_us(100);
    }
    return false;
}

/* Sends `op` to thread t of slot s (not waiting). */
static void send(int s, int t, int op, uint64_t bytes)
{
    struct cell *c = &sh->slot[s].cell[t];
    atomic_store(&c->op, op);
    atomic_store(&c->bytes, bytes);
    atomic_fetch_add(&c->seq, 1);
}

static int wait_done(int s, int t)
{
    struct cell *c = &sh->slot[s].cell[t];
    for (int i = 0; i < 50000; i++) {
        if (atomic_load(&c->seq) == atomic_load(&c->done))
            return atomic_load(&c->result);
        sleep_us(100);
    }
    REQUIRE(0, "slot %d thread %d did not answer op %d", s, t, atomic_load(&c->op));
    return -1;
}

/* Until process `pid` is gone (reaped: SIGCHLD is ignored), every thread of it with it: a leader
 * that is a zombie while its other threads still exit still holds its files. */
static void wait_gone(pid_t pid)
{
    for (int i = 0; i < 50000 && (kill(pid, 0) == 0 || errno != ESRCH); i++)
        sleep_us(100);
}

static int free_slot(void)
{
    for (int s = 0; s < SLOTS; s++)
        if (!atomic_load(&sh->slot[s].pid))
            return s;
    return -1;
}

static int live_slot(unsigned *seed)
{
    int n = 0, pick[SLOTS];
    for (int s = 0; s < SLOTS; s++)
        if (atomic_load(&sh->slot[s].pid))
            pick[n++] = s;
    return n ? pick[rand_r(seed) % n] : -1;
}

static void start_worker(int s)
{
    atomic_store(&sh->slot[s].ready, 0);
    atomic_store(&sh->slot[s].pid, -1); /* taken */
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", s);
        execl("/proc/self/exe", "test_live_prop", "worker", arg, (char *)NULL);
        _exit(3);
    }
    REQUIRE(wait_ready(s), "worker %d did not start", s);
}

static void coordinator(int steps)
{
    unsigned seed0 = getenv("TEST_SEED") ? (unsigned)strtoul(getenv("TEST_SEED"), NULL, 10)
                                         : (unsigned)time(NULL) ^ (unsigned)getpid() * 2654435761u;
    unsigned seed = seed0;
    printf("TEST_SEED=%u\n", seed0);
    fflush(stdout);
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* fork children of workers that left are this process's */
    signal(SIGCHLD, SIG_IGN);
    uint64_t limit = 256;
    write_limit(limit);
    start_worker(0);
    start_worker(1);
    struct gpc_ledger *l = map_ledger();
    int probe = open(getenv("GPUCAP_LEDGER"), O_RDONLY | O_CLOEXEC);
    REQUIRE(probe >= 0, "open the ledger");
    const char *names[] = {"", "alloc", "free", "fork", "exec", "exit", "kill", "lower", "raise", "pair"};
    /* Since the last change: which slots made an admission (each looks first). */
    bool looked[SLOTS] = {false};
    for (int step = 0; step < steps && !failures; step++) {
        int what = (int)(rand_r(&seed) % 100), s = live_slot(&seed), op;
        if (s < 0) {
            start_worker(free_slot());
            continue;
        }
        op = what < 34 ? 1 : what < 56 ? 2 : what < 62 ? 3 : what < 67 ? 4 : what < 71 ? 5 : what < 75 ? 6
             : what < 84 ? 7 : what < 92 ? 8 : 9;
        uint64_t before = fakecuda_outstanding(0);
        bool admitted = false;
        char said[96];
        snprintf(said, sizeof said, "step %d (%s, slot %d, limit %llu MiB)", step, names[op], s,
                 (unsigned long long)limit);
        switch (op) {
        case 1: {
            int t = (int)(rand_r(&seed) % THREADS);
            send(s, t, OP_ALLOC, (1 + rand_r(&seed) % 48) * MiB);
            admitted = wait_done(s, t) == 1;
            break;
        }
        case 9: /* both threads at once */
            for (int t = 0; t < THREADS; t++)
                send(s, t, OP_ALLOC, (1 + rand_r(&seed) % 40) * MiB);
            for (int t = 0; t < THREADS; t++)
                admitted |= wait_done(s, t) == 1;
            break;
        case 2: {
            int t = (int)(rand_r(&seed) % THREADS);
            send(s, t, OP_FREE, 0);
            wait_done(s, t);
            break;
        }
        case 3: {
            int to = free_slot();
            if (to < 0)
                break;
            atomic_store(&sh->slot[to].ready, 0);
            atomic_store(&sh->slot[to].pid, -1);
            send(s, 0, OP_FORK, (uint64_t)to);
            wait_done(s, 0);
            REQUIRE(wait_ready(to), "%s: the fork child did not start", said);
            break;
        }
        case 4:
            send(s, 0, OP_EXEC, 0);
            wait_done(s, 0);
            REQUIRE(wait_ready(s), "%s: the image after exec did not start", said);
            break;
        case 5:
        case 6: {
            pid_t pid = atomic_load(&sh->slot[s].pid);
            if (op == 5) {
                send(s, 0, OP_EXIT, 0);
                wait_done(s, 0);
            } else {
                kill(pid, SIGKILL);
            }
            wait_gone(pid);
            atomic_store(&sh->slot[s].pid, 0);
            break;
        }
        case 7:
        case 8:
            limit = op == 7 ? 32 + rand_r(&seed) % 200 : 128 + rand_r(&seed) % 256;
            write_limit(limit);
            memset(looked, 0, sizeof looked);
            break;
        }
        if (op == 1 || op == 9)
            looked[s] = true;
        if (op == 3 || op == 4 || op == 5 || op == 6)
            looked[s] = op == 3 ? looked[s] : false; /* a new image, or a slot left: not looked yet */
        /* The card as it is now (dead processes' memory back) against the ledger's holders. */
        uint64_t card = fakecuda_outstanding(0), counted = gpc_ledger_in_use_live(l, 0, probe);
        if (admitted)
            CHECK(card <= limit * MiB, "%s: an allocation was admitted past the limit: the card holds %llu MiB (it "
                  "held %llu MiB before)", said, (unsigned long long)(card / MiB), (unsigned long long)(before / MiB));
        CHECK(counted == card, "%s: the ledger counts %llu bytes for the processes holding memory, the card holds %llu",
              said, (unsigned long long)counted, (unsigned long long)card);
        if (counted != card && getenv("TEST_VERBOSE"))
            for (uint32_t i = 0; i < atomic_load(&l->procs_used); i++)
                if (atomic_load(&l->proc[i].pid))
                    fprintf(stderr, "  entry %u: pid %d start %llu locked %u held %d alive %d in use %llu\n", i,
                            atomic_load(&l->proc[i].pid), (unsigned long long)atomic_load(&l->proc[i].start_time),
                            atomic_load(&l->proc[i].locked), gpc_ledger_lock_held(probe, (int)i),
                            gpc_ledger_entry_live(l, (int)i, probe),
                            (unsigned long long)gpc_ledger_share_in_use(&l->proc[i].share[0]));
        /* Every admission looks first: once one did, the ledger's limit is never above the file's
         * (a lowering is in force), and once every live process did (each asks the new figure),
         * it is the file's (a raise is). */
        uint64_t in_force = atomic_load(&l->dev[0].slot.limit);
        bool all = true;
        for (int k = 0; k < SLOTS; k++)
            all &= !atomic_load(&sh->slot[k].pid) || looked[k];
        if (op == 1 || op == 9)
            CHECK(in_force <= limit * MiB, "%s: the ledger's limit is %llu MiB, above the file's", said,
                  (unsigned long long)(in_force / MiB));
        if ((op == 1 || op == 9) && all)
            CHECK(in_force == limit * MiB, "%s: every process looked, the ledger's limit is %llu MiB", said,
                  (unsigned long long)(in_force / MiB));
    }
    if (failures)
        printf("failed with TEST_SEED=%u\n", seed0);
    for (int s = 0; s < SLOTS; s++) {
        pid_t pid = atomic_load(&sh->slot[s].pid);
        if (pid > 0) {
            kill(pid, SIGKILL);
            wait_gone(pid);
        }
    }
}

int main(int argc, char **argv)
{
    snprintf(settings, sizeof settings, "%s.ini", getenv("GPUCAP_LEDGER"));
    char shm[1100];
    snprintf(shm, sizeof shm, "%s.prop", getenv("GPUCAP_LEDGER"));
    bool is_worker = argc == 3 && strcmp(argv[1], "worker") == 0;
    setenv("GPUCAP_CONFIG", settings, 1);
    unsetenv("GPUCAP_MEMORY_LIMIT");
    if (!is_worker) {
        unlink(settings);
        unlink(shm);
    }
    int fd = open(shm, O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0 && ftruncate(fd, sizeof *sh) == 0, "the shared state");
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    REQUIRE(sh != MAP_FAILED, "mmap");
    if (is_worker) {
        prctl(PR_SET_PDEATHSIG, 0);
        worker(atoi(argv[2]));
        return 0;
    }
    coordinator(argc > 1 ? atoi(argv[1]) : 120);
    unlink(shm);
    return test_result();
}
