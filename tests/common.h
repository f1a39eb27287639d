/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common.h: what the test programs share: the checks (check.h), cases by name, and a table of
 * driver entry points filled through one of the three routes a program can take to the driver.
 *
 * Tests link the fake libcuda.so.1 (tests/fake) and run with libgpucap.so preloaded by ctest.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#ifndef GPUCAP_TESTS_COMMON_H
#define GPUCAP_TESTS_COMMON_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fakecuda.h"
#include "gpucap.h"

#define MiB (1024ULL * 1024)
#define GiB (1024ULL * MiB)

#define CHECK_RC(call, want)                                                                      \
    do {                                                                                          \
        CUresult rc_ = (call);                                                                    \
        CHECK(rc_ == (want), "%s returned %d, want %d", #call, (int)rc_, (int)(want));            \
    } while (0)

/* A test program's cases by name: `gpucap_test(... COMMAND prog CASE)` runs one. */
struct test_case {
    const char *name;
    void (*run)(void);
};
/* Runs the case of `cases` named `name`; exits 1 when there is none. */
static inline void run_case(const struct test_case *cases, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, name) == 0) {
            cases[i].run();
            return;
        }
    fprintf(stderr, "unknown case '%s'\n", name);
    exit(1);
}
#define RUN_CASE(cases, name) run_case((cases), sizeof(cases) / sizeof((cases)[0]), (name))

enum route { ROUTE_DIRECT, ROUTE_DLSYM, ROUTE_DLVSYM, ROUTE_PROCADDR, ROUTE_PROCADDR_PTSZ, ROUTE_PROCADDR_LEGACY };

