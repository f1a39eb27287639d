/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c: every setting of gpucap, one table.
 *
 * gpc_option_defs[] is the only list of settings: the environment parser and the ini parser here,
 * and the `gpucap` CLI's help and `check` command all read it. A setting has one name: the ini key
 * `memory_limit` in [gpucap] is the variable GPUCAP_MEMORY_LIMIT. Per-device forms are
 * GPUCAP_MEMORY_LIMIT_<ordinal> and an ini section [device.<ordinal>], and by device UUID (or a
 * prefix of it, as CUDA_VISIBLE_DEVICES takes them) GPUCAP_MEMORY_LIMIT_GPU-<uuid> and
 * [device.GPU-<uuid>]: a UUID names the same card whatever ordinal a process gives it.
 *
 * The environment overrides the file, key by key. A malformed value is one error line naming the
 * setting, the value and the accepted forms, and the value is marked bad so that its safe state
 * applies: for a memory limit that is a budget of 0 (every allocation denied), never "no limit".
 * An ini file that cannot be read or parsed, or that holds an unknown key, puts every budget that
 * the environment does not set at 0; an unknown GPUCAP_* variable (a typo of a limit, most likely)
 * puts every budget at 0. This runs once, at the first CUDA call, never on the allocation path.
 * In a secure-execution process (setuid and the like) the environment is not read at all: only the
 * system settings file, by its fixed path (load_secure).
 *
 * The platform's lock: when the platform file (GPC_SYSTEM_CONFIG, /etc/gpucap/gpucap.ini) says
 * `lock = true` in [gpucap], the budget belongs to the platform. GPUCAP_CONFIG is not read, and the
 * environment may only tighten: a memory limit applies only where it is below the file's (both are
 * kept and the lower one wins per device, so a percentage and a size compare on the real card),
 * mode only from audit to enforce, the ledger and its sharing stay as the file says, the context
 * reserve only grows. Each refused override is one warning line naming the variable and the file.
 * A platform file that exists but cannot be read counts as locked with an error: its budgets are 0.
 * The path is fixed at build time: the test suite builds a copy of the library with its own path,
 * and nothing at run time can point the library at another "platform" file.
 */
#include "common/options.h"

#include "common/defs.h"
#include "common/proc.h"
#include "common/log.h"
#include "common/units.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#ifndef GPC_SYSTEM_CONFIG
#define GPC_SYSTEM_CONFIG "/etc/gpucap/gpucap.ini"
#endif
/* The dynamic loader's preload list: the webhook mounts it, as it mounts the platform file. */
#ifndef GPC_PRELOAD_FILE
#define GPC_PRELOAD_FILE "/etc/ld.so.preload"
#endif

