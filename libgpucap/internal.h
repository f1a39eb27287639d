/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h: what the files of libgpucap share, grouped by the file that owns each declaration.
 * Everything not declared here is static to its file. Nothing here is exported: the library is
 * built with hidden visibility and libgpucap.map lists the exports.
 */
#ifndef GPUCAP_INTERNAL_H
#define GPUCAP_INTERNAL_H

/* Legacy 32-bit prototypes and no `#define cuMemAlloc cuMemAlloc_v2` renames: we export both. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hooklist.h"
#include "ledger.h"
#include "units.h"

#define GPC_EXPORT __attribute__((visibility("default")))
#define gpc_likely(x) __builtin_expect(!!(x), 1)
#define gpc_unlikely(x) __builtin_expect(!!(x), 0)

/* Device ordinals a process can have settings and per-ordinal state for (a node has at most 16
 * today). Not GPC_LEDGER_DEVICES (ledger.h): the distinct cards, by UUID, a ledger records and
 * budgets are numbered by; an ordinal whose card finds no free ledger entry is denied (device.c). */
#define GPC_MAX_DEVICES 64
/* Per-UUID memory limits a configuration can hold. */
#define GPC_MAX_UUID_LIMITS 16
/* A limit of GPC_UNLIMITED means "no budget for this device". */
#define GPC_UNLIMITED UINT64_MAX

/*
 * The choices of the GPC_T_ENUM settings. One list per setting gives both its enum and its choices
 * string ("a|b|c", index = value), so a choice cannot name another value than its enum's.
 */
#define GPC_ENUM_VALUE(name, text) name,
#define GPC_ENUM_TEXT(name, text) "|" text
#define GPC_CHOICES(list) (list(GPC_ENUM_TEXT) + 1) /* "|a|b" + 1: "a|b" */
#define GPC_LOG_LEVELS(X) X(GPC_LOG_ERROR, "error") X(GPC_LOG_WARN, "warn") X(GPC_LOG_INFO, "info") \
    X(GPC_LOG_DEBUG, "debug")
#define GPC_MODES(X) X(GPC_MODE_ENFORCE, "enforce") X(GPC_MODE_AUDIT, "audit")
#define GPC_REPORT_FORMATS(X) X(GPC_REPORT_TEXT, "text") X(GPC_REPORT_JSON, "json")
enum gpc_mode { GPC_MODES(GPC_ENUM_VALUE) };
enum gpc_report_format { GPC_REPORT_FORMATS(GPC_ENUM_VALUE) };

