/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c: the library's one log sink.
 *
 * Lines start with "gpucap: " and go to stderr through a single write(2), so lines from several
 * threads and processes do not interleave and no stdio buffer or lock is involved (the host process
 * may be in any state). Quiet by default: errors and warnings only; GPUCAP_LOG_LEVEL raises it.
 * In debug builds only, a failed GPC_ASSERT (defs.h) is one line here and an abort.
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int gpc_log_threshold = GPC_LOG_WARN;

void gpc_log_line(enum gpc_log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"error: ", "warning: ", "", ""};
    int saved = errno;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "gpucap: %s", tags[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
    errno = saved;
}

#ifdef GPC_DEBUG
void gpc_assert_fail(const char *what, const char *file, int line)
{
    gpc_log_line(GPC_LOG_ERROR, "assertion failed at %s:%d: %s (a debug build: aborting)", file, line, what);
    abort();
}
#endif
