/*
 * glibc_floor.h: keeps libgpucap.so loadable with glibc 2.17 (CentOS 7, UBI 8, Ubuntu 20.04 CUDA
 * images) although it is built against a current glibc. Included first in every file of the library
 * (-include, x86-64 only: aarch64's glibc starts at 2.17 anyway).
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

#if defined(__x86_64__) && defined(__linux__)
#include <sys/stat.h>

__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.12");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.12");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.2.5");
__asm__(".symver pthread_key_create,pthread_key_create@GLIBC_2.2.5");
__asm__(".symver pthread_setspecific,pthread_setspecific@GLIBC_2.2.5");
__asm__(".symver pthread_getspecific,pthread_getspecific@GLIBC_2.2.5");
__asm__(".symver pthread_kill,pthread_kill@GLIBC_2.2.5");
__asm__(".symver __fxstat,__fxstat@GLIBC_2.2.5");

extern int __fxstat(int ver, int fd, struct stat *buf);
#define fstat(fd, buf) __fxstat(1 /* _STAT_VER_LINUX */, (fd), (buf))
#endif

#endif
