/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakecuda.h: the inspection API of the fake libcuda.so.1 (tests/fake). Tests read the fake's
 * own record of what is really allocated on each physical device and compare it with what
 * gpucap believes. Link `fakecuda`, or dlopen("libcuda.so.1") and dlsym these names.
 *
 * Devices here are physical indices (0 .. fakecuda_physical_count()-1), not CUDA ordinals:
 * CUDA_VISIBLE_DEVICES does not renumber them. With FAKECUDA_RECORD set, the record is one file
 * shared by every process (and the fake NVML) using it, so the figures are card-wide.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes held on the card by live processes (dead ones are reaped first); 0 for a bad index. */
uint64_t fakecuda_outstanding(int phys_dev);
/* Highest outstanding ever observed (since creation or fakecuda_reset_peak). */
uint64_t fakecuda_peak(int phys_dev);
/* Physical memory of the device. */
uint64_t fakecuda_capacity(int phys_dev);
/* The driver's per-container limit on the device as this process sees it (FAKECUDA_DRIVER_LIMIT:
 * the process is in the driver-limited container), 0 when none. */
uint64_t fakecuda_driver_limit(int phys_dev);
/* Bytes the driver-limited container's live processes hold on the device (all processes that
 * set FAKECUDA_DRIVER_LIMIT and share the record). */
uint64_t fakecuda_container_used(int phys_dev);
/* Calls of that exported entry point in this process (every call counts, failed ones too);
 * UINT64_MAX for a name the fake does not export, so a misspelt name cannot pass a test. */
uint64_t fakecuda_calls(const char *exported_name);
/* Entry row i of the fake (entries.h): exported symbol, base name, version, per-thread variant; 0,
 * or -1 past the last. */
int fakecuda_row(int i, const char **sym, const char **base, int *version, int *per_thread);
/* Makes a context on CUDA ordinal `ordinal` and pushes it current, as cuCtxCreate does, but by a
 * route no interposer sees (a library's private entry into the driver); NULL before cuInit or on
 * failure. With FAKECUDA_CTX_REUSE=1 it may take the handle of a destroyed context. */
void *fakecuda_ctx_create(int ordinal);
/* The driver takes `bytes` more for the calling thread's current context, by no call an interposer
 * sees (what modules loaded lazily at a launch take); freed with the context. 0, or -1 when no
 * context is current or the card is full. */
int fakecuda_ctx_grow(uint64_t bytes);
/* Sets the peak to the current outstanding. */
void fakecuda_reset_peak(int phys_dev);
/* Physical devices on the (fake) machine; CUDA_VISIBLE_DEVICES does not change it. */
int fakecuda_physical_count(void);
/* Allocations and frees the record counted on the device (all processes). */
uint64_t fakecuda_alloc_count(int phys_dev);
uint64_t fakecuda_free_count(int phys_dev);

/* What a physical device is (its FAKECUDA_PROFILE), for the fake NVML and tests. */
struct fakecuda_device {
    char name[64], uuid[48], pci_bus_id[32]; /* as cuDeviceGetName, NVML's UUID, cuDeviceGetPCIBusId */
    unsigned int pci_bus, pci_device_id;     /* bus number; product id << 16 | vendor 0x10de */
    int cc_major, cc_minor, sm_count, clock_mhz, memory_clock_mhz, bus_width;
    uint64_t l2_bytes;
};
/* Fills *out for a physical device: 0, or -1 for a bad index (or before the record is attached). */
int fakecuda_device_info(int phys_dev, struct fakecuda_device *out);

/* The private tables the fake serves the CUDA runtime (export.c): calls of the table's slots in this
 * process (UINT64_MAX for a table it does not serve), and the table itself with its UUID and slot
 * count (NULL for an unknown name). Names: CUDART_INTERFACE, TOOLS_RUNTIME_CALLBACK_HOOKS, TOOLS_TLS,
 * TOOLS_CONTEXT, CONTEXT_LOCAL_STORAGE_V0301, CONTEXT_CHECKS, INTEGRITY_CHECK, UNKNOWN_1734DC26. */
uint64_t fakecuda_table_calls(const char *table);
const void *fakecuda_table(const char *table, unsigned char uuid[16], int *slots);
/* Calls in this process of table slots the fake serves as stubs that answer CUDA_ERROR_NOT_SUPPORTED
 * (TOOLS_CONTEXT's all but 4, 39 and 51; all of UNKNOWN_1734DC26's): each answered an error a real
 * driver would not give. */
uint64_t fakecuda_table_unmodelled_calls(void);
/* MD2 (RFC 1319) of `len` bytes, the digest the integrity check's HMAC is built on. */
void fakecuda_md2(const void *data, size_t len, unsigned char digest[16]);

/* One live process on a device, as the record knows it (for the fake NVML). */
struct fakecuda_process {
    unsigned int pid;
    uint64_t bytes;     /* bytes it holds on the device */
    unsigned int ctxs;  /* contexts it holds there */
};
/* Fills at most `max` live processes that hold memory or a context on the device and returns
 * how many there are in all (which may exceed max); -1 for a bad index. Reaps dead ones first. */
int fakecuda_processes(int phys_dev, struct fakecuda_process *out, int max);

#ifdef __cplusplus
}
#endif

#endif
