/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.h: the usage report (report.c, in gpucap_core: the library at exit and `gpucap run` write it).
 */
#ifndef GPUCAP_COMMON_REPORT_H
#define GPUCAP_COMMON_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ledger.h"

/* One bucket of a device's usage timeline: from t_ns (UTC, ns), the highest and the last figure. */
struct gpc_tl_point {
    uint64_t t_ns, max, last;
    uint32_t denials;
};
/* The timeline of the device whose UUID is `uuid` (points in time order), for a JSON report. */
struct gpc_timeline {
    uint8_t uuid[16];
    int n;
    const struct gpc_tl_point *p;
};
/*
 * Writes the figures of every device entry of ledger `l` to `fd` with write(2) (no malloc, no
 * stdio), as text or one JSON object, with a "timeline" in each JSON device that one of
 * `tl[0..ntl)` matches, and the live changes of each budget with the peak of each budget period.
 * `ledger_fd`: a descriptor of the ledger's file holding no lock (-1: none), to tell which processes
 * still hold memory (gpc_ledger_entry_live). `audit` says the run was in audit mode. 0, or -errno.
 */
int gpc_report_write_timeline(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit,
                              const struct gpc_timeline *tl, int ntl);
/* What `gpucap run` adds to a report: a device's index and name (NVML's), the run's command,
 * how it ended (exit status, or the signal that killed it) and its wall time. */
struct gpc_report_device {
    uint8_t uuid[16];
    int index;          /* -1: unknown */
    char name[96];
};
struct gpc_report_run {
    char *const *argv;
    int argc;
    int status;         /* exit status when signal is 0 */
    int signal;         /* the signal that killed the command, or 0 */
    const char *signal_name;
    uint64_t wall_ns;
    const struct gpc_report_device *dev;
    int ndev;
};
/* gpc_report_write_timeline with the run's own facts (`run` may be NULL). */
int gpc_report_write_run(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit, const struct gpc_timeline *tl,
                         int ntl, const struct gpc_report_run *run);
/*
 * Writes a report to the file `path` as a new file renamed into place (never through a symbolic
 * link or an existing inode); refuses a directory writable by every user that is not sticky. The
 * content is what `write(fd, arg)` puts there (0 or -errno). 0, or -errno with the reason in why
 * ("is a symbolic link: refused", ...). No malloc, no stdio stream.
 */
int gpc_report_file(const char *path, int (*write)(int fd, void *arg), void *arg, char *why, size_t len);
/*
 * What gpc_report_file would refuse before writing, checked now (the directory, the name, the right
 * to create a file there), for a caller that wants to fail before the work whose report it is.
 * 0, or -errno with the reason in why.
 */
int gpc_report_file_check(const char *path, char *why, size_t len);

#endif
