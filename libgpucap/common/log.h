/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h: the one log sink (log.c), "gpucap: " prefixed lines on stderr.
 */
#ifndef GPUCAP_COMMON_LOG_H
#define GPUCAP_COMMON_LOG_H

#include "common/defs.h"

enum gpc_log_level { GPC_LOG_LEVELS(GPC_ENUM_VALUE) };
extern int gpc_log_threshold;
/* Writes one line with write(2): no stdio buffer, no malloc; keeps errno. */
void gpc_log_line(enum gpc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define gpc_log(level, ...)                                  \
    do {                                                     \
        if ((int)(level) <= gpc_log_threshold)               \
            gpc_log_line((level), __VA_ARGS__);              \
    } while (0)

#endif
