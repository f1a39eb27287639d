/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.h: the contract of the driver layer, the one place that names a real entry point.
 *
 * Every function gpucap interposes is also one it must call for real: CUDA's (the one hook list,
 * hooklist.h), NVML's (driver/nvml.h), the loader's dlopen, dlmopen, dlsym and dlvsym, and libc's
 * exec family. Called by name from inside this library, each of them would bind to our own hook
 * (a preloaded definition matches versioned references too: `dlopen@GLIBC_2.2.5` is `dlopen`), so
 * no file outside driver/ names one: they all come from here, resolved once, on first use, without
 * calling anything interposed (resolve.c says how). A real entry point that is missing is NULL
 * here; the callers answer it with an error code (GPC_CALL_REAL: CUDA_ERROR_NOT_FOUND; the exec
 * family: ENOSYS), never a crash. tools/check_layers.sh checks that nothing below hooks/ uses a
 * name hooks/ defines, reading the objects' symbols with their versions stripped.
 */
#ifndef GPUCAP_DRIVER_RESOLVE_H
#define GPUCAP_DRIVER_RESOLVE_H

/* Legacy 32-bit prototypes and no `#define cuMemAlloc cuMemAlloc_v2` renames: we export both. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdbool.h>

#include "common/hooklist.h"

/* ---- the CUDA driver ---- */

struct gpc_real {
#define GPC_REAL_FIELD(exp, base, ver, pt, pfn) pfn exp;
    GPC_HOOKS(GPC_REAL_FIELD)
#undef GPC_REAL_FIELD
#define GPC_REAL_FIELD2(exp, pfn) pfn exp;
    GPC_REAL_ONLY(GPC_REAL_FIELD2)
#undef GPC_REAL_FIELD2
};
extern struct gpc_real gpc_real;
/* Resolves gpc_real from libcuda.so.1 (once; `handle` is used when the caller already has one). */
void gpc_resolve_cuda(void *handle);
/* A driver entry point that is missing answers this instead of crashing. */
#define GPC_CALL_REAL(name, args) (gpc_real.name ? gpc_real.name args : CUDA_ERROR_NOT_FOUND)

/* ---- the dynamic loader ---- */

/* The DT_SONAME of a loaded object (its link map), or NULL if it has none. */
struct link_map;
const char *gpc_object_soname(const struct link_map *m);
/* True when another interposer of dlsym is loaded after this library (its dlsym is "the real one"). */
bool gpc_dlsym_chained(void);
/* glibc's dlsym/dlvsym (or the next interposer's), found without calling dlsym. NULL if not found. */
void *(*gpc_real_dlsym_fn(void))(void *, const char *);
void *(*gpc_real_dlvsym_fn(void))(void *, const char *, const char *);
/* The loader's dlopen and dlmopen (or the next interposer's), not this library's hooks; NULL if
 * not found. A library opened with them from here is opened on this library's behalf. */
void *(*gpc_real_dlopen_fn(void))(const char *, int);
void *(*gpc_real_dlmopen_fn(void))(Lmid_t, const char *, int);

/* ---- libc's exec family ---- */

/* The next definitions after this library (libc's), each NULL if there is none. Looked up at the
 * first exec (no lock: a vfork child may be the first), every later exec reuses them. */
struct gpc_real_exec {
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execv)(const char *, char *const[]);
    int (*execvp)(const char *, char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*fexecve)(int, char *const[], char *const[]);
    int (*execveat)(int, const char *, char *const[], char *const[], int);
};
const struct gpc_real_exec *gpc_real_exec(void);

#endif
