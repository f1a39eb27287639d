/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.h: the library's own NVML figure, what the card holds for this process (nvml.c).
 */
#ifndef GPUCAP_DRIVER_NVML_H
#define GPUCAP_DRIVER_NVML_H

#include <stdint.h>

/*
 * What the card `uuid` ("GPU-...") holds for this process, by NVML's per-process list: 0 and
 * *bytes; -ENOENT when NVML lists no figure for this process's PID (none yet, or a PID namespace
 * the driver does not translate), -ENOSYS when NVML cannot be loaded or lacks the calls, -ENODEV
 * for a UUID NVML does not know, -EIO when NVML failed. Loads NVML on first use. Thread-safe.
 */
int gpc_nvml_own_bytes(const char *uuid, uint64_t *bytes);

#endif
