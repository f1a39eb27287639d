/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tool.c: the command line every gpucap program shares (tool.h): getopt_long over a table of flags
 * (the option strings are built from the table, so a flag cannot be documented and not parsed or
 * the reverse), the help and man page made from the same rows, one-line usage errors, and the
 * sanitiser of names read from tenants' files.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucap_version.h"
#include "man.h"

#define MAX_FLAGS 64
enum { ID_HELP = 1000, ID_VERSION, ID_MAN, ID_BASE = 2000 };

void tool_error(const char *name, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", name, line);
}

int tool_usage_error(const struct tool_cmd *c, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see '%s --help')\n", c->name, line, c->name);
    return -1;
}

void tool_version(const char *name)
{
    printf("%s %s\n", name, GPUCAP_VERSION_STRING);
}

/* The program's own name for --version: "gpucap run" is gpucap's. */
static void version_of(const struct tool_cmd *c)
{
    char name[64];
    snprintf(name, sizeof name, "%s", c->name);
    name[strcspn(name, " ")] = '\0';
    tool_version(name);
}

/* "--name", "-x, --name": how the argument was written, for a message. */
static const char *flag_text(const struct tool_cmd *c, int id, char *buf, size_t len)
{
    if (id >= 0 && id < c->nflags)
        snprintf(buf, len, "--%s", c->flags[id].name);
    else
        snprintf(buf, len, "?");
    return buf;
}

int tool_parse(const struct tool_cmd *c, int argc, char **argv, int (*on_flag)(void *arg, int flag, const char *value),
               void *arg)
{
    struct option longopts[MAX_FLAGS + 4];
    char shorts[3 * MAX_FLAGS + 8];
    size_t ns = 0;
    int n = 0;
    /* '+': stop at the first operand; ':': a missing value is told apart from an unknown flag. */
    if (c->stop_at_operand)
        shorts[ns++] = '+';
    shorts[ns++] = ':';
    for (int i = 0; i < c->nflags && i < MAX_FLAGS; i++) {
        const struct tool_flag *f = &c->flags[i];
        longopts[n++] = (struct option){f->name, f->arg ? required_argument : no_argument, NULL, ID_BASE + i};
        if (f->short_name) {
            shorts[ns++] = f->short_name;
            if (f->arg)
                shorts[ns++] = ':';
        }
    }
    longopts[n++] = (struct option){"help", no_argument, NULL, ID_HELP};
    longopts[n++] = (struct option){"version", no_argument, NULL, ID_VERSION};
    longopts[n++] = (struct option){"help-man", no_argument, NULL, ID_MAN};
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    shorts[ns++] = 'h';
    shorts[ns++] = 'V';
    shorts[ns] = '\0';

    optind = 0; /* a full reset of getopt's state: parsers run one after another in one process */
    opterr = 0;
    int opt, longindex;
    while ((opt = getopt_long(argc, argv, shorts, longopts, &longindex)) != -1) {
        char buf[80];
        if (opt == ID_HELP || opt == 'h') {
            tool_help(c, stdout);
            return TOOL_PARSE_EXIT_OK;
        }
        if (opt == ID_VERSION || opt == 'V') {
            version_of(c);
            return TOOL_PARSE_EXIT_OK;
        }
        if (opt == ID_MAN) {
            tool_man(c, stdout);
            return TOOL_PARSE_EXIT_OK;
        }
        if (opt == '?' || opt == ':') {
            const char *bad = argv[optind - 1];
            /* A short option's letter is optopt; a long one is the word as written. */
            bool lng = bad && bad[0] == '-' && bad[1] == '-';
            if (opt == ':' && lng)
                tool_usage_error(c, "option '%.*s' needs a value", (int)strcspn(bad, "="), bad);
            else if (opt == ':')
                tool_usage_error(c, "option '-%c' needs a value", optopt);
            else if (lng && optopt)
                tool_usage_error(c, "option '%.*s' takes no value", (int)strcspn(bad, "="), bad);
            else if (lng)
                tool_usage_error(c, "unknown option '%.*s'", (int)strcspn(bad, "="), bad);
            else
                tool_usage_error(c, "unknown option '-%c'", optopt);
            return TOOL_PARSE_EXIT_BAD;
        }
        int id = -1;
        if (opt >= ID_BASE)
            id = opt - ID_BASE;
        else
            for (int i = 0; i < c->nflags && id < 0; i++)
                if (c->flags[i].short_name == opt)
                    id = i;
        if (id < 0) {
            tool_usage_error(c, "unknown option '%s'", flag_text(c, id, buf, sizeof buf));
            return TOOL_PARSE_EXIT_BAD;
        }
        if (on_flag && on_flag(arg, id, c->flags[id].arg ? optarg : NULL) != 0)
            return TOOL_PARSE_EXIT_BAD;
    }
    return optind;
}

