/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.c: the fake libnvidia-ml.so.1. It reads the same record as the fake libcuda (through the
 * exported fakecuda_* functions), so with FAKECUDA_RECORD set it sees one card with every
 * process's usage, like nvidia-smi. Devices are physical indices: CUDA_VISIBLE_DEVICES is
 * ignored, as real NVML ignores it; their names, UUIDs and PCI identities are the fake driver's
 * (its FAKECUDA_PROFILE). Every entry point is a row of NV_ENTRIES, counted (fakenvml_calls).
 * No fake card has NvLink or a fabric: those queries answer NVML_ERROR_NOT_SUPPORTED, as on a
 * PCIe card.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"
#include "fakenvml.h"

#define NV_EXPORT __attribute__((visibility("default")))
#define NV_MAX_DEV 16

/* The entry points, each counted. */
#define NV_ENTRIES(X)                                                                                   \
    X(nvmlInitWithFlags) X(nvmlInit_v2) X(nvmlShutdown) X(nvmlErrorString) X(nvmlSystemGetDriverVersion)  \
    X(nvmlSystemGetNVMLVersion) X(nvmlSystemGetCudaDriverVersion) X(nvmlSystemGetCudaDriverVersion_v2)   \
    X(nvmlDeviceGetCount_v2) X(nvmlDeviceGetHandleByIndex_v2) X(nvmlDeviceGetHandleByUUID)                \
    X(nvmlDeviceGetHandleByPciBusId_v2) X(nvmlDeviceGetUUID) X(nvmlDeviceGetName) X(nvmlDeviceGetIndex)   \
    X(nvmlDeviceGetPciInfo_v3) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)                   \
    X(nvmlDeviceGetComputeRunningProcesses) X(nvmlDeviceGetComputeRunningProcesses_v3)                    \
    X(nvmlDeviceGetMigMode) X(nvmlDeviceGetP2PStatus) X(nvmlDeviceGetNvLinkState)                         \
    X(nvmlDeviceGetNvLinkRemoteDeviceType) X(nvmlDeviceGetNvLinkRemotePciInfo_v2)                         \
    X(nvmlDeviceGetGpuFabricInfoV)

enum nv_entry {
#define NV_ENUM(name) NV_##name,
    NV_ENTRIES(NV_ENUM)
#undef NV_ENUM
    NV_NENTRIES
};
static const char *const nv_names[NV_NENTRIES] = {
#define NV_NAME(name) #name,
    NV_ENTRIES(NV_NAME)
#undef NV_NAME
};
static _Atomic unsigned long long nv_calls[NV_NENTRIES];
#define NV_COUNT(name) atomic_fetch_add_explicit(&nv_calls[NV_##name], 1, memory_order_relaxed)

NV_EXPORT unsigned long long fakenvml_calls(const char *name)
{
    for (int i = 0; name && i < NV_NENTRIES; i++)
        if (strcmp(nv_names[i], name) == 0)
            return atomic_load_explicit(&nv_calls[i], memory_order_relaxed);
    return ~0ull;
}

struct nvmlDevice_st {
    unsigned int index;
};

static struct nvmlDevice_st devs[NV_MAX_DEV];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int init_count;

static bool inited(void)
{
    pthread_mutex_lock(&mu);
    bool v = init_count > 0;
    pthread_mutex_unlock(&mu);
    return v;
}

/* The device behind a handle, or -1 for a handle this library did not give out. */
static int dev_index(nvmlDevice_t d)
{
    if (d < &devs[0] || d >= &devs[NV_MAX_DEV] || (int)d->index >= fakecuda_physical_count())
        return -1;
    return (int)d->index;
}

#define NV_ENTER(name)                      \
    do {                                    \
        NV_COUNT(name);                     \
        if (!inited())                      \
            return NVML_ERROR_UNINITIALIZED; \
    } while (0)

#define NV_DEVICE(d, idx)                          \
    int idx = dev_index(d);                        \
    if (idx < 0)                                   \
        return NVML_ERROR_INVALID_ARGUMENT

static nvmlReturn_t put_string(char *out, unsigned int len, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    NV_COUNT(nvmlInitWithFlags);
    fakecuda_physical_count(); /* attaches the record now rather than in a later query */
    pthread_mutex_lock(&mu);
    for (unsigned i = 0; i < NV_MAX_DEV; i++)
        devs[i].index = i;
    init_count++;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    NV_COUNT(nvmlInit_v2);
    return nvmlInitWithFlags(0);
}

