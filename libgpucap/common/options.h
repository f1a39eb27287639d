/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h: every setting in one table (options.c), read by the library and the tools alike.
 */
#ifndef GPUCAP_COMMON_OPTIONS_H
#define GPUCAP_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/log.h"
#include "common/units.h"

#define GPC_MODES(X) X(GPC_MODE_ENFORCE, "enforce") X(GPC_MODE_AUDIT, "audit")
#define GPC_REPORT_FORMATS(X) X(GPC_REPORT_TEXT, "text") X(GPC_REPORT_JSON, "json")
enum gpc_mode { GPC_MODES(GPC_ENUM_VALUE) };
enum gpc_report_format { GPC_REPORT_FORMATS(GPC_ENUM_VALUE) };

enum gpc_opt {
    GPC_OPT_MEMORY_LIMIT,
    GPC_OPT_CONFIG,
    GPC_OPT_LOG_LEVEL,
    GPC_OPT_LEDGER,
    GPC_OPT_LEDGER_GROUP,
    GPC_OPT_MODE,
    GPC_OPT_REPORT,
    GPC_OPT_REPORT_FORMAT,
    GPC_OPT_FAIL_AFTER,
    GPC_OPT_FAIL_RATE,
    GPC_OPT_FAIL_SEED,
    GPC_OPT_BACKTRACE,
    GPC_OPT_LIB,
    GPC_OPT_CONTEXT_RESERVE,
    GPC_OPT_POD_NAMESPACE,
    GPC_OPT_POD_NAME,
    GPC_OPT_POD_UID,
    GPC_OPT_CONTAINER_NAME,
    GPC_OPT_TIMELINE,
    GPC_OPT_MEMORY_LIMIT_MAX,
    GPC_OPT_LOCK,
    GPC_OPT_SCHED_LIMIT,
    GPC_OPT_MEMORY_REQUEST,
    GPC_OPT_MEMORY_GRANT,
    GPC_OPT_ARBITER_SOCKET,
    GPC_OPT_RECLAIM_GRACE,
    GPC_OPT__COUNT
};
enum gpc_opt_type { GPC_T_SIZE, GPC_T_BOOL, GPC_T_INT, GPC_T_STRING, GPC_T_ENUM };
#define GPC_OPTF_PER_DEVICE 1u /* also GPUCAP_<NAME>_<ordinal> and [device.<ordinal>] */
#define GPC_OPTF_ENV_ONLY 2u   /* not read from the ini file */
/* Under the platform's lock (`lock = true` in the platform file) the environment may set these only
 * to the platform's value (FIXED), to a stricter one (LOWER: a smaller size, or an earlier enum
 * choice: choices are listed strictest first), or a larger size (RAISE). */
#define GPC_OPTF_LOCK_FIXED 4u
#define GPC_OPTF_LOCK_LOWER 8u
#define GPC_OPTF_LOCK_RAISE 16u
#define GPC_OPTF_FILE_ONLY 32u /* read from the ini file only, never from the environment */
#define GPC_OPTF_IDENTITY 64u  /* who the ledger belongs to: a name, never a limit */

struct gpc_option_def {
    const char *key;     /* ini key in [gpucap]; the variable is GPUCAP_ + the key in capitals */
    const char *env;     /* that variable, spelled out */
    enum gpc_opt_type type;
    const char *def;     /* default as text; NULL: unset */
    const char *choices; /* GPC_T_ENUM: "a|b|c", index = value */
    unsigned flags;
    const char *doc;
};
extern const struct gpc_option_def gpc_option_defs[GPC_OPT__COUNT];