const struct gpc_option_def gpc_option_defs[GPC_OPT__COUNT] = {
    [GPC_OPT_MEMORY_LIMIT] = {"memory_limit", "GPUCAP_MEMORY_LIMIT", GPC_T_SIZE, NULL, NULL,
                              GPC_OPTF_PER_DEVICE | GPC_OPTF_LOCK_LOWER,
                              "device memory budget for every device (per device: "
                              "GPUCAP_MEMORY_LIMIT_<ordinal> or _GPU-<uuid>, ini [device.<ordinal>] or "
                              "[device.GPU-<uuid>]); unset: no limit"},
    [GPC_OPT_CONFIG] = {"config", "GPUCAP_CONFIG", GPC_T_STRING, GPC_SYSTEM_CONFIG, NULL,
                        GPC_OPTF_ENV_ONLY | GPC_OPTF_LOCK_FIXED,
                        "ini file to read; the default path is read only if it exists"},
    [GPC_OPT_LOG_LEVEL] = {"log_level", "GPUCAP_LOG_LEVEL", GPC_T_ENUM, "warn", GPC_CHOICES(GPC_LOG_LEVELS), 0,
                           "how much the library says on stderr"},
    [GPC_OPT_LEDGER] = {"ledger", "GPUCAP_LEDGER", GPC_T_STRING, NULL, NULL, GPC_OPTF_LOCK_FIXED,
                        "file shared by the processes that share a budget; default /tmp/gpucap-<uid>.ledger "
                        "(one per container and user); 'off': a budget private to each process"},
    [GPC_OPT_LEDGER_GROUP] = {"ledger_group", "GPUCAP_LEDGER_GROUP", GPC_T_BOOL, "0", NULL, GPC_OPTF_LOCK_FIXED,
                              "create the ledger group-writable (0660) and accept one owned by another user of "
                              "the group, for containers where processes of several users share a budget"},
    [GPC_OPT_MODE] = {"mode", "GPUCAP_MODE", GPC_T_ENUM, "enforce", GPC_CHOICES(GPC_MODES), GPC_OPTF_LOCK_LOWER,
                      "enforce: deny what exceeds the budget; audit: deny nothing, log and count each "
                      "allocation the budget would have denied (the report's peak is the budget the job needs)"},
    [GPC_OPT_REPORT] = {"report", "GPUCAP_REPORT", GPC_T_STRING, NULL, NULL, 0,
                        "write a usage report at process exit to this file ('-': stderr): per device budget, "
                        "peak, allocations, frees, denials, largest request, first denial"},
    [GPC_OPT_REPORT_FORMAT] = {"report_format", "GPUCAP_REPORT_FORMAT", GPC_T_ENUM, "text", GPC_CHOICES(GPC_REPORT_FORMATS), 0,
                               "format of that report"},
    [GPC_OPT_FAIL_AFTER] = {"fail_after", "GPUCAP_FAIL_AFTER", GPC_T_INT, NULL, NULL, 0,
                            "fault injection: every allocation after the N-th of this process answers "
                            "CUDA_ERROR_OUT_OF_MEMORY without reaching the driver"},
    [GPC_OPT_FAIL_RATE] = {"fail_rate", "GPUCAP_FAIL_RATE", GPC_T_STRING, NULL, NULL, 0,
                           "fault injection: this share (0 to 1, e.g. 0.05) of allocations answers "
                           "CUDA_ERROR_OUT_OF_MEMORY; which ones is fixed by fail_seed"},
    [GPC_OPT_FAIL_SEED] = {"fail_seed", "GPUCAP_FAIL_SEED", GPC_T_INT, "0", NULL, 0,
                           "seed of fail_rate: the same seed fails the same allocations (by their index)"},
    [GPC_OPT_BACKTRACE] = {"backtrace", "GPUCAP_BACKTRACE", GPC_T_BOOL, "0", NULL, 0,
                           "log the call stack of each denied allocation (libunwind, loaded at the first denial)"},
    [GPC_OPT_LIB] = {"lib", "GPUCAP_LIB", GPC_T_STRING, NULL, NULL, GPC_OPTF_ENV_ONLY,
                     "read by the gpucap command: the libgpucap.so that `gpucap run` preloads and `gpucap "
                     "doctor` checks; default: found beside the command (build tree, or lib/<multiarch>/gpucap of "
                     "its install prefix), then in /usr/local/lib/gpucap, /usr/lib/gpucap"},
    [GPC_OPT_CONTEXT_RESERVE] = {"context_reserve", "GPUCAP_CONTEXT_RESERVE", GPC_T_SIZE, NULL, NULL,
                                 GPC_OPTF_LOCK_RAISE,
                                 "device memory charged per CUDA context (primary, created, green), which no "
                                 "allocation call reports, charged when it is made; unset: 768MiB on cards of 64GiB or more, "
                                 "384MiB from 24GiB, 256MiB below 24GiB; where NVML lists the process, what the "
                                 "card holds beyond it is charged too (up to 4 reserves); 0: contexts are not charged"},
    [GPC_OPT_POD_NAMESPACE] = {"pod_namespace", "GPUCAP_POD_NAMESPACE", GPC_T_STRING, NULL, NULL, GPC_OPTF_IDENTITY,
                               "identity recorded in the ledger for gpucap-exporter: the pod's namespace (the "
                               "webhook sets it from the downward API); never changes a limit"},
    [GPC_OPT_POD_NAME] = {"pod_name", "GPUCAP_POD_NAME", GPC_T_STRING, NULL, NULL, GPC_OPTF_IDENTITY,
                          "identity recorded in the ledger: the pod's name; never changes a limit"},
    [GPC_OPT_POD_UID] = {"pod_uid", "GPUCAP_POD_UID", GPC_T_STRING, NULL, NULL, GPC_OPTF_IDENTITY,
                         "identity recorded in the ledger: the pod's UID; never changes a limit"},
    [GPC_OPT_CONTAINER_NAME] = {"container_name", "GPUCAP_CONTAINER_NAME", GPC_T_STRING, NULL, NULL,
                                GPC_OPTF_IDENTITY,
                                "identity recorded in the ledger: the container's name; never changes a limit"},
    [GPC_OPT_TIMELINE] = {"timeline", "GPUCAP_TIMELINE", GPC_T_STRING, NULL, NULL, GPC_OPTF_ENV_ONLY,
                          "set by `gpucap run --report` for its command: a directory where each process "
                          "writes how its devices' usage moved over time (timeline.<pid>) at exit"},
    [GPC_OPT_MEMORY_LIMIT_MAX] = {"memory_limit_max", "GPUCAP_MEMORY_LIMIT_MAX", GPC_T_SIZE, NULL, NULL,
                                  GPC_OPTF_LOCK_LOWER,
                                  "the platform's maximum for every device: every limit, from any source, is "
                                  "bounded by it (with no limit set, it is the limit)"},
    [GPC_OPT_LOCK] = {"lock", "GPUCAP_LOCK", GPC_T_BOOL, "0", NULL, GPC_OPTF_FILE_ONLY,
                      "only in the platform file " GPC_SYSTEM_CONFIG ": the environment (and GPUCAP_CONFIG) "
                      "may then only tighten: lower limits, enforce over audit, fault injection, log level; "
                      "the ledger and a larger context reserve stay as the file says"},
    [GPC_OPT_SCHED_LIMIT] = {"gpu_memory_limit", "GPU_MEMORY_LIMIT", GPC_T_SIZE, NULL, NULL, GPC_OPTF_ENV_ONLY,
                             "set by a GPU-sharing scheduler (KAI's binder), in bytes: bounds every device's "
                             "limit like memory_limit_max; under the lock it is one more tightening"},
    [GPC_OPT_MEMORY_REQUEST] = {"memory_request", "GPUCAP_MEMORY_REQUEST", GPC_T_SIZE, NULL, NULL,
                                GPC_OPTF_PER_DEVICE | GPC_OPTF_LOCK_LOWER,
                                "burstable memory: the part of the limit guaranteed (per device as memory_limit); "
                                "present (0 too: best effort), the budget in force is min(limit, max(request, "
                                "grant)); unset: the budget is the limit. Above the limit: refused, best effort"},
    [GPC_OPT_MEMORY_GRANT] = {"memory_grant", "GPUCAP_MEMORY_GRANT", GPC_T_SIZE, NULL, NULL,
                              GPC_OPTF_PER_DEVICE | GPC_OPTF_FILE_ONLY,
                              "written by the node arbiter in the platform settings file (never read from the "
                              "environment; per device as memory_limit): what a burstable container may use "
                              "now, its request plus a loan; clamped to the limit; unset: 0 (no loan)"},
    [GPC_OPT_ARBITER_SOCKET] = {"arbiter_socket", "GPUCAP_ARBITER_SOCKET", GPC_T_STRING, NULL, NULL, GPC_OPTF_LOCK_FIXED,
                                "the node arbiter's datagram socket, asked for a loan when an allocation of a "
                                "burstable container is denied; default <ledger directory>/arbiter.sock, then "
                                "$XDG_RUNTIME_DIR/gpucap/arbiter.sock or /tmp/gpucap-<uid>/arbiter.sock; none: no loans"},
    [GPC_OPT_RECLAIM_GRACE] = {"reclaim_grace", "GPUCAP_RECLAIM_GRACE", GPC_T_INT, "10", NULL, 0,
                               "seconds the arbiter takes to get memory back from borrowers: an allocation within "
                               "the request that the driver refuses is retried, asking the arbiter, for this long "
                               "plus 1 s before it answers CUDA_ERROR_OUT_OF_MEMORY"},
};

