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

static const char setmem_usage[] =
    "usage: gpucap set-memory [--ledger FILE | --pid PID] [--device UUID|INDEX] [--wait SECONDS] SIZE\n"
    "\n"
    "Changes the memory budget of the processes on a ledger while they run: the ledger FILE, the\n"
    "ledger of process PID (a `gpucap run` or one of its children: its GPUCAP_LEDGER), else the ledger\n"
    "setting. SIZE takes the forms of GPUCAP_MEMORY_LIMIT (4GiB, 1500MB, 50%); every device of the\n"
    "ledger, or the one --device names (UUID or its prefix, or the ledger's entry index).\n"
    "A raise admits at once; a lowering takes back what the processes hold spare and admits nothing\n"
    "more until the use is below it; nothing held is taken away. A running process applies it at its\n"
    "next CUDA memory call; the command waits for that up to --wait seconds (default 5).\n"
    "Refused when the settings are locked by the platform file: the budget is the platform's.\n"
    "Exit 0 applied (or posted, said so), 1 error, 2 usage.\n"
    "\n";

/* GPUCAP_LEDGER from /proc/PID/environ, else from one of its children's: 0 or -errno. */
static int ledger_of_pid(long pid, char *out, size_t len, int depth)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(buf + i) + 1) {
        buf[n] = '\0';
        if (strncmp(buf + i, "GPUCAP_LEDGER=", 14) == 0) {
            snprintf(out, len, "%s", buf + i + 14);
            return 0;
        }
    }
    /* `gpucap run` names the ledger in its command's environment, not in its own. */
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = depth < 2 ? fopen(path, "re") : NULL;
    long child;
    int rc = -ENOENT;
    while (f && rc != 0 && fscanf(f, "%ld", &child) == 1)
        rc = ledger_of_pid(child, out, len, depth + 1);
    if (f)
        fclose(f);
    return rc;
}

static bool any_live(const struct gpc_ledger *l)
{
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0 &&
            gpc_ledger_proc_alive(atomic_load(&l->proc[i].pid), atomic_load(&l->proc[i].start_time)))
            return true;
    return false;
}

/* No process runs on the ledger: the change is made here, under the entry's lock (0), or -EBUSY. */
static int apply_here(struct gpc_ledger *l, struct gpc_ledger_dev *d, int id, uint64_t limit)
{
    int rc = pthread_mutex_trylock(&d->lock);
    if (rc == EOWNERDEAD) {
        /* Its settling is the library's (ledger.c): leave it to the next process. */
        pthread_mutex_consistent(&d->lock);
        pthread_mutex_unlock(&d->lock);
        return -EBUSY;
    }
    if (rc != 0)
        return -EBUSY;
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
    const char *path = NULL, *device = NULL, *size_text = NULL;
    long pid = 0;
    double wait_s = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(setmem_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--ledger") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--pid") == 0 && i + 1 < argc) {
            pid = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
        } else if (strcmp(argv[i], "--wait") == 0 && i + 1 < argc) {
            wait_s = strtod(argv[++i], NULL);
        } else if (argv[i][0] != '-' && !size_text) {
            size_text = argv[i];
        } else {
            fprintf(stderr, "gpucap set-memory: unexpected argument '%s'\n%s", argv[i], setmem_usage);
            return CLI_USAGE;
        }
    }
    if (!size_text) {
        fprintf(stderr, "gpucap set-memory: no SIZE\n%s", setmem_usage);
        return CLI_USAGE;
    }
    struct gpc_value v;
    if (gpc_option_parse(GPC_OPT_MEMORY_LIMIT, size_text, &v) != 0 || (!v.u.size.is_percent && !v.u.size.bytes)) {
        fprintf(stderr, "gpucap set-memory: '%s' is not a budget; accepted: a size (4GiB, 1500MB, 2G) or a "
                "percentage of the card (50%%), above 0\n", size_text);
        return 1;
    }
    extern char **environ;
    struct gpc_settings s;
    cli_settings_quiet(&s, environ);
    if (s.locked) {
        fprintf(stderr, "gpucap set-memory: the settings are locked by %s: the budget is the platform's (on "
                "Kubernetes, the pod's budget annotation, which the node agent applies); refused\n", s.config_path);
        return 1;
    }
    char named[4096];
    if (!path && pid > 0) {
        int rc = ledger_of_pid(pid, named, sizeof named, 0);
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
    char why[256];
    const char *bad = l == MAP_FAILED ? "cannot be mapped" : gpc_ledger_check(l, (uint64_t)st.st_size, why, sizeof why);
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
        uint64_t now = atomic_load(&d->slot.limit), used = gpc_ledger_in_use(l, i);
        if (atomic_load(&d->limit_asked) != 0) {
            printf("device %s: %s posted; the processes on the ledger apply it at their next CUDA memory call "
                   "(none did within %.0f s)\n", uuid, gpc_format_size(want[i], a, sizeof a), wait_s);
            continue;
        }
        printf("device %s: budget %s (was %s), in use %s%s\n", uuid, gpc_format_size(now, a, sizeof a),
               gpc_format_size(atomic_load(&d->limit_was), b, sizeof b), gpc_format_size(used, c, sizeof c),
               used > now ? ": above the lowered budget, nothing more is admitted until the use is below it" : "");
    }
    munmap(l, sizeof *l);
    return rc;
}
