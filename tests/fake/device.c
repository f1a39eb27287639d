/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.c: the fake cards' identity and properties, and the device queries. A card is one of the
 * profiles below (FAKECUDA_PROFILE: one name, or one per FAKECUDA_DEVICES device; unset: "fake",
 * the neutral card every older test was written against); FAKECUDA_MEM, when set, overrides the
 * profile's memory size.
 *
 * Where the figures come from (facts, per card class):
 *  - name, compute capability, SM count, memory bus width, L2 size, clocks: NVIDIA's datasheets
 *    and the CUDA samples' deviceQuery output as published for each card (H200 SXM: 132 SMs,
 *    6144-bit HBM3e, 50 MiB L2, 1980 MHz; A100-SXM4-40GB: 108 SMs, 5120-bit HBM2, 40 MiB L2,
 *    1410 MHz, memory 1215 MHz; L4: 58 SMs, 192-bit GDDR6, 48 MiB L2, 2040 MHz, memory 6251 MHz
 *    (DCGM's process stats on an L4); T4: 40 SMs, 256-bit GDDR6, 4 MiB L2, 1590 MHz, memory
 *    5001 MHz);
 *  - memory: nvidia-smi's memory.total on such cards (H200 143771 MiB, A100 40 GB 40960 MiB,
 *    L4 23034 MiB, T4 15360 MiB), what cuDeviceTotalMem answers to within the driver's reserve;
 *  - per-SM limits (threads, blocks, shared memory, registers): the CUDA C++ Programming Guide's
 *    table of technical specifications per compute capability (7.5, 8.0, 8.9, 9.0);
 *  - PCI device ids: the PCI ID repository (pci-ids.ucw.cz): 10de:2335 GH100 [H200 SXM 141GB],
 *    10de:20b0 GA100 [A100 SXM4 40GB], 10de:27b8 AD104GL [L4], 10de:1eb8 TU104GL [Tesla T4].
 * UUIDs and PCI bus numbers are made up, one per physical device, stable across processes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fake_internal.h"

#define MiB ((uint64_t)1 << 20)

static const struct fk_profile profiles[] = {
    /* key, name, cc, SMs, memory, L2, clock kHz, memory clock kHz, bus bits, threads/SM, blocks/SM,
     * shared memory per block (opt-in), per SM, async engines, PCI device, UUID tag, first bus */
    { "fake", "Fake GPU %d", 9, 0, 132, 16384 * MiB, 50 * MiB, 1980000, 2619000, 5120, 2048, 32, 232448, 233472, 2,
      0x0000, 0x0000, 0x00 },
    { "h200", "NVIDIA H200", 9, 0, 132, 143771 * MiB, 50 * MiB, 1980000, 3201000, 6144, 2048, 32, 232448, 233472, 3,
      0x2335, 0x0200, 0x18 },
    { "a100-40gb", "NVIDIA A100-SXM4-40GB", 8, 0, 108, 40960 * MiB, 40 * MiB, 1410000, 1215000, 5120, 2048, 32,
      166912, 167936, 3, 0x20b0, 0x0100, 0x07 },
    { "l4", "NVIDIA L4", 8, 9, 58, 23034 * MiB, 48 * MiB, 2040000, 6251000, 192, 1536, 24, 101376, 102400, 2, 0x27b8,
      0x0400, 0x31 },
    { "t4", "Tesla T4", 7, 5, 40, 15360 * MiB, 4 * MiB, 1590000, 5001000, 256, 1024, 16, 65536, 65536, 3, 0x1eb8,
      0x0075, 0x3b },
};

const struct fk_profile *fk_profile_find(const char *key)
{
    for (size_t i = 0; i < sizeof profiles / sizeof *profiles; i++)
        if (strcmp(profiles[i].key, key) == 0)
            return &profiles[i];
    return NULL;
}

const char *fk_profile_names(void)
{
    return "fake, h200, a100-40gb, l4, t4";
}