/* Kubernetes names as the ledger can hold them: lowercase letters, digits, '-' and '.' (the
 * characters of DNS labels, subdomains and UIDs), at most 253 characters for a pod name (a DNS
 * subdomain) and 63 for the others. */
#define IDENTITY_FORMS "lowercase letters, digits, '-' and '.'; at most 63 characters (pod_name: 253)"
static bool identity_ok(const struct gpc_option_def *d, const char *text)
{
    size_t max = d == &gpc_option_defs[GPC_OPT_POD_NAME] ? GPC_IDENTITY_POD - 3 : GPC_IDENTITY_NAME - 1;
    size_t n = strlen(text);
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(text[i] >= 'a' && text[i] <= 'z') && !(text[i] >= '0' && text[i] <= '9') && text[i] != '-' &&
            text[i] != '.')
            return false;
    return true;
}

/* Below this context reserve a locked platform file that leaves it unset could be undercut. */
#define LOCK_RESERVE_FLOOR ((uint64_t)768 << 20)

/* One line of the load of *s: to the load's sink (s->sink), or log.c's stderr lines without one. */
__attribute__((format(printf, 3, 4))) static void say(const struct gpc_settings *s, enum gpc_log_level level,
                                                      const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s->sink)
        s->sink(level, line, s->sink_arg);
    else
        gpc_log_line(level, "%s", line);
}
/* A line below the log threshold is not said (as gpc_log). */
#define say_gated(s, level, ...)                 \
    do {                                         \
        if ((int)(level) <= gpc_log_threshold)   \
            say((s), (level), __VA_ARGS__);      \
    } while (0)

/* Index of `text` among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *text)
{
    size_t len = strlen(text);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, text, n) == 0)
            return i;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

static const char *type_forms(const struct gpc_option_def *d)
{
    switch (d->type) {
    case GPC_T_SIZE: return gpc_size_forms;
    case GPC_T_BOOL: return "1/0, true/false, yes/no, on/off";
    case GPC_T_INT: return "a whole number";
    case GPC_T_ENUM: return d->choices;
    case GPC_T_STRING: return (d->flags & GPC_OPTF_IDENTITY) ? IDENTITY_FORMS : "any text";
    }
    return "";
}

/* Parses `text` for option `d` into *v; false (and v->bad) when malformed. */
static bool parse_value(const struct gpc_option_def *d, const char *text, struct gpc_value *v)
{
    v->set = true;
    v->bad = false;
    snprintf(v->text, sizeof v->text, "%s", text);
    switch (d->type) {
    case GPC_T_SIZE:
        v->bad = gpc_parse_size(text, &v->u.size) != 0;
        break;
    case GPC_T_BOOL: {
        int i = choice_index("0|1|false|true|no|yes|off|on", text);
        v->bad = i < 0;
        v->u.b = i > 0 && (i % 2) == 1;
        break;
    }
    case GPC_T_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(text, &end, 10);
        v->bad = errno || end == text || *end || x < 0;
        v->u.i = x;
        break;
    }
    case GPC_T_ENUM:
        v->u.e = choice_index(d->choices, text);
        v->bad = v->u.e < 0;
        break;
    case GPC_T_STRING:
        v->bad = strlen(text) >= sizeof v->text || ((d->flags & GPC_OPTF_IDENTITY) && !identity_ok(d, text));
        break;
    }
    return !v->bad;
}

int gpc_option_parse(enum gpc_opt o, const char *text, struct gpc_value *v)
{
    return parse_value(&gpc_option_defs[o], text, v) ? 0 : -EINVAL;
}

static void report_bad(struct gpc_settings *s, const struct gpc_option_def *d, const char *where,
                       const char *text, const char *safe)
{
    s->errors++;
    say(s, GPC_LOG_ERROR, "%s: %s = '%s' is not valid; accepted: %s; %s", where, d->key, text,
                 type_forms(d), safe);
}

