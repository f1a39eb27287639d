/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procaddr.c: cuGetProcAddress, the route by which the CUDA runtime and every NVIDIA library reach
 * the driver, and the name -> hook table that the dlsym redirect uses too.
 *
 * Our resolver always asks the driver's first, so the return code, *pfn for names we do not hook,
 * and *symbolStatus stay the driver's (unknown names, the stub-library probe, versions above the
 * driver's). When the driver hands back a function for a hooked base name, we hand back our hook of
 * the same variant: the variant whose real address equals the driver's answer, or, if the driver
 * answered with an address we do not know, the newest variant at or below the requested version,
 * the per-thread one when CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is set.
 * "cuGetProcAddress" itself thus maps to our 4-argument resolver below 12000 and to the 5-argument
 * one from 12000 on.
 *
 * A driver function for a hooked base name is never handed out raw: that would be an allocating
 * entry point outside the budget. When the requested version is below every variant we hook (or
 * the variant is one whose real function we could not resolve), the answer is the driver's own
 * for a version that is too old (cuda.h): CUDA_SUCCESS, *pfn NULL, symbolStatus
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT. Mapping it to another variant instead could hand a
 * caller a function of another ABI (32-bit sizes against 64-bit ones); every ABI a driver still
 * exports is hooked (hooklist.h), so a refusal only meets versions older than any such ABI.
 */
#include "hooks/procaddr.h"

#include "common/log.h"
#include "driver/resolve.h"
#include "hooks/init.h"

#include <stdbool.h>
#include <string.h>

struct hook_row {
    const char *export;
    const char *base;
    int version;
    int per_thread;
    void *hook;
    size_t real_offset; /* of the real pointer in struct gpc_real */
};

static const struct hook_row rows[] = {
#define GPC_ROW(exp, base, ver, pt, pfn) {#exp, #base, ver, pt, (void *)&exp, offsetof(struct gpc_real, exp)},
    GPC_HOOKS(GPC_ROW)
#undef GPC_ROW
};
#define NROWS (sizeof rows / sizeof rows[0])

static void *real_of(const struct hook_row *r)
{
    return *(void **)((char *)&gpc_real + r->real_offset);
}

void *gpc_hook_for_export(const char *name)
{
    /* Every hooked name starts with "cu": other lookups leave after one comparison. */
    if (name[0] != 'c' || name[1] != 'u')
        return NULL;
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(rows[i].export, name) == 0)
            return rows[i].hook;
    return NULL;
}

bool gpc_procaddr_redirect(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (symbol[0] != 'c' || symbol[1] != 'u')
        return true;
    const struct hook_row *pick = NULL;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    bool hooked = false;
    long best = -1;
    for (size_t i = 0; i < NROWS; i++) {
        const struct hook_row *r = &rows[i];
        if (strcmp(r->base, symbol) != 0)
            continue;
        hooked = true;
        if (real_of(r) == *pfn) {
            pick = r;
            break;
        }
        if (r->version > version)
            continue;
        /* The wanted stream variant first, then the newest version. */
        long score = (r->per_thread == per_thread) * 1000000L + r->version;
        if (score > best) {
            best = score;
            pick = r;
        }
    }
    if (!hooked)
        return true;
    if (!pick || !real_of(pick)) {
        gpc_log(GPC_LOG_WARN, "cuGetProcAddress(%s, %d): %s; answered as for a version the driver does not "
                "support (the driver's function would not be capped)", symbol, version,
                pick ? "that variant is missing from libcuda's exports" : "below every variant gpucap wraps");
        *pfn = NULL;
        return false;
    }
    *pfn = pick->hook;
    return true;
}

GPC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGetProcAddress_v2, (symbol, pfn, cudaVersion, flags, symbolStatus));
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && !gpc_procaddr_redirect(symbol, pfn, cudaVersion, flags) &&
        symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return rc;
}

GPC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    gpc_init();
    CUresult rc = GPC_CALL_REAL(cuGetProcAddress, (symbol, pfn, cudaVersion, flags));
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn)
        gpc_procaddr_redirect(symbol, pfn, cudaVersion, flags);
    return rc;
}