NV_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    NV_COUNT(nvmlShutdown);
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&mu);
    return rc;
}

NV_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    NV_COUNT(nvmlErrorString);
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

NV_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    NV_ENTER(nvmlSystemGetDriverVersion);
    return put_string(version, length, "580.00.fake");
}

NV_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    NV_ENTER(nvmlSystemGetNVMLVersion);
    return put_string(version, length, "13.580.00.fake");
}

static int cuda_version(void)
{
    const char *v = getenv("FAKECUDA_DRIVER_VERSION");
    int n = v ? atoi(v) : 0;
    return n > 0 ? n : 13000;
}

NV_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    NV_ENTER(nvmlSystemGetCudaDriverVersion);
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = cuda_version();
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    NV_COUNT(nvmlSystemGetCudaDriverVersion_v2);
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    NV_ENTER(nvmlDeviceGetCount_v2);
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)fakecuda_physical_count();
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    NV_ENTER(nvmlDeviceGetHandleByIndex_v2);
    if (!device || index >= (unsigned)fakecuda_physical_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

static void uuid_of(int idx, char out[48])
{
    struct fakecuda_device d;
    if (fakecuda_device_info(idx, &d) == 0)
        snprintf(out, 48, "%s", d.uuid);
    else
        out[0] = 0;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    NV_ENTER(nvmlDeviceGetHandleByUUID);
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < fakecuda_physical_count(); i++) {
        char u[48];
        uuid_of(i, u);
        if (strcmp(u, uuid) == 0) {
            *device = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    NV_ENTER(nvmlDeviceGetUUID);
    NV_DEVICE(device, idx);
    char u[48];
    uuid_of(idx, u);
    return put_string(uuid, length, u);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    NV_ENTER(nvmlDeviceGetName);
    NV_DEVICE(device, idx);
    struct fakecuda_device d;
    if (fakecuda_device_info(idx, &d) != 0)
        return NVML_ERROR_UNKNOWN;
    return put_string(name, length, d.name);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    NV_ENTER(nvmlDeviceGetIndex);
    NV_DEVICE(device, idx);
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)idx;
    return NVML_SUCCESS;
}

/* The card's figures; inside the driver-limited container (FAKECUDA_DRIVER_LIMIT) those of the
 * container: total = the limit (never above the card), used = what the container holds, free =
 * what it has left, never above what the card has left (the same assumption as cuMemGetInfo's). */
static void mem_figures(int idx, uint64_t *total, uint64_t *used, uint64_t *free_b)
{
    uint64_t cap = fakecuda_capacity(idx), out = fakecuda_outstanding(idx), lim = fakecuda_driver_limit(idx);
    uint64_t card_free = out < cap ? cap - out : 0;
    *total = cap;
    *used = out;
    *free_b = card_free;
    if (lim) {
        *total = lim < cap ? lim : cap;
        *used = fakecuda_container_used(idx);
        uint64_t left = *used < *total ? *total - *used : 0;
        *free_b = left < card_free ? left : card_free;
    }
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    NV_ENTER(nvmlDeviceGetMemoryInfo);
    NV_DEVICE(device, idx);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total, used, free_b;
    mem_figures(idx, &total, &used, &free_b);
    *memory = (nvmlMemory_t){ total, free_b, used };
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    NV_ENTER(nvmlDeviceGetMemoryInfo_v2);
    NV_DEVICE(device, idx);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t total, used, free_b;
    mem_figures(idx, &total, &used, &free_b);
    memory->total = total;
    memory->reserved = 0;
    memory->used = used;
    memory->free = free_b;
    return NVML_SUCCESS;
}

/* As NVML: with *infoCount too small (0 to ask), NVML_ERROR_INSUFFICIENT_SIZE and the count. `v1`:
 * the unversioned export's layout, { pid, usedGpuMemory } (16 bytes); else _v3's (24 bytes). */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, bool v1)
{
    NV_DEVICE(device, idx);
    if (!infoCount || (*infoCount && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fakecuda_process p[256];
    int n = fakecuda_processes(idx, p, 256);
    if (n < 0)
        return NVML_ERROR_UNKNOWN;
    if (n > 256)
        n = 256;
    if ((unsigned)n > *infoCount) {
        *infoCount = (unsigned)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    /* FAKECUDA_NVML_PID_OFFSET=N: PIDs as a driver in another PID namespace reports them (the
     * host's), N above the caller's own. */
    const char *off = getenv("FAKECUDA_NVML_PID_OFFSET");
    unsigned shift = off ? (unsigned)strtoul(off, NULL, 10) : 0;
    for (int i = 0; i < n; i++) {
        if (v1)
            ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){ p[i].pid + shift, p[i].bytes };
        else
            ((nvmlProcessInfo_t *)infos)[i] = (nvmlProcessInfo_t){ p[i].pid + shift, p[i].bytes, 0xFFFFFFFFu, 0xFFFFFFFFu };
    }
    *infoCount = (unsigned)n;
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                               nvmlProcessInfo_t *infos)
{
    NV_ENTER(nvmlDeviceGetComputeRunningProcesses_v3);
    return running_processes(device, infoCount, infos, false);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                            nvmlProcessInfo_v1_t *infos)
{
    NV_ENTER(nvmlDeviceGetComputeRunningProcesses);
    return running_processes(device, infoCount, infos, true);
}

/* "dddd:bb:dd.f" or "dddddddd:bb:dd.f", hex, any case, as nvidia-smi and the CUDA driver print them. */
NV_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    NV_ENTER(nvmlDeviceGetHandleByPciBusId_v2);
    unsigned domain, bus, dev, fn;
    if (!pciBusId || !device || sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < fakecuda_physical_count(); i++) {
        struct fakecuda_device d;
        if (fakecuda_device_info(i, &d) == 0 && domain == 0 && bus == d.pci_bus && dev == 0 && fn == 0) {
            *device = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    NV_ENTER(nvmlDeviceGetPciInfo_v3);
    NV_DEVICE(device, idx);
    struct fakecuda_device d;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fakecuda_device_info(idx, &d) != 0)
        return NVML_ERROR_UNKNOWN;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:00.0", 0, d.pci_bus);
    snprintf(pci->busId, sizeof pci->busId, "%s", d.pci_bus_id);
    pci->bus = d.pci_bus;
    pci->pciDeviceId = d.pci_device_id;
    pci->pciSubSystemId = 0x100010de;
    return NVML_SUCCESS;
}

/* No two fake cards are peers (the fake driver's cuDeviceCanAccessPeer says 0). */
NV_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex,
                                              int *p2pStatus)
{
    NV_ENTER(nvmlDeviceGetP2PStatus);
    NV_DEVICE(device1, a);
    NV_DEVICE(device2, b);
    if (!p2pStatus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p2pStatus = a == b ? 0 /* OK */ : 4 /* NVML_P2P_STATUS_NOT_SUPPORTED */;
    return NVML_SUCCESS;
}

/* NvLink and the fabric: a PCIe card's answers. */
#define NV_NOT_SUPPORTED(name, params)                  \
    NV_EXPORT nvmlReturn_t name params                  \
    {                                                   \
        NV_ENTER(name);                                 \
        NV_DEVICE(device, idx);                         \
        (void)idx;                                      \
        return NVML_ERROR_NOT_SUPPORTED;                \
    }
NV_NOT_SUPPORTED(nvmlDeviceGetNvLinkState, (nvmlDevice_t device, unsigned int link, int *isActive))
NV_NOT_SUPPORTED(nvmlDeviceGetNvLinkRemoteDeviceType, (nvmlDevice_t device, unsigned int link, int *pNvLinkDeviceType))
NV_NOT_SUPPORTED(nvmlDeviceGetNvLinkRemotePciInfo_v2, (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci))
NV_NOT_SUPPORTED(nvmlDeviceGetGpuFabricInfoV, (nvmlDevice_t device, void *gpuFabricInfo))
#undef NV_NOT_SUPPORTED

NV_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    NV_ENTER(nvmlDeviceGetMigMode);
    NV_DEVICE(device, idx);
    (void)idx;
    if (!currentMode || !pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *mig = getenv("FAKECUDA_MIG");
    if (!mig || strcmp(mig, "1") != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = 1;
    return NVML_SUCCESS;
}