static const char *safe_state(const struct gpc_option_def *d)
{
    if (d == &gpc_option_defs[GPC_OPT_CONTEXT_RESERVE])
        return "the default for the device's class applies";
    if (d->flags & GPC_OPTF_IDENTITY)
        return "it is not recorded in the ledger (limits are not affected)";
    if (d == &gpc_option_defs[GPC_OPT_MEMORY_REQUEST])
        return "the request is 0 until it is fixed (best effort: the container runs on what it is granted)";
    if (d == &gpc_option_defs[GPC_OPT_MEMORY_GRANT])
        return "the grant is 0 until it is fixed (no loan)";
    return d->type == GPC_T_SIZE ? "that budget is 0 until it is fixed (every allocation is denied)"
                                 : "the default applies";
}

/* ---- the ini file ---- */

struct ini_ctx {
    struct gpc_settings *s;
    FILE *f;
    int line;
    int orphan_line; /* the first key before any [section]: reported after parsing (see load_file) */
    char orphan_key[64];
    char bad_section[64]; /* the unknown section last reported (once per section) */
    int syntax_errors;    /* lines that are no ini line, each reported (inih reports the first only) */
    bool after_key;       /* the last line read was key = value (an indented line may continue it) */
    int section_line;     /* the line of the last [section] read */
};

/* Under `c`: a line read that is none of inih's (blank, ; or # comment, [section], key = value or
 * key: value, an indented continuation of a value) is reported with its number, every one of
 * them, so that one syntax error hides nothing after it. */
static void check_syntax(struct ini_ctx *c, const char *line)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    bool indented = p != line;
    bool ok;
    if (*p == '\0' || *p == '\n' || *p == '\r' || *p == ';' || *p == '#')
        ok = true, indented = c->after_key && indented;
    else if (*p == '[')
        ok = strchr(p, ']') != NULL, c->after_key = false, c->section_line = c->line;
    else if (strpbrk(p, "=:"))
        ok = true, c->after_key = true;
    else
        ok = indented && c->after_key; /* a multi-line value */
    if (ok)
        return;
    c->syntax_errors++;
    c->s->errors++;
    c->s->config_bad = true;
    say(c->s, GPC_LOG_ERROR, "%s:%d: syntax error: not an ini line (key = value, [section], ; comment); budgets "
                 "not set in the environment are 0", c->s->config_path, c->line);
}

/* inih reads through this so that every handler call knows its line number. */
static char *read_line(char *str, int num, void *stream)
{
    struct ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (r) {
        c->line++;
        check_syntax(c, r);
    }
    return r;
}

/* "GPU-" then hex digits and dashes, at least 8 digits: a UUID or a prefix of one. */
bool gpc_settings_uuid_text(const char *t)
{
    if (strncasecmp(t, "GPU-", 4) != 0 || strlen(t) >= GPC_UUID_TEXT)
        return false;
    int digits = 0;
    for (const char *p = t + 4; *p; p++) {
        if (isxdigit((unsigned char)*p))
            digits++;
        else if (*p != '-')
            return false;
    }
    return digits >= 8;
}

struct gpc_value *gpc_settings_dev_value(struct gpc_settings *s, enum gpc_opt o, int dev)
{
    return o == GPC_OPT_MEMORY_REQUEST ? &s->dev_request[dev]
           : o == GPC_OPT_MEMORY_GRANT ? &s->dev_grant[dev]
                                       : &s->dev_limit[dev];
}

struct gpc_value *gpc_settings_uuid_slot(struct gpc_uuid_limit *u, enum gpc_opt o)
{
    return o == GPC_OPT_MEMORY_REQUEST ? &u->request : o == GPC_OPT_MEMORY_GRANT ? &u->grant : &u->v;
}

/* The per-UUID value of setting `o` for `uuid` (the entry added if new), or NULL when the table is full. */
static struct gpc_value *uuid_value(struct gpc_settings *s, enum gpc_opt o, const char *uuid)
{
    for (int i = 0; i < s->n_uuid; i++)
        if (strcasecmp(s->uuid_limit[i].uuid, uuid) == 0)
            return gpc_settings_uuid_slot(&s->uuid_limit[i], o);
    if (s->n_uuid == GPC_MAX_UUID_LIMITS) {
        s->errors++;
        s->env_bad = true;
        say(s, GPC_LOG_ERROR, "more than %d per-UUID limits; every budget is 0", GPC_MAX_UUID_LIMITS);
        return NULL;
    }
    struct gpc_uuid_limit *u = &s->uuid_limit[s->n_uuid++];
    snprintf(u->uuid, sizeof u->uuid, "%s", uuid);
    return gpc_settings_uuid_slot(u, o);
}

/* Edit distance between a and b (insert, delete, replace, swap two neighbours), up to 64 characters. */
static int distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 64 || lb > 64)
        return 99;
    int d[65][65];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int m = d[i - 1][j] + 1 < d[i][j - 1] + 1 ? d[i - 1][j] + 1 : d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < m)
                m = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m)
                m = d[i - 2][j - 2] + 1;
            d[i][j] = m;
        }
    return d[la][lb];
}

/*
 * "; did you mean 'memory_limit'?" when a setting of the table is near `word` (a third of its
 * length or 2 edits at most), else "". With `env`, the variables are compared, else the ini keys
 * (a variable's name written as a key suggests the key; in a device section, `device`, only the
 * keys a device section takes, and a key of [gpucap] is said to belong there) and, for `section`,
 * the sections.
 */
