/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.c: `gpucap check [FILE]`: validates the environment and an ini file exactly as the library
 * reads them (gpc_settings_load, the same table and parsers), prints every setting with its value
 * and where it came from, whether the platform file locks them (and what the lock refused), and the
 * effective budget per device. Exit 1 if any error was found: the
 * error lines are the library's own, with the file's line number.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { F_JSON, F_COUNT };
static const struct tool_flag check_flags[F_COUNT] = {
    [F_JSON] = {"json", 'j', NULL, NULL, NULL, "the settings, budgets and errors as one JSON object on stdout"},
};

const struct tool_cmd cli_check_cmd = {
    CLI_COMMAND("check", check_flags, "[--json] [FILE]", "validate gpucap's settings"),
    .about = "Validates the GPUCAP_* environment and an ini file (FILE, else GPUCAP_CONFIG, else\n"
             "/etc/gpucap/gpucap.ini if present) against the settings table, the whole file (an unknown\n"
             "section or key is reported, with the nearest known name, and checking goes on), prints each\n"
             "setting with its origin and the effective budget per device.",
    .tail = "Exit 0 when all is valid, 1 otherwise, 2 for a usage error.\n\n" CLI_SETTINGS_NOTE,
    .max_operands = 1,
};

/* The error lines of the load, kept for --json (and printed as the library prints them without). */
struct said {
    bool json;
    int n;
    char line[64][600];
};

static void collect(enum gpc_log_level level, const char *line, void *arg)
{
    struct said *w = arg;
    if (!w->json) {
        fprintf(stderr, "gpucap: %s: %s\n", level == GPC_LOG_ERROR ? "error" : "warning", line);
        return;
    }
    if (w->n < 64)
        snprintf(w->line[w->n++], sizeof w->line[0], "%s%s", level == GPC_LOG_ERROR ? "error: " : "warning: ", line);
}

static void show_value(const struct gpc_value *v, char *buf, size_t len)
{
    if (!v->set)
        snprintf(buf, len, "(unset)");
    else if (v->bad)
        snprintf(buf, len, "'%s' INVALID", v->text);
    else
        snprintf(buf, len, "%s", v->text);
}

static void show_budget(const struct gpc_settings *s, const char *who, int ordinal, const char *uuid)
{
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(s, ordinal, uuid, 0, &from);
    char where[600], a[GPC_SIZE_TEXT];
    if (!from || limit == GPC_UNLIMITED) {
        printf("  %-12s no limit\n", who);
        return;
    }
    gpc_value_origin(s, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where);
    if (from->bad)
        printf("  %-12s 0 (every allocation denied until the error is fixed)  from %s\n", who, where);
    else if (from->u.size.is_percent)
        printf("  %-12s %g%% of the device  from %s\n", who, from->u.size.ppm / 10000.0, where);
    else
        printf("  %-12s %s (%llu bytes)  from %s\n", who, gpc_format_size(from->u.size.bytes, a, sizeof a),
               (unsigned long long)from->u.size.bytes, where);
}

/*
 * Burstable (issue 35): where a request applies to the device, the request, the grant and the
 * budget in force by the library's formula (gpc_qos_in_force), in bytes where the figures are sizes
 * (a percentage waits for the card). *refused: a request above the limit (an error, as the
 * library says it). False when no request applies.
 */
struct qos_view {
    const struct gpc_value *rf, *lf, *gf;
    bool sizes, refused;
    uint64_t request, limit, grant, in_force;
};
static bool qos_of(const struct gpc_settings *s, int ordinal, const char *uuid, struct qos_view *q)
{
    memset(q, 0, sizeof *q);
    if (!gpc_settings_request(s, ordinal, uuid, 0, &q->request, &q->rf))
        return false;
    q->limit = gpc_settings_limit(s, ordinal, uuid, 0, &q->lf);
    q->gf = gpc_settings_pick(s, GPC_OPT_MEMORY_GRANT, ordinal, uuid, false);
    q->grant = gpc_settings_grant(s, ordinal, uuid, 0);
    bool pct = (q->rf && !q->rf->bad && q->rf->u.size.is_percent) || (q->lf && !q->lf->bad && q->lf->u.size.is_percent) ||
               (q->gf && !q->gf->bad && q->gf->u.size.is_percent);
    q->sizes = !pct && q->limit != GPC_UNLIMITED;
    if (q->sizes)
        q->in_force = gpc_qos_in_force(q->limit, q->request, q->grant, &q->refused);
    return true;
}