static const struct fk_profile *profile_of(int phys)
{
    const struct fk_profile *p = phys >= 0 && phys < FK_MAX_DEV ? fk_config()->profile[phys] : NULL;
    return p ? p : &profiles[0];
}

void fk_device_cc(int phys, int *major, int *minor)
{
    bool ok = phys >= 0 && phys < FK_MAX_DEV;
    *major = ok ? profile_of(phys)->cc_major : 0;
    *minor = ok ? profile_of(phys)->cc_minor : 0;
}

void fk_uuid_bytes(int phys, unsigned char out[16])
{
    uint16_t tag = profile_of(phys)->uuid_tag;
    static const unsigned char base[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    memcpy(out, base, 16);
    out[4] = (unsigned char)(tag >> 8);
    out[5] = (unsigned char)tag;
    out[15] = (unsigned char)phys;
}

void fk_uuid_string(int phys, char out[48])
{
    snprintf(out, 48, "GPU-fa4ec0da-%04x-4000-8000-0000000000%02x", profile_of(phys)->uuid_tag, phys);
}

/* The PCI bus number of physical device `phys` (domain 0, device 0, function 0). */
static int pci_bus(int phys)
{
    return profile_of(phys)->bus + phys;
}

/* ---- the inspection API (fakecuda.h) ---- */

FK_EXPORT int fakecuda_device_info(int phys_dev, struct fakecuda_device *out)
{
    if (!out || phys_dev < 0 || phys_dev >= fakecuda_physical_count())
        return -1;
    const struct fk_profile *p = profile_of(phys_dev);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, p->name, phys_dev);
    fk_uuid_string(phys_dev, out->uuid);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "00000000:%02X:00.0", pci_bus(phys_dev));
    out->pci_bus = (unsigned)pci_bus(phys_dev);
    out->pci_device_id = (unsigned)p->pci_device << 16 | 0x10de;
    out->cc_major = p->cc_major;
    out->cc_minor = p->cc_minor;
    out->sm_count = p->sms;
    out->l2_bytes = p->l2;
    out->clock_mhz = p->clock_khz / 1000;
    out->memory_clock_mhz = p->mem_clock_khz / 1000;
    out->bus_width = p->bus_width;
    return 0;
}

/* ---- device queries ---- */

/* The answer of an entry point that reports one number: CUDA_ERROR_INVALID_VALUE for a NULL out. */
static CUresult answer_int(int *out, int value)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = value;
    return CUDA_SUCCESS;
}

