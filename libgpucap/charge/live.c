/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c: budgets that change while the processes run.
 *
 * Two things change a budget live. On Kubernetes the node agent rewrites the container's platform
 * settings file in place (a subPath mount shows the same inode's new content, never a file renamed
 * over it), then bumps the file's generation line (its first line, `; generation = N`): the change
 * is complete, and signalled, when that second write returns. Without the lock, `gpucap set-memory`
 * posts a new limit in the ledger's device entry and bumps the ledger's live_gen. Each process maps
 * the settings file read-only, and core/budget.c compares the word it watches (the generation's low
 * digits in that mapping, under the lock and for a private budget; the ledger's live_gen for a
 * shared ledger without the lock) with the value it last saw, one load, before every admission:
 * when it moved, the admission takes the slow path, which calls gpc_live_check first. So every
 * process obeys a completed change before its next admission, from its spare too.
 *
 * What the check does: a request posted in the ledger is applied (and acknowledged in the entry,
 * which `gpucap set-memory` waits for); the settings file is re-read whole when the word moved, when
 * its mapped text differs from what was applied (a rewrite in place without a generation line: seen
 * at the next admission that leaves the lease), or when its identity moved (inode, size, times:
 * looked at with a stat at most once a second, at every memory query and before a denial: a file
 * replaced by a rename, which the mapping does not see); only its limits are applied (the lock, the
 * mode, the ledger and the rest stay as they were at start-up). A read is used only when neither
 * the file's identity nor its mapped text moved while it was read.
 *
 * Applying is budget.c's gpc_budget_set_limit, under the entry's lock: a raise admits at once, a
 * lowering closes and takes back every spare and admits nothing more until the use is below it
 * (nothing held is revoked). The limits resolve as at start-up (charge/device.c: a percentage of
 * the driver's figure where its own limit is in force, never above it). A live change never uncaps:
 * a rewritten file that gives no limit, a malformed one or one read torn keeps the budget in force,
 * said once. A forged signal (the ledger's word is the tenant's) only causes extra looks: the limit
 * comes from the platform's file, or under the lock from nothing a tenant writes. No thread is
 * started: a process that makes no CUDA call has nothing to apply.
 */
#include "charge/live.h"

#include "charge/device.h"
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/locks.h"
#include "core/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_EVERY_MS 1000
#define READ_TRIES 3
/* The most of the settings file mapped and compared (gpucap-agent's bound of a settings file). */
#define MAP_MAX 16384
#define PAGE 4096

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static bool have_file;           /* a settings file was read at start-up: it is watched */
static struct stat file_seen;    /* its identity when last applied (under live_lock) */
static _Atomic uint64_t file_due_ms;
static bool said_bad;            /* a bad rewrite was said (once per rewrite) */
/* Under the lock: this process read the platform file at its start, maybe after a rewrite that the
 * processes already there did not apply yet; its first look applies what it read (their asks of
 * the file's figure move with it). */
static atomic_bool first_look;

/* The settings file mapped read-only (NULL: not), and the text of it last applied (under live_lock).
 * A fault in the mapping (the file shrunk: ledger_file.c's guard) replaces it by zeros and sets
 * map_hit; it is then not compared any more (the identity check still sees the change). */
static const char *_Atomic map;
static atomic_bool map_hit;
static char applied[MAP_MAX];
static size_t applied_len;
/* What any thread can compare without the lock: the length and a hash of the text applied. */
static _Atomic size_t applied_len_seen;
static _Atomic uint64_t applied_hash;

/* FNV-1a of n bytes. */
static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
    return h;
}

/* The text applied is `n` bytes of `text` (under live_lock, or at start-up). */
static void set_applied(const char *text, size_t n)
{
    if (text != applied)
        memcpy(applied, text, n);
    applied_len = n;
    atomic_store(&applied_hash, hash_of(applied, n));
    atomic_store(&applied_len_seen, n);
}
/* The generation line a writer that signals puts first (gpucap inject, gpucap-agent): the low 8 of
 * its 17 hex digits are the 8-aligned word at GEN_WORD_AT. */
#define GEN_PREFIX "; generation = "
#define GEN_WORD_AT 24

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

void gpc_live_fork(enum gpc_fork_step step, enum gpc_lock_rank rank)
{
    if (rank == GPC_LOCK_LIVE)
        gpc_fork_mutex(&live_lock, step);
}