int tool_usage_exit(const struct tool_cmd *c)
{
    return c->usage_exit ? c->usage_exit : TOOL_EXIT_USAGE;
}

int tool_begin(const struct tool_cmd *c, int argc, char **argv, int (*on_flag)(void *arg, int flag, const char *value),
               void *arg, int *first)
{
    int i = tool_parse(c, argc, argv, on_flag, arg);
    if (i == TOOL_PARSE_EXIT_OK)
        return 0;
    if (i < 0)
        return tool_usage_exit(c);
    /* A program without commands or operands answers `help` as --help (gpucap answers `help [CMD]`). */
    if (c->max_operands == 0 && argc - i == 1 && strcmp(argv[i], "help") == 0 && !strchr(c->name, ' ')) {
        tool_help(c, stdout);
        return 0;
    }
    if (c->max_operands != TOOL_ANY && argc - i > c->max_operands) {
        tool_usage_error(c, "unexpected argument '%s'", argv[i + c->max_operands]);
        return tool_usage_exit(c);
    }
    if (c->no_operand && i >= argc) {
        tool_usage_error(c, "%s", c->no_operand);
        return tool_usage_exit(c);
    }
    *first = i;
    return -1;
}

/* What tool_begin_values and tool_settings keep of each flag given. */
struct kept {
    const char **values;
    enum tool_origin *from;
};

static int keep(void *arg, int flag, const char *value)
{
    struct kept *k = arg;
    k->values[flag] = value ? value : "1";
    if (k->from)
        k->from[flag] = TOOL_FROM_FLAG;
    return 0;
}

int tool_begin_values(const struct tool_cmd *c, int argc, char **argv, const char **values, int *first)
{
    struct kept k = {values, NULL};
    return tool_begin(c, argc, argv, keep, &k, first);
}

int tool_settings(const struct tool_cmd *c, int argc, char **argv, const char **values, enum tool_origin *from,
                  int *first)
{
    tool_env_values(c, values);
    for (int i = 0; from && i < c->nflags; i++)
        from[i] = values[i] && values[i] != c->flags[i].def ? TOOL_FROM_ENV : TOOL_FROM_DEFAULT;
    struct kept k = {values, from};
    return tool_begin(c, argc, argv, keep, &k, first);
}

const char *tool_origin_name(const struct tool_cmd *c, int flag, enum tool_origin from, char *buf, size_t len)
{
    if (from == TOOL_FROM_FLAG)
        snprintf(buf, len, "--%s", c->flags[flag].name);
    else
        snprintf(buf, len, "%s", from == TOOL_FROM_ENV ? c->flags[flag].env : "default");
    return buf;
}

int tool_number(const struct tool_cmd *c, const char *what, const char *text, unsigned min, unsigned max,
                unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (!errno && end != text && !*end && v >= min && v <= max) {
        *out = (unsigned)v;
        return 0;
    }
    if (min)
        return tool_usage_error(c, "%s '%s': expected a whole number from %u to %u", what, text, min, max);
    return tool_usage_error(c, "%s '%s': expected a whole number of at most %u", what, text, max);
}

static volatile sig_atomic_t *stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    *stop_flag = 1;
}

