/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c: budgets that change while the processes run.
 *
 * Two things change a budget live. On Kubernetes the node agent rewrites the container's platform
 * settings file in place (a subPath mount shows the same inode's new content, never a file renamed
 * over it); each process looks at the file's identity (inode, size, times) at most once a second
 * from its locked steps and its batched counts, at every memory query, and before any denial, and
 * when it moved re-reads the whole file and applies only its limits (the lock, the mode, the
 * ledger and the rest stay as they were at start-up). Without the lock, `gpucap set-memory` posts
 * a new limit in the ledger's device entry and the first process that looks applies it.
 *
 * Applying is budget.c's gpc_budget_set_limit, under the entry's lock: a raise admits at once, a
 * lowering takes the spare back and admits nothing more until the use is below it (nothing held
 * is revoked). The other processes see the entry's change count move (gpc_budget_sync) at their
 * next look. A live change never uncaps: a rewritten file that gives no limit, a malformed one or
 * one read torn (its identity moved while it was read) keeps the budget in force, said once.
 * No thread is started: a process that makes no CUDA call has nothing to apply.
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
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define FILE_EVERY_MS 1000
#define READ_TRIES 3

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static bool have_file;           /* a settings file was read at start-up: it is watched */
static struct stat file_seen;    /* its identity when last applied (under live_lock) */
static _Atomic uint64_t file_due_ms;
static bool said_bad;            /* a bad rewrite was said (once per rewrite) */

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

void gpc_live_start(void)
{
    struct stat st;
    if (gpc_config.config_read && fstatat(AT_FDCWD, gpc_config.config_path, &st, 0) == 0) {
        file_seen = st;
        have_file = true;
        atomic_store(&file_due_ms, now_ms() + FILE_EVERY_MS);
    }
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
    bool changed;
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
    struct apply *a = arg;
    const struct gpc_value *from = NULL;
    uint64_t limit = gpc_settings_limit(a->fresh, ordinal, uuid, physical, &from);
    if (limit == GPC_UNLIMITED || (from && from->bad) || (from && from->u.size.is_percent && !physical)) {
        if (!said_bad)
            gpc_log(GPC_LOG_WARN, "device %d: the rewritten %s gives no valid limit; the budget in force stays "
                    "(a live change never uncaps)", ordinal, gpc_config.config_path);
        said_bad = true;
        return;
    }
    /* The NVIDIA driver's own limit, where one was seen in force, stays the driver's (it is applied
     * once, when the container starts): the budget is never above it. */
    uint64_t drv = gpc_ledger ? atomic_load(&gpc_ledger->dev[id].driver_limit) : 0;
    if (drv && drv < limit)
        limit = drv;
    if (limit == gpc_budget_own_limit(id))
        return;
    uint64_t was, now;
    if (gpc_budget_set_limit(id, limit, GPC_LIMIT_BY_PLATFORM, &was, &now) == 0) {
        a->changed = true;
        if (was != now)
            say_change(ordinal, id, was, now, "the settings file was rewritten");
    }
}

/* Under live_lock: re-reads a settings file whose identity moved and applies its limits. */
static bool check_file(void)
{
    struct stat before, after;
    if (fstatat(AT_FDCWD, gpc_config.config_path, &before, 0) != 0 || same_file(&before, &file_seen))
        return false;
    extern char **environ;
    /* This check's own copies (under live_lock): a read that is not used changes nothing. */
    static struct gpc_settings fresh, fresh_platform;
    struct apply a = {.fresh = &fresh};
    gpc_device_hold(true);
    bool good = false, bad = false;
    for (int i = 0; i < READ_TRIES && !good && !bad; i++) {
        int errors = 0;
        gpc_settings_load_to(&fresh, &fresh_platform, environ, count_errors, &errors);
        /* A file whose identity moved while it was read may be torn: read again. */
        if (fstatat(AT_FDCWD, gpc_config.config_path, &after, 0) != 0 || !same_file(&before, &after)) {
            before = after;
            continue;
        }
        bad = errors || fresh.config_bad || fresh.locked != gpc_config.locked;
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
    /* Torn at every try: looked at again at the next check. Bad: said once, looked at again
     * when it is rewritten. */
    if (good || bad)
        file_seen = after;
    said_bad |= bad;
    gpc_device_hold(false);
    return a.changed;
}

/* ---- a limit posted in the ledger ---- */

static bool apply_asked(int id)
{
    struct gpc_ledger_dev *d = &gpc_ledger->dev[id];
    uint64_t asked = atomic_load(&d->limit_asked);
    if (!asked || !atomic_compare_exchange_strong(&d->limit_asked, &asked, 0))
        return false;
    uint64_t was, now;
    if (gpc_budget_set_limit(id, asked, GPC_LIMIT_BY_CLI, &was, &now) != 0) {
        uint64_t none = 0; /* not applied: left for the next look */
        atomic_compare_exchange_strong(&d->limit_asked, &none, asked);
        return false;
    }
    if (was != now)
        say_change(id, id, was, now, "gpucap set-memory");
    return true;
}

bool gpc_live_check(bool now)
{
    struct gpc_ledger *l = gpc_ledger;
    if (!l || !atomic_load_explicit(&gpc_initialized, memory_order_acquire) ||
        atomic_load_explicit(&gpc_passthrough, memory_order_relaxed))
        return false;
    bool changed = false;
    for (uint32_t mask = gpc_budget_entries(); mask; mask &= mask - 1) {
        int id = __builtin_ctz(mask);
        /* Under the lock the file is the authority: a limit posted in the ledger is ignored. */
        if (!gpc_config.locked && gpc_ledger_shared &&
            gpc_unlikely(atomic_load_explicit(&l->dev[id].limit_asked, memory_order_relaxed)))
            changed |= apply_asked(id);
        gpc_budget_sync(id);
    }
    if (!have_file)
        return changed;
    if (!now) {
        uint64_t t = now_ms(), due = atomic_load_explicit(&file_due_ms, memory_order_relaxed);
        if (t < due || !atomic_compare_exchange_strong(&file_due_ms, &due, t + FILE_EVERY_MS))
            return changed;
        if (gpc_trylock(&live_lock, GPC_LOCK_LIVE) != 0)
            return changed;
    } else {
        gpc_lock(&live_lock, GPC_LOCK_LIVE);
    }
    changed |= check_file();
    gpc_unlock(&live_lock, GPC_LOCK_LIVE);
    return changed;
}