static const char *suggest(const char *word, bool env, bool section, bool device, char *buf, size_t len)
{
    const char *best = NULL;
    int best_d = 99;
    if (device) {
        for (int i = 0; i < GPC_OPT__COUNT; i++) {
            const struct gpc_option_def *o = &gpc_option_defs[i];
            if (!(o->flags & (GPC_OPTF_ENV_ONLY | GPC_OPTF_PER_DEVICE)) && strcasecmp(word, o->key) == 0) {
                snprintf(buf, len, "; '%s' is a setting of [gpucap], not of a device's section", o->key);
                return buf;
            }
        }
    }
    if (section) {
        static const char *const sections[] = {"gpucap", "device.0", "device.GPU-<uuid>"};
        for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
            int d = distance(word, sections[i]);
            if (d < best_d)
                best = sections[i], best_d = d;
        }
    } else {
        for (int i = 0; i < GPC_OPT__COUNT; i++) {
            const struct gpc_option_def *o = &gpc_option_defs[i];
            if (!env && (o->flags & GPC_OPTF_ENV_ONLY))
                continue;
            if (device && !(o->flags & GPC_OPTF_PER_DEVICE))
                continue;
            int d = distance(word, env ? o->env : o->key);
            /* GPUCAP_MEMORY_LIMIT = ... in the file: the key is memory_limit. */
            if (!env && distance(word, o->env) < d)
                d = distance(word, o->env);
            if (d < best_d)
                best = env ? o->env : o->key, best_d = d;
        }
    }
    int most = (int)strlen(word) / 3;
    if (most < 2)
        most = 2;
    buf[0] = '\0';
    if (best && best_d <= most)
        snprintf(buf, len, "; did you mean '%s'?", best);
    return buf;
}

/* A section [device.GPU-...]: the limit of a device by UUID. */
#define SECTION_UUID GPC_MAX_DEVICES

/* "device.3" -> 3; "device.GPU-..." -> SECTION_UUID; -ENOENT if the section is not a device
 * section, -EINVAL if it is a malformed one. */
static int device_section(const char *section)
{
    if (strncmp(section, "device.", 7) != 0)
        return -ENOENT;
    if (gpc_settings_uuid_text(section + 7))
        return SECTION_UUID;
    char *end;
    long n = strtol(section + 7, &end, 10);
    if (end == section + 7 || *end || n < 0 || n >= GPC_MAX_DEVICES)
        return -EINVAL;
    return (int)n;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *c = user;
    struct gpc_settings *s = c->s;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", s->config_path, c->line);

    if (!section[0]) {
        if (!c->orphan_line) {
            c->orphan_line = c->line;
            snprintf(c->orphan_key, sizeof c->orphan_key, "%s", name);
        }
        return 1;
    }
    int dev = device_section(section);
    char hint[96];
    bool unknown_section = dev == -EINVAL || (dev == -ENOENT && strcmp(section, "gpucap") != 0);
    if (unknown_section) {
        /* Said once per section; its keys are still checked (and not applied), so one typo in a
         * section name does not hide the rest of the file. */
        if (strcmp(c->bad_section, section) != 0) {
            s->errors++;
            s->config_bad = true;
            say(s, GPC_LOG_ERROR, "%s:%d: unknown section [%s] (use [gpucap], [device.<ordinal>] or "
                         "[device.GPU-<uuid>]%s); budgets not set in the environment are 0", s->config_path,
                         c->section_line ? c->section_line : c->line, section,
                         suggest(section, false, true, false, hint, sizeof hint));
            snprintf(c->bad_section, sizeof c->bad_section, "%s", section);
        }
    }
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (strcmp(d->key, name) != 0 || (d->flags & GPC_OPTF_ENV_ONLY))
            continue;
        if (dev >= 0 && !(d->flags & GPC_OPTF_PER_DEVICE))
            break;
        if (unknown_section) {
            struct gpc_value scratch = {0};
            if (!parse_value(d, value, &scratch))
                report_bad(s, d, where, value, "it is in an unknown section, so it applies nowhere");
            return 1;
        }
        struct gpc_value *v = dev == SECTION_UUID ? uuid_value(s, (enum gpc_opt)i, section + 7)
                              : dev >= 0           ? gpc_settings_dev_value(s, (enum gpc_opt)i, dev)
                                                   : &s->opt[i];
        if (!v)
            return 1;
        if (!parse_value(d, value, v))
            report_bad(s, d, where, value, safe_state(d));
        v->src = GPC_SRC_FILE;
        v->line = c->line;
        return 1;
    }
    s->errors++;
    s->config_bad = true;
    say(s, GPC_LOG_ERROR, "%s: unknown key '%s' in [%s]%s; budgets not set in the environment are 0",
                 where, name, section, suggest(name, false, false, dev >= 0, hint, sizeof hint));
    return 1;
}

