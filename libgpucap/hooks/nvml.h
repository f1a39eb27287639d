/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml.h: the NVML hooks (nvml.c).
 */
#ifndef GPUCAP_HOOKS_NVML_H
#define GPUCAP_HOOKS_NVML_H

/* Our hook for NVML export `name` (GPC_NVML_HOOKS), or NULL. */
void *gpc_nvml_hook_for_export(const char *name);

#endif
