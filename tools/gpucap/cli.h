/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h: what the files of the `gpucap` command share. main.c dispatches to one cmd_* per
 * subcommand; help.c writes the help and the man page; shared.c holds the helpers the subcommands
 * share (finding the library, reading settings quietly, reading a ledger, naming devices). Every
 * setting the command reads or passes on is a row of libgpucap's options table.
 */
#ifndef GPUCAP_CLI_H
#define GPUCAP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The tools see the common layer of libgpucap only (tools/check_layers.sh checks it). */
#include "common/defs.h"
#include "common/faults.h"
#include "common/hooklist.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/report.h"
#include "common/units.h"
#include "tool.h"

/* Exit codes of the commands other than run: 0 success, 1 the check found a problem (or the command
 * failed), 2 usage error. `gpucap run` uses tool.h's 125/126/127 for its own failures. */
#define CLI_USAGE TOOL_EXIT_USAGE

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_inject(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_set_memory(int argc, char **argv);
/*
 * What every command's definition starts with (tool.h's TOOL_COMMAND): its word ("check"), its
 * flags table, its operands as the synopsis shows them ("[--json] [FILE]") and its one-line summary;
 * the name is "gpucap check". A usage error exits 2 unless the command sets .usage_exit.
 */
#define CLI_COMMAND(word, table, operands, summary_text) TOOL_COMMAND("gpucap " word, table, operands, summary_text)
/* Each command's flags and help (the rows --help and the man page print). */
extern const struct tool_cmd cli_run_cmd, cli_check_cmd, cli_doctor_cmd, cli_status_cmd, cli_inject_cmd,
    cli_plot_cmd, cli_setmem_cmd;

/* help.c: gpucap's own help (the commands and every GPUCAP_* setting), and gpucap(1). */
void cli_print_help(FILE *f);
void cli_print_man(FILE *f);
/* help.c: prints the options table (every GPUCAP_* setting) for --help. */
void cli_print_options(FILE *f);
/* The placeholder of a setting's value (help.c, gpucap.ini(5)): SIZE, N, TEXT, the choices, and a
 * boolean as `bool_form` ("0|1" for the variables, "true|false" in the ini file). */
static inline const char *cli_value_form(const struct gpc_option_def *d, const char *bool_form)
{
    switch (d->type) {
    case GPC_T_SIZE: return "SIZE";
    case GPC_T_BOOL: return bool_form;
    case GPC_T_INT: return "N";
    case GPC_T_STRING: return "TEXT";
    case GPC_T_ENUM: return d->choices;
    }
    return "VALUE";
}
/* The line a command's --help ends with: where the settings are listed. */
#define CLI_SETTINGS_NOTE "Settings (GPUCAP_* variables, ini keys): `gpucap --help` or man gpucap lists them all.\n"


/*
 * plot.c: the report of `gpucap run` with the timelines its processes wrote into `dir`: an SVG
 * picture when `dest` ends in .svg, else gpc_report_write_run's text or JSON (with a "timeline"
 * per device). `run` (may be NULL) adds the command's facts. 0, or -errno.
 */
int cli_report_write(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit, const char *dir,
                     const char *dest, const struct gpc_report_run *run);
/* plot.c: removes the timeline files of a run from `dir`. */
void cli_timeline_clean(const char *dir);

/*
 * A `gpucap run --memory-request` job registered with the user's arbiter (runqos.c): its directory
 * made under tool_qos_dir()/runs (into dir), holding its settings file (memory_limit `limit`,
 * memory_request `request`; GPUCAP_CONFIG set to it), the gpucap's pid, and a link to the arbiter's
 * socket. 0, or -1 with err set (nothing left behind).
 */
int cli_qos_register(const char *request, const char *limit, char *dir, size_t dirlen, char *err, size_t errlen);
/* Its files and directory removed (the ledger and timelines too). */
void cli_qos_unregister(const char *dir);

/*
 * shared.c: finds libgpucap.so: `given` (--lib), GPUCAP_LIB, beside this executable (build tree and
 * install prefix), the configured install path, /usr/local/lib/gpucap, /usr/lib/gpucap, each place
 * once. Writes the absolute path into buf and returns 0, or -ENOENT with *tried listing where it
 * looked.
 */
int cli_find_lib(const char *given, char *buf, size_t len, char *tried, size_t tried_len);
/* shared.c: reads settings from `envp` like the library does, without printing its error lines;
 * *platform is the storage for the platform file's settings (gpc_settings_load). */
void cli_settings_quiet(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp);
/*
 * shared.c: reads a ledger file into a private copy, as a file someone else may write: opened with
 * O_NONBLOCK|O_NOFOLLOW (a FIFO or a link planted at the path cannot hang or redirect the read),
 * then copied by gpc_ledger_copy (common/ledger.h: only a regular file no larger than a ledger,
 * with pread, checked, its identity whole). Returns the copy (free() it), or NULL with *why set:
 * cannot be opened, or the copy's fault. *age_ns (optional) is how long ago the file was last
 * written. *keep_fd (optional): the descriptor it read, left open (close it), which holds no lock:
 * what gpc_ledger_entry_live asks through; -1 without a copy.
 */
struct gpc_ledger *cli_read_ledger(const char *path, char *why, size_t len, uint64_t *age_ns, int *keep_fd);
/* The ledger of process `pid`: GPUCAP_LEDGER in /proc/PID/environ, else in one of its children's
 * (`gpucap run` names it in its command's environment, not its own), into out: 0 or -errno. */
int cli_ledger_of_pid(long pid, char *out, size_t len);
/*
 * shared.c: the index and name NVML gives the card `uuid` ("GPU-..."), through a dlopen of
 * libnvidia-ml.so.1 (as doctor does). 0, or -ENOENT (no NVML, or no such card): *index -1, name "".
 */
int cli_device_name(const char *uuid, int *index, char *name, size_t len);
/* shared.c: the UUID NVML gives the card of index `index` (its order, which `gpucap status` shows as
 * "GPU N"): 0, or -ENOENT (no NVML, or no such card). */
int cli_device_uuid(int index, char *uuid, size_t len);
/*
 * shared.c: how many of NVML's cards have a UUID that starts with `prefix` (case aside), the way the
 * per-UUID settings match; -1 when NVML lists no card (not there: nothing can be said).
 */
int cli_devices_matching(const char *prefix);
/* shared.c: "1 denial", "2 denials": the count and the noun, singular or plural. */
const char *cli_count(unsigned long long n, const char *one, const char *many, char *buf, size_t len);
/* shared.c: a duration as "45 s", "12 min", "3 h", "2 d". */
const char *cli_age(uint64_t ns, char *buf, size_t len);

#endif
