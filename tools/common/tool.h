/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.h: what gpucap's programs (gpucap, gpucap-webhook, gpucap-exporter, gpucap-agent) share on
 * the command line: one getopt_long parser over a table of flags, one start (each setting from its
 * variable, its default or its flag), one help layout (every flag with its value's placeholder, its
 * variable and default), one man page layout, one error style, the exit statuses, a server's stop
 * signals, and the sanitiser and check of names read from files a tenant writes.
 *
 * The error style is coreutils': one line, "PROGRAM: what is wrong (see 'PROGRAM --help')", on
 * stderr, then the usage exit status. -h/--help, -V/--version and the hidden --help-man are
 * answered by the parser itself; a program that takes no operand answers `help` as --help.
 */
#ifndef GPUCAP_TOOLS_TOOL_H
#define GPUCAP_TOOLS_TOOL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit statuses. A command that runs another (gpucap run) fails with 125 for its own failures and
 * usage errors, 126 when CMD cannot be executed, 127 when it is not found, as env(1) does; the
 * other commands with 1 for a failure or a problem found and 2 for a usage error. */
#define TOOL_EXIT_FAIL 1
#define TOOL_EXIT_USAGE 2
#define TOOL_EXIT_OWN 125
#define TOOL_EXIT_CANNOT_EXEC 126
#define TOOL_EXIT_NOT_FOUND 127

struct tool_flag {
    const char *name;  /* long name without "--" */
    char short_name;   /* 0: none */
    const char *arg;   /* the value's placeholder ("SIZE"); NULL: the flag takes no value */
    const char *env;   /* the variable with the same meaning, or NULL */
    const char *def;   /* the default shown in the help, or NULL */
    const char *doc;   /* one line (or a few, '\n'-separated) */
};

struct tool_cmd {
    const char *name;     /* "gpucap run", "gpucap-webhook": starts every message */
    const char *summary;  /* one line for the man page's NAME */
    const char *synopsis; /* what follows "usage: " (lines after the first: further forms) */
    const char *about;    /* the paragraph after the synopsis */
    const struct tool_flag *flags;
    int nflags;
    const char *tail;     /* after the flags: operands, exit status, examples (or NULL) */
    bool stop_at_operand; /* the first operand ends the options (CMD's own are CMD's) */
    int usage_exit;       /* the exit status of a usage error; 0: TOOL_EXIT_USAGE */
    int max_operands;     /* operands allowed after the options: 0 (the default), N, or TOOL_ANY */
    const char *no_operand; /* set: an operand is required, and this is the usage error without one */
    /* The man page's own sections (tool_man), NULL where there is none: */
    const char *man_description; /* DESCRIPTION (else `about`) */
    const char *man_notes_title, *man_notes; /* a section after OPTIONS ("SIZES") */
    const char *man_exit;        /* EXIT STATUS */
    const char *man_files;       /* FILES */
    const char *man_see_also;    /* SEE ALSO, as roff (".BR gpucap (1)") */
};
#define TOOL_ANY (-1)
/* .flags and .nflags of a struct tool_cmd from one array of struct tool_flag. */
#define TOOL_FLAGS(table) .flags = (table), .nflags = (int)(sizeof(table) / sizeof((table)[0]))
/*
 * What every definition starts with: the name ("gpucap-exporter"), the flags table, the operands
 * as the synopsis shows them after the name, the one-line summary: .name, .synopsis (the name, a
 * space, the operands), .summary, .flags and .nflags.
 */
#define TOOL_COMMAND(cmd_name, table, operands, summary_text) \
    .name = cmd_name, .synopsis = cmd_name " " operands, .summary = summary_text, TOOL_FLAGS(table)

/* Return values of tool_parse other than an operand's index. */
#define TOOL_PARSE_EXIT_OK (-1)  /* --help, --version or --help-man was answered: exit 0 */
#define TOOL_PARSE_EXIT_BAD (-2) /* a usage error was said: exit with tool_usage_exit(c) */

/*
 * Parses argv with getopt_long over c->flags plus -h/--help, -V/--version, --help-man, calling
 * on_flag(arg, index into c->flags, value or NULL) for each flag in command-line order (a
 * non-zero return: the callback said a usage error). Returns the index of the first operand,
 * TOOL_PARSE_EXIT_OK or TOOL_PARSE_EXIT_BAD.
 */
int tool_parse(const struct tool_cmd *c, int argc, char **argv, int (*on_flag)(void *arg, int flag, const char *value),
               void *arg);