static void load_file(struct gpc_settings *s, const char *env_path)
{
    const char *path = env_path && *env_path ? env_path : gpc_option_defs[GPC_OPT_CONFIG].def;
    snprintf(s->config_path, sizeof s->config_path, "%s", path);
    FILE *f = fopen(path, "re");
    if (!f) {
        /* The default file is optional; a file that was asked for is not. */
        if (env_path && *env_path) {
            s->errors++;
            s->config_bad = true;
            say(s, GPC_LOG_ERROR, "GPUCAP_CONFIG=%s cannot be read (%s); budgets not set in the "
                         "environment are 0", path, strerror(errno));
        }
        return;
    }
    struct ini_ctx c = {s, f, 0, 0, "", "", 0, false, 0};
    int rc = ini_parse_stream(read_line, &c, on_key, &c);
    fclose(f);
    s->config_read = true;
    if (rc > 0 && c.syntax_errors == 0) {
        /* inih reports syntax errors (and nothing else, our handler never fails) by line. Keys
         * before any section come after a broken "[gpucap" line: the syntax error is the news. */
        s->errors++;
        s->config_bad = true;
        say(s, GPC_LOG_ERROR, "%s:%d: syntax error: not an ini line (key = value, [section], ; comment); "
                     "budgets not set in the environment are 0", path, rc);
    } else if (c.orphan_line && c.syntax_errors == 0) {
        s->errors++;
        s->config_bad = true;
        say(s, GPC_LOG_ERROR, "%s:%d: key '%s' before any section (put it under [gpucap]); budgets not "
                     "set in the environment are 0", path, c.orphan_line, c.orphan_key);
    } else if (rc < 0) {
        s->errors++;
        s->config_bad = true;
        say(s, GPC_LOG_ERROR, "%s: cannot be parsed; budgets not set in the environment are 0", path);
    }
}

/* ---- typed reads ---- */

/* The value of setting `o` as loaded, or its default's (parsed from the table) when unset or bad. */
static const struct gpc_value *value_or_default(const struct gpc_settings *s, enum gpc_opt o,
                                                struct gpc_value *def)
{
    const struct gpc_value *v = &s->opt[o];
    if (v->set && !v->bad)
        return v;
    memset(def, 0, sizeof *def);
    if (gpc_option_defs[o].def)
        parse_value(&gpc_option_defs[o], gpc_option_defs[o].def, def);
    return def;
}

int gpc_opt_enum(const struct gpc_settings *s, enum gpc_opt o)
{
    struct gpc_value def;
    const struct gpc_value *v = value_or_default(s, o, &def);
    return v->set ? v->u.e : -1;
}

bool gpc_opt_bool(const struct gpc_settings *s, enum gpc_opt o)
{
    struct gpc_value def;
    const struct gpc_value *v = value_or_default(s, o, &def);
    return v->set && v->u.b;
}

long long gpc_opt_int(const struct gpc_settings *s, enum gpc_opt o, long long fallback)
{
    struct gpc_value def;
    const struct gpc_value *v = value_or_default(s, o, &def);
    return v->set ? v->u.i : fallback;
}

const char *gpc_opt_string(const struct gpc_settings *s, enum gpc_opt o)
{
    const struct gpc_value *v = &s->opt[o];
    return v->set && !v->bad ? v->text : gpc_option_defs[o].def;
}

/* ---- secure execution (setuid, setgid, file capabilities) ---- */

bool gpc_secure_execution(void)
{
    return getauxval(AT_SECURE) != 0;
}

/* The log level the settings say. A settings file read again while other threads log (live.c)
 * rewrites the same level: no store then, so that no reader races with it. */
static void set_threshold(int level)
{
    if (gpc_log_threshold != level)
        gpc_log_threshold = level;
}

/*
 * The user who started a setuid program chose its environment, not its privileges: every GPUCAP_*
 * variable is ignored (it could name a file to create or truncate, or one whose contents an error
 * line would print), and only the system settings file is read, by its fixed path.
 */
static void load_secure(struct gpc_settings *s, char *const *envp)
{
    int ignored = 0;
    for (char *const *e = envp; e && *e; e++)
        ignored += strncmp(*e, "GPUCAP_", 7) == 0;
    load_file(s, NULL);
    set_threshold(gpc_opt_enum(s, GPC_OPT_LOG_LEVEL));
    say_gated(s, GPC_LOG_WARN, "secure-execution process (setuid, setgid or file capabilities): %d GPUCAP_* "
            "variable(s) ignored; settings from %s only", ignored, s->config_path);
}

/* ---- the environment ---- */

/* Applies one GPUCAP_* variable; false if it names no setting. */
static bool apply_env(struct gpc_settings *s, const char *name, const char *value)
{
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        size_t n = strlen(d->env);
        if (strncmp(name, d->env, n) != 0)
            continue;
        struct gpc_value *v;
        if (name[n] == '\0') {
            v = &s->opt[i];
        } else if (name[n] == '_' && (d->flags & GPC_OPTF_PER_DEVICE) && gpc_settings_uuid_text(name + n + 1)) {
            v = uuid_value(s, (enum gpc_opt)i, name + n + 1);
            if (!v)
                return true;
        } else if (name[n] == '_' && (d->flags & GPC_OPTF_PER_DEVICE) && isdigit((unsigned char)name[n + 1])) {
            char *end;
            long dev = strtol(name + n + 1, &end, 10);
            if (*end || dev < 0 || dev >= GPC_MAX_DEVICES)
                return false;
            v = gpc_settings_dev_value(s, (enum gpc_opt)i, (int)dev);
        } else {
            continue;
        }
        if (d->flags & GPC_OPTF_FILE_ONLY) {
            s->errors++;
            s->env_errors++;
            say(s, GPC_LOG_ERROR, "%s: %s is read only from the platform file %s; ignored", name, d->key,
                         GPC_SYSTEM_CONFIG);
            return true;
        }
        if (!parse_value(d, value, v)) {
            s->env_errors++;
            report_bad(s, d, name, value, safe_state(d));
        }
        v->src = GPC_SRC_ENV;
        v->line = 0;
        return true;
    }
    return false;
}

