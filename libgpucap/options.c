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
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

const struct gpc_option_def gpc_option_defs[GPC_OPT__COUNT] = {
    [GPC_OPT_MEMORY_LIMIT] = {"memory_limit", "GPUCAP_MEMORY_LIMIT", GPC_T_SIZE, NULL, NULL,
                              GPC_OPTF_PER_DEVICE,
                              "device memory budget for every device (per device: "
                              "GPUCAP_MEMORY_LIMIT_<ordinal> or _GPU-<uuid>, ini [device.<ordinal>] or "
                              "[device.GPU-<uuid>]); unset: no limit"},
    [GPC_OPT_CONFIG] = {"config", "GPUCAP_CONFIG", GPC_T_STRING, "/etc/gpucap/gpucap.ini", NULL,
                        GPC_OPTF_ENV_ONLY,
                        "ini file to read; the default path is read only if it exists"},
    [GPC_OPT_LOG_LEVEL] = {"log_level", "GPUCAP_LOG_LEVEL", GPC_T_ENUM, "warn", "error|warn|info|debug", 0,
                           "how much the library says on stderr"},
    [GPC_OPT_LEDGER] = {"ledger", "GPUCAP_LEDGER", GPC_T_STRING, NULL, NULL, 0,
                        "file shared by the processes that share a budget; default /tmp/gpucap-<uid>.ledger "
                        "(one per container and user); 'off': a budget private to each process"},
    [GPC_OPT_LEDGER_GROUP] = {"ledger_group", "GPUCAP_LEDGER_GROUP", GPC_T_BOOL, "0", NULL, 0,
                              "create the ledger group-writable (0660) and accept one owned by another user of "
                              "the group, for containers where processes of several users share a budget"},
    [GPC_OPT_MODE] = {"mode", "GPUCAP_MODE", GPC_T_ENUM, "enforce", "enforce|audit", 0,
                      "enforce: deny what exceeds the budget; audit: deny nothing, log and count each "
                      "allocation the budget would have denied (the report's peak is the budget the job needs)"},
    [GPC_OPT_REPORT] = {"report", "GPUCAP_REPORT", GPC_T_STRING, NULL, NULL, 0,
                        "write a usage report at process exit to this file ('-': stderr): per device budget, "
                        "peak, allocations, frees, denials, largest request, first denial"},
    [GPC_OPT_REPORT_FORMAT] = {"report_format", "GPUCAP_REPORT_FORMAT", GPC_T_ENUM, "text", "text|json", 0,
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
    [GPC_OPT_CONTEXT_RESERVE] = {"context_reserve", "GPUCAP_CONTEXT_RESERVE", GPC_T_SIZE, NULL, NULL, 0,
                                 "device memory charged per CUDA context (primary, created, green), which no "
                                 "allocation call reports; unset: 512MiB on cards of 64GiB or more, 384MiB from "
                                 "24GiB, 256MiB below 24GiB; 0: contexts are not charged"},
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

static const char *source_name(enum gpc_source src)
{
    return src == GPC_SRC_ENV ? "environment" : src == GPC_SRC_FILE ? "file" : "default";
}

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

static void report_bad(struct gpc_settings *s, const struct gpc_option_def *d, const char *where,
                       const char *text, const char *safe)
{
    s->errors++;
    gpc_log_line(GPC_LOG_ERROR, "%s: %s = '%s' is not valid; accepted: %s; %s", where, d->key, text,
                 type_forms(d), safe);
}

static const char *safe_state(const struct gpc_option_def *d)
{
    if (d == &gpc_option_defs[GPC_OPT_CONTEXT_RESERVE])
        return "the default for the device's class applies";
    if (d->flags & GPC_OPTF_IDENTITY)
        return "it is not recorded in the ledger (limits are not affected)";
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
};

/* inih reads through this so that every handler call knows its line number. */
static char *read_line(char *str, int num, void *stream)
{
    struct ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (r)
        c->line++;
    return r;
}

/* "GPU-" then hex digits and dashes, at least 8 digits: a UUID or a prefix of one. */
static bool uuid_text(const char *t)
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

/* The per-UUID value for `uuid` (added if new), or NULL when the table is full. */
static struct gpc_value *uuid_value(struct gpc_settings *s, const char *uuid)
{
    for (int i = 0; i < s->n_uuid; i++)
        if (strcasecmp(s->uuid_limit[i].uuid, uuid) == 0)
            return &s->uuid_limit[i].v;
    if (s->n_uuid == GPC_MAX_UUID_LIMITS) {
        s->errors++;
        s->env_bad = true;
        gpc_log_line(GPC_LOG_ERROR, "more than %d per-UUID limits; every budget is 0", GPC_MAX_UUID_LIMITS);
        return NULL;
    }
    struct gpc_uuid_limit *u = &s->uuid_limit[s->n_uuid++];
    snprintf(u->uuid, sizeof u->uuid, "%s", uuid);
    return &u->v;
}

/* "device.3" -> 3; "device.GPU-..." -> GPC_MAX_DEVICES (a UUID); -1 if the section is not a
 * device section, -2 if it is a malformed one. */
static int device_section(const char *section)
{
    if (strncmp(section, "device.", 7) != 0)
        return -1;
    if (uuid_text(section + 7))
        return GPC_MAX_DEVICES;
    char *end;
    long n = strtol(section + 7, &end, 10);
    if (end == section + 7 || *end || n < 0 || n >= GPC_MAX_DEVICES)
        return -2;
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
    if (dev == -2 || (dev == -1 && strcmp(section, "gpucap") != 0)) {
        s->errors++;
        s->config_bad = true;
        gpc_log_line(GPC_LOG_ERROR, "%s: unknown section [%s] (use [gpucap], [device.<ordinal>] or "
                     "[device.GPU-<uuid>]); "
                     "budgets not set in the environment are 0", where, section);
        return 1;
    }
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (strcmp(d->key, name) != 0 || (d->flags & GPC_OPTF_ENV_ONLY))
            continue;
        if (dev >= 0 && !(d->flags & GPC_OPTF_PER_DEVICE))
            break;
        struct gpc_value *v = dev == GPC_MAX_DEVICES ? uuid_value(s, section + 7)
                              : dev >= 0           ? &s->dev_limit[dev]
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
    gpc_log_line(GPC_LOG_ERROR, "%s: unknown key '%s' in [%s]; budgets not set in the environment are 0",
                 where, name, section);
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
            gpc_log_line(GPC_LOG_ERROR, "GPUCAP_CONFIG=%s cannot be read (%s); budgets not set in the "
                         "environment are 0", path, strerror(errno));
        }
        return;
    }
    struct ini_ctx c = {s, f, 0, 0, ""};
    int rc = ini_parse_stream(read_line, &c, on_key, &c);
    fclose(f);
    s->config_read = true;
    if (rc > 0 && !s->config_bad) {
        /* inih reports syntax errors (and nothing else, our handler never fails) by line. Keys
         * before any section come after a broken "[gpucap" line: the syntax error is the news. */
        s->errors++;
        s->config_bad = true;
        gpc_log_line(GPC_LOG_ERROR, "%s:%d: syntax error: not an ini line (key = value, [section], ; comment); "
                     "budgets not set in the environment are 0", path, rc);
    } else if (c.orphan_line && !s->config_bad) {
        s->errors++;
        s->config_bad = true;
        gpc_log_line(GPC_LOG_ERROR, "%s:%d: key '%s' before any section (put it under [gpucap]); budgets not "
                     "set in the environment are 0", path, c.orphan_line, c.orphan_key);
    } else if (rc < 0) {
        s->errors++;
        s->config_bad = true;
        gpc_log_line(GPC_LOG_ERROR, "%s: cannot be parsed; budgets not set in the environment are 0", path);
    }
}

