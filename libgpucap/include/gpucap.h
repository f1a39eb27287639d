/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpucap.h: the public API of libgpucap.so.
 *
 * The library works without being called: preload it and set GPUCAP_MEMORY_LIMIT. These functions
 * let a program (or a test) that knows it runs under gpucap read its own budget figures; look them
 * up with dlsym(RTLD_DEFAULT, "gpucap_version") to stay loadable without gpucap.
 */
#ifndef GPUCAP_H
#define GPUCAP_H

#include <stdint.h>

#include "gpucap_version.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpucap_usage {
    uint64_t limit;       /* budget in bytes */
    uint64_t used;        /* bytes admitted and not freed */
    uint64_t peak;        /* highest `used` so far */
    uint64_t allocations; /* admitted allocations */
    uint64_t frees;
    uint64_t denials;     /* allocations answered CUDA_ERROR_OUT_OF_MEMORY by gpucap */
};

/* GPUCAP_VERSION_STRING of the library that is loaded, e.g. "0.1.0". */
const char *gpucap_version(void);

/*
 * Budget figures of device `ordinal` (as this process numbers devices). Returns 0, -EINVAL for a
 * bad argument, or -ENOENT when that device has no budget or has not been used yet.
 */
int gpucap_device_usage(int ordinal, struct gpucap_usage *out);

#ifdef __cplusplus
}
#endif

#endif
