/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.c: the fake libnvidia-ml.so.1. It reads the same record as the fake libcuda (through the
 * exported fakecuda_* functions), so with FAKECUDA_RECORD set it sees one card with every
 * process's usage, like nvidia-smi. Devices are physical indices: CUDA_VISIBLE_DEVICES is
 * ignored, as real NVML ignores it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"
#include "fakenvml.h"

#define NV_EXPORT __attribute__((visibility("default")))
#define NV_MAX_DEV 16

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

#define NV_ENTER()                          \
    do {                                    \
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
    return nvmlInitWithFlags(0);
}

NV_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&mu);
    return rc;
}

NV_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
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
    NV_ENTER();
    return put_string(version, length, "580.00.fake");
}

NV_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    NV_ENTER();
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
    NV_ENTER();
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = cuda_version();
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    NV_ENTER();
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)fakecuda_physical_count();
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    NV_ENTER();
    if (!device || index >= (unsigned)fakecuda_physical_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

static void uuid_of(int idx, char out[48])
{
    snprintf(out, 48, "GPU-fa4ec0da-0000-4000-8000-0000000000%02x", idx);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    NV_ENTER();
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
    NV_ENTER();
    NV_DEVICE(device, idx);
    char u[48];
    uuid_of(idx, u);
    return put_string(uuid, length, u);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    NV_ENTER();
    NV_DEVICE(device, idx);
    char n[32];
    snprintf(n, sizeof n, "Fake GPU %d", idx);
    return put_string(name, length, n);
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    NV_ENTER();
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
    NV_ENTER();
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
    NV_ENTER();
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

/* As NVML: with *infoCount too small (0 to ask), NVML_ERROR_INSUFFICIENT_SIZE and the count. */
NV_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                               nvmlProcessInfo_t *infos)
{
    NV_ENTER();
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
    for (int i = 0; i < n; i++)
        infos[i] = (nvmlProcessInfo_t){ p[i].pid + shift, p[i].bytes, 0xFFFFFFFFu, 0xFFFFFFFFu };
    *infoCount = (unsigned)n;
    return NVML_SUCCESS;
}

NV_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    NV_ENTER();
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