/*
 * The word of mapping m (whose text, `len` bytes, is `text`) that the allocation path watches: the
 * generation's low digits where the file has the line, else the 8-aligned word where the value of its
 * first memory_limit starts (a rewrite of that value in place moves it), else the file's first word.
 */
static const _Atomic uint64_t *file_word(const char *m, const char *text, size_t len)
{
    size_t at = 0;
    if (len >= GEN_WORD_AT + 8 && memcmp(text, GEN_PREFIX, sizeof GEN_PREFIX - 1) == 0) {
        at = GEN_WORD_AT;
    } else {
        const char *key = "memory_limit";
        for (size_t i = 0; i + strlen(key) < len; i++) {
            /* At the start of a line, after blanks: a setting, not a comment. */
            size_t j = i;
            while (j > 0 && (text[j - 1] == ' ' || text[j - 1] == '\t'))
                j--;
            if ((j > 0 && text[j - 1] != '\n') || memcmp(text + i, key, strlen(key)) != 0)
                continue;
            size_t v = i + strlen(key);
            while (v < len && (text[v] == ' ' || text[v] == '\t'))
                v++;
            if (v >= len || text[v] != '=')
                continue; /* memory_limit_max, or another key */
            for (v++; v < len && (text[v] == ' ' || text[v] == '\t'); v++)
                ;
            at = v & ~(size_t)7;
            break;
        }
    }
    return (const _Atomic uint64_t *)(const void *)(m + at);
}

/* Points the allocation path at the words it must watch now: the settings file's, and without the
 * lock the shared ledger's (under the lock a limit posted in the ledger is ignored). */
static void watch(void)
{
    const char *m = atomic_load(&map);
    gpc_budget_signal_watch(GPC_SIGNAL_FILE, m && !atomic_load(&map_hit) ? file_word(m, applied, applied_len) : NULL);
    bool ledger = !gpc_config.locked && gpc_ledger_shared && gpc_ledger;
    gpc_budget_signal_watch(GPC_SIGNAL_LEDGER, ledger ? &gpc_ledger->live_gen : NULL);
}

