/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glibc_floor.h: keeps libgpucap.so loadable with glibc 2.17 (CentOS 7, UBI 8, Ubuntu 20.04 CUDA
 * images) although it is built against a current glibc. Included first in every file of the library
 * (-include), on x86-64 and on aarch64, whose oldest glibc symbol versions are all GLIBC_2.17.
 *
 * glibc 2.34 moved libdl and libpthread into libc and gave their functions new symbol versions;
 * the linker picks the newest, and an older ld.so then refuses the whole library ("cannot be
 * preloaded: ignored": the job runs uncapped). Each function the library calls is bound here to
 * its oldest version, which current glibc still provides (not dlsym and dlvsym: the library
 * defines those itself, and finds glibc's without linking them); the library also names
 * libdl.so.2 and libpthread.so.0 as needed, where old glibc defines them. fstat is a
 * function only since 2.33 (before, an inline wrapper of __fxstat), and so is fstatat: we make the
 * system calls, whose struct stat is glibc's on both architectures (binding __fxstat@GLIBC_2.2.5 instead breaks the
 * ThreadSanitizer build, whose runtime defines __fxstat unversioned).
 * tests/unit/test_glibc_floor.sh fails on any symbol version newer than 2.17: a new call into glibc
 * that shows up there gets its line below.
 */
#ifndef GPUCAP_GLIBC_FLOOR_H
#define GPUCAP_GLIBC_FLOOR_H

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GPC_GLIBC_BASE "GLIBC_2.2.5"
#define GPC_GLIBC_ROBUST "GLIBC_2.12"
#define GPC_GLIBC_DLADDR1 "GLIBC_2.3.3"
#else
#define GPC_GLIBC_BASE "GLIBC_2.17"
#define GPC_GLIBC_ROBUST "GLIBC_2.17"
#define GPC_GLIBC_DLADDR1 "GLIBC_2.17"
#endif

#ifndef GPC_DEFINES_DLOPEN /* hooks/dlsym.c defines dlopen and dlmopen itself */
__asm__(".symver dlopen,dlopen@" GPC_GLIBC_BASE);
#endif
__asm__(".symver dlerror,dlerror@" GPC_GLIBC_BASE);
__asm__(".symver dladdr,dladdr@" GPC_GLIBC_BASE);
__asm__(".symver dladdr1,dladdr1@" GPC_GLIBC_DLADDR1);
__asm__(".symver dlclose,dlclose@" GPC_GLIBC_BASE);
__asm__(".symver pthread_once,pthread_once@" GPC_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@" GPC_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@" GPC_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@" GPC_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@" GPC_GLIBC_ROBUST);
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@" GPC_GLIBC_ROBUST);
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_key_create,pthread_key_create@" GPC_GLIBC_BASE);
__asm__(".symver pthread_setspecific,pthread_setspecific@" GPC_GLIBC_BASE);
__asm__(".symver pthread_getspecific,pthread_getspecific@" GPC_GLIBC_BASE);
__asm__(".symver pthread_kill,pthread_kill@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_init,pthread_rwlock_init@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_rdlock,pthread_rwlock_rdlock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_wrlock,pthread_rwlock_wrlock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_trywrlock,pthread_rwlock_trywrlock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_tryrdlock,pthread_rwlock_tryrdlock@" GPC_GLIBC_BASE);
__asm__(".symver pthread_rwlock_unlock,pthread_rwlock_unlock@" GPC_GLIBC_BASE);

#define fstat(fd, buf) ((int)syscall(SYS_fstat, (fd), (buf)))
/* fstatat is a function only since 2.33 too; renameat2 has a wrapper only since 2.28 (the system
 * call is Linux 3.15: older kernels answer ENOSYS, which the caller handles). stdio.h and fcntl.h
 * are included above so that their prototypes are read before these macros exist. */
#define fstatat(dfd, path, buf, flags) ((int)syscall(SYS_newfstatat, (dfd), (path), (buf), (flags)))
/* stat likewise (a function only since 2.33): `struct stat` is not followed by '(', so it stays. */
#define stat(path, buf) ((int)syscall(SYS_newfstatat, AT_FDCWD, (path), (buf), 0))
#define renameat2(ofd, old, nfd, new, flags) ((int)syscall(SYS_renameat2, (ofd), (old), (nfd), (new), (flags)))
#endif

#endif
