/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report_exit.c: the report that a process writes at exit when GPUCAP_REPORT is set.
 *
 * Written by the exit sequence (init.c), so only by processes that exit normally and that used
 * CUDA under a budget. The figures are the ledger's: with a shared ledger, those of every process that shares
 * it, so the last process to exit writes the whole picture. `gpucap run` does not set
 * GPUCAP_REPORT for its command: it writes the one report of the run itself.
 */
#include "common/log.h"
#include "common/options.h"
#include "common/report.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/state.h"
#include "core/timeline.h"
#include "hooks/init.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

struct gpc_exit_report {
    bool json, audit;
    const struct gpc_timeline *tl;
    int ntl;
};

static int write_report(int fd, void *arg)
{
    const struct gpc_exit_report *r = arg;
    return gpc_report_write_timeline(fd, gpc_ledger, gpc_ledger_reader_fd(), r->json, r->audit, r->tl, r->ntl);
}

void gpc_report_at_exit(void)
{
    const char *path = gpc_opt_string(&gpc_config, GPC_OPT_REPORT);
    if (atomic_load(&gpc_initialized))
        gpc_timeline_write_file();
    if (!atomic_load(&gpc_initialized) || !path || !path[0])
        return;
    gpc_budget_flush_counts();
    struct gpc_exit_report r = {
        .json = gpc_opt_enum(&gpc_config, GPC_OPT_REPORT_FORMAT) == GPC_REPORT_JSON,
        .audit = gpc_opt_enum(&gpc_config, GPC_OPT_MODE) == GPC_MODE_AUDIT};
    r.ntl = gpc_timeline_collect(&r.tl);
    char why[256];
    if (strcmp(path, "-") == 0)
        write_report(STDERR_FILENO, &r);
    else if (gpc_report_file(path, write_report, &r, why, sizeof why) != 0)
        gpc_log_line(GPC_LOG_ERROR, "report %s: %s; no report", path, why);
}
