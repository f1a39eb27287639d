/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli_alloc.c OP...: a CUDA program for the `gpucap` command's tests, driven by its arguments.
 *   a<N>      allocate N MiB with cuMemAlloc_v2 and keep it (a denial is recorded, not fatal)
 *   n<N>      allocate N MiB in the named function cli_named_allocator (for backtraces)
 *   F         free everything held
 *   d<N>      make device N's primary context current (later allocations are on device N)
 *   s<N>      sleep N tenths of a second
 *   c:OPS     run `cli_alloc OPS` (OPS comma-separated) as a child process and wait for it
 *   p         print the fake driver's own record of device 0: "fake peak=.. allocs=.. frees=.."
 *   m         print "unwind=1" if libunwind is mapped into this process, else "unwind=0"
 *   i         print what the program is told: "info free=.. total=.." (cuMemGetInfo_v2)
 *   f<P>      size itself as a framework does: allocate P% of the free memory cuMemGetInfo_v2 reports
 *   K         die by SIGKILL here;  X  end with _exit(0) here (neither runs an exit handler)
 *   R         register an exit handler that releases device 0's primary context, as the CUDA
 *             runtime does at its start (it runs at exit before the library's destructor)
 * At the end prints "results=" and one character per allocation attempt: 0 admitted, 1 failed.
 * Exit 0, or the child's failure.
 */
#include "common.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_HELD 1024

static CUdeviceptr held[MAX_HELD];
static int nheld;
static char results[4096];
static int nresults;

static void record(CUresult rc, CUdeviceptr p)
{
    if (nresults < (int)sizeof results - 1)
        results[nresults++] = rc == CUDA_SUCCESS ? '0' : '1';
    if (rc == CUDA_SUCCESS && nheld < MAX_HELD)
        held[nheld++] = p;
}

__attribute__((noinline)) void cli_named_allocator(unsigned long long mib)
{
    CUdeviceptr p = 0;
    CUresult rc = cuMemAlloc_v2(&p, mib * MiB);
    record(rc, p);
    __asm__ volatile("" ::: "memory"); /* not a tail call: keep this frame on the stack */
}

static int run_child(const char *self, const char *ops)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", ops);
    char *args[64];
    int n = 0;
    args[n++] = (char *)self;
    for (char *t = strtok(buf, ","); t && n < 63; t = strtok(NULL, ","))
        args[n++] = t;
    args[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void release_primary(void)
{
    cuDevicePrimaryCtxRelease_v2(0);
}

int main(int argc, char **argv)
{
    make_context(0);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        switch (op[0]) {
        case 'a': {
            CUdeviceptr p = 0;
            CUresult arc = cuMemAlloc_v2(&p, strtoull(op + 1, NULL, 10) * MiB);
            record(arc, p);
            break;
        }
        case 'n':
            cli_named_allocator(strtoull(op + 1, NULL, 10));
            break;
        case 'd':
            make_context(atoi(op + 1));
            break;
        case 'F':
            while (nheld > 0)
                cuMemFree_v2(held[--nheld]);
            break;
        case 's':
            usleep((useconds_t)atoi(op + 1) * 100000);
            break;
        case 'R':
            atexit(release_primary);
            break;
        case 'K':
            fflush(stdout);
            raise(SIGKILL);
            break;
        case 'X':
            fflush(stdout);
            _exit(0);
        case 'c':
            if (run_child(argv[0], op + 2) != 0)
                rc = 1;
            break;
        case 'p':
            printf("fake peak=%llu allocs=%llu frees=%llu\n", (unsigned long long)fakecuda_peak(0),
                   (unsigned long long)fakecuda_alloc_count(0), (unsigned long long)fakecuda_free_count(0));
            break;
        case 'i': {
            size_t fr = 0, tot = 0;
            cuMemGetInfo_v2(&fr, &tot);
            printf("info free=%zu total=%zu\n", fr, tot);
            break;
        }
        case 'f': {
            size_t fr = 0, tot = 0;
            cuMemGetInfo_v2(&fr, &tot);
            CUdeviceptr p = 0;
            CUresult arc = cuMemAlloc_v2(&p, fr * strtoull(op + 1, NULL, 10) / 100);
            record(arc, p);
            break;
        }
        case 'm': {
            FILE *f = fopen("/proc/self/maps", "r");
            char line[512];
            bool found = false;
            while (f && fgets(line, sizeof line, f))
                found |= strstr(line, "libunwind") != NULL;
            if (f)
                fclose(f);
            printf("unwind=%d\n", found);
            break;
        }
        default:
            fprintf(stderr, "cli_alloc: unknown op '%s'\n", op);
            return 2;
        }
    }
    results[nresults] = '\0';
    printf("results=%s\n", results);
    return rc;
}