/*
 * A program's or command's start: tool_parse, then more operands than c->max_operands, or none
 * where c->no_operand says one is required, are a usage error. Returns -1 to go on, with *first the
 * index of the first operand; else the exit status to return at once (0 after --help or --version,
 * tool_usage_exit(c) after a usage error, said).
 */
int tool_begin(const struct tool_cmd *c, int argc, char **argv, int (*on_flag)(void *arg, int flag, const char *value),
               void *arg, int *first);
/*
 * tool_begin keeping each flag given in values[] (c->nflags of them; what the caller put there
 * stays for a flag not given): its value, or "1" for a flag that takes none.
 */
int tool_begin_values(const struct tool_cmd *c, int argc, char **argv, const char **values, int *first);

/* Where a program's setting came from (tool_settings). */
enum tool_origin { TOOL_FROM_DEFAULT, TOOL_FROM_ENV, TOOL_FROM_FLAG };
/*
 * A program's settings: each flag's value from its variable, else its default (tool_env_values),
 * then the command line over them (tool_begin_values). from[] (NULL: not wanted) says where each
 * value came from. Returns as tool_begin.
 */
int tool_settings(const struct tool_cmd *c, int argc, char **argv, const char **values, enum tool_origin *from,
                  int *first);
/* How a setting's origin is named in a message: "--listen", "GPUCAP_WEBHOOK_LISTEN" or "default". */
const char *tool_origin_name(const struct tool_cmd *c, int flag, enum tool_origin from, char *buf, size_t len);
/*
 * A whole number from `min` to `max` in `text` (a setting named `what`: "--rounds") into *out; 0,
 * or -1 after the usage error ("expected a whole number from MIN to MAX", "of at most MAX" where
 * MIN is 0).
 */
int tool_number(const struct tool_cmd *c, const char *what, const char *text, unsigned min, unsigned max,
                unsigned *out);
/* The exit status of c's usage errors: c->usage_exit, else TOOL_EXIT_USAGE. */
int tool_usage_exit(const struct tool_cmd *c);
/*
 * A server's signals: SIGTERM and SIGINT set *stop (its loop ends), SIGPIPE is ignored (a peer gone
 * is an error on its socket). Call once, before any thread.
 */
void tool_stop_on_signals(volatile sig_atomic_t *stop);
/* One usage error line: "NAME: message (see 'NAME --help')". Returns -1, what a flag callback
 * returns for a usage error (`return tool_usage_error(...)`). */
int tool_usage_error(const struct tool_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One error line "NAME: message", for what is not a usage error. */
void tool_error(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The help: usage, about, every flag with its placeholder, variable and default, the tail. */
void tool_help(const struct tool_cmd *c, FILE *f);
/*
 * The same rows as a man page (common/man.h's roff): .TH, NAME (c->summary), SYNOPSIS, DESCRIPTION,
 * OPTIONS (each flag with its placeholder, its variable and default), the notes, EXIT STATUS,
 * ENVIRONMENT (each flag's variable), FILES, SEE ALSO.
 */
void tool_man(const struct tool_cmd *c, FILE *f);
/* "NAME VERSION" on stdout. */
void tool_version(const char *name);
/* Each flag's value from its variable (else its default; NULL without one) into values[]. */
void tool_env_values(const struct tool_cmd *c, const char **values);

/* Reads from `fd` into buf until `len` bytes, the end of the file or an error (EINTR is retried):
 * the bytes read. */
size_t tool_read_full(int fd, char *buf, size_t len);

/* Writes `text` as a JSON string (quotes included): '"', '\\' and control characters escaped. */
void tool_json_string(FILE *f, const char *text);

/*
 * A name read from a file someone else writes (a ledger's pod, container, version): at most
 * `field_size` bytes of `field` (no terminator needed there) and at most out_size - 1, every byte
 * but [A-Za-z0-9._+-] shown as '?', NUL-terminated in `out`. Returns out. Safe to print as it is,
 * in JSON, in a Prometheus label or in SVG.
 */
char *tool_field_text(char *out, size_t out_size, const char *field, size_t field_size);
/*
 * A name as a pod's directory or the kubelet spells it (a pod UID, a container name): 1 to 63 of
 * [A-Za-z0-9._-], not "." or "..", so safe as one component of a path.
 */
bool tool_name_ok(const char *name);

/*
 * The directory of this user's burstable-memory arbiter (`gpucap-agent --local`) and of the
 * `gpucap run` jobs it arbitrates (runs/ there): $XDG_RUNTIME_DIR/gpucap when XDG_RUNTIME_DIR names
 * an absolute path, else /tmp/gpucap-<euid>. Into buf (the path only: nothing is made).
 */
void tool_qos_dir(char *buf, size_t len);

#endif
