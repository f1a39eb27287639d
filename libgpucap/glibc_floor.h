/*
 * glibc_floor.h: keeps libgpucap.so loadable with glibc 2.17 (CentOS 7, UBI 8, Ubuntu 20.04 CUDA
 * images) although it is built against a current glibc. Included first in every file of the library
 * (-include), on x86-64 and on aarch64, whose oldest glibc symbol versions are all GLIBC_2.17.
 *
 * glibc 2.34 moved libdl and libpthread into libc and gave their functions new symbol versions;
 * the linker picks the newest, and an older ld.so then refuses the whole library ("cannot be
 * preloaded: ignored": the job runs uncapped). Each function the library calls is bound here to
 * its oldest version, which current glibc still provides (not dlsym and dlvsym: the library
 * defines those itself, and finds glibc's without linking them); the library also names libdl.so.2 and
 * libpthread.so.0 as needed, where old glibc defines them (libgpucap/CMakeLists.txt). fstat is a
 * function only since 2.33: before, it was an inline wrapper of __fxstat, which we call instead.
 * tests/test_glibc_floor.sh fails on any symbol version newer than 2.17: a new call into glibc
 * that shows up there gets its line below.
 */
#ifndef GPUCAP_GLIBC_FLOOR_H
#define GPUCAP_GLIBC_FLOOR_H

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/stat.h>

#if defined(__x86_64__)
#define GPC_GLIBC_BASE "GLIBC_2.2.5"
#define GPC_GLIBC_ROBUST "GLIBC_2.12"
#define GPC_STAT_VER 1 /* _STAT_VER_LINUX */
#else
#define GPC_GLIBC_BASE "GLIBC_2.17"
#define GPC_GLIBC_ROBUST "GLIBC_2.17"
#define GPC_STAT_VER 0 /* _STAT_VER_KERNEL: the generic struct stat */
#endif

__asm__(".symver dlopen,dlopen@" GPC_GLIBC_BASE);
__asm__(".symver dlerror,dlerror@" GPC_GLIBC_BASE);
__asm__(".symver dladdr,dladdr@" GPC_GLIBC_BASE);
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
__asm__(".symver __fxstat,__fxstat@" GPC_GLIBC_BASE);

extern int __fxstat(int ver, int fd, struct stat *buf);
#define fstat(fd, buf) __fxstat(GPC_STAT_VER, (fd), (buf))
#endif

#endif
