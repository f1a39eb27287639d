/* SPDX-License-Identifier: Apache-2.0 */
/*
 * setmem.c: `gpucap set-memory [--ledger FILE | --pid PID] [--device UUID|INDEX] [--wait S] SIZE`:
 * changes the budget of a running `gpucap run` (or of any ledger) without restarting anything.
 *
 * The library is the only writer of a ledger's budget state under its locks, so this command does
 * not apply the change itself while processes run: it posts the new limit in each device entry
 * (`limit_asked`) and the first process that looks applies it under the entry's lock with the
 * library's own rules (budget.c): a raise admits at once, a lowering takes the spare back and admits
 * nothing more until the use is below it, nothing held is revoked. The command waits for that and
 * says what happened. A ledger without a live process is changed here, under the entry's lock.
 * Under the platform's lock the budget belongs to the platform and the command refuses: the
 * library ignores a limit posted in a locked ledger anyway (the platform file is the authority).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { F_LEDGER, F_PID, F_DEVICE, F_WAIT, F_COUNT };
static const struct tool_flag setmem_flags[F_COUNT] = {
    [F_LEDGER] = {"ledger", 'l', "FILE", "GPUCAP_LEDGER", "/tmp/gpucap-<euid>.ledger", "the ledger whose budget changes"},
    [F_PID] = {"pid", 'p', "PID", NULL, NULL,
               "the ledger of process PID: a `gpucap run` or one of its children (its GPUCAP_LEDGER)"},
    [F_DEVICE] = {"device", 'd', "UUID|INDEX", NULL, "every device", "the device (its UUID or a prefix of it, or the "
                  "ledger's entry index)"},
    [F_WAIT] = {"wait", 'w', "SECONDS", NULL, "5", "how long to wait for a running process to apply it"},
};

const struct tool_cmd cli_setmem_cmd = {
    CLI_COMMAND("set-memory", setmem_flags, "[--ledger FILE | --pid PID] [--device UUID|INDEX] [--wait SECONDS] SIZE",
                "change the budget of running processes"),
    .about = "Changes the memory budget of the processes on a ledger while they run. SIZE takes the forms of\n"
             "GPUCAP_MEMORY_LIMIT (4GiB, 1500MB, 50%). A raise admits at once; a lowering takes back what the\n"
             "processes hold spare and admits nothing more until the use is below it; nothing held is taken\n"
             "away. A running process applies it at its next CUDA memory call; a process that joins the ledger\n"
             "later takes it too, until the last process on it leaves. Refused when the settings are locked by\n"
             "the platform file: the budget is the platform's.",
    .tail = "Exit 0 applied (or posted, said so), 1 on an error, 2 for a usage error.\n\n"
            "example: gpucap run --memory 8GiB -- python train.py &   gpucap set-memory --pid $! 12GiB\n",
    .max_operands = 1,
    .no_operand = "no SIZE",
};

struct setmem_opts {
    const char *path, *device;
    long pid;
    double wait_s;
};

static int on_flag(void *arg, int flag, const char *v)
{
    struct setmem_opts *o = arg;
    char *end;
    if (flag == F_LEDGER) {
        o->path = v;
    } else if (flag == F_DEVICE) {
        o->device = v;
    } else if (flag == F_PID) {
        o->pid = strtol(v, &end, 10);
        if (*end || o->pid <= 0)
            return tool_usage_error(&cli_setmem_cmd, "--pid takes a process id, not '%s'", v);
    } else {
        o->wait_s = strtod(v, &end);
        if (*end || o->wait_s < 0)
            return tool_usage_error(&cli_setmem_cmd, "--wait takes seconds, not '%s'", v);
    }
    return 0;
}

static bool any_live(const struct gpc_ledger *l)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0 &&
            gpc_ledger_proc_alive(atomic_load(&l->proc[i].pid), atomic_load(&l->proc[i].start_time), &l->proc[i]))
            return true;
    return false;
}

/* No process runs on the ledger: the change is made here, under the entry's lock (0), or -EBUSY. */
static int apply_here(struct gpc_ledger *l, struct gpc_ledger_dev *d, int id, uint64_t limit)
{
    int rc = pthread_mutex_trylock(&d->lock);
    if (rc == EOWNERDEAD) {
        /* Its settling is the library's (core/lease.c, gpc_lease_settle): leave it to the next process. */
        pthread_mutex_consistent(&d->lock);
        pthread_mutex_unlock(&d->lock);
        return -EBUSY;
    }
    if (rc != 0)
        return -EBUSY;
    /* Looked at again under the lock: a process that started since the first look may lease now,
     * with spare open under the old limit, and only the library closes spares (core/lease.c). */
    if (any_live(l)) {
        pthread_mutex_unlock(&d->lock);
        return -EBUSY;
    }
    uint64_t was = atomic_load(&d->slot.limit);
    /* Entries of processes not reaped yet: their asks follow, so that reaping them (the limit is
     * recomputed from the asks left) does not bring the old figure back. */
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0 && atomic_load(&l->proc[i].share[id].limit) != 0)
            atomic_store(&l->proc[i].share[id].limit, limit);
    if (was != limit) {
        atomic_store(&d->slot.limit, limit);
        atomic_store(&d->limit_was, was);
        atomic_store(&d->limit_changed_s, (uint32_t)time(NULL));
        atomic_fetch_add(&d->limit_changes, 1);
    }
    /* The next process to join takes it (until the last one on the ledger leaves). */
    atomic_store(&d->limit_by, GPC_LIMIT_BY_CLI | GPC_LIMIT_HELD);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

