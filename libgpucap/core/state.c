/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c: this process's state, which every layer reads: the settings loaded (written here
 * alone: the load at start-up and the limits of a rewritten file), whether start-up is done, and
 * whether calls only pass through (written by the start-up and the exit of hooks/init.c).
 */
#include "core/state.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

struct gpc_settings gpc_config;
/* Under the platform's lock: the platform file's own settings, gpc_config.platform. */
static struct gpc_settings platform_config;
atomic_int gpc_initialized;
/* True until start-up is done, so that a hook re-entered during start-up passes through. */
atomic_bool gpc_passthrough = true;
/* Set by the exit sequence, when the process's memory has left the ledger. */
atomic_bool gpc_closed;

void gpc_config_load(char *const *envp)
{
    gpc_settings_load(&gpc_config, &platform_config, envp);
}

void gpc_config_adopt_limits(const struct gpc_settings *fresh)
{
    gpc_config.opt[GPC_OPT_MEMORY_LIMIT] = fresh->opt[GPC_OPT_MEMORY_LIMIT];
    gpc_config.opt[GPC_OPT_MEMORY_LIMIT_MAX] = fresh->opt[GPC_OPT_MEMORY_LIMIT_MAX];
    gpc_config.opt[GPC_OPT_MEMORY_REQUEST] = fresh->opt[GPC_OPT_MEMORY_REQUEST];
    gpc_config.opt[GPC_OPT_MEMORY_GRANT] = fresh->opt[GPC_OPT_MEMORY_GRANT];
    memcpy(gpc_config.dev_limit, fresh->dev_limit, sizeof gpc_config.dev_limit);
    memcpy(gpc_config.dev_request, fresh->dev_request, sizeof gpc_config.dev_request);
    memcpy(gpc_config.dev_grant, fresh->dev_grant, sizeof gpc_config.dev_grant);
    memcpy(gpc_config.uuid_limit, fresh->uuid_limit, sizeof gpc_config.uuid_limit);
    gpc_config.n_uuid = fresh->n_uuid;
    /* Under the lock the platform file bounds every limit: the one just read is the platform's now. */
    if (gpc_config.platform && fresh->platform)
        platform_config = *fresh->platform;
}
