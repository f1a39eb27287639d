/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procaddr.h: the hook that stands for a driver symbol (procaddr.c).
 */
#ifndef GPUCAP_HOOKS_PROCADDR_H
#define GPUCAP_HOOKS_PROCADDR_H

#include "driver/resolve.h"

/* Our hook for exported name `name` (e.g. "cuMemAlloc_v2"), or NULL if we do not hook it. */
void *gpc_hook_for_export(const char *name);
/*
 * Replaces *pfn (the driver's answer for base name `symbol`) by the hook of the same variant and
 * returns true; names we do not hook are left as they are. False, with *pfn NULL, when the name is
 * hooked but no wrapped variant fits `version` (the caller reports "version not sufficient").
 */
bool gpc_procaddr_redirect(const char *symbol, void **pfn, int version, cuuint64_t flags);

#endif