enum gpc_source { GPC_SRC_DEFAULT, GPC_SRC_FILE, GPC_SRC_ENV };
struct gpc_value {
    bool set;            /* a value was given (or a default applies) */
    bool bad;            /* a value was given and is malformed: its safe state applies */
    enum gpc_source src;
    int line;            /* ini line, when src == GPC_SRC_FILE */
    union {
        struct gpc_size size;
        bool b;
        long long i;
        int e;
    } u;
    char text[256];      /* as written (strings: the value) */
};
typedef void gpc_settings_sink(enum gpc_log_level level, const char *line, void *arg);
struct gpc_settings {
    struct gpc_value opt[GPC_OPT__COUNT];
    struct gpc_value dev_limit[GPC_MAX_DEVICES]; /* per ordinal memory_limit */
    struct gpc_value dev_request[GPC_MAX_DEVICES]; /* per ordinal memory_request */
    struct gpc_value dev_grant[GPC_MAX_DEVICES];   /* per ordinal memory_grant */
    struct gpc_uuid_limit {
        char uuid[GPC_UUID_TEXT];                 /* "GPU-..." as written: the UUID or a prefix */
        struct gpc_value v;                       /* memory_limit */
        struct gpc_value request, grant;          /* memory_request, memory_grant */
    } uuid_limit[GPC_MAX_UUID_LIMITS];            /* per UUID settings */
    int n_uuid;
    char config_path[512];
    bool config_read;    /* the ini file existed and was read */
    bool config_bad;     /* unreadable, bad syntax or unknown keys: budgets not set by env are 0 */
    bool env_bad;        /* an unknown GPUCAP_* variable: every budget is 0 */
    int errors;          /* error lines written */
    int env_errors;      /* of those, the ones about the environment (a live re-read of the file
                          * judges the file by the others: charge/live.c) */
    bool locked;         /* the platform file locks the settings: the environment may only tighten */
    uid_t platform_uid;  /* under the lock: the platform file's owner, who alone makes ledgers */
    bool platform_mounted; /* the platform file is a mount of its own (the webhook's layout): so is the ledger */
    int refused;         /* overrides refused under the lock (one warning line each) */
    /* Under the lock: the platform file's settings alone, which bound every limit here; the copy the
     * caller of the load gave (NULL when not locked). */
    const struct gpc_settings *platform;
    /* While a load runs: where its lines go (gpc_settings_load_to; NULL: the log). */
    gpc_settings_sink *sink;
    void *sink_arg;
};
/*
 * Fills *s from the ini file (GPUCAP_CONFIG, else /etc/gpucap/gpucap.ini if present) and then the
 * environment `envp`, which overrides it. Every malformed value is logged as one error line naming
 * the setting, the value and the accepted forms. Never fails: bad values are marked `bad`.
 * When the platform file (/etc/gpucap/gpucap.ini) says `lock = true`, GPUCAP_CONFIG is not read and
 * the environment may only tighten (GPC_OPTF_LOCK_*); each refused override is one warning line,
 * and the platform file's own settings are kept in *platform, the caller's storage, which
 * s->platform then points at (keep it as long as *s). Loads share no state but the log threshold
 * (log.h), which each sets from the level its settings say.
 */
void gpc_settings_load(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp);
/*
 * The same, with each line the loader would log (error and warning lines, without the "gpucap: "
 * prefix) handed to `to` instead: the CLI's way to read the settings quietly or to count. The
 * lines below the log threshold are not said.
 */
void gpc_settings_load_to(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp,
                          gpc_settings_sink *to, void *arg);
/*
 * True in a secure-execution process (getauxval(AT_SECURE): setuid, setgid, file capabilities).
 * There gpc_settings_load reads only the system settings file and no GPUCAP_* variable, and the
 * library opens no path that the environment named.
 */
bool gpc_secure_execution(void);
/*
 * Typed reads of a loaded setting. Each returns the setting's default (parsed from its table row)
 * when it is unset or malformed: gpc_opt_enum the default choice's index (-1 without a default),
 * gpc_opt_bool false and gpc_opt_int `fallback` without one, gpc_opt_string the default text (NULL
 * without one). Where a bad value has another safe state than the default, the caller checks `bad`.
 */