/* ---- secure execution (setuid, setgid, file capabilities) ---- */

bool gpc_secure_execution(void)
{
    return getauxval(AT_SECURE) != 0;
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
    if (s->opt[GPC_OPT_LOG_LEVEL].set && !s->opt[GPC_OPT_LOG_LEVEL].bad)
        gpc_log_threshold = s->opt[GPC_OPT_LOG_LEVEL].u.e;
    gpc_log(GPC_LOG_WARN, "secure-execution process (setuid, setgid or file capabilities): %d GPUCAP_* "
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
        } else if (name[n] == '_' && (d->flags & GPC_OPTF_PER_DEVICE) && uuid_text(name + n + 1)) {
            v = uuid_value(s, name + n + 1);
            if (!v)
                return true;
        } else if (name[n] == '_' && (d->flags & GPC_OPTF_PER_DEVICE) && isdigit((unsigned char)name[n + 1])) {
            char *end;
            long dev = strtol(name + n + 1, &end, 10);
            if (*end || dev < 0 || dev >= GPC_MAX_DEVICES)
                return false;
            v = &s->dev_limit[dev];
        } else {
            continue;
        }
        if (!parse_value(d, value, v))
            report_bad(s, d, name, value, safe_state(d));
        v->src = GPC_SRC_ENV;
        v->line = 0;
        return true;
    }
    return false;
}

