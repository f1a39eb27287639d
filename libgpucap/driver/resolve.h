/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.h: the real entry points (resolve.c), resolved once: the driver's, by the one hook list
 * (hooklist.h), and the loader's dlsym/dlvsym.
 */
#ifndef GPUCAP_DRIVER_RESOLVE_H
#define GPUCAP_DRIVER_RESOLVE_H

/* Legacy 32-bit prototypes and no `#define cuMemAlloc cuMemAlloc_v2` renames: we export both. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdbool.h>

#include "common/hooklist.h"

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
/* The DT_SONAME of a loaded object (its link map), or NULL if it has none. */
struct link_map;
const char *gpc_object_soname(const struct link_map *m);
/* True when another interposer of dlsym is loaded after this library (its dlsym is "the real one"). */
bool gpc_dlsym_chained(void);
/* glibc's dlsym/dlvsym (or the next interposer's), found without calling dlsym. NULL if not found. */
void *(*gpc_real_dlsym_fn(void))(void *, const char *);
void *(*gpc_real_dlvsym_fn(void))(void *, const char *, const char *);
/* The loader's dlopen (or the next interposer's), not this library's hook; NULL if not found. */
void *(*gpc_real_dlopen_fn(void))(const char *, int);
/* A driver entry point that is missing answers this instead of crashing. */
#define GPC_CALL_REAL(name, args) (gpc_real.name ? gpc_real.name args : CUDA_ERROR_NOT_FOUND)

#endif
