/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c: the exec family, so that the share of an image that execs is given back when its
 * memory is: at the exec.
 *
 * The driver frees a process's memory at exec (its descriptors are close-on-exec), but the pid and
 * the start time stay, and the new image may never call CUDA. The entry's lock (common/ledger.h),
 * held through a close-on-exec descriptor, goes with the exec, hooked or not; before the exec this
 * process also marks its ledger entry "exec under way" (gpc_ledger_exec_begin), which a reader that
 * cannot ask the lock keeps as alive. An exec that fails returns here and the mark is cleared: the
 * share stays.
 *
 * Every exported exec is hooked, because glibc's execvp, execl... call the kernel through an
 * internal alias, not through execve; the real ones are the driver layer's (driver/resolve.c). A
 * process that never touched CUDA only passes through (no file read, no thread). The raw system
 * call (a static program, Go's syscall package) is not seen here; the lock still goes with it.
 */
#include "common/defs.h"
#include "core/ledger_map.h"
#include "driver/resolve.h"
#include "hooks/init.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>

/* The real call (driver/resolve.c, libc's), around it the mark of this process's entry. */
#define CALL_REAL(name, args)                                      \
    do {                                                           \
        __typeof__(gpc_real_exec()->name) real = gpc_real_exec()->name; \
        if (!real) {                                               \
            errno = ENOSYS;                                        \
            return -1;                                             \
        }                                                          \
        bool marked = gpc_ledger_exec_begin();                     \
        int rc = real args;                                        \
        int saved = errno;                                         \
        gpc_ledger_exec_end(marked);                               \
        errno = saved;                                             \
        return rc;                                                 \
    } while (0)

GPC_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    CALL_REAL(execve, (path, argv, envp));
}

GPC_EXPORT int execv(const char *path, char *const argv[])
{
    CALL_REAL(execv, (path, argv));
}

GPC_EXPORT int execvp(const char *file, char *const argv[])
{
    CALL_REAL(execvp, (file, argv));
}

GPC_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    CALL_REAL(execvpe, (file, argv, envp));
}

GPC_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    CALL_REAL(fexecve, (fd, argv, envp));
}

GPC_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    CALL_REAL(execveat, (dirfd, path, argv, envp, flags));
}

/* The list forms: their arguments gathered into an array on the stack, then the vector form. */
#define GATHER(first, ap, argv, n)                     \
    va_start(ap, first);                               \
    size_t n = 1;                                      \
    while (va_arg(ap, char *))                         \
        n++;                                           \
    va_end(ap);                                        \
    char *argv[n + 1];                                 \
    argv[0] = (char *)(first);                         \
    va_start(ap, first);                               \
    for (size_t i_ = 1; i_ <= n; i_++)                 \
        argv[i_] = va_arg(ap, char *);

GPC_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, n)
    va_end(ap);
    return execv(path, argv);
}

GPC_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, n)
    va_end(ap);
    return execvp(file, argv);
}

GPC_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, n)
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