void gpc_settings_load(struct gpc_settings *s, char *const *envp)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (d->def) {
            parse_value(d, d->def, &s->opt[i]);
            s->opt[i].src = GPC_SRC_DEFAULT;
        }
    }
    if (gpc_secure_execution()) {
        load_secure(s, envp);
        return;
    }
    const char *config = NULL;
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "GPUCAP_CONFIG=", 14) == 0)
            config = *e + 14;
    load_file(s, config);

    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, "GPUCAP_", 7) != 0)
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
            s->errors++;
            s->env_bad = true;
            gpc_log_line(GPC_LOG_ERROR, "%s is not a gpucap setting (see `gpucap check`); every budget is 0 "
                         "until it is removed or corrected", name);
        }
    }
    if (s->opt[GPC_OPT_LOG_LEVEL].set && !s->opt[GPC_OPT_LOG_LEVEL].bad)
        gpc_log_threshold = s->opt[GPC_OPT_LOG_LEVEL].u.e;
}

/* The per-UUID value from `src` whose configured text is a prefix of `uuid`, or NULL. */
static const struct gpc_value *uuid_match(const struct gpc_settings *s, const char *uuid, enum gpc_source src)
{
    for (int i = 0; uuid && i < s->n_uuid; i++) {
        const struct gpc_uuid_limit *u = &s->uuid_limit[i];
        if (u->v.set && u->v.src == src && strncasecmp(uuid, u->uuid, strlen(u->uuid)) == 0)
            return &u->v;
    }
    return NULL;
}

uint64_t gpc_settings_limit(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                            const struct gpc_value **from)
{
    static const struct gpc_value forced = {.set = true, .bad = true};
    const struct gpc_value *dev = ordinal >= 0 && ordinal < GPC_MAX_DEVICES ? &s->dev_limit[ordinal] : NULL;
    const struct gpc_value *all = &s->opt[GPC_OPT_MEMORY_LIMIT];
    const struct gpc_value *v = NULL;

    /* Environment first (per UUID, per ordinal, for all), then the file (in the same order). */
    if ((v = uuid_match(s, uuid, GPC_SRC_ENV)))
        ;
    else if (dev && dev->set && dev->src == GPC_SRC_ENV)
        v = dev;
    else if (all->set && all->src == GPC_SRC_ENV)
        v = all;
    else if (s->config_bad)
        v = &forced;
    else if ((v = uuid_match(s, uuid, GPC_SRC_FILE)))
        ;
    else if (dev && dev->set)
        v = dev;
    else if (all->set)
        v = all;
    if (s->env_bad)
        v = &forced;
    if (from)
        *from = v;
    if (!v)
        return GPC_UNLIMITED;
    if (v->bad)
        return 0;
    return gpc_size_resolve(&v->u.size, physical);
}

bool gpc_settings_any_limit(const struct gpc_settings *s)
{
    if (s->config_bad || s->env_bad || s->opt[GPC_OPT_MEMORY_LIMIT].set)
        return true;
    for (int i = 0; i < GPC_MAX_DEVICES; i++)
        if (s->dev_limit[i].set)
            return true;
    return s->n_uuid > 0;
}

const char *gpc_value_origin(const struct gpc_settings *s, const struct gpc_value *v, enum gpc_opt opt,
                             int ordinal, char *buf, size_t len)
{
    if (!v || !v->set) {
        snprintf(buf, len, "unset");
    } else if (v->bad && v->text[0] == '\0') {
        snprintf(buf, len, "safe state after an error");
    } else if (v->src == GPC_SRC_ENV) {
        const char *uuid = NULL;
        for (int i = 0; i < s->n_uuid; i++)
            if (v == &s->uuid_limit[i].v)
                uuid = s->uuid_limit[i].uuid;
        if (uuid)
            snprintf(buf, len, "%s_%s", gpc_option_defs[opt].env, uuid);
        else if (ordinal >= 0 && v == &s->dev_limit[ordinal])
            snprintf(buf, len, "%s_%d", gpc_option_defs[opt].env, ordinal);
        else
            snprintf(buf, len, "%s", gpc_option_defs[opt].env);
    } else if (v->src == GPC_SRC_FILE) {
        snprintf(buf, len, "%s:%d", s->config_path, v->line);
    } else {
        snprintf(buf, len, "%s", source_name(v->src));
    }
    return buf;
}
