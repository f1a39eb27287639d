/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c: this process's state, which every layer reads and only the start-up and shutdown of
 * the hooks layer (hooks/init.c) write: the settings loaded, whether start-up is done, and
 * whether calls only pass through.
 */
#include "core/state.h"

#include <stdatomic.h>
#include <stdbool.h>

struct gpc_settings gpc_config;
atomic_int gpc_initialized;
/* True until start-up is done, so that a hook re-entered during start-up passes through. */
atomic_bool gpc_passthrough = true;
/* Set by the destructor at exit, when the process's memory has left the ledger. */
atomic_bool gpc_closed;
