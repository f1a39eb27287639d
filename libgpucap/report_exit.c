/*
 * report_exit.c: the report that a process writes at exit when GPUCAP_REPORT is set.
 *
 * Written from a destructor, so only by processes that exit normally and that used CUDA under a
 * budget. The figures are the ledger's: with a shared ledger, those of every process that shares
 * it, so the last process to exit writes the whole picture. `gpucap run` does not set
 * GPUCAP_REPORT for its command: it writes the one report of the run itself.
 */
#include "internal.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

__attribute__((destructor)) static void report_at_exit(void)
{
    const struct gpc_value *v = &gpc_settings.opt[GPC_OPT_REPORT];
    if (atomic_load(&gpc_initialized))
        gpc_timeline_write_file();
    if (!atomic_load(&gpc_initialized) || !v->set || v->bad || !v->text[0])
        return;
    bool to_stderr = strcmp(v->text, "-") == 0;
    int fd = to_stderr ? STDERR_FILENO : open(v->text, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        gpc_log_line(GPC_LOG_ERROR, "GPUCAP_REPORT=%s cannot be written; no report", v->text);
        return;
    }
    const struct gpc_value *fmt = &gpc_settings.opt[GPC_OPT_REPORT_FORMAT];
    const struct gpc_value *mode = &gpc_settings.opt[GPC_OPT_MODE];
    const struct gpc_timeline *tl;
    int ntl = gpc_timeline_collect(&tl);
    gpc_report_write_timeline(fd, gpc_ledger, fmt->set && !fmt->bad && fmt->u.e == 1,
                              mode->set && !mode->bad && mode->u.e == 1, tl, ntl);
    if (!to_stderr)
        close(fd);
}