/* ---- log.c: the one log sink, "gpucap: " prefixed lines on stderr ---- */
enum gpc_log_level { GPC_LOG_LEVELS(GPC_ENUM_VALUE) };
extern int gpc_log_threshold;
/* Writes one line with write(2): no stdio buffer, no malloc; keeps errno. */
void gpc_log_line(enum gpc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define gpc_log(level, ...)                                  \
    do {                                                     \
        if ((int)(level) <= gpc_log_threshold)               \
            gpc_log_line((level), __VA_ARGS__);              \
    } while (0)

/* ---- options.c: every setting, one table ---- */
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
struct gpc_settings {
    struct gpc_value opt[GPC_OPT__COUNT];
    struct gpc_value dev_limit[GPC_MAX_DEVICES]; /* per ordinal memory_limit */
    struct gpc_uuid_limit {
        char uuid[GPC_UUID_TEXT];                 /* "GPU-..." as written: the UUID or a prefix */
        struct gpc_value v;
    } uuid_limit[GPC_MAX_UUID_LIMITS];            /* per UUID memory_limit */
    int n_uuid;
    char config_path[512];
    bool config_read;    /* the ini file existed and was read */
    bool config_bad;     /* unreadable, bad syntax or unknown keys: budgets not set by env are 0 */
    bool env_bad;        /* an unknown GPUCAP_* variable: every budget is 0 */
    int errors;          /* error lines written */
    bool locked;         /* the platform file locks the settings: the environment may only tighten */
    int refused;         /* overrides refused under the lock (one warning line each) */
    /* Under the lock: the platform file's settings alone, which bound every limit here. */
    const struct gpc_settings *platform;
};
/*
 * Fills *s from the ini file (GPUCAP_CONFIG, else /etc/gpucap/gpucap.ini if present) and then the
 * environment `envp`, which overrides it. Every malformed value is logged as one error line naming
 * the setting, the value and the accepted forms. Never fails: bad values are marked `bad`.
 * When the platform file (/etc/gpucap/gpucap.ini) says `lock = true`, GPUCAP_CONFIG is not read and
 * the environment may only tighten (GPC_OPTF_LOCK_*); each refused override is one warning line and
 * s->platform keeps the platform file's settings (static storage: the last locked load's).
 */
void gpc_settings_load(struct gpc_settings *s, char *const *envp);
/*
 * The same, with each line the loader would log (error and warning lines, without the "gpucap: "
 * prefix) handed to `to` instead: the CLI's way to read the settings quietly or to count. The
 * lines below the log threshold are not said. One load at a time.
 */
typedef void gpc_settings_sink(enum gpc_log_level level, const char *line, void *arg);
void gpc_settings_load_to(struct gpc_settings *s, char *const *envp, gpc_settings_sink *to, void *arg);
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
uint64_t gpc_settings_limit(const struct gpc_settings *s, int ordinal, const char *uuid, uint64_t physical,
                            const struct gpc_value **from);
/* True when some budget applies to some device (or a bad setting forces the safe state). */
bool gpc_settings_any_limit(const struct gpc_settings *s);
/* Describes where a value came from: "GPUCAP_MEMORY_LIMIT", "/etc/gpucap/gpucap.ini:3", "default". */
const char *gpc_value_origin(const struct gpc_settings *s, const struct gpc_value *v, enum gpc_opt opt,
                             int ordinal, char *buf, size_t len);

/* ---- init.c: lazy start-up on the first CUDA call, shutdown ---- */
extern struct gpc_settings gpc_settings;
/* 1 once settings are loaded and the real driver resolved; hooks may run before the constructor. */
extern atomic_int gpc_initialized;
/* True when hooks must only pass calls through: no budget configured, or after the destructor. */
extern atomic_bool gpc_passthrough;
void gpc_init_slow(void);
static inline void gpc_init(void)
{
    if (gpc_unlikely(!atomic_load_explicit(&gpc_initialized, memory_order_acquire)))
        gpc_init_slow();
}
/* gpc_init() then true when this call should be counted against a budget. */
static inline bool gpc_enforcing(void)
{
    gpc_init();
    return !atomic_load_explicit(&gpc_passthrough, memory_order_relaxed);
}

/* ---- resolve.c: the real entry points ---- */
struct gpc_real {
#define GPC_REAL_FIELD(exp, base, ver, pt, pfn) pfn exp;
    GPC_HOOKS(GPC_REAL_FIELD)
#undef GPC_REAL_FIELD
#define GPC_REAL_FIELD2(exp, pfn) pfn exp;
    GPC_REAL_ONLY(GPC_REAL_FIELD2)
#undef GPC_REAL_FIELD2
};
extern struct gpc_real gpc_real;
/* Resolves gpc_real from libcuda.so.1 (once; `handle` is used when the caller already has one). */
void gpc_resolve_cuda(void *handle);
/* glibc's dlsym/dlvsym (or the next interposer's), found without calling dlsym. NULL if not found. */
void *(*gpc_real_dlsym_fn(void))(void *, const char *);
void *(*gpc_real_dlvsym_fn(void))(void *, const char *, const char *);
/* A driver entry point that is missing answers this instead of crashing. */
#define GPC_CALL_REAL(name, args) (gpc_real.name ? gpc_real.name args : CUDA_ERROR_NOT_FOUND)

/* ---- procaddr.c: the hook that stands for a driver symbol ---- */
/* Our hook for exported name `name` (e.g. "cuMemAlloc_v2"), or NULL if we do not hook it. */
void *gpc_hook_for_export(const char *name);
/* Replaces *pfn (the driver's answer for base name `symbol`) by the hook of the same variant. */
void gpc_procaddr_redirect(const char *symbol, void **pfn, int version, cuuint64_t flags);

/* ---- ledger.c: the record of usage, shared by the processes of a container ---- */
extern struct gpc_ledger *gpc_ledger;
/* True: a ledger file shared with other processes (locked admission, per-process accounting).
 * False: a budget private to this process (GPUCAP_LEDGER=off, or after a ledger error). */
extern bool gpc_ledger_shared;
/*
 * ledger_check.c: the ledger's path by the settings `s` (GPUCAP_LEDGER, ini `ledger`), else
 * /tmp/gpucap-<euid>.ledger, into buf. 0, or -ENOENT when it is "off" (a budget private to each
 * process: no file).
 */
int gpc_ledger_path(const struct gpc_settings *s, char *buf, size_t len);
/* Maps the ledger named by the settings, or a private one after one clear error. Never fails. */
void gpc_ledger_attach(void);
/*
 * Writes the identity settings that are set and valid (GPUCAP_POD_NAMESPACE, _POD_NAME, _POD_UID,
 * GPUCAP_CONTAINER_NAME) and this library's version into the shared ledger's identity block,
 * under its table lock. Nothing for a private ledger; a lock not obtained leaves the block as is.
 */
void gpc_ledger_identify(void);
/*
 * The ledger entry of the device with this UUID, registering it with `limit` if new (under the
 * rule "the smallest limit among live processes wins", with a warning on disagreement). Returns
 * the entry index; -ENOSPC when the device table is really full; -EAGAIN when a lock was not
 * obtained in time or the process table is full (logged): the caller tries again at its next call.
 */
int gpc_ledger_device(const uint8_t uuid[16], uint64_t physical, uint64_t limit, int ordinal);
/*
 * This process's entry in the ledger in use (claimed on first use, again after fork, with this
 * process's own limits; an exec'd image takes over the entry of its pid and start time from zero),
 * or NULL when the table is full (logged). One pointer: a move to another file (a rebuild, a file
 * replaced at the path) publishes the entry there in one store, so no caller pairs one file with
 * an index into another.
 */
extern struct gpc_ledger_proc *_Atomic gpc_ledger_entry;
struct gpc_ledger_proc *gpc_ledger_claim(void);
static inline struct gpc_ledger_proc *gpc_ledger_me(void)
{
    struct gpc_ledger_proc *p = atomic_load_explicit(&gpc_ledger_entry, memory_order_relaxed);
    return gpc_likely(p != NULL) ? p : gpc_ledger_claim();
}
/* Gives back the budget of dead processes (gone, zombies, images that exec'd) and recomputes the
 * limits they set; returns how many were reclaimed. */
int gpc_ledger_reap(void);
/*
 * Set by the SIGBUS guard when the ledger file was shrunk under this process (the mapping now holds
 * zero pages). gpc_ledger_recover() then moves the process to a private budget with the same entry
 * indices and its limits, charged exactly what it holds (gpc_budget_held: counted by budget.c
 * outside the mapping), and says so once. Budget calls check it on the shared path only.
 */
extern atomic_bool gpc_ledger_broken;
void gpc_ledger_recover(void);
static inline void gpc_ledger_check_broken(void)
{
    if (gpc_unlikely(gpc_ledger_shared && atomic_load_explicit(&gpc_ledger_broken, memory_order_relaxed)))
        gpc_ledger_recover();
}
/* Touches the whole mapping, so that a file shrunk since is noticed (and this process moved to a
 * private budget) before a figure is read from it: for callers about to report one. */
void gpc_ledger_probe(void);
/* gpc_ledger_probe, then gpc_ledger_reap at most every 100 ms per process: for callers about to
 * report a figure. */
void gpc_ledger_reap_lazy(void);
/*
 * Around an exec (hooks_exec.c): marks this process's entry "exec under way" (true if it marked
 * it: a process that never touched CUDA has none, and a vfork child must not mark its parent's),
 * then clears the mark when the exec returned, that is failed. See gpc_ledger_proc_alive.
 */
bool gpc_ledger_exec_begin(void);
void gpc_ledger_exec_end(bool marked);
/*
 * Locks device entry `id` of the ledger (robust, bounded wait) and returns it, or NULL after
 * logging "...; <consequence>" (with the holder's pid when the wait timed out). A ledger whose lock
 * was left not recoverable is rebuilt under a fresh file first: use the entry returned (and
 * gpc_ledger after the call), never one taken before.
 */
struct gpc_ledger_dev *gpc_ledger_lock_dev(int id, const char *consequence);
/* Locks device entry `id` if it is free now (a dead owner's entry is recovered), else NULL, quietly. */
struct gpc_ledger_dev *gpc_ledger_trylock_dev(int id);
void gpc_ledger_unlock(struct gpc_ledger_dev *d);

/* ---- budget.c: reservation arithmetic ---- */
/* In the crash-test copy of the library only: the process dies (SIGKILL) at step n of a locked
 * lease operation when GPC_TEST_CRASH_AT=n. Nothing in the real library. */
#ifdef GPC_CRASH_POINTS
void gpc_crash_point(int n);
#define GPC_CRASH_POINT(n) gpc_crash_point(n)
#else
#define GPC_CRASH_POINT(n) ((void)0)
#endif
/* Budget ids are ledger device indices, or one of these. */
#define GPC_BUDGET_NONE (-1) /* no limit for that device: nothing is counted */
#define GPC_BUDGET_DENY (-2) /* a budget of 0 after a bad setting: everything is denied */
/*
 * Admits `bytes` if what is admitted on the device stays within its limit: 0, or -ENOMEM (nothing
 * changed, denial counted). Inside this process's lease: one compare-and-swap. Otherwise the lease
 * grows under the device's robust lock; before denying, every process's spare and dead processes'
 * shares are taken back and admission is tried again.
 */
int gpc_budget_reserve(int id, uint64_t bytes);
/* The admission rule: `bytes` more on top of `used` stays within `limit` (computed without wrapping). */
bool gpc_budget_fits(uint64_t used, uint64_t bytes, uint64_t limit);
/* Gives back bytes admitted earlier (no lock: into this process's lease). */
void gpc_budget_release(int id, uint64_t bytes);
/* What the processes on budget `id` have in use (0 for none); the device's peak follows it. */
uint64_t gpc_budget_in_use(int id);
/* The device's peak of budget `id` (gpc_ledger_peak, and what is in use now). */
uint64_t gpc_budget_peak(int id);
/* Adds every thread's batched allocation and free counts to the ledger (for a report). */
void gpc_budget_flush_counts(void);
/* Registers the fork handler of the batched counts (at start-up). */
void gpc_budget_atfork(void);
/* Adds `delta` bytes to the part of a budget's use that context reserves make up (figures only). */
void gpc_budget_note_contexts(int id, int64_t delta);
/* The figures of a budget (NULL for GPC_BUDGET_NONE). */
struct gpc_slot *gpc_budget_slot(int id);
/*
 * Applies `limit` to budget `id` (a ledger device entry) at once, under the entry's lock: lowered,
 * every process's spare is closed to admission and taken back until the leases fit under it (what
 * the processes hold stays theirs; nothing more is admitted, with or without the lock, until what
 * is admitted plus the request fits); raised, admission up to the new limit is possible at once.
 * The processes' own limits are not changed: a later registration or reap recomputes the device's
 * limit from them. 0, -EINVAL for an id that is no device entry, -EAGAIN when the lock was not
 * obtained (logged; nothing changed).
 */
int gpc_budget_set_limit(int id, uint64_t limit);
/* gpc_budget_set_limit for a caller that holds the lock of entry d of ledger l (ledger.c). */
void gpc_budget_limit_locked(struct gpc_ledger *l, struct gpc_ledger_dev *d, uint64_t limit);
/* What this process holds on budget `id` by its own count, kept outside the ledger (for a process
 * moved off a shrunk file: charged exactly that). */
uint64_t gpc_budget_held(int id);
/*
 * Audit mode: admits `bytes` whatever the limit (used may pass it), so that the peak is what the
 * job really needs. 0, or -ENOMEM when the shared ledger cannot be locked (logged).
 */
int gpc_budget_reserve_unchecked(int id, uint64_t bytes);
/* Counts a denial decided elsewhere (an injected fault) in the budget's figures. */
void gpc_budget_note_denial(int id, uint64_t bytes);

/* ---- device.c: device ordinals, their budgets, the device of the current context ---- */
/* The budget id of device `ordinal` (set up on first use). */
int gpc_device_budget(int ordinal);
/* The budget id of `ordinal` if it was set up, else GPC_BUDGET_NONE; never sets anything up. */
int gpc_device_budget_if_ready(int ordinal);
/*
 * The device of the calling thread's current context: CUDA_SUCCESS, or the driver's error
 * (CUDA_ERROR_INVALID_CONTEXT when none is current). A single-device process answers 0 without a
 * driver call; otherwise one cuCtxGetCurrent, and cuCtxGetDevice once per context (cached).
 */
CUresult gpc_current_device(CUdevice *dev);
/* 1 when the process sees exactly one device, 0 several, -1 not asked yet (for gpc_ctx_device). */
extern atomic_int gpc_single_device;
/* gpc_ctx_device past its test for a single device (the per-context cache). */
CUresult gpc_ctx_device_lookup(CUcontext ctx, CUdevice *dev);
/*
 * The device of `ctx`, which must be the calling thread's current context (not NULL): CUDA_SUCCESS,
 * or the driver's error. No driver call once the context was seen (device.c caches it per context).
 */
static inline CUresult gpc_ctx_device(CUcontext ctx, CUdevice *dev)
{
    if (gpc_likely(atomic_load_explicit(&gpc_single_device, memory_order_relaxed) == 1)) {
        *dev = 0;
        return CUDA_SUCCESS;
    }
    return gpc_ctx_device_lookup(ctx, dev);
}
/*
 * Forgets the device of every context: call it after a context was made or torn down (its handle
 * may be one an earlier context had, on another device), before the caller gets the new handle.
 */
void gpc_ctx_devices_forget(void);
/* Registers the fork handler of the set-up and context-cache locks (at start-up). */
void gpc_device_atfork(void);

/* ---- track.c: what each pointer and handle was charged ---- */
enum gpc_map_kind {
    GPC_MAP_PTR, GPC_MAP_HANDLE, GPC_MAP_MAPPING,
    GPC_MAP_ARRAY,   /* hooks_array.c: CUarray / CUmipmappedArray handle -> bytes charged */
    GPC_MAP_CTX,     /* hooks_ctx.c: CUcontext / CUgreenCtx handle -> context reserve charged */
    GPC_MAP_POOLPTR, /* hooks_pool.c: pool allocation -> size (not charged itself), aux = pool slot */
    GPC_MAP_POOLKEPT, /* hooks_pool.c: pool without a slot -> bytes it keeps (charged), aux = live bytes */
    GPC_MAP__COUNT
};
struct gpc_track {
    uint64_t bytes;
    int32_t device;   /* ordinal whose budget was charged */
    int32_t refs;     /* GPC_MAP_HANDLE: references (creation, retains, mappings) */
    uint64_t aux;     /* GPC_MAP_MAPPING: the handle mapped there */
    uint64_t ctx;     /* the context current at allocation (0: none known): its teardown frees it */
};
/* Records key -> *t. 0, or -ENOMEM when no memory could be mapped for the record. */
int gpc_track_add(enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t);
/* Removes key and copies its record to *t: true if it was known. */
bool gpc_track_take(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t);
/* Adds `delta` to the refs of a known key; returns the new count, or -1 if unknown. When the count
 * reaches 0 the record is removed and copied to *t. */
int gpc_track_ref(enum gpc_map_kind kind, uint64_t key, int delta, struct gpc_track *t);
/* Registers the fork handlers for the map locks. */
void gpc_track_atfork(void);
/*
 * Removes every record of `kind` whose ctx is `ctx` (a context the driver tore down, which freed
 * them) and calls fn(t, arg) for each, under a map lock: fn must only do arithmetic.
 */
void gpc_track_drain_ctx(enum gpc_map_kind kind, uint64_t ctx, void (*fn)(const struct gpc_track *t, void *arg),
                         void *arg);
/* The records of `kind` and the bytes its tables take (for the table test and bench). */
void gpc_track_stats(enum gpc_map_kind kind, uint64_t *records, uint64_t *bytes);

/* ---- faults.c: fault injection (in gpucap_core; the counter lives in the process that calls it) ---- */
/* Parses a share "0.05" (0 to 1) into parts per 2^32: 0, or -EINVAL. */
int gpc_fault_parse_rate(const char *text, uint64_t *out);
/* True if attempt `index` (1-based) fails under fail_rate `rate` (parts per 2^32) and `seed`. */
bool gpc_fault_hit(uint64_t seed, uint64_t index, uint64_t rate);
/* True when fault injection is configured in *s. */
static inline bool gpc_fault_armed(const struct gpc_settings *s)
{
    return s->opt[GPC_OPT_FAIL_AFTER].set || s->opt[GPC_OPT_FAIL_RATE].set;
}
/* Counts one allocation attempt; true (after logging it) when this attempt must fail. */
bool gpc_fault_inject(const struct gpc_settings *s, const char *call, int device, uint64_t bytes);

/* ---- report.c: the usage report (in gpucap_core: the library at exit and `gpucap run` write it) ---- */
/*
 * Writes the figures of every device entry of ledger `l` to `fd` with write(2) (no malloc, no
 * stdio), as text or one JSON object. `audit` says the run was in audit mode. 0, or -errno.
 */
int gpc_report_write(int fd, const struct gpc_ledger *l, bool json, bool audit);
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
/* gpc_report_write, with a "timeline" in each JSON device that one of `tl[0..ntl)` matches. */
int gpc_report_write_timeline(int fd, const struct gpc_ledger *l, bool json, bool audit,
                              const struct gpc_timeline *tl, int ntl);
/*
 * Writes a report to the file `path` as a new file renamed into place (never through a symbolic
 * link or an existing inode); refuses a directory writable by every user that is not sticky. The
 * content is what `write(fd, arg)` puts there (0 or -errno). 0, or -errno with the reason in why
 * ("is a symbolic link: refused", ...). No malloc, no stdio stream.
 */
int gpc_report_file(const char *path, int (*write)(int fd, void *arg), void *arg, char *why, size_t len);

/* ---- backtrace.c: the call stack of a denied allocation ---- */
/* Logs the caller's stack, one "gpucap:   #N function+0xoff" line per frame, if backtraces are on. */
void gpc_backtrace_log(void);

/* ---- reclaim.c: memory kept for reuse, given back before a denial ---- */
/* A module's step: gives back what it keeps unused on `device`; true when anything was released. */
typedef bool gpc_reclaim_fn(int device);
/* Adds a step (at start-up, before any allocation is charged: init.c). 0, or -ENOSPC when full. */
int gpc_reclaim_register(gpc_reclaim_fn *fn);
/* Runs every registered step for `device`: true when any released memory (admission may retry). */
bool gpc_reclaim(int device);

/* ---- charge.c: the common "reserve, call the driver, commit or roll back" steps of hooks ---- */
struct gpc_charge {
    int budget;            /* GPC_BUDGET_NONE: not counted (no budget, pass-through) */
    int device;
    uint64_t bytes;
    bool no_fault;         /* not an allocation call (a context): fault injection skips it */
    bool have_ctx;         /* ctx was read at begin (device < 0) */
    uint64_t ctx;          /* the calling thread's current context then */
};
/*
 * Reserves `bytes` on device `device` (or the current context's device when device < 0).
 * CUDA_SUCCESS (c->budget GPC_BUDGET_NONE: nothing to count) or CUDA_ERROR_OUT_OF_MEMORY after logging
 * the denial; the caller must then not call the driver.
 */
CUresult gpc_charge_begin(struct gpc_charge *c, int device, uint64_t bytes, const char *call);
/* gpc_charge_begin for what is not an allocation call (a context reserve): no fault is injected. */
CUresult gpc_charge_begin_context(struct gpc_charge *c, int device, uint64_t bytes, const char *call);
/* After the driver call: on failure gives the reservation back; on success records `key`. */
void gpc_charge_end(struct gpc_charge *c, CUresult rc, enum gpc_map_kind kind, uint64_t key);
/*
 * For calls whose size is known only afterwards (pitch, arrays), charged with an estimate: after a
 * successful driver call, settles the charge to `actual` bytes and records `key`. Returns
 * CUDA_ERROR_OUT_OF_MEMORY, with nothing charged or recorded, when the difference does not fit:
 * the caller must then free what the driver made. Admitted bytes never pass the budget meanwhile.
 */
CUresult gpc_charge_settle(struct gpc_charge *c, uint64_t actual, enum gpc_map_kind kind, uint64_t key,
                           const char *call);
/*
 * Frees are "take the record, call the driver, then release or put the record back": the record
 * leaves the map before the driver can hand the same address out again to another thread.
 * gpc_free_begin returns true when the key was charged (and copies its record to *t).
 */
bool gpc_free_begin(enum gpc_map_kind kind, uint64_t key, struct gpc_track *t);
void gpc_free_end(bool known, enum gpc_map_kind kind, uint64_t key, const struct gpc_track *t, CUresult rc);

/* ---- hooks_pool.c: stream-ordered pools, counted by what they reserve on the card ---- */
/*
 * Asks the pools of device `device` to give back what they hold unused (cuMemPoolTrimTo(pool, 0))
 * and releases from the budget what they gave back. For a caller about to deny an allocation:
 * true when something was released, so that admission is worth trying once more.
 */
bool gpc_pools_trim(int device);
/* Releases what pools gave back on their own (at synchronisations); cheap when no pool is known. */
void gpc_pools_reconcile(void);
/* Context `ctx` was torn down: its pool allocations went back to their pools, which the driver
 * trimmed; drops their records and brings each pool's charge to what it still reserves. */
void gpc_pools_forget_ctx(uint64_t ctx);
/*
 * cuMemFree on a stream-ordered allocation (legal): gpc_pools_free_begin takes its record (true
 * when it was one of ours), gpc_pools_free_end settles its pool after the driver call.
 */
bool gpc_pools_free_begin(CUdeviceptr dptr, struct gpc_track *t);
/*
 * A pointer counted per pointer because its pool has no slot (GPC_MAP_PTR with aux = the pool) was
 * freed: its bytes stay charged as memory the pool keeps, until the pool is trimmed or destroyed
 * (never under-charged).
 */
void gpc_pools_keep(const struct gpc_track *t);
void gpc_pools_free_end(CUdeviceptr dptr, const struct gpc_track *t, CUresult rc);

/* ---- hooks_graph.c: graph memory, counted by what the device reserves for graphs ---- */
/* cuDeviceGraphMemTrim on `device`, then releases what it gave back: true when anything was. */
bool gpc_graphs_trim(int device);
/*
 * After the driver tore down context `ctx` (it frees the graph memory and executable graphs that
 * lived there): forgets the executable graphs instantiated in it and settles each device's graph
 * memory charge to the driver's figure. Call it after the real teardown succeeded.
 */
void gpc_graphs_forget_ctx(CUcontext ctx);

/* ---- timeline.c: usage over time, recorded only when a report is asked for ---- */
extern bool gpc_timeline_on;
/* At start-up: records from now on if GPUCAP_REPORT or GPUCAP_TIMELINE is set. */
void gpc_timeline_start(void);
/* Records the figure of budget `id` now (and a denial). Use gpc_timeline_note. */
void gpc_timeline_record(int id, bool denied);
/* For the budget: one predictable branch when no report is asked for. */
static inline void gpc_timeline_note(int id, bool denied)
{
    if (gpc_unlikely(gpc_timeline_on))
        gpc_timeline_record(id, denied);
}
/* Copies up to `max` buckets of budget `id`, in time order: how many. */
int gpc_timeline_points(int id, struct gpc_tl_point *out, int max);
/* This process's timeline of each device, for its report at exit: how many (*out set). */
int gpc_timeline_collect(const struct gpc_timeline **out);
/* At exit, with GPUCAP_TIMELINE=DIR: writes DIR/timeline.<pid>. */
void gpc_timeline_write_file(void);

/* ---- hooks_ctx.c: the memory of contexts, which no allocation call reports ---- */
/* The reserve charged per context on device `ordinal` with `physical` bytes (settings or default). */
uint64_t gpc_context_reserve(int ordinal, uint64_t physical);
/* Registers the fork handler of the primary-context lock (at start-up). */
void gpc_ctx_atfork(void);

/* ---- hooks_nvml.c ---- */
/* Our hook for NVML export `name` (GPC_NVML_HOOKS), or NULL. */
void *gpc_nvml_hook_for_export(const char *name);
/* Remembers the libnvidia-ml handle a dlsym redirect was made on (the real functions live there). */
void gpc_nvml_set_handle(void *handle);

#endif