static inline int parse_route(const char *s)
{
    static const char *const names[] = {"direct", "dlsym", "dlvsym", "procaddr", "procaddr_ptsz", "procaddr_legacy"};
    for (int i = 0; i < 6; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/*
 * DEFINE_FILL_API(fn, type, LIST) defines `static void fn(type *a, int route)`, which fills every
 * field of LIST(X) -- X(field, base name, version) -- through one route: direct, the linked symbols
 * (LD_PRELOAD interposition); dlsym/dlvsym, lookups on a dlopen'ed libcuda handle; procaddr*, the
 * resolver obtained as the CUDA runtime does (dlsym "cuGetProcAddress_v2", then asking it for
 * "cuGetProcAddress" itself), with flags 0 or per-thread, or the legacy 4-argument one.
 */
#define FILL_DIRECT(f, base, ver) a->f = f;
#define FILL_DLSYM(f, base, ver)                                                   \
    a->f = (void *)(route == ROUTE_DLSYM ? dlsym(h, #f) : dlvsym(h, #f, ""));      \
    REQUIRE(a->f != NULL, "lookup of %s failed", #f);
#define FILL_GPA1(f, base, ver) \
    REQUIRE(gpa1(#base, (void **)&a->f, ver, 0) == CUDA_SUCCESS && a->f, "%s@%d", #base, ver);
#define FILL_GPA2(f, base, ver)                                                                   \
    REQUIRE(gpa2(#base, (void **)&a->f, ver, flags, &st) == CUDA_SUCCESS && a->f &&               \
                st == CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d", #base, ver);
#define DEFINE_FILL_API(fn, type, LIST)                                                                   \
    static void fn(type *a, int route)                                                                    \
    {                                                                                                     \
        memset(a, 0, sizeof *a);                                                                          \
        if (route == ROUTE_DIRECT) {                                                                      \
            LIST(FILL_DIRECT)                                                                             \
            return;                                                                                       \
        }                                                                                                 \
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);                                          \
        REQUIRE(h != NULL, "dlopen libcuda.so.1: %s", dlerror());                                         \
        if (route == ROUTE_DLSYM || route == ROUTE_DLVSYM) {                                              \
            LIST(FILL_DLSYM)                                                                              \
            return;                                                                                       \
        }                                                                                                 \
        PFN_cuGetProcAddress_v12000 gpa2 = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2"); \
        REQUIRE(gpa2 != NULL, "no cuGetProcAddress_v2");                                                  \
        CUdriverProcAddressQueryResult st;                                                                \
        void *p = NULL;                                                                                   \
        if (route == ROUTE_PROCADDR_LEGACY) {                                                             \
            REQUIRE(gpa2("cuGetProcAddress", &p, 11030, 0, &st) == CUDA_SUCCESS && p, "resolver@11030");  \
            PFN_cuGetProcAddress_v11030 gpa1 = (PFN_cuGetProcAddress_v11030)p;                            \
            LIST(FILL_GPA1)                                                                               \
            return;                                                                                       \
        }                                                                                                 \
        REQUIRE(gpa2("cuGetProcAddress", &p, 12000, 0, &st) == CUDA_SUCCESS && p, "resolver@12000");      \
        gpa2 = (PFN_cuGetProcAddress_v12000)p;                                                            \
        cuuint64_t flags = route == ROUTE_PROCADDR_PTSZ ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0; \
        LIST(FILL_GPA2)                                                                                   \
    }

/* cuInit and a context on device `dev`, made current. */
static inline CUcontext make_context(int dev)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    CUdevice d;
    REQUIRE(cuDeviceGet(&d, dev) == CUDA_SUCCESS, "cuDeviceGet(%d)", dev);
    CUcontext ctx;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, d) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
    return ctx;
}

/* make_context(dev), then `bytes` allocated there (a failed check when refused): the pointer. */
static inline CUdeviceptr context_holding(int dev, uint64_t bytes)
{
    make_context(dev);
    CUdeviceptr p = 0;
    CHECK_RC(cuMemAlloc_v2(&p, bytes), CUDA_SUCCESS);
    return p;
}

/* The total cuMemGetInfo_v2 reports in the current context (the program stops when it fails). */
static inline size_t total_now(void)
{
    size_t f = 0, t = 0;
    REQUIRE(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS, "cuMemGetInfo_v2");
    return t;
}

/* gpucap's own figures for a device, or all zero. */
static inline struct gpucap_usage usage(int dev)
{
    /* Looked up at run time: the tests do not link the library, they run with it preloaded. */
    int (*get)(int, struct gpucap_usage *) = (int (*)(int, struct gpucap_usage *))dlsym(RTLD_DEFAULT, "gpucap_device_usage");
    REQUIRE(get != NULL, "libgpucap.so is not preloaded");
    struct gpucap_usage u = {0};
    get(dev, &u);
    return u;
}

/* Writes `text` over the open file `fd` from its start, as gpucap-agent rewrites a settings file in
 * place: the same inode, never shorter than it was (a comment line pads it to the old length, so a
 * reader never sees the old tail). */
static inline void write_in_place(int fd, const char *text)
{
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0, "fstat");
    char buf[4096];
    size_t n = strlen(text);
    REQUIRE(n < sizeof buf && st.st_size <= (off_t)sizeof buf, "text");
    memcpy(buf, text, n);
    if ((off_t)n < st.st_size) {
        size_t pad = (size_t)st.st_size - n;
        buf[n] = ';';
        memset(buf + n + 1, ' ', pad - 1);
        buf[n + pad - 1] = '\n';
        n += pad;
    }
    REQUIRE(pwrite(fd, buf, n, 0) == (ssize_t)n, "pwrite");
}

/* Runs this program again in a child, argv[0] `name` and argv[1] `mode`, to its end (stdio flushed
 * first): its wait status. */
static inline int run_self(const char *name, const char *mode)
{
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        execl("/proc/self/exe", name, mode, (char *)NULL);
        _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

extern char **environ;

/* Starts argv[0] (a path) with `argv` and this environment less LD_PRELOAD (a tool or helper, not a
 * CUDA program: no library under it), its stdout into a pipe whose read end is *out: the pid. */
static inline pid_t spawn_unpreloaded(char *const argv[], int *out)
{
    char *env[128];
    int e = 0;
    for (char **v = environ; *v && e < 126; v++)
        if (strncmp(*v, "LD_PRELOAD=", 11) != 0)
            env[e++] = *v;
    env[e] = NULL;
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    REQUIRE(posix_spawn(&pid, argv[0], &fa, NULL, argv, env) == 0, "spawn %s", argv[0]);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    *out = fds[0];
    return pid;
}

#endif
