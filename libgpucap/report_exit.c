/*
 * report_exit.c: the report that a process writes at exit when GPUCAP_REPORT is set.
 *
 * Written from a destructor, so only by processes that exit normally and that used CUDA under a
 * budget. The figures are the ledger's: with a shared ledger, those of every process that shares
 * it, so the last process to exit writes the whole picture. `gpucap run` does not set
 * GPUCAP_REPORT for its command: it writes the one report of the run itself.
 */
#include "internal.h"

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
    return gpc_report_write_timeline(fd, gpc_ledger, r->json, r->audit, r->tl, r->ntl);
}

__attribute__((destructor)) static void report_at_exit(void)
{
    const struct gpc_value *v = &gpc_settings.opt[GPC_OPT_REPORT];
    if (atomic_load(&gpc_initialized))
        gpc_timeline_write_file();
    if (!atomic_load(&gpc_initialized) || !v->set || v->bad || !v->text[0])
        return;
    const struct gpc_value *fmt = &gpc_settings.opt[GPC_OPT_REPORT_FORMAT];
    const struct gpc_value *mode = &gpc_settings.opt[GPC_OPT_MODE];
    struct gpc_exit_report r = {.json = fmt->set && !fmt->bad && fmt->u.e == 1,
                                .audit = mode->set && !mode->bad && mode->u.e == 1};
    r.ntl = gpc_timeline_collect(&r.tl);
    char why[256];
    if (strcmp(v->text, "-") == 0)
        write_report(STDERR_FILENO, &r);
    else if (gpc_report_file(v->text, write_report, &r, why, sizeof why) != 0)
        gpc_log_line(GPC_LOG_ERROR, "report %s: %s; no report", v->text, why);
}
