/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.c: NVML as the driver layer sees it: the real functions behind the NVML hooks (hooks/nvml.c),
 * and the library's own reading of NVML for one figure, what the card holds for this process
 * (NVML's per-process list, nvmlDeviceGetComputeRunningProcesses), which includes what a context
 * takes that no allocation call reports (its own structures, and the modules it loads lazily at
 * launches). charge/context.c measures contexts with it.
 *
 * The real table is looked up, once, in a libnvidia-ml.so.1 that is already loaded: the handle a
 * dlsym redirect was made on (hooks/dlsym.c hands it over), else one the loader has (RTLD_NOLOAD),
 * else the definition after this library (a linked NVML). Only the figure below loads NVML.
 *
 * libnvidia-ml.so.1 is opened with the loader's own dlopen (gpc_real_dlopen_fn: a plain dlopen
 * from here would run through this library's hook) the first time a figure is asked for, which
 * is after a context was made: never in a process that does not use CUDA. The functions are
 * looked up on that handle with the real dlsym, so none of them is one of our NVML hooks (which a
 * program's own NVML calls reach: hooks/nvml.c). nvmlInit_v2 is reference-counted by NVML, so
 * the program's own init and shutdown are unaffected; we never shut it down.
 *
 * The driver does not know PID namespaces: in a container without the host's, NVML lists host
 * PIDs and this process is not found (-ENOENT). Then nothing is measured and the reserve alone is
 * charged (the caller says so once).
 */
#include "driver/nvml.h"

#include "driver/resolve.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

/* ---- the real functions behind the NVML hooks ---- */

static struct gpc_real_nvml real_nvml;
static _Atomic(void *) nvml_handle;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

void gpc_nvml_set_handle(void *handle)
{
    void *none = NULL;
    atomic_compare_exchange_strong(&nvml_handle, &none, handle);
}

static void resolve_real(void)
{
    void *(*look)(void *, const char *) = gpc_real_dlsym_fn();
    void *(*open_fn)(const char *, int) = gpc_real_dlopen_fn();
    if (!look)
        return;
    void *h = atomic_load(&nvml_handle);
    if (!h && open_fn)
        h = open_fn("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    /* Called from this library, RTLD_NEXT finds the definition after ours (a linked NVML). */
    void *where = h ? h : RTLD_NEXT;
#define NV_RESOLVE(exp, pfn) real_nvml.exp = (pfn)look(where, #exp);
    GPC_NVML_HOOKS(NV_RESOLVE)
#undef NV_RESOLVE
    real_nvml.nvmlDeviceGetUUID = (gpc_nvmlDeviceGetUUID_fn)look(where, "nvmlDeviceGetUUID");
}

const struct gpc_real_nvml *gpc_real_nvml(void)
{
    pthread_once(&real_once, resolve_real);
    return &real_nvml;
}

/* ---- what the card holds for this process ---- */

typedef nvmlDevice_t nvml_device;
typedef struct {
    unsigned int pid;
    unsigned long long used; /* usedGpuMemory; NVML_VALUE_NOT_AVAILABLE when unknown */
    unsigned int gpu_instance, compute_instance;
} nvml_process_v2;
#define NVML_OK 0
#define NVML_INSUFFICIENT_SIZE 7
#define NVML_NOT_AVAILABLE (~0ULL)

static struct {
    int (*init)(void);
    int (*by_uuid)(const char *, nvml_device *);
    int (*processes)(nvml_device, unsigned int *, nvml_process_v2 *);
    int (*memory)(nvml_device, nvmlMemory_t *);
    int ok; /* 1 usable, -1 not */
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void)
{
    nv.ok = -1;
    void *(*open_fn)(const char *, int) = gpc_real_dlopen_fn();
    void *(*look)(void *, const char *) = gpc_real_dlsym_fn();
    void *h = open_fn ? open_fn("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h || !look)
        return;
    nv.init = (int (*)(void))look(h, "nvmlInit_v2");
    nv.by_uuid = (int (*)(const char *, nvml_device *))look(h, "nvmlDeviceGetHandleByUUID");
    /* _v3 and _v2 take the same v2 record; _v3 exists from driver r510. */
    nv.processes = (int (*)(nvml_device, unsigned int *, nvml_process_v2 *))look(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!nv.processes)
        nv.processes = (int (*)(nvml_device, unsigned int *, nvml_process_v2 *))look(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    nv.memory = (int (*)(nvml_device, nvmlMemory_t *))look(h, "nvmlDeviceGetMemoryInfo");
    if (nv.init && nv.by_uuid && nv.processes && nv.init() == NVML_OK)
        nv.ok = 1;
}

int gpc_nvml_total_bytes(const char *uuid, uint64_t *total)
{
    if (!uuid || !total)
        return -EINVAL;
    pthread_once(&nv_once, nv_load);
    if (nv.ok != 1 || !nv.memory)
        return -ENOSYS;
    nvml_device dev;
    if (nv.by_uuid(uuid, &dev) != NVML_OK)
        return -ENODEV;
    nvmlMemory_t m;
    if (nv.memory(dev, &m) != NVML_OK || m.total == 0)
        return -EIO;
    *total = m.total;
    return 0;
}

/* Processes listed at most; a card runs few more (NVML's own cap is per device as well). */
#define MAX_LISTED 256

int gpc_nvml_own_bytes(const char *uuid, uint64_t *bytes)
{
    if (!uuid || !bytes)
        return -EINVAL;
    pthread_once(&nv_once, nv_load);
    if (nv.ok != 1)
        return -ENOSYS;
    nvml_device dev;
    if (nv.by_uuid(uuid, &dev) != NVML_OK)
        return -ENODEV;
    nvml_process_v2 list[MAX_LISTED];
    unsigned int n = MAX_LISTED;
    int rc = nv.processes(dev, &n, list);
    if (rc != NVML_OK && rc != NVML_INSUFFICIENT_SIZE)
        return -EIO;
    if (n > MAX_LISTED)
        n = MAX_LISTED;
    unsigned int me = (unsigned int)getpid();
    for (unsigned int i = 0; rc == NVML_OK && i < n; i++) {
        if (list[i].pid != me)
            continue;
        if (list[i].used == NVML_NOT_AVAILABLE)
            return -ENOENT;
        *bytes = list[i].used;
        return 0;
    }
    return -ENOENT;
}
