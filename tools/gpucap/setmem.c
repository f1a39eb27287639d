/* SPDX-License-Identifier: Apache-2.0 */
/*
 * setmem.c: `gpucap set-memory [--ledger FILE | --pid PID] [--device ORDINAL|UUID] [--wait S] SIZE`:
 * changes the budget of a running `gpucap run` (or of any ledger) without restarting anything.
 *
 * The library is the only writer of a ledger's budget state (core/lease.c), so this command never
 * applies the change itself: it posts the new limit in each device entry (`limit_asked`, a size or
 * a share of the card, with the next request number `ask_seq`), then bumps the ledger's live
 * signal (`live_gen`), which every process on it compares before each admission; the first process
 * that looks applies it under the entry's lock with the library's own rules (budget.c, resolved as a
 * setting is at start-up: min of the size and the driver's own limit, a percentage of the driver's
 * figure where that limit is in force), and acknowledges it (`ask_done`). The command exits 0 once
 * the change is in force in every entry it asked, printing the figure in force; it waits at most
 * --wait seconds, and otherwise exits 1 saying what is pending (and which process holds the lock).
 * A ledger without a live process has nobody to admit anything: the request stays posted, and the
 * next process that uses the ledger applies it before its first allocation. Under the platform's
 * lock the budget belongs to the platform and the command refuses: the library ignores a limit
 * posted in a locked ledger anyway (the platform file is the authority).
 */
#include "cli.h"

#include "common/drvlimit.h"

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
    [F_DEVICE] = {"device", 'd', "ORDINAL|UUID", NULL, "every device", "the device: its CUDA ordinal (as this "
                  "command's CUDA_VISIBLE_DEVICES numbers the cards NVML lists, `gpucap status`'s GPU N) or its UUID (or "
                  "a unique start of it)"},
    [F_WAIT] = {"wait", 'w', "SECONDS", NULL, "5", "how long to wait for a running process to apply it"},
};

const struct tool_cmd cli_setmem_cmd = {
    CLI_COMMAND("set-memory", setmem_flags, "[--ledger FILE | --pid PID] [--device ORDINAL|UUID] [--wait SECONDS] SIZE",
                "change the budget of running processes"),
    .about = "Changes the memory budget of the processes on a ledger while they run. SIZE takes the forms of\n"
             "GPUCAP_MEMORY_LIMIT (4GiB, 1500MB, 50%). A raise admits at once; a lowering takes back what the\n"
             "processes hold spare and admits nothing more until the use is below it; nothing held is taken\n"
             "away. Every running process applies it before its next allocation; a process that joins the\n"
             "ledger later takes it too, until the last process on it leaves. Resolved as the library resolves a\n"
             "setting: never above the driver's own limit, a percentage of it where it is in force. Refused when\n"
             "the settings are locked by the platform file: the budget is the platform's.",
    .tail = "Exit 0 once the change is in force (the figure in force is printed; on a ledger no process uses,\n"
            "it is in force from the next process's first allocation), 1 on an error or when it is still\n"
            "pending after --wait seconds (what is pending is said), 2 for a usage error.\n\n"
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

/* Whether a process on ledger l (its file open on fd, which holds no lock) holds memory or may. */
static bool any_live(const struct gpc_ledger *l, int fd)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0 && gpc_ledger_entry_live(l, i, fd))
            return true;
    return false;
}

/*
 * The UUID of the card --device names, into uuid: a UUID (or the start of one) as it is, a CUDA
 * ordinal through this command's CUDA_VISIBLE_DEVICES (indices or UUIDs, as the driver reads it)
 * over NVML's list of cards. 0, or -1 after saying why.
 */
static int device_uuid(const char *which, char *uuid, size_t len)
{
    char *end;
    long n = strtol(which, &end, 10);
    if (!*which || *end) {
        snprintf(uuid, len, "%s", which);
        return 0;
    }
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (n < 0 || n >= GPC_MAX_DEVICES) {
        fprintf(stderr, "gpucap set-memory: --device %s: not a CUDA ordinal\n", which);
        return -1;
    }
    long index = n;
    char entry[GPC_UUID_TEXT] = "";
    if (visible) {
        /* The n-th entry of the list (the driver stops at the first one it cannot read). */
        const char *p = visible;
        for (long k = 0; k < n && p; k++)
            p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        size_t m = p ? strcspn(p, ",") : 0;
        if (!p || !m || m >= sizeof entry) {
            fprintf(stderr, "gpucap set-memory: --device %s: CUDA_VISIBLE_DEVICES=%s has no device %ld\n", which,
                    visible, n);
            return -1;
        }
        memcpy(entry, p, m);
        entry[m] = '\0';
        index = strtol(entry, &end, 10);
        if (*end) {
            snprintf(uuid, len, "%s", entry); /* a UUID there names the card */
            return 0;
        }
    }
    if (cli_device_uuid((int)index, uuid, len) != 0) {
        fprintf(stderr, "gpucap set-memory: --device %s: NVML lists no card %ld here; give the card's UUID (`gpucap "
                "status` shows it)\n", which, index);
        return -1;
    }
    return 0;
}

static bool device_matches(const struct gpc_ledger_dev *d, const char *uuid_prefix)
{
    if (!uuid_prefix)
        return true;
    char uuid[GPC_UUID_TEXT];
    gpc_uuid_format(d->uuid, uuid);
    return strncasecmp(uuid, uuid_prefix, strlen(uuid_prefix)) == 0;
}