void tool_stop_on_signals(volatile sig_atomic_t *stop)
{
    stop_flag = stop;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void tool_env_values(const struct tool_cmd *c, const char **values)
{
    for (int i = 0; i < c->nflags; i++) {
        const char *e = c->flags[i].env ? getenv(c->flags[i].env) : NULL;
        values[i] = e && *e ? e : c->flags[i].def;
    }
}

/* "  -m, --memory SIZE" */
static int flag_head(const struct tool_flag *f, char *buf, size_t len)
{
    return snprintf(buf, len, "  %c%c%s--%s%s%s", f->short_name ? '-' : ' ', f->short_name ? f->short_name : ' ',
                    f->short_name ? ", " : "  ", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
}

void tool_help(const struct tool_cmd *c, FILE *f)
{
    fprintf(f, "usage: %s\n", c->synopsis);
    if (c->about)
        fprintf(f, "\n%s\n", c->about);
    fputc('\n', f);
    for (int i = 0; i < c->nflags; i++) {
        const struct tool_flag *fl = &c->flags[i];
        char head[128];
        int n = flag_head(fl, head, sizeof head);
        /* The documentation in a column; a long head puts it on the next line. */
        const char *doc = fl->doc;
        if (n > 28)
            fprintf(f, "%s\n%-30s", head, "");
        else
            fprintf(f, "%-28s  ", head);
        for (const char *p = doc; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fprintf(f, "%-30s", "");
        }
        if (fl->env || fl->def) {
            fprintf(f, "\n%-30s", "");
            if (fl->env)
                fprintf(f, "(%s%s%s)", fl->env, fl->def ? ", default " : "", fl->def ? fl->def : "");
            else
                fprintf(f, "(default %s)", fl->def);
        }
        fputc('\n', f);
    }
    fprintf(f, "  -h, --help                  this text\n  -V, --version               the version\n");
    if (c->tail)
        fprintf(f, "\n%s", c->tail);
}

void tool_man(const struct tool_cmd *c, FILE *f)
{
    char upper[64], text[1200];
    size_t i = 0;
    for (; c->name[i] && i < sizeof upper - 1; i++)
        upper[i] = c->name[i] >= 'a' && c->name[i] <= 'z' ? (char)(c->name[i] - 'a' + 'A') : c->name[i];
    upper[i] = '\0';
    fprintf(f, ".TH %s 1 \"\" \"gpucap %s\" \"User Commands\"\n", upper, GPUCAP_VERSION_STRING);
    snprintf(text, sizeof text, "%s - %s", c->name, c->summary ? c->summary : "");
    gpc_man_section(f, "NAME", text);
    fputs(".SH SYNOPSIS\n.nf\n", f);
    gpc_man_text(f, c->synopsis);
    fputc('\n', f);
    gpc_man_text(f, c->name);
    fputs(" --version | --help\n.fi\n", f);
    gpc_man_section(f, "DESCRIPTION", c->man_description ? c->man_description : c->about ? c->about : "");
    fputs(".SH OPTIONS\n", f);
    for (int k = 0; k < c->nflags; k++) {
        const struct tool_flag *fl = &c->flags[k];
        int n = snprintf(text, sizeof text, "%s.", fl->doc);
        if (fl->env && n > 0 && (size_t)n < sizeof text)
            n += snprintf(text + n, sizeof text - (size_t)n, " Variable %s.", fl->env);
        if (fl->def && n > 0 && (size_t)n < sizeof text)
            snprintf(text + n, sizeof text - (size_t)n, " Default %s.", fl->def);
        gpc_man_option(f, fl->name, fl->arg, text);
    }
    gpc_man_option(f, "version", NULL, "Print the version and exit (also -V).");
    gpc_man_option(f, "help", NULL, "Print the options and exit (also -h).");
    if (c->man_notes_title && c->man_notes)
        gpc_man_section(f, c->man_notes_title, c->man_notes);
    gpc_man_section(f, "EXIT STATUS", c->man_exit ? c->man_exit : c->tail ? c->tail : "");
    fputs(".SH ENVIRONMENT\n", f);
    for (int k = 0; k < c->nflags; k++) {
        if (!c->flags[k].env)
            continue;
        snprintf(text, sizeof text, "As --%s; the flag wins.", c->flags[k].name);
        gpc_man_item(f, c->flags[k].env, NULL, text);
    }
    if (c->man_files)
        gpc_man_section(f, "FILES", c->man_files);
    if (c->man_see_also)
        fprintf(f, ".SH SEE ALSO\n%s\n", c->man_see_also);
}

size_t tool_read_full(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n < len) {
        ssize_t got = read(fd, buf + n, len - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    return n;
}

void tool_json_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if ((unsigned char)*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", (unsigned char)*p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A character of a name: [A-Za-z0-9._-]. */
static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

bool tool_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 63 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(name[i]))
            return false;
    return true;
}

char *tool_field_text(char *out, size_t out_size, const char *field, size_t field_size)
{
    size_t n = strnlen(field, field_size);
    if (n >= out_size)
        n = out_size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = name_char(field[i]) || field[i] == '+' ? field[i] : '?';
    out[n] = '\0';
    return out;
}

void tool_qos_dir(char *buf, size_t len)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/' && strlen(x) + 8 < len)
        snprintf(buf, len, "%s/gpucap", x);
    else
        snprintf(buf, len, "/tmp/gpucap-%u", (unsigned)geteuid());
}
