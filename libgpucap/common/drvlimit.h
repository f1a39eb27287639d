/* SPDX-License-Identifier: Apache-2.0 */
/*
 * drvlimit.h: the NVIDIA driver's own per-container memory limit, as gpucap sees it (common layer:
 * the library, `gpucap doctor`, `status`, the report and the exporter share it). Calls no driver
 * and reads no library global.
 *
 * Facts this rests on (README, "When to use it", cites the sources):
 *  - the container toolkit's `nvidia-cdi-hook apply-cuda-memory-limits` reads
 *    NVIDIA_GPU_MEMORY_REQUEST and NVIDIA_GPU_MEMORY_LIMIT from the container's environment, whole
 *    MiB, and does nothing unless both are set; cgroup v2 only; request <= limit; it applies them
 *    to the container's cgroup with nvmlDeviceSetMemoryLimits_v1 (soft = request, hard = limit);
 *  - driver r615 / CUDA 13.4, not MIG: the hard limit fails allocations with out-of-memory; on
 *    kernels with the dmem controller it is the cgroup's dmem.max (soft = dmem.min), else an
 *    internal backend of the driver;
 *  - memory queries inside the cgroup report the limit (NVML: "cross-referenced with
 *    nvmlDeviceGetMemoryInfo_v2 while in that cgroup"); gpucap takes cuMemGetInfo's total as the
 *    driver's figure.
 */
#ifndef GPUCAP_DRVLIMIT_H
#define GPUCAP_DRVLIMIT_H

#include <stdbool.h>
#include <stdint.h>

#define GPC_DRV_ENV_REQUEST "NVIDIA_GPU_MEMORY_REQUEST"
#define GPC_DRV_ENV_LIMIT "NVIDIA_GPU_MEMORY_LIMIT"

/*
 * The hard limit the platform declared for the toolkit's hook in `envp`, in bytes: 0 when it is not
 * declared or the hook would refuse it (both variables are needed, whole MiB, request <= limit);
 * *why (optional) then says which, NULL when none was set at all.
 */
uint64_t gpc_drv_declared(char *const *envp, const char **why);

/*
 * Whether the driver enforces a limit on a card of `card` bytes, given the total it reports in a
 * context on that card (`reported`, 0: unknown) and the declared limit (`declared`, 0: none): the
 * driver reports less than the card. A declaration is no evidence: it is the container's own
 * environment, and a limit at or above the card limits nothing (`declared` is kept in the
 * signature for the callers, which cap the budget at it all the same).
 */
bool gpc_drv_in_force(uint64_t card, uint64_t reported, uint64_t declared);

/*
 * The driver's limit a reader of a ledger may show for a card of `card` bytes (0: unknown): the
 * recorded `driver_limit` when it is below the card, else 0 (none: a "limit" at or above the card
 * limits nothing, and the ledger is the container's file).
 */
uint64_t gpc_drv_recorded(uint64_t driver_limit, uint64_t card);

/* "driver + gpucap" when `driver_limit` (a ledger device's, ledger.h, through gpc_drv_recorded) is
 * set, else "gpucap". */
const char *gpc_enforced_by(uint64_t driver_limit);

/* The cgroup v2 facts of this container, read under `root` (normally "/"). */
#define GPC_DMEM_REGIONS 16
struct gpc_dmem_region {
    char name[96];       /* e.g. nvidia/0000:3b:00.0/vidmem */
    uint64_t max;        /* dmem.max of this cgroup; UINT64_MAX: "max" (no limit) */
    uint64_t current;    /* dmem.current */
    uint64_t capacity;   /* dmem.capacity (the root cgroup's file; 0 where not visible) */
};
struct gpc_cgroup_facts {
    bool v2;                  /* /sys/fs/cgroup/cgroup.controllers exists */
    bool dmem;                /* the dmem controller is listed there */
    char controllers[256];
    char path[256];           /* this process's cgroup ("0::PATH" of /proc/self/cgroup) */
    int nregions;
    struct gpc_dmem_region region[GPC_DMEM_REGIONS];
};
/* Fills *f from root/sys/fs/cgroup and root/proc/self/cgroup; 0, or -ENOENT when no cgroup v2. */
int gpc_cgroup_read(const char *root, struct gpc_cgroup_facts *f);

/* The driver branch (e.g. 580) from root/proc/driver/nvidia/version, with the full version text in
 * buf; -1 when unreadable. */
int gpc_driver_branch(const char *root, char *buf, unsigned len);

#endif
