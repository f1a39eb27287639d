/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.c: NVML's memory figures, answered with the budget, so that nvidia-smi, pynvml and
 * PyTorch inside the container see the budget as the card.
 *
 * nvmlDeviceGetMemoryInfo and nvmlDeviceGetMemoryInfo_v2 call the real NVML first (its errors, and
 * the version check of the _v2 struct, stay NVML's), then, when the device has a budget:
 * total = the budget (never above the card), used = what the ledger counts on that card for the
 * whole tenant (every process sharing the ledger), free = total - used, never below 0; _v2's
 * `reserved` is 0 (the budget has no driver-reserved part). NVML numbers devices its own way and
 * ignores CUDA_VISIBLE_DEVICES, so an NVML device is matched to a CUDA ordinal by UUID (NVML's
 * "GPU-..." string against cuDeviceGetUuid_v2), and the budget is that ordinal's: the same ledger
 * entry that the CUDA calls charge. A process that never used CUDA (nvidia-smi) is counted on the
 * same entry: we initialise the driver (cuInit) to read the UUIDs, and the entry is registered as
 * a CUDA process would. A device CUDA cannot see (outside CUDA_VISIBLE_DEVICES) or a MIG instance
 * is answered unchanged. With GPUCAP_LEDGER=off the tenant's use is this process's.
 *
 * The real functions are the driver layer's (driver/nvml.c: looked up in a libnvidia-ml.so.1 that
 * is already loaded): gpucap never loads NVML into a process for these hooks.
 */
#include "common/defs.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "driver/nvml.h"
#include "driver/resolve.h"
#include "charge/device.h"
#include "charge/live.h"
#include "hooks/init.h"
#include "hooks/nvml.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

GPC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
GPC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

void *gpc_nvml_hook_for_export(const char *name)
{
    if (strncmp(name, "nvml", 4) != 0)
        return NULL;
#define NV_MATCH(exp, pfn)        \
    if (strcmp(name, #exp) == 0)  \
        return (void *)&exp;
    GPC_NVML_HOOKS(NV_MATCH)
#undef NV_MATCH
    return NULL;
}

/* ---- NVML device -> CUDA ordinal, by UUID ---- */

static pthread_once_t uuid_once = PTHREAD_ONCE_INIT;
static int n_cuda;
static char cuda_uuid[GPC_MAX_DEVICES][GPC_UUID_TEXT]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */

static void read_cuda_uuids(void)
{
    int n = 0;
    CUresult rc = GPC_CALL_REAL(cuDeviceGetCount, (&n));
    if (rc == CUDA_ERROR_NOT_INITIALIZED && GPC_CALL_REAL(cuInit, (0)) == CUDA_SUCCESS)
        rc = GPC_CALL_REAL(cuDeviceGetCount, (&n));
    if (rc != CUDA_SUCCESS)
        return;
    if (n > GPC_MAX_DEVICES)
        n = GPC_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        CUuuid u;
        if (GPC_CALL_REAL(cuDeviceGetUuid_v2, (&u, i)) != CUDA_SUCCESS)
            continue;
        gpc_uuid_format((const uint8_t *)u.bytes, cuda_uuid[i]);
    }
    n_cuda = n;
}

/* The budget of an NVML device, or GPC_BUDGET_NONE when it has none we can tell. */
static int nvml_budget(const struct gpc_real_nvml *nv, nvmlDevice_t device)
{
    /* Audit mode: the card as it is, as in hooks/info.c (a program sizes itself from it). */
    if (!gpc_enforcing() || !nv->nvmlDeviceGetUUID || gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT)
        return GPC_BUDGET_NONE;
    char uuid[96];
    if (nv->nvmlDeviceGetUUID(device, uuid, sizeof uuid) != NVML_SUCCESS)
        return GPC_BUDGET_NONE;
    pthread_once(&uuid_once, read_cuda_uuids);
    for (int i = 0; i < n_cuda; i++)
        if (cuda_uuid[i][0] && strcasecmp(cuda_uuid[i], uuid) == 0) {
            /* The tenant's use without processes that died since the last look (rate-limited). */
            gpc_budget_refresh(true);
            gpc_live_check(true); /* a budget changed live is the one answered */
            return gpc_device_budget(i);
        }
    return GPC_BUDGET_NONE;
}

/* total, used, free of a budget given the card's total. */
static void figures(int id, unsigned long long card_total, unsigned long long *total, unsigned long long *used,
                    unsigned long long *free_b)
{
    uint64_t limit = gpc_budget_limit(id);
    uint64_t u = gpc_budget_in_use(id);
    uint64_t t = limit < card_total ? limit : card_total;
    *total = t;
    *used = u;
    *free_b = u >= t ? 0 : t - u;
}

/* Both versions: the driver's answer, then the budget's figures, then `more` (v2: none reserved). */
#define MEMORY_INFO(name, type, more)                                                \
    GPC_EXPORT nvmlReturn_t name(nvmlDevice_t device, type *memory)                  \
    {                                                                                \
        const struct gpc_real_nvml *nv = gpc_real_nvml();                            \
        if (!nv->name)                                                               \
            return NVML_ERROR_FUNCTION_NOT_FOUND;                                    \
        nvmlReturn_t rc = nv->name(device, memory);                                  \
        int id;                                                                      \
        if (rc != NVML_SUCCESS || !memory || (id = nvml_budget(nv, device)) == GPC_BUDGET_NONE) \
            return rc;                                                               \
        figures(id, memory->total, &memory->total, &memory->used, &memory->free);    \
        more;                                                                        \
        return rc;                                                                   \
    }
MEMORY_INFO(nvmlDeviceGetMemoryInfo, nvmlMemory_t, (void)0)
MEMORY_INFO(nvmlDeviceGetMemoryInfo_v2, nvmlMemory_v2_t, memory->reserved = 0)