/* ---- the platform's lock ---- */

static int on_lock_key(void *user, const char *section, const char *name, const char *value)
{
    bool *locked = user;
    if (strcmp(section, "gpucap") == 0 && strcmp(name, "lock") == 0) {
        struct gpc_value v;
        /* A malformed value locks: the platform meant something, and locked is the safe side. */
        *locked = !parse_value(&gpc_option_defs[GPC_OPT_LOCK], value, &v) || v.u.b;
    }
    return 1;
}

/* 1 when the platform file says lock = true, 0 when it does not or is absent, -errno when it exists
 * but cannot be read. *owner: the file's owner, the platform's uid (GPC_NO_UID when unknown). */
static int platform_locked(uid_t *owner)
{
    *owner = GPC_NO_UID;
    FILE *f = fopen(GPC_SYSTEM_CONFIG, "re");
    if (!f)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
    struct stat st;
    if (fstat(fileno(f), &st) == 0)
        *owner = st.st_uid;
    bool locked = false;
    ini_parse_file(f, on_lock_key, &locked);
    fclose(f);
    return locked;
}

/* -1, 0, 1 as `a` is below, equal to, above `b`; 2 when they cannot be compared before the card is
 * known (a percentage and a size). Unset means "no limit", or for the context reserve its default. */
static int size_cmp(enum gpc_opt opt, const struct gpc_value *a, const struct gpc_value *b)
{
    struct gpc_size floor = {.bytes = LOCK_RESERVE_FLOOR};
    const struct gpc_size *x = &a->u.size, *y = &b->u.size;
    if (!b->set && opt == GPC_OPT_CONTEXT_RESERVE)
        y = &floor;
    else if (!b->set)
        return a->set ? -1 : 0;
    if (a->bad || b->bad)
        return a->bad && b->bad ? 0 : a->bad ? -1 : 1; /* a bad size is a budget of 0 */
    if (x->is_percent != y->is_percent)
        return 2;
    uint64_t p = x->is_percent ? x->ppm : x->bytes, q = y->is_percent ? y->ppm : y->bytes;
    return p < q ? -1 : p > q;
}

static void refuse(struct gpc_settings *s, const char *var, const char *text, const char *why)
{
    s->refused++;
    say(s, GPC_LOG_WARN, "%s=%s refused: the settings are locked by %s (%s)", var, text,
                 s->platform->config_path, why);
}

/* Checks one memory limit from the environment against the platform file's limit for the same
 * scope (`plat`; NULL: none). Both stay in force (the lower applies, see gpc_settings_limit); a
 * refused one is put back to the platform's value so that `gpucap check` shows what applies. */
static void lock_limit(struct gpc_settings *s, enum gpc_opt o, const char *var, struct gpc_value *v,
                       const struct gpc_value *plat)
{
    if (!v->set || v->src != GPC_SRC_ENV || !plat || !plat->set)
        return;
    int c = size_cmp(o, v, plat);
    if (c == 2 && v->u.size.is_percent && v->u.size.ppm == 1000000)
        c = 1; /* the whole card is never below a size */
    char why[320];
    const char *key = gpc_option_defs[o].key;
    if (c == 1) {
        snprintf(why, sizeof why, "%s = %s applies", key, plat->text);
        refuse(s, var, v->text, why);
        *v = *plat;
    } else if (c == 2) {
        say(s, GPC_LOG_WARN, "%s=%s: the settings are locked by %s: it applies only on devices where it "
                     "is below %s = %s", var, v->text, s->platform->config_path, key, plat->text);
    }
}

/* Under the lock: every per-device value of size setting `o` from the environment against the
 * platform file's for the same scope (its per-device value, else its value for all devices). */
static void lock_sizes(struct gpc_settings *s, enum gpc_opt o)
{
    const struct gpc_settings *p = s->platform;
    const char *env = gpc_option_defs[o].env;
    lock_limit(s, o, env, &s->opt[o], &p->opt[o]);
    for (int dev = 0; dev < GPC_MAX_DEVICES; dev++) {
        char var[64];
        snprintf(var, sizeof var, "%s_%d", env, dev);
        const struct gpc_value *pd = gpc_settings_dev_value((struct gpc_settings *)p, o, dev);
        lock_limit(s, o, var, gpc_settings_dev_value(s, o, dev), pd->set ? pd : &p->opt[o]);
    }
    for (int i = 0; i < s->n_uuid; i++) {
        char var[96];
        snprintf(var, sizeof var, "%s_%s", env, s->uuid_limit[i].uuid);
        const struct gpc_value *plat = &p->opt[o];
        for (int j = 0; j < p->n_uuid; j++)
            if (strcasecmp(p->uuid_limit[j].uuid, s->uuid_limit[i].uuid) == 0 &&
                gpc_settings_uuid_slot((struct gpc_uuid_limit *)&p->uuid_limit[j], o)->set)
                plat = gpc_settings_uuid_slot((struct gpc_uuid_limit *)&p->uuid_limit[j], o);
        lock_limit(s, o, var, gpc_settings_uuid_slot(&s->uuid_limit[i], o), plat);
    }
}

