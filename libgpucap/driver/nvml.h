/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.h: NVML, the driver layer's side of it (nvml.c): the few NVML types gpucap uses, the real
 * entry points behind the NVML hooks, and the library's own figure of what the card holds for
 * this process. The contract of the driver layer as a whole is driver/resolve.h's head.
 */
#ifndef GPUCAP_DRIVER_NVML_H
#define GPUCAP_DRIVER_NVML_H

#include <stdint.h>

#include "common/hooklist.h"

/* The NVML types gpucap uses, as nvml.h defines them (not a header of the toolkit we build with). */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_FUNCTION_NOT_FOUND 13

typedef nvmlReturn_t (*gpc_nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*gpc_nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*gpc_nvmlDeviceGetUUID_fn)(nvmlDevice_t, char *, unsigned int);

/*
 * The real NVML functions behind the hooks (GPC_NVML_HOOKS), and nvmlDeviceGetUUID, which the
 * hooks use to match an NVML device to a CUDA ordinal. A field is NULL where NVML lacks it.
 */
struct gpc_real_nvml {
#define GPC_REAL_NVML_FIELD(exp, pfn) pfn exp;
    GPC_NVML_HOOKS(GPC_REAL_NVML_FIELD)
#undef GPC_REAL_NVML_FIELD
    gpc_nvmlDeviceGetUUID_fn nvmlDeviceGetUUID;
};
/*
 * Resolves the table once and returns it: looked up in a libnvidia-ml.so.1 that is already loaded
 * (the handle given to gpc_nvml_set_handle, else one found loaded), else after this library
 * (RTLD_NEXT: an NVML the program links). gpucap never loads NVML into a process for the hooks.
 */
const struct gpc_real_nvml *gpc_real_nvml(void);
/* Remembers the libnvidia-ml handle a dlsym redirect was made on (the first one wins). */
void gpc_nvml_set_handle(void *handle);

/*
 * What the card `uuid` ("GPU-...") holds for this process, by NVML's per-process list: 0 and
 * *bytes; -ENOENT when NVML lists no figure for this process's PID (none yet, or a PID namespace
 * the driver does not translate), -ENOSYS when NVML cannot be loaded or lacks the calls, -ENODEV
 * for a UUID NVML does not know, -EIO when NVML failed. Loads NVML on first use. Thread-safe.
 */
int gpc_nvml_own_bytes(const char *uuid, uint64_t *bytes);
/*
 * The total NVML reports for the card `uuid`, which needs no context: inside a container the
 * NVIDIA driver limits, the limit. 0 and *total, or -ENOSYS / -ENODEV / -EIO as above. Loads NVML
 * on first use (the real function, never the hook, which would answer gpucap's budget).
 */
int gpc_nvml_total_bytes(const char *uuid, uint64_t *total);

#endif