static void show_qos(const struct gpc_settings *s, const char *who, int ordinal, const char *uuid)
{
    struct qos_view q;
    if (!qos_of(s, ordinal, uuid, &q))
        return;
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], d[GPC_SIZE_TEXT];
    if (!q.sizes) {
        printf("  %-12s burstable: request %s, grant %s; in force min(limit, max(request, grant)) on the card\n", who,
               q.rf && !q.rf->bad ? q.rf->text : "0", q.gf && !q.gf->bad ? q.gf->text : "0");
        return;
    }
    printf("  %-12s burstable: request %s, limit %s, grant %s: in force %s%s\n", who,
           gpc_format_size(q.refused ? 0 : q.request, a, sizeof a), gpc_format_size(q.limit, b, sizeof b),
           gpc_format_size(q.grant < q.limit ? q.grant : q.limit, c, sizeof c), gpc_format_size(q.in_force, d, sizeof d),
           q.refused ? " (the request is above the limit: refused, best effort)" : "");
}

/* One budget of --json: {"device": WHO, "budget": TEXT or null, "bytes": N or null, "origin": TEXT or
 * null}, as show_budget says it (a bad setting: "0", 0 bytes). */
static void json_budget(const struct gpc_settings *s, const char *who, int ordinal, const char *uuid)
{
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(s, ordinal, uuid, 0, &from);
    char where[600];
    printf("{\"device\":");
    tool_json_string(stdout, who);
    if (!from || limit == GPC_UNLIMITED) {
        printf(",\"budget\":null,\"bytes\":null,\"origin\":null}");
        return;
    }
    printf(",\"budget\":");
    tool_json_string(stdout, from->bad ? "0" : from->text);
    if (from->bad)
        printf(",\"bytes\":0");
    else if (from->u.size.is_percent)
        printf(",\"bytes\":null,\"percent\":%g", from->u.size.ppm / 10000.0);
    else
        printf(",\"bytes\":%llu", (unsigned long long)from->u.size.bytes);
    printf(",\"origin\":");
    tool_json_string(stdout, gpc_value_origin(s, from, GPC_OPT_MEMORY_LIMIT, ordinal, where, sizeof where));
    struct qos_view q;
    if (qos_of(s, ordinal, uuid, &q)) {
        printf(",\"burstable\":true,\"request\":");
        tool_json_string(stdout, q.rf && !q.rf->bad ? q.rf->text : "0");
        printf(",\"grant\":");
        tool_json_string(stdout, q.gf && !q.gf->bad ? q.gf->text : "0");
        if (q.sizes)
            printf(",\"request_bytes\":%llu,\"grant_bytes\":%llu,\"in_force_bytes\":%llu,\"request_refused\":%s",
                   (unsigned long long)(q.refused ? 0 : q.request), (unsigned long long)(q.grant < q.limit ? q.grant : q.limit),
                   (unsigned long long)q.in_force, q.refused ? "true" : "false");
    }
    printf("}");
}

/* Whether device `dev` has a setting of its own (any per-device key). */
static bool dev_has(const struct gpc_settings *s, int dev)
{
    return s->dev_limit[dev].set || s->dev_request[dev].set || s->dev_grant[dev].set;
}

