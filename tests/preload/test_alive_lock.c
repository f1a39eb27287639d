/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_alive_lock.c CASE: the liveness lock of a process's ledger entry (common/ledger.h,
 * GPC_LEDGER_ALIVE_AT), which a reader in another PID namespace (gpucap-exporter) asks the kernel
 * about: held while the process lives, gone when it exits, is killed or execs, a fork child's own.
 * Each check runs in a forked checker that opens the ledger itself: a process that closed a
 * descriptor of its own ledger would drop its own lock (POSIX record locks), so this one never does.
 *   held   after its first allocation this process's entry says it holds the lock, and does; a
 *          reader's open and close of the file changes nothing
 *   fork   a fork child that allocates holds its own lock beside the parent's; once it exited
 *          (normally, holding memory: its share stays in the ledger) its entry is gone, the
 *          parent's is not
 *   kill   a child killed holding memory: its entry is gone at once
 *   exec   a child that allocated, then exec'd a program that does not touch CUDA: its entry is
 *          gone while its pid lives on
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ledger.h"

enum { LOCKED = 1, GONE = 0, NO_FLAG = 2, NO_ENTRY = 3, CANNOT = 4 };

/* In a checker process: what the ledger says of the entry of `pid` (an exit status above). */
static int check_entry(pid_t pid)
{
    int fd = open(getenv("GPUCAP_LEDGER"), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CANNOT;
    struct gpc_ledger *l = mmap(NULL, sizeof *l, PROT_READ, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED)
        return CANNOT;
    int rc = NO_ENTRY;
    for (int i = 0; i < GPC_LEDGER_PROCS && rc == NO_ENTRY; i++) {
        if (atomic_load(&l->proc[i].pid) != pid)
            continue;
        if (atomic_load(&l->proc[i].alive_lock) != 1)
            rc = NO_FLAG;
        else
            rc = gpc_ledger_proc_locked(fd, i) == 1 ? LOCKED : gpc_ledger_proc_locked(fd, i) == 0 ? GONE : CANNOT;
    }
    close(fd);
    return rc;
}

/* What a reader in another process finds for `pid`. */
static int probe(pid_t pid)
{
    fflush(NULL);
    pid_t c = fork();
    if (c == 0)
        _exit(check_entry(pid));
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : CANNOT;
}

static const char *name_of(int r)
{
    return r == LOCKED ? "locked" : r == GONE ? "gone" : r == NO_FLAG ? "no lock said" : r == NO_ENTRY ? "no entry"
                                                                                                      : "cannot tell";
}

static void allocate(size_t mib)
{
    CUdeviceptr p;
    CUcontext ctx;
    CHECK_RC(cuInit(0), CUDA_SUCCESS);
    CHECK_RC(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, mib * MiB), CUDA_SUCCESS);
}

/* Waits (up to 5 s) until the entry of pid is what `want` says. */
static int wait_for(pid_t pid, int want)
{
    int r = probe(pid);
    for (int i = 0; i < 500 && r != want; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        r = probe(pid);
    }
    return r;
}

static void case_held(void)
{
    allocate(8);
    int r = probe(getpid());
    CHECK(r == LOCKED, "this process's entry: %s", name_of(r));
    r = probe(getpid());
    CHECK(r == LOCKED, "after a reader opened and closed the file: %s", name_of(r));
}

/* A child that allocates, says so on `ready`, and waits on `go` (then exits, or execs `prog`). */
static pid_t child(int ready[2], int go[2], const char *prog)
{
    CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        allocate(16);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(3);
        if (prog) {
            execl(prog, prog, "3", (char *)NULL);
            _exit(4);
        }
        exit(0); /* holding its 16 MiB: the library gives them back only once a reaper sees it dead */
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "the child did not allocate");
    return pid;
}

static void case_fork(void)
{
    allocate(8);
    int ready[2], go[2];
    pid_t pid = child(ready, go, NULL);
    int r = probe(pid);
    CHECK(r == LOCKED, "the fork child's own entry: %s", name_of(r));
    r = probe(getpid());
    CHECK(r == LOCKED, "the parent's entry beside the child's: %s", name_of(r));
    CHECK(write(go[1], "x", 1) == 1, "go");
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: %d", st);
    r = probe(pid);
    CHECK(r == GONE, "the child that exited: %s", name_of(r));
    r = probe(getpid());
    CHECK(r == LOCKED, "the parent after its child left: %s", name_of(r));
}

static void case_kill(void)
{
    int ready[2], go[2];
    pid_t pid = child(ready, go, NULL);
    int r = probe(pid);
    CHECK(r == LOCKED, "the child before the kill: %s", name_of(r));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    r = probe(pid);
    CHECK(r == GONE, "the child killed holding memory: %s", name_of(r));
}

static void case_exec(void)
{
    int ready[2], go[2];
    pid_t pid = child(ready, go, "/bin/sleep");
    int r = probe(pid);
    CHECK(r == LOCKED, "the child before its exec: %s", name_of(r));
    CHECK(write(go[1], "x", 1) == 1, "go");
    r = wait_for(pid, GONE);
    CHECK(r == GONE, "the child after its exec: %s", name_of(r));
    CHECK(kill(pid, 0) == 0, "the exec'd image is not running (the check is about a live pid)");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"held", case_held}, {"fork", case_fork}, {"kill", case_kill}, {"exec", case_exec}};
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return test_result();
        }
    fprintf(stderr, "usage: %s held|fork|kill|exec\n", argv[0]);
    return 2;
}
