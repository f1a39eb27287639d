/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h: what the files of the `gpucap` command share. main.c dispatches to one cmd_* per
 * subcommand; every setting the command reads or passes on is a row of libgpucap's options table.
 */
#ifndef GPUCAP_CLI_H
#define GPUCAP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The tools see the common layer of libgpucap only (tests/layers.sh checks it). */
#include "common/defs.h"
#include "common/faults.h"
#include "common/hooklist.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/report.h"
#include "common/units.h"

/* Exit codes: 0 success, 1 the check found a problem (or the command failed), 2 usage error. */
#define CLI_USAGE 2

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_inject(int argc, char **argv);
int cmd_plot(int argc, char **argv);

/*
 * plot.c: the report of `gpucap run` with the timelines its processes wrote into `dir`: an SVG
 * picture when `dest` ends in .svg, else gpc_report_write's text or JSON (with a "timeline" per
 * device). 0, or -errno.
 */
int cli_report_write(int fd, const struct gpc_ledger *l, bool json, bool audit, const char *dir, const char *dest);
/* plot.c: removes the timeline files of a run from `dir`. */
void cli_timeline_clean(const char *dir);

/* main.c: prints the options table (every GPUCAP_* setting) for --help. */
void cli_print_options(FILE *f);
/* main.c: the line a command's --help ends with: where the settings are listed. */
void cli_print_settings_note(FILE *f);
/*
 * main.c: finds libgpucap.so: `given` (--lib), GPUCAP_LIB, beside this executable (build tree and
 * install prefix), the configured install path, /usr/local/lib/gpucap, /usr/lib/gpucap. Writes the absolute path into buf and
 * returns 0, or -ENOENT with *tried listing where it looked.
 */
int cli_find_lib(const char *given, char *buf, size_t len, char *tried, size_t tried_len);
/* main.c: reads settings from `envp` like the library does, without printing its error lines. */
void cli_settings_quiet(struct gpc_settings *s, char *const *envp);
/*
 * main.c: maps a ledger file read-only. Returns the mapping (munmap with sizeof(struct gpc_ledger))
 * or NULL with *why set: cannot be opened, truncated, or refused by gpc_ledger_check (the library's
 * own check: not a ledger, another layout version, a corrupted header or device entry). A device's
 * use above its limit is no fault: audit mode admits past it.
 */
const struct gpc_ledger *cli_map_ledger(const char *path, char *why, size_t len);

#endif