/* Maps the settings file read-only (the one of `st`), guarded; its text as it is now is what was applied. */
static void map_file(const struct stat *st)
{
    if (st->st_size <= 0)
        return; /* an empty file has no page to map: every read of one would fault */
    int fd = open(gpc_config.config_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat now;
    if (fd < 0)
        return;
    void *m = fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino
                  ? mmap(NULL, MAP_MAX, PROT_READ, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED)
        return;
    /* The old mapping, if any, is left mapped (a thread may be reading its word). */
    atomic_store(&map_hit, false);
    gpc_ledger_guard_also(m, MAP_MAX, &map_hit);
    size_t n = (size_t)now.st_size < MAP_MAX ? (size_t)now.st_size : MAP_MAX;
    set_applied(m, n);
    atomic_store(&map, (const char *)m);
}

void gpc_live_start(void)
{
    struct stat st;
    if (gpc_config.config_read && fstatat(AT_FDCWD, gpc_config.config_path, &st, 0) == 0) {
        file_seen = st;
        have_file = true;
        atomic_store(&file_due_ms, now_ms() + FILE_EVERY_MS);
        map_file(&st);
    }
    watch();
    atomic_store(&first_look, have_file && gpc_config.locked && gpc_ledger_shared);
    gpc_budget_set_poll(gpc_live_check);
}

/* ---- a rewritten settings file ---- */

static void count_errors(enum gpc_log_level level, const char *line, void *arg)
{
    (void)line;
    if (level == GPC_LOG_ERROR)
        ++*(int *)arg;
}

struct apply {
    const struct gpc_settings *fresh;
    bool changed, failed;
};

static void say_change(int ordinal, int id, uint64_t was, uint64_t now, const char *why)
{
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
    gpc_log(GPC_LOG_INFO, "device %d: budget changed from %s to %s (%s)", ordinal, gpc_format_size(was, a, sizeof a),
            gpc_format_size(now, b, sizeof b), why);
    uint64_t in_use = gpc_budget_in_use(id);
    if (in_use > now)
        gpc_log(GPC_LOG_WARN, "device %d: %s in use is above the lowered budget %s: nothing more is admitted until "
                "the use is below it (nothing held is taken away)", ordinal, gpc_format_size(in_use, c, sizeof c),
                gpc_format_size(now, b, sizeof b));
}

/* Under the set-up lock: device `ordinal`'s limit by the re-read settings, applied if it moved. */
static void apply_one(int ordinal, int id, const char *uuid, uint64_t physical, void *arg)
{
    (void)uuid;
    struct apply *a = arg;
    const struct gpc_value *from = NULL;
    /* Resolved as at start-up: against the driver's figure where its limit is in force, never
     * above that limit. */
    struct gpc_qos q, was_q;
    uint64_t limit = gpc_device_limit_of(ordinal, a->fresh, &from, &q);
    if (limit == GPC_UNLIMITED || (from && from->bad) || (from && from->u.size.is_percent && !physical)) {
        if (!said_bad)
            gpc_log(GPC_LOG_WARN, "device %d: the rewritten %s gives no valid limit; the budget in force stays "
                    "(a live change never uncaps)", ordinal, gpc_config.config_path);
        said_bad = true;
        return;
    }
    /* A change of the grant alone (the request and the limit as they were) is the node arbiter's. */
    gpc_device_qos(ordinal, &was_q, NULL);
    bool arbiter = q.burstable && was_q.burstable && q.request == was_q.request && q.limit == was_q.limit &&
                   q.grant != was_q.grant;
    if (limit == gpc_budget_own_limit(id) && limit == gpc_budget_limit(id)) {
        gpc_device_qos(ordinal, NULL, &q);
        gpc_device_note_qos(id, &q);
        return;
    }
    uint64_t was, now;
    unsigned by = (arbiter ? GPC_LIMIT_BY_ARBITER : GPC_LIMIT_BY_PLATFORM) | (q.from_file ? GPC_LIMIT_FROM_FILE : 0);
    if (gpc_budget_set_limit(id, limit, by, &was, &now) != 0) {
        a->failed = true; /* the entry's lock was not obtained: looked at again at the next admission */
        return;
    }
    gpc_device_qos(ordinal, NULL, &q);
    gpc_device_note_qos(id, &q);
    a->changed = true;
    if (was != now)
        say_change(ordinal, id, was, now, arbiter ? "the node arbiter moved the grant" : "the settings file was rewritten");
}

/* Copies the mapped text (`len` bytes of it) into `out`; false when the mapping is gone. */
static bool snapshot(char *out, size_t len)
{
    const char *m = atomic_load(&map);
    if (!m || atomic_load(&map_hit))
        return false;
    memcpy(out, m, len);
    return !atomic_load(&map_hit);
}

/* Whether the mapped text differs from what was applied (under live_lock). */
static bool text_moved(void)
{
    const char *m = atomic_load(&map);
    if (!m || atomic_load(&map_hit))
        return false;
    if (memcmp(m, applied, applied_len) != 0)
        return true;
    /* Grown: the byte after the text, where it lies on a page that held part of the file. */
    return applied_len % PAGE != 0 && applied_len < MAP_MAX && m[applied_len] != 0;
}

/* text_moved for a thread that does not hold live_lock (whether it must wait for the look another
 * thread may be making): by the length and hash of the text applied. */
static bool text_moved_now(void)
{
    const char *m = atomic_load(&map);
    size_t n = atomic_load(&applied_len_seen);
    if (!m || atomic_load(&map_hit))
        return false;
    return hash_of(m, n) != atomic_load(&applied_hash) ||
           (n % PAGE != 0 && n < MAP_MAX && m[n] != 0);
}

/* Whether the file is one whose writer signals with the generation line: then a change is applied
 * once the line says it is complete, not while it is written. */
static bool signalled_file(void)
{
    const char *m = atomic_load(&map);
    return m && !atomic_load(&map_hit) && memcmp(m, GEN_PREFIX, sizeof GEN_PREFIX - 1) == 0;
}

/*
 * Under live_lock: re-reads the settings file and applies its limits when it changed. `look`: the
 * identity is looked at (a stat); else only the mapped text is compared. *done is false when a
 * change is still to apply (a torn read at every try, a lock not obtained).
 */
static bool check_file(bool look, bool *done)
{
    /* Without a look only the text can say a change came, and not that of a file whose writer
     * signals: that one is applied once complete. With one the text counts too (two rewrites
     * within one tick of the file system's clock, of one size, leave the same identity). */
    bool text = text_moved();
    if (!look && (!text || signalled_file()))
        return false;
    struct stat before, after;
    if (fstatat(AT_FDCWD, gpc_config.config_path, &before, 0) != 0)
        return false; /* gone: the budget in force stays (a live change never uncaps) */
    bool renamed = before.st_dev != file_seen.st_dev || before.st_ino != file_seen.st_ino;
    if (!text && same_file(&before, &file_seen))
        return false;
    extern char **environ;
    /* This check's own copies (under live_lock): a read that is not used changes nothing. */
    static struct gpc_settings fresh, fresh_platform;
    static char snap[MAP_MAX], again[MAP_MAX];
    struct apply a = {.fresh = &fresh};
    gpc_device_hold(true);
    bool good = false, bad = false, mapped = atomic_load(&map) && !renamed;
    size_t n = 0;
    for (int i = 0; i < READ_TRIES && !good && !bad; i++) {
        n = (size_t)before.st_size < MAP_MAX ? (size_t)before.st_size : MAP_MAX;
        if (mapped && !snapshot(snap, n))
            mapped = false;
        int errors = 0;
        gpc_settings_load_to(&fresh, &fresh_platform, environ, count_errors, &errors);
        /* A file whose identity or text moved while it was read may be torn: read again. */
        if (fstatat(AT_FDCWD, gpc_config.config_path, &after, 0) != 0 || !same_file(&before, &after) ||
            (mapped && snapshot(again, n) && memcmp(snap, again, n) != 0)) {
            before = after;
            continue;
        }
        /* The file is judged by its own errors: the environment's (the tenant's) are the same at every
         * read and would otherwise hold every live change off, a lowered grant's too. */
        bad = errors > fresh.env_errors || fresh.config_bad || fresh.locked != gpc_config.locked;
        good = !bad;
    }
    if (bad && !said_bad)
        gpc_log(GPC_LOG_WARN, "%s was rewritten %s; the budget in force stays until it is fixed",
                gpc_config.config_path, fresh.locked != gpc_config.locked
                    ? "with another lock setting (only limits change live)" : "with errors (see `gpucap check`)");
    if (good) {
        said_bad = false;
        /* Only the limits change live, so that a device set up later gets them too (state.c). */
        gpc_config_adopt_limits(&fresh);
        gpc_device_each_budget(apply_one, &a);
    }
    gpc_device_hold(false);
    /* Torn at every try: looked at again at the next check. Bad: said once, looked at again when it
     * is rewritten. Good but not applied everywhere (a lock): the next admission looks again. */
    if ((good && !a.failed) || bad) {
        file_seen = after;
        if (mapped)
            set_applied(snap, n);
        /* Another file at the path (a rename), or a mapping lost: the new one is mapped. */
        if (renamed || !atomic_load(&map) || atomic_load(&map_hit))
            map_file(&after);
        /* Where the watched word is may have moved with the text (the allocation path looks once more). */
        if (good && atomic_load(&map) &&
            file_word(atomic_load(&map), applied, applied_len) != atomic_load(&gpc_budget_signal.word[GPC_SIGNAL_FILE]))
            watch();
    }
    said_bad |= bad;
    *done &= (good && !a.failed) || bad;
    return a.changed;
}

/* ---- a limit posted in the ledger ---- */

struct find {
    int id, ordinal;
};

static void find_ordinal(int ordinal, int id, const char *uuid, uint64_t physical, void *arg)
{
    (void)uuid, (void)physical;
    struct find *f = arg;
    if (id == f->id && f->ordinal < 0)
        f->ordinal = ordinal;
}

/* A request of `gpucap set-memory` on entry `id`, applied and acknowledged (ask_done). */
static bool apply_asked(int id, bool *done)
{
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    uint32_t seq = atomic_load_explicit(&d->ask_seq, memory_order_acquire);
    if (seq == atomic_load(&d->ask_done))
        return false;
    uint64_t asked = atomic_load(&d->limit_asked);
    struct gpc_size size = {.bytes = asked};
    if (asked & GPC_ASK_PERCENT)
        size = (struct gpc_size){.ppm = (uint32_t)(asked & ~GPC_ASK_PERCENT), .is_percent = true};
    /* Resolved as a setting is at start-up (the driver's limit where it is in force). */
    struct find f = {id, -1};
    gpc_device_hold(true);
    gpc_device_each_budget(find_ordinal, &f);
    uint64_t limit = f.ordinal >= 0 ? gpc_device_limit_size(f.ordinal, &size) : 0;
    gpc_device_hold(false);
    uint64_t was = 0, now = 0;
    bool applied_here = false;
    if (!limit || (size.is_percent && size.ppm > 1000000)) {
        gpc_log(GPC_LOG_WARN, "device entry %d: the budget gpucap set-memory asked for cannot be resolved here; the "
                "budget in force stays", id);
    } else if (gpc_budget_set_limit(id, limit, GPC_LIMIT_BY_CLI, &was, &now) != 0) {
        *done = false; /* the entry's lock was not obtained: the next admission tries again */
        return false;
    } else {
        applied_here = true;
    }
    /* In force: said to the command that waits (a later request's number is never taken back). */
    uint32_t cur = atomic_load(&d->ask_done);
    while ((int32_t)(seq - cur) > 0 && !atomic_compare_exchange_weak(&d->ask_done, &cur, seq))
        ;
    if (applied_here && was != now)
        say_change(f.ordinal, id, was, now, "gpucap set-memory");
    return applied_here;
}

bool gpc_live_check(bool now)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l || !atomic_load_explicit(&gpc_initialized, memory_order_acquire) ||
        atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return false;
    uint64_t file_now, ledger_now;
    bool file_moved = gpc_budget_signal_moved(GPC_SIGNAL_FILE, &file_now);
    bool ledger_moved = gpc_budget_signal_moved(GPC_SIGNAL_LEDGER, &ledger_now);
    bool asks_done = true, file_done = true, changed = false, due = now;
    if (!now) {
        uint64_t t = now_ms(), at = atomic_load_explicit(&file_due_ms, memory_order_relaxed);
        due = t >= at && atomic_compare_exchange_strong(&file_due_ms, &at, t + FILE_EVERY_MS);
    }
    if (due) {
        /* At most once a second: a raw clone child still on its parent's entry takes its own. */
        gpc_budget_check_pid();
        /* The ledger moved (a rebuild, a file replaced): its word is the one to watch. */
        if (!gpc_config.locked && gpc_ledger_shared &&
            atomic_load(&gpc_budget_signal.word[GPC_SIGNAL_LEDGER]) != &gpc_ledger->live_gen) {
            watch();
            file_moved = gpc_budget_signal_moved(GPC_SIGNAL_FILE, &file_now);
            ledger_moved = gpc_budget_signal_moved(GPC_SIGNAL_LEDGER, &ledger_now);
        }
    }
    for (uint32_t mask = gpc_budget_entries(); mask; mask &= mask - 1) {
        int id = __builtin_ctz(mask);
        /* Under the lock the file is the authority: a limit posted in the ledger is ignored. */
        if (!gpc_config.locked && gpc_ledger_shared &&
            gpc_unlikely(atomic_load_explicit(&l->dev[id].ask_seq, memory_order_relaxed) !=
                         atomic_load_explicit(&l->dev[id].ask_done, memory_order_relaxed)))
            changed |= apply_asked(id, &asks_done);
        gpc_budget_sync(id);
    }
    if (gpc_unlikely(atomic_load_explicit(&first_look, memory_order_relaxed)) && atomic_exchange(&first_look, false)) {
        /* The settings as read at start-up, applied as a rewrite would be. */
        struct apply a = {.fresh = &gpc_config};
        gpc_device_hold(true);
        gpc_device_each_budget(apply_one, &a);
        gpc_device_hold(false);
        if (a.failed)
            atomic_store(&first_look, true); /* a lock not obtained: at the next look */
        changed |= a.changed;
    }
    if (have_file) {
        /* A look that must happen waits for another thread's (a change is signalled, or its text
         * moved: the admission must not pass it); one that may happen is skipped then. */
        bool must = file_moved || now || (!signalled_file() && text_moved_now());
        if (must)
            gpc_lock(&live_lock, GPC_LOCK_LIVE);
        if (must || gpc_trylock(&live_lock, GPC_LOCK_LIVE) == 0) {
            changed |= check_file(must || due, &file_done);
            gpc_unlock(&live_lock, GPC_LOCK_LIVE);
        }
    }
    if (file_moved && file_done)
        gpc_budget_signal_seen(GPC_SIGNAL_FILE, file_now);
    if (ledger_moved && asks_done)
        gpc_budget_signal_seen(GPC_SIGNAL_LEDGER, ledger_now);
    return changed;
}