/* The process holding device entry d's lock (glibc keeps its owner's thread id in the mutex), or 0. */
static long lock_holder(const struct gpc_ledger_dev *d)
{
    int32_t tid = __atomic_load_n(&d->lock.__data.__owner, __ATOMIC_RELAXED) & 0x3fffffff;
    char path[64], buf[512];
    if (tid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return tid;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *t = strstr(buf, "\nTgid:");
    return t ? strtol(t + 7, NULL, 10) : tid;
}

int cmd_set_memory(int argc, char **argv)
{
    struct setmem_opts o = {.wait_s = 5};
    int first, rc0 = tool_begin(&cli_setmem_cmd, argc, argv, on_flag, &o, &first);
    if (rc0 >= 0)
        return rc0;
    const char *path = o.path, *size_text = argv[first];
    long pid = o.pid;
    double wait_s = o.wait_s;
    struct gpc_value v;
    if (gpc_option_parse(GPC_OPT_MEMORY_LIMIT, size_text, &v) != 0 || (!v.u.size.is_percent && !v.u.size.bytes) ||
        (v.u.size.is_percent && !v.u.size.ppm) || (!v.u.size.is_percent && (v.u.size.bytes & GPC_ASK_PERCENT))) {
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
    char uuid_arg[GPC_UUID_TEXT] = "";
    if (o.device && device_uuid(o.device, uuid_arg, sizeof uuid_arg) != 0)
        return 1;
    const char *device = o.device ? uuid_arg : NULL;
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
    /* fd stays open: it holds no lock, so it asks whose entries are held. */
    struct gpc_ledger_problem why;
    const char *bad = l == MAP_FAILED                                          ? "cannot be mapped"
                      : gpc_ledger_check(l, (uint64_t)st.st_size, &why) != 0 ? why.text
                                                                             : NULL;
    if (bad) {
        fprintf(stderr, "gpucap set-memory: ledger %s %s\n", path, bad);
        close(fd);
        return 1;
    }
    /* The request as the library reads it: a size, or a share of the card (resolved there). */
    uint64_t asked = v.u.size.is_percent ? GPC_ASK_PERCENT | v.u.size.ppm : v.u.size.bytes;
    int matched = 0;
    uint32_t seq[GPC_LEDGER_DEVICES] = {0};
    uint64_t was[GPC_LEDGER_DEVICES] = {0};
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1 || !device_matches(d, device))
            continue;
        matched++;
        was[i] = atomic_load(&d->slot.limit);
        /* The request, then its number (a process reads them in the other order), then the signal. */
        atomic_store(&d->limit_asked, asked);
        seq[i] = atomic_fetch_add(&d->ask_seq, 1) + 1;
    }
    if (!matched) {
        fprintf(stderr, "gpucap set-memory: ledger %s has %s\n", path,
                device ? "no device entry of the card --device names" : "no device yet (no process has allocated)");
        munmap(l, sizeof *l);
        close(fd);
        return 1;
    }
    atomic_fetch_add(&l->live_gen, 1);
    bool live = any_live(l, fd);
    /* Wait until a running process applied each request (or a later one came). */
    for (int t = 0; live && t < (int)(wait_s * 100); t++) {
        int left = 0;
        for (int i = 0; i < GPC_LEDGER_DEVICES; i++)
            left += seq[i] && (int32_t)(atomic_load(&l->dev[i].ask_done) - seq[i]) < 0;
        if (!left)
            break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int rc = 0;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        if (!seq[i])
            continue;
        struct gpc_ledger_dev *d = &l->dev[i];
        char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
        gpc_uuid_format(d->uuid, uuid);
        uint64_t used = gpc_ledger_in_use_live(l, i, fd); /* dead processes not reaped yet: not in use */
        bool done = (int32_t)(atomic_load(&d->ask_done) - seq[i]) >= 0;
        if (live && !done) {
            long holder = lock_holder(d);
            char who[64] = "";
            if (holder > 0)
                snprintf(who, sizeof who, "; process %ld holds the device's lock", holder);
            printf("device %s: %s asked, pending: no process applied it within %.1f s%s; the budget in force stays "
                   "%s until one does\n", uuid, size_text, wait_s, who, gpc_format_size(atomic_load(&d->slot.limit), a,
                   sizeof a));
            rc = 1;
            continue;
        }
        /* In force: the entry's figure (applied), or the one the next process applies (none runs). */
        uint64_t now = done ? atomic_load(&d->slot.limit) : gpc_ledger_pending_limit(d);
        uint64_t from = done && atomic_load(&d->limit_was) && now != was[i] ? atomic_load(&d->limit_was) : was[i];
        printf("device %s: budget %s (was %s), in use %s%s\n", uuid, gpc_format_size(now, a, sizeof a),
               gpc_format_size(from, b, sizeof b), gpc_format_size(used, c, sizeof c),
               used > now ? ": above the lowered budget, nothing more is admitted until the use is below it" : "");
        uint64_t drv = gpc_drv_recorded(atomic_load(&d->driver_limit), d->physical);
        if (drv && !v.u.size.is_percent && v.u.size.bytes > now && now == drv)
            printf("device %s: %s asked; the driver's own limit, %s, is the most it can be\n", uuid, size_text,
                   gpc_format_size(drv, a, sizeof a));
    }
    if (!live)
        printf("no process uses ledger %s now: the next process that joins it takes this budget before its first "
               "allocation, until it leaves (then each process's own settings apply again)\n", path);
    munmap(l, sizeof *l);
    close(fd);
    return rc;
}