/* answer_int for a good ordinal `dev`: CUDA_ERROR_INVALID_DEVICE for a bad one (after a NULL out). */
static CUresult device_answer(int *out, CUdevice dev, int value)
{
    if (out && fk_phys_of(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return answer_int(out, value);
}

FK_FORWARD(cuDeviceGetCount, (int *count), answer_int(count, fk_visible_count()))

FK_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FK_ENTER_INIT(cuDeviceGet);
    return device_answer(device, ordinal, ordinal);
}

static CUresult device_name(char *out, int len, CUdevice dev)
{
    if (!out || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    snprintf(out, (size_t)len, profile_of(phys)->name, phys);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDeviceGetName, (char *name, int len, CUdevice dev), device_name(name, len, dev))

static CUresult pci_bus_id(char *out, int len, CUdevice dev)
{
    if (!out || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    snprintf(out, (size_t)len, "00000000:%02X:00.0", pci_bus(phys));
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDeviceGetPCIBusId, (char *pciBusId, int len, CUdevice dev), pci_bus_id(pciBusId, len, dev))

/* cuDeviceGetByPCIBusId: "[domain]:[bus]:[device].[function]" or "[domain]:[bus]:[device]", hex. */
static CUresult by_pci_bus_id(CUdevice *dev, const char *id)
{
    unsigned domain = 0, bus, device = 0, function = 0;
    if (!dev || !id)
        return CUDA_ERROR_INVALID_VALUE;
    if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function) < 3 &&
        sscanf(id, "%x:%x", &bus, &device) != 2)
        return CUDA_ERROR_INVALID_VALUE;
    for (int d = 0; d < fk_visible_count(); d++) {
        if (domain == 0 && device == 0 && function == 0 && (int)bus == pci_bus(fk_phys_of(d))) {
            *dev = d;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

FK_FORWARD(cuDeviceGetByPCIBusId, (CUdevice *dev, const char *pciBusId), by_pci_bus_id(dev, pciBusId))

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    fk_uuid_bytes(phys, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev), get_uuid(uuid, dev))
FK_FORWARD(cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev), get_uuid(uuid, dev))

/* cuDeviceTotalMem_v2 and the legacy cuDeviceTotalMem: one body, the answer clamped to the width of `type`. */
#define FK_DEVICE_TOTAL_MEM(sym, type, max)                                             \
    FK_EXPORT CUresult sym(type *bytes, CUdevice dev)                                   \
    {                                                                                   \
        FK_ENTER_INIT(sym);                                                             \
        if (!bytes)                                                                     \
            return CUDA_ERROR_INVALID_VALUE;                                            \
        FK_DEVICE(dev, phys);                                                           \
        uint64_t cap = fk_record_capacity(phys);                                        \
        *bytes = (type)(cap < (max) ? cap : (max));                                     \
        return CUDA_SUCCESS;                                                            \
    }
FK_DEVICE_TOTAL_MEM(cuDeviceTotalMem_v2, size_t, SIZE_MAX)
FK_DEVICE_TOTAL_MEM(cuDeviceTotalMem, unsigned int, UINT_MAX)
#undef FK_DEVICE_TOTAL_MEM

/* One attribute of a card of profile `p` at physical index `phys`; 0 for what the fake does not model. */
static int attribute(const struct fk_profile *p, int phys, CUdevice_attribute a)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return INT_MAX;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return INT_MAX;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return p->clock_khz;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return p->sms;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return pci_bus(phys);
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return p->mem_clock_khz;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return p->bus_width;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return (int)p->l2;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return p->cc_major >= 8 ? (int)(p->l2 * 3 / 4) : 0;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return p->cc_major >= 8 ? 134213632 : 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return p->threads_per_sm;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return p->async_engines;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return p->cc_major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return p->cc_minor;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return p->smem_per_sm;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return p->smem_optin;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return p->cc_major >= 8 ? 1024 : 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return p->blocks_per_sm;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return p->cc_minor == 9 ? 64 : p->cc_major == 7 ? 32 : 2;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return p->cc_major >= 9 ? 4 : 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: return (int)((unsigned)p->pci_device << 16 | 0x10de);
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID: return (int)(0x1000u << 16 | 0x10de);
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return p->cc_major >= 9;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 1;
    default: return 0;
    }
}

FK_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FK_ENTER_INIT(cuDeviceGetAttribute);
    if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    *pi = attribute(profile_of(phys), phys, attrib);
    return CUDA_SUCCESS;
}

/* The legacy pair of queries the attribute table replaced. */
FK_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    FK_ENTER_INIT(cuDeviceComputeCapability);
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    FK_DEVICE(dev, phys);
    *major = profile_of(phys)->cc_major;
    *minor = profile_of(phys)->cc_minor;
    return CUDA_SUCCESS;
}

/* Peer access: no two fake cards are connected (P2P needs NVLink or a PCIe switch). */
FK_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    FK_ENTER_INIT(cuDeviceCanAccessPeer);
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (fk_phys_of(dev) < 0 || fk_phys_of(peerDev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = 0;
    return CUDA_SUCCESS;
}

FK_EXPORT CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                           CUdevice dstDevice)
{
    FK_ENTER_INIT(cuDeviceGetP2PAttribute);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (fk_phys_of(srcDevice) < 0 || fk_phys_of(dstDevice) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    *value = 0;
    return CUDA_SUCCESS;
}

/* Execution affinity (SM partitions for contexts): not supported on these cards' fake. */
FK_EXPORT CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
    FK_ENTER_INIT(cuDeviceGetExecAffinitySupport);
    return device_answer(pi, dev, 0);
}