/* --json: {"config": {...}, "settings": [...], "budget": {...}, "errors": [...], "ok": bool}. */
static int print_json(const struct gpc_settings *s, const char *file, const struct said *said)
{
    printf("{\"config\":{\"path\":");
    tool_json_string(stdout, s->config_path);
    printf(",\"read\":%s,\"bad\":%s,\"locked\":%s,\"from\":\"%s\"},\"settings\":[", s->config_read ? "true" : "false",
           s->config_bad ? "true" : "false", s->locked ? "true" : "false", file ? "argument" : "environment");
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_value *v = &s->opt[i];
        char where[600];
        printf("%s{\"key\":\"%s\",\"variable\":\"%s\",\"value\":", i ? "," : "", gpc_option_defs[i].key,
               gpc_option_defs[i].env);
        if (v->set)
            tool_json_string(stdout, v->text);
        else
            printf("null");
        printf(",\"valid\":%s,\"origin\":", v->bad ? "false" : "true");
        if (v->set)
            tool_json_string(stdout, file && i == GPC_OPT_CONFIG ? "the command line"
                                                    : gpc_value_origin(s, v, (enum gpc_opt)i, -1, where, sizeof where));
        else
            printf("null");
        printf("}");
    }
    const struct gpc_value *from;
    uint64_t limit = gpc_settings_limit(s, -1, NULL, 0, &from);
    printf("],\"budget\":{\"all_devices\":");
    if (!from || limit == GPC_UNLIMITED)
        printf("null");
    else if (from->bad)
        printf("0");
    else
        tool_json_string(stdout, from->text);
    /* Each budget the text lists: every device, then each device's own (an ordinal or a UUID). */
    printf(",\"devices\":[");
    json_budget(s, "all", -1, NULL);
    for (int dev = 0; dev < GPC_MAX_DEVICES; dev++) {
        char who[16];
        snprintf(who, sizeof who, "%d", dev);
        if (dev_has(s, dev)) {
            putchar(',');
            json_budget(s, who, dev, NULL);
        }
    }
    for (int i = 0; i < s->n_uuid; i++) {
        putchar(',');
        json_budget(s, s->uuid_limit[i].uuid, -1, s->uuid_limit[i].uuid);
    }
    printf("]},\"env_bad\":%s,\"audit\":%s,\"errors\":[", s->env_bad ? "true" : "false",
           gpc_opt_enum(s, GPC_OPT_MODE) == GPC_MODE_AUDIT ? "true" : "false");
    for (int i = 0; i < said->n; i++) {
        if (i)
            putchar(',');
        tool_json_string(stdout, said->line[i]);
    }
    printf("],\"error_count\":%d,\"ok\":%s}\n", s->errors, s->errors ? "false" : "true");
    return s->errors ? 1 : 0;
}