static bool device_matches(const struct gpc_ledger_dev *d, int index, const char *which)
{
    if (!which)
        return true;
    char uuid[GPC_UUID_TEXT], *end;
    long n = strtol(which, &end, 10);
    if (*which && !*end)
        return n == index;
    gpc_uuid_format(d->uuid, uuid);
    return strncasecmp(uuid, which, strlen(which)) == 0;
}

int cmd_set_memory(int argc, char **argv)
{
    struct setmem_opts o = {.wait_s = 5};
    int first, rc0 = tool_begin(&cli_setmem_cmd, argc, argv, on_flag, &o, &first);
    if (rc0 >= 0)
        return rc0;
    const char *path = o.path, *device = o.device, *size_text = argv[first];
    long pid = o.pid;
    double wait_s = o.wait_s;
    struct gpc_value v;
    if (gpc_option_parse(GPC_OPT_MEMORY_LIMIT, size_text, &v) != 0 || (!v.u.size.is_percent && !v.u.size.bytes)) {
        tool_usage_error(&cli_setmem_cmd, "'%s' is not a budget; accepted: a size (4GiB, 1500MB, 2G) or a "
                         "percentage of the card (50%%), above 0", size_text);
        return TOOL_EXIT_USAGE;
    }
    extern char **environ;
    struct gpc_settings s, platform;
    cli_settings_quiet(&s, &platform, environ);
    if (s.locked) {
        fprintf(stderr, "gpucap set-memory: the settings are locked by %s: the budget is the platform's (on "
                "Kubernetes, the pod's budget annotation, which the node agent applies); refused\n", s.config_path);
        return 1;
    }
    char named[4096];
    if (!path && pid > 0) {
        int rc = cli_ledger_of_pid(pid, named, sizeof named);
        if (rc != 0) {
            fprintf(stderr, "gpucap set-memory: process %ld (or its children) names no GPUCAP_LEDGER (%s)\n", pid,
                    strerror(-rc));
            return 1;
        }
        path = named;
    } else if (!path) {
        gpc_ledger_path(&s, named, sizeof named);
        path = named;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "gpucap set-memory: ledger %s cannot be opened for writing (%s)\n", path, strerror(errno));
        return 1;
    }
    struct gpc_ledger *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    struct gpc_ledger_problem why;
    const char *bad = l == MAP_FAILED                                          ? "cannot be mapped"
                      : gpc_ledger_check(l, (uint64_t)st.st_size, &why) != 0 ? why.text
                                                                             : NULL;
    if (bad) {
        fprintf(stderr, "gpucap set-memory: ledger %s %s\n", path, bad);
        return 1;
    }
    bool live = any_live(l);
    int posted = 0, matched = 0;
    uint64_t want[GPC_LEDGER_DEVICES] = {0};
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1 || !device_matches(d, i, device))
            continue;
        matched++;
        want[i] = gpc_size_resolve(&v.u.size, d->physical);
        if (!live && apply_here(l, d, i, want[i]) == 0)
            continue;
        atomic_store(&d->limit_asked, want[i]);
        posted++;
    }
    if (!matched) {
        fprintf(stderr, "gpucap set-memory: ledger %s has %s\n", path,
                device ? "no device entry matching --device" : "no device yet (no process has allocated)");
        munmap(l, sizeof *l);
        return 1;
    }
    /* Posted: wait until running processes applied it. */
    for (int t = 0; posted && t < (int)(wait_s * 100); t++) {
        int left = 0;
        for (int i = 0; i < GPC_LEDGER_DEVICES; i++)
            left += want[i] && atomic_load(&l->dev[i].limit_asked) != 0;
        if (!left)
            break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int rc = 0;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        if (!want[i])
            continue;
        struct gpc_ledger_dev *d = &l->dev[i];
        char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
        gpc_uuid_format(d->uuid, uuid);
        uint64_t now = atomic_load(&d->slot.limit), used = gpc_ledger_in_use_live(l, i); /* dead processes not reaped yet: not in use */
        if (atomic_load(&d->limit_asked) != 0) {
            printf("device %s: %s posted; the processes on the ledger apply it at their next CUDA memory call "
                   "(none did within %.0f s)\n", uuid, gpc_format_size(want[i], a, sizeof a), wait_s);
            continue;
        }
        printf("device %s: budget %s (was %s), in use %s%s\n", uuid, gpc_format_size(now, a, sizeof a),
               gpc_format_size(atomic_load(&d->limit_was), b, sizeof b), gpc_format_size(used, c, sizeof c),
               used > now ? ": above the lowered budget, nothing more is admitted until the use is below it" : "");
    }
    if (!live)
        printf("no process uses ledger %s now: the next process that joins it takes this budget, until it "
               "leaves (then each process's own settings apply again)\n", path);
    munmap(l, sizeof *l);
    return rc;
}