static void apply_lock(struct gpc_settings *s)
{
    const struct gpc_settings *p = s->platform;
    say_gated(s, GPC_LOG_INFO, "settings locked by %s: the environment may only tighten them", p->config_path);
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        struct gpc_value *v = &s->opt[i];
        const struct gpc_value *pv = &p->opt[i];
        if (!v->set || v->src != GPC_SRC_ENV || i == GPC_OPT_MEMORY_LIMIT || i == GPC_OPT_MEMORY_REQUEST)
            continue;
        bool ok = true;
        if ((d->flags & GPC_OPTF_LOCK_FIXED) && d->type == GPC_T_BOOL)
            ok = !v->bad && pv->set && v->u.b == pv->u.b;
        else if (d->flags & GPC_OPTF_LOCK_FIXED)
            ok = pv->set && strcmp(v->text, pv->text) == 0;
        else if ((d->flags & GPC_OPTF_LOCK_LOWER) && d->type == GPC_T_ENUM)
            ok = !v->bad && (!pv->set || v->u.e <= pv->u.e);
        else if ((d->flags & GPC_OPTF_LOCK_LOWER) && d->type == GPC_T_SIZE)
            ok = size_cmp((enum gpc_opt)i, v, pv) != 1; /* a percentage against a size: the lower applies */
        else if (d->flags & GPC_OPTF_LOCK_RAISE)
            ok = !v->bad && (size_cmp((enum gpc_opt)i, v, pv) == 0 || size_cmp((enum gpc_opt)i, v, pv) == 1);
        if (ok)
            continue;
        char why[320];
        if (pv->set)
            snprintf(why, sizeof why, "%s = %s applies", d->key, pv->text);
        else if (i == GPC_OPT_CONTEXT_RESERVE)
            snprintf(why, sizeof why, "%s may only be raised above the default for the device's class", d->key);
        else
            snprintf(why, sizeof why, "%s stays at its default", d->key);
        refuse(s, d->env, v->text, why);
        *v = *pv;
    }
    /* A request from the environment may only lower the platform's (none there: the request is the
     * limit, so any is lower); the lower one per device applies (gpc_settings_request). */
    lock_sizes(s, GPC_OPT_MEMORY_LIMIT);
    lock_sizes(s, GPC_OPT_MEMORY_REQUEST);
}

static void load(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp, gpc_settings_sink *to,
                 void *arg);

void gpc_settings_load(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp)
{
    load(s, platform, envp, NULL, NULL);
}

void gpc_settings_load_to(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp,
                          gpc_settings_sink *to, void *arg)
{
    load(s, platform, envp, to, arg);
}

static void load(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp, gpc_settings_sink *to,
                 void *arg)
{
    memset(s, 0, sizeof *s);
    s->sink = to;
    s->sink_arg = arg;
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (d->def) {
            parse_value(d, d->def, &s->opt[i]);
            s->opt[i].src = GPC_SRC_DEFAULT;
        }
    }
    if (gpc_secure_execution()) {
        load_secure(s, envp);
        s->sink = NULL;
        s->sink_arg = NULL;
        return;
    }
    const char *config = NULL;
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "GPUCAP_CONFIG=", 14) == 0)
            config = *e + 14;
    int lock = platform_locked(&s->platform_uid);
    s->platform_mounted = lock > 0 && gpc_path_own_mount(GPC_SYSTEM_CONFIG, -1) == 1;
    /* The webhook mounts the preload list and the platform file each on its own. Where the list is
     * mounted and the platform file is not (or is missing, or unlocked), someone with the rights to
     * rename the directory above the mount put another in its place: locked, every budget 0. */
    bool replaced = !s->platform_mounted && gpc_path_own_mount(GPC_PRELOAD_FILE, -1) == 1;
    if (lock != 0 || replaced) {
        s->locked = true;
        load_file(s, NULL);
        if (replaced) {
            s->errors++;
            s->config_bad = true;
            say(s, GPC_LOG_ERROR, "%s is not the file the platform mounted (%s is a mount of its own, it is not: a "
                         "directory above it was replaced); every budget is 0", GPC_SYSTEM_CONFIG, GPC_PRELOAD_FILE);
        } else if (lock < 0) {
            s->errors++;
            s->config_bad = true;
            say(s, GPC_LOG_ERROR, "%s exists but cannot be read (%s); it may lock the settings, so "
                         "budgets not set in the environment are 0", GPC_SYSTEM_CONFIG, strerror(-lock));
        }
        /* The caller's copy: the platform file's settings as this load read them. */
        *platform = *s;
        platform->sink = NULL;
        platform->sink_arg = NULL;
        s->platform = platform;
    } else {
        load_file(s, config);
        if (s->opt[GPC_OPT_LOCK].src == GPC_SRC_FILE && gpc_opt_bool(s, GPC_OPT_LOCK))
            say(s, GPC_LOG_WARN, "%s: lock = true has no effect here: only the platform file %s locks "
                         "the settings", s->config_path, GPC_SYSTEM_CONFIG);
    }

    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, "GPUCAP_", 7) != 0 && strncmp(*e, "GPU_MEMORY_LIMIT=", 17) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char name[128];
        size_t n = (size_t)(eq - *e);
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (!apply_env(s, name, eq + 1)) {
            char hint[96];
            s->errors++;
            s->env_errors++;
            s->env_bad = true;
            say(s, GPC_LOG_ERROR, "%s is not a gpucap setting%s (see `gpucap check`); every budget is 0 "
                         "until it is removed or corrected", name, suggest(name, true, false, false, hint, sizeof hint));
        }
    }
    set_threshold(gpc_opt_enum(s, GPC_OPT_LOG_LEVEL));
    if (s->locked)
        apply_lock(s);
    s->sink = NULL;
    s->sink_arg = NULL;
}