int cmd_check(int argc, char **argv)
{
    const char *given[F_COUNT] = {0};
    int first, rc = tool_begin_values(&cli_check_cmd, argc, argv, given, &first);
    if (rc >= 0)
        return rc;
    bool json = given[F_JSON] != NULL;
    const char *file = first < argc ? argv[first] : NULL;
    if (file) {
        /* Said here, about the argument: the library would name GPUCAP_CONFIG, which the user did not set. */
        FILE *f = fopen(file, "re");
        if (!f) {
            tool_error("gpucap check", "%s cannot be read (%s)", file, strerror(errno));
            return 1;
        }
        fclose(f);
        setenv("GPUCAP_CONFIG", file, 1);
    }

    extern char **environ;
    struct gpc_settings s, platform;
    static struct said said;
    said.json = json;
    fflush(stdout);
    gpc_settings_load_to(&s, &platform, environ, collect, &said);
    /* A rate is text in the table; it is parsed where it is used, and here with the same parser. */
    const struct gpc_value *rate = &s.opt[GPC_OPT_FAIL_RATE];
    uint64_t r;
    if (rate->set && gpc_fault_parse_rate(rate->text, &r) != 0) {
        char where[600];
        s.errors++;
        char line[700];
        snprintf(line, sizeof line, "%s: fail_rate = '%s' is not valid; accepted: a share from 0 to 1 (0.05) or a "
                 "percentage (5%%)", gpc_value_origin(&s, rate, GPC_OPT_FAIL_RATE, -1, where, sizeof where), rate->text);
        collect(GPC_LOG_ERROR, line, &said);
    }
    /* A request above the limit (sizes both): the library refuses it, an error said here too. */
    for (int dev = -1; dev < GPC_MAX_DEVICES + s.n_uuid; dev++) {
        struct qos_view qv;
        bool by_uuid = dev >= GPC_MAX_DEVICES;
        const char *uuid = by_uuid ? s.uuid_limit[dev - GPC_MAX_DEVICES].uuid : NULL;
        if ((dev >= 0 && !by_uuid && !dev_has(&s, dev)) || !qos_of(&s, by_uuid ? -1 : dev, uuid, &qv) || !qv.refused)
            continue;
        char line[700], who[96];
        if (by_uuid)
            snprintf(who, sizeof who, "device %s: ", uuid);
        else if (dev >= 0)
            snprintf(who, sizeof who, "device %d: ", dev);
        else
            who[0] = '\0';
        s.errors++;
        snprintf(line, sizeof line, "%smemory_request = %s is above the limit (memory_limit, memory_limit_max): "
                 "refused; the request is 0 (best effort) until it is fixed", who, qv.rf ? qv.rf->text : "?");
        collect(GPC_LOG_ERROR, line, &said);
    }
    if (json)
        return print_json(&s, file, &said);

    if (s.config_read)
        printf("config file: %s%s\n", s.config_path, s.config_bad ? " (has errors)" : "");
    else if (s.config_bad)
        printf("config file: %s (cannot be read: every budget the environment does not set is 0)\n", s.config_path);
    else
        printf("config file: %s (not present: defaults and environment only)\n", s.config_path);
    if (s.locked)
        printf("locked: %s locks the settings; the environment may only tighten them (%d override%s "
               "refused%s)\n", s.config_path, s.refused, s.refused == 1 ? "" : "s",
               s.refused ? ", see the warnings above" : "");
    printf("settings:\n");
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        char val[300], where[600];
        show_value(&s.opt[i], val, sizeof val);
        const char *origin = s.opt[i].set ? gpc_value_origin(&s, &s.opt[i], (enum gpc_opt)i, -1, where, sizeof where) : "";
        /* The file given as the argument is named as such, not as GPUCAP_CONFIG (set by us). */
        if (file && i == GPC_OPT_CONFIG)
            origin = "the command line";
        printf("  %-16s = %-24s %s\n", d->key, val, origin);
    }
    static const enum gpc_opt per_device[] = {GPC_OPT_MEMORY_LIMIT, GPC_OPT_MEMORY_REQUEST, GPC_OPT_MEMORY_GRANT};
    for (size_t k = 0; k < sizeof per_device / sizeof per_device[0]; k++) {
        enum gpc_opt o = per_device[k];
        for (int i = 0; i < s.n_uuid; i++) {
            const struct gpc_value *v = gpc_settings_uuid_slot(&s.uuid_limit[i], o);
            if (!v->set && o != GPC_OPT_MEMORY_LIMIT)
                continue;
            char val[300], where[600], key[96];
            snprintf(key, sizeof key, "[device.%s] %s", s.uuid_limit[i].uuid, gpc_option_defs[o].key);
            show_value(v, val, sizeof val);
            printf("  %-16s = %-24s %s\n", key, val, gpc_value_origin(&s, v, o, -1, where, sizeof where));
        }
        for (int dev = 0; dev < GPC_MAX_DEVICES; dev++) {
            const struct gpc_value *v = gpc_settings_dev_value(&s, o, dev);
            if (!v->set)
                continue;
            char val[300], where[600], key[64];
            snprintf(key, sizeof key, "[device.%d] %s", dev, gpc_option_defs[o].key);
            show_value(v, val, sizeof val);
            printf("  %-16s = %-24s %s\n", key, val, gpc_value_origin(&s, v, o, dev, where, sizeof where));
        }
    }
    printf("effective budget:\n");
    show_budget(&s, "all devices", -1, NULL);
    show_qos(&s, "all devices", -1, NULL);
    for (int dev = 0; dev < GPC_MAX_DEVICES; dev++) {
        if (!dev_has(&s, dev))
            continue;
        char who[32];
        snprintf(who, sizeof who, "device %d", dev);
        show_budget(&s, who, dev, NULL);
        show_qos(&s, who, dev, NULL);
    }
    for (int i = 0; i < s.n_uuid; i++) {
        show_budget(&s, s.uuid_limit[i].uuid, -1, s.uuid_limit[i].uuid);
        show_qos(&s, s.uuid_limit[i].uuid, -1, s.uuid_limit[i].uuid);
    }
    if (s.env_bad)
        printf("  an unknown GPUCAP_* variable puts every budget at 0\n");
    if (gpc_opt_enum(&s, GPC_OPT_MODE) == GPC_MODE_AUDIT)
        printf("  audit mode: nothing is denied, would-be denials are logged and counted\n");
    if (s.errors) {
        printf("%d error%s: see the lines above\n", s.errors, s.errors == 1 ? "" : "s");
        return 1;
    }
    printf("ok\n");
    return 0;
}