int gpc_opt_enum(const struct gpc_settings *s, enum gpc_opt o);
bool gpc_opt_bool(const struct gpc_settings *s, enum gpc_opt o);
long long gpc_opt_int(const struct gpc_settings *s, enum gpc_opt o, long long fallback);
const char *gpc_opt_string(const struct gpc_settings *s, enum gpc_opt o);
/* Parses `text` as setting `o`'s value (the loader's parser) into *v: 0, or -EINVAL when malformed. */
int gpc_option_parse(enum gpc_opt o, const char *text, struct gpc_value *v);
/*
 * The byte budget for device `ordinal` (UUID text `uuid`, may be NULL) with `physical` bytes of
 * memory under *s: GPC_UNLIMITED when no limit applies, 0 when the setting that applies is
 * malformed. *from (optional) names the source. Precedence: the environment over the file, and in
 * each, per UUID over per ordinal over all devices. That figure is then bounded by memory_limit_max,
 * by the scheduler's GPU_MEMORY_LIMIT and, under the lock, by the platform file's own figure: the
 * lowest wins (*from names it).
 */
/* "GPU-" then hex digits and dashes, 8 digits at least: a card's UUID or the start of one, as the
 * per-UUID settings take it (GPUCAP_MEMORY_LIMIT_GPU-..., [device.GPU-...]). */
bool gpc_settings_uuid_text(const char *t);
uint64_t gpc_settings_limit(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                            const struct gpc_value **from);
/*
 * The value of per-device setting `o` (memory_limit, memory_request, memory_grant) that applies to
 * device `ordinal` (UUID text `uuid`, may be NULL): the environment over the file, and in each per
 * UUID over per ordinal over all devices; NULL when none is set. With `forced`, a settings file or
 * an environment that is broken (config_bad, env_bad) gives a bad value (a budget of 0) instead.
 */
const struct gpc_value *gpc_settings_pick(const struct gpc_settings *s, enum gpc_opt o, int ordinal,
                                          const char *uuid, bool forced);
/* The slot of per-device setting `o` for ordinal `dev` (0 <= dev < GPC_MAX_DEVICES), and of entry u
 * of the per-UUID table. */
struct gpc_value *gpc_settings_dev_value(struct gpc_settings *s, enum gpc_opt o, int dev);
struct gpc_value *gpc_settings_uuid_slot(struct gpc_uuid_limit *u, enum gpc_opt o);

/*
 * Burstable memory (issue 35, options_qos.c). Whether device `ordinal` has a request
 * (memory_request, any source; under the lock the environment's only lowers the platform file's,
 * the lower per device wins): true and *request the bytes resolved against `physical` (0 when the
 * value that applies is malformed: best effort, its safe state; *from names it), or false: no
 * request applies, the container is not burstable there (its budget is its limit, as before QoS).
 */
bool gpc_settings_request(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                          uint64_t *request, const struct gpc_value **from);
/* The grant (memory_grant) of the node arbiter for device `ordinal`, resolved against `physical`: from
 * the settings file only, never the environment (GPC_OPTF_FILE_ONLY); 0 when none or malformed. */
uint64_t gpc_settings_grant(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical);
/*
 * The budget in force by the QoS model: min(limit, max(request, grant)), the grant first clamped to
 * the limit. A request above the limit is refused: best effort (request 0), *refused set (the
 * caller says it). The one formula, for the library and the tools alike.
 */
uint64_t gpc_qos_in_force(uint64_t limit, uint64_t request, uint64_t grant, bool *refused);

/* True when some budget applies to some device (or a bad setting forces the safe state). */
bool gpc_settings_any_limit(const struct gpc_settings *s);
/* Describes where a value came from: "GPUCAP_MEMORY_LIMIT", "/etc/gpucap/gpucap.ini:3", "default". */
const char *gpc_value_origin(const struct gpc_settings *s, const struct gpc_value *v, enum gpc_opt opt,
                             int ordinal, char *buf, size_t len);

#endif
