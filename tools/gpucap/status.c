/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c: `gpucap status [--ledger FILE] [--json]`: the ledger as it is now, read-only: its path
 * (and where that came from), its age and whether any process of it is alive; whose it is (pod,
 * container, the writer's gpucap version); per device (by UUID, with NVML's index and name) budget,
 * in use, peak and denials, and who enforces it (`enforced by: driver + gpucap` where the NVIDIA
 * driver's own limit was seen in force, else `gpucap`), a budget changed live (from, to, when, by
 * whom) and whether the use is above it; per process pid, command name
 * (/proc/<pid>/comm), age, use, peak and whether it is alive. The file is someone else's: it is
 * copied (cli_read_ledger: no link followed, no FIFO waited on, no mapping that a truncation turns
 * into SIGBUS), nothing is locked or written, so a status never disturbs the processes it looks at.
 * A ledger that cannot be read is one line with the reason, exit 1.
 */
#include "cli.h"
#include "common/drvlimit.h"
#include "common/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

enum { F_LEDGER, F_PID, F_JSON, F_COUNT };
static const struct tool_flag status_flags[F_COUNT] = {
    [F_LEDGER] = {"ledger", 'l', "FILE", "GPUCAP_LEDGER", "/tmp/gpucap-<euid>.ledger", "the ledger to show"},
    [F_PID] = {"pid", 'p', "PID", NULL, NULL,
               "the ledger of process PID: a `gpucap run` or one of its children (its GPUCAP_LEDGER)"},
    [F_JSON] = {"json", 'j', NULL, NULL, NULL, "one JSON object on stdout"},
};

const struct tool_cmd cli_status_cmd = {
    CLI_COMMAND("status", status_flags, "[--json] [--ledger FILE | --pid PID]", "show a gpucap ledger"),
    .about = "Shows the ledger (FILE, or that of process PID, else the ledger setting: GPUCAP_LEDGER or `ledger` in the ini file, else\n"
             "/tmp/gpucap-<euid>.ledger): its age; per device its budget, use, peak and denials; per process\n"
             "its command, age, use, peak and whether it is alive. Read-only.",
    .tail = "Exit 0, 1 when the ledger cannot be read (the reason is said), 2 for a usage error.\n\n" CLI_SETTINGS_NOTE,
};

/* The descriptor of the ledger read, which holds no lock: whose entries are held is asked through it. */
static int ledger_fd = -1;

static bool alive(const struct gpc_ledger *l, int i)
{
    return gpc_ledger_entry_live(l, i, ledger_fd);
}

/* What dead processes still hold on device entry `dv`: not in use any more (the library takes it
 * back at its next reap; status is read-only and leaves it out of the figure). */
static uint64_t dead_share(const struct gpc_ledger *l, int dv)
{
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        uint64_t in_use = gpc_ledger_share_in_use(&p->share[dv]);
        if (atomic_load(&p->pid) != 0 && in_use != 0 && !alive(l, i))
            sum += in_use;
    }
    return sum;
}

/* The identity block: who the ledger belongs to (the GPUCAP_POD_* settings of its writers). */
static void print_identity(const struct gpc_ledger *l, bool json)
{
    const struct gpc_ledger_identity *id = &l->identity;
    char ns[GPC_IDENTITY_NAME + 1], pod[GPC_IDENTITY_POD + 1], uid[GPC_IDENTITY_NAME + 1],
        ctr[GPC_IDENTITY_NAME + 1], ver[sizeof id->gpucap_version + 1];
    tool_field_text(ns, sizeof ns, id->pod_namespace, sizeof id->pod_namespace);
    tool_field_text(pod, sizeof pod, id->pod_name, sizeof id->pod_name);
    tool_field_text(uid, sizeof uid, id->pod_uid, sizeof id->pod_uid);
    tool_field_text(ctr, sizeof ctr, id->container_name, sizeof id->container_name);
    tool_field_text(ver, sizeof ver, id->gpucap_version, sizeof id->gpucap_version);
    if (json) {
        printf("\"identity\":{\"namespace\":\"%s\",\"pod\":\"%s\",\"pod_uid\":\"%s\",\"container\":\"%s\","
               "\"gpucap_version\":\"%s\"},", ns, pod, uid, ctr, ver);
    } else if (ns[0] || pod[0] || uid[0] || ctr[0]) {
        printf("pod %s/%s (uid %s)  container %s  written by gpucap %s\n", ns[0] ? ns : "-", pod[0] ? pod : "-",
               uid[0] ? uid : "-", ctr[0] ? ctr : "-", ver[0] ? ver : "?");
    } else {
        printf("no pod identity (GPUCAP_POD_* not set)  written by gpucap %s\n", ver[0] ? ver : "?");
    }
}

/* "2026-12-03T08:44:01Z" for a CLOCK_REALTIME figure in seconds. */
static const char *utc_text(uint64_t s, char *buf, size_t len)
{
    time_t t = (time_t)s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* The live changes of a device's budget (the entry's record of the last GPC_LEDGER_CHANGES), a
 * pending request, and whether the use is above the budget (text: indented lines under the
 * device's). */
static void print_change(const struct gpc_ledger_dev *d, uint64_t limit, uint64_t used, bool json)
{
    uint16_t n = atomic_load(&d->limit_changes);
    uint64_t asked = gpc_ledger_pending_limit(d);
    bool above = limit != GPC_UNLIMITED && used > limit;
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], t[32];
    int kept = n < GPC_LEDGER_CHANGES ? n : GPC_LEDGER_CHANGES;
    const struct gpc_limit_change *last = n ? &d->changes[(uint16_t)(n - 1) % GPC_LEDGER_CHANGES] : NULL;
    if (json) {
        printf(",\"above_budget\":%s", above ? "true" : "false");
        if (last) {
            printf(",\"budget_changed\":{\"from\":%llu,\"to\":%llu,\"at\":%llu,\"by\":\"%s\",\"changes\":%u}",
                   (unsigned long long)atomic_load(&last->from), (unsigned long long)atomic_load(&last->to),
                   (unsigned long long)(atomic_load(&last->t_ns) / 1000000000u), gpc_limit_by_name(atomic_load(&last->by)),
                   (unsigned)n);
            printf(",\"budget_changes\":[");
            for (int k = kept; k >= 1; k--) {
                const struct gpc_limit_change *ch = &d->changes[(uint16_t)(n - k) % GPC_LEDGER_CHANGES];
                printf("%s{\"from\":%llu,\"to\":%llu,\"at\":%llu,\"by\":\"%s\",\"peak_before\":%llu}",
                       k == kept ? "" : ",", (unsigned long long)atomic_load(&ch->from),
                       (unsigned long long)atomic_load(&ch->to),
                       (unsigned long long)(atomic_load(&ch->t_ns) / 1000000000u), gpc_limit_by_name(atomic_load(&ch->by)),
                       (unsigned long long)atomic_load(&ch->peak));
            }
            printf("]");
        }
        if (asked)
            printf(",\"budget_pending\":%llu", (unsigned long long)asked);
        return;
    }
    for (int k = kept; k >= 1; k--) {
        const struct gpc_limit_change *ch = &d->changes[(uint16_t)(n - k) % GPC_LEDGER_CHANGES];
        printf("  budget changed from %s to %s at %s (%s), peak before %s\n",
               gpc_format_size(atomic_load(&ch->from), a, sizeof a), gpc_format_size(atomic_load(&ch->to), b, sizeof b),
               utc_text(atomic_load(&ch->t_ns) / 1000000000u, t, sizeof t), gpc_limit_by_name(atomic_load(&ch->by)),
               gpc_format_size(atomic_load(&ch->peak), c, sizeof c));
    }
    if (above)
        printf("  above the budget by %s: nothing more is admitted until the use is below it\n",
               gpc_format_size(used - limit, a, sizeof a));
    if (asked)
        printf("  set-memory asked for %s: pending, applied by the next admission of a process on the ledger\n",
               gpc_format_size(asked, a, sizeof a));
}

/* Burstable memory (issue 35): request, limit, grant, what is loaned now (granted above the request,
 * and in use above it), the loans asked, and the arbiter's changes among those above. */
static void print_qos(const struct gpc_ledger_dev *d, uint64_t used, bool json)
{
    struct gpc_ledger_qos q;
    gpc_ledger_qos_of(d, &q);
    uint64_t above = q.burstable && used > q.request ? used - q.request : 0;
    if (json) {
        if (!q.burstable && !q.loan_asks && !q.arbiter_changes) {
            printf(",\"qos\":null");
            return;
        }
        printf(",\"qos\":{\"burstable\":%s", q.burstable ? "true" : "false");
        if (q.burstable)
            printf(",\"request\":%llu,\"limit\":%llu,\"grant\":%llu,\"loaned\":%llu,\"in_use_loaned\":%llu",
                   (unsigned long long)q.request, (unsigned long long)q.limit, (unsigned long long)q.grant,
                   (unsigned long long)q.loaned, (unsigned long long)above);
        printf(",\"loaned_peak\":%llu,\"loan_asks\":%u,\"arbiter_changes\":%u,\"arbiter_lowerings\":%u}",
               (unsigned long long)q.loaned_peak, q.loan_asks, q.arbiter_changes, q.arbiter_lowerings);
        return;
    }
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], e[GPC_SIZE_TEXT], f[GPC_SIZE_TEXT];
    if (q.burstable)
        printf("  burstable: request %s  limit %s  grant %s  loaned %s (in use above the request %s)\n",
               gpc_format_size(q.request, a, sizeof a), gpc_format_size(q.limit, b, sizeof b),
               gpc_format_size(q.grant, c, sizeof c), gpc_format_size(q.loaned, e, sizeof e),
               gpc_format_size(above, f, sizeof f));
    if (q.burstable || q.loan_asks || q.arbiter_changes)
        printf("  loans: %u asked of the arbiter, peak loaned %s, %u grant change%s by the arbiter (%u taken back)\n",
               q.loan_asks, gpc_format_size(q.loaned_peak, a, sizeof a), q.arbiter_changes,
               q.arbiter_changes == 1 ? "" : "s", q.arbiter_lowerings);
}

static void budget_text(uint64_t limit, char *buf, size_t len)
{
    if (limit == GPC_UNLIMITED)
        snprintf(buf, len, "none");
    else
        gpc_format_size(limit, buf, len);
}

/* The command name of a live process (/proc/<pid>/comm, as ps shows it), reduced to safe characters;
 * "?" when it cannot be read (another PID namespace: a container's ledger read from the node). */
static const char *comm_of(int32_t pid, bool live, char *out, size_t len)
{
    snprintf(out, len, "?");
    if (!live)
        return out;
    char raw[32] = "";
    if (gpc_proc_read(pid, "comm", raw, sizeof raw) <= 0)
        return out;
    raw[strcspn(raw, "\n")] = '\0';
    return tool_field_text(out, len, raw, sizeof raw);
}

/* How long ago process start time `ticks` (clock ticks since boot) was; false when unknown. */
static bool proc_age(uint64_t ticks, uint64_t *ns)
{
    struct timespec up;
    long hz = sysconf(_SC_CLK_TCK);
    if (!ticks || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &up) != 0)
        return false;
    uint64_t start = ticks * (1000000000u / (uint64_t)hz);
    uint64_t now = (uint64_t)up.tv_sec * 1000000000u + (uint64_t)up.tv_nsec;
    *ns = now > start ? now - start : 0;
    return true;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cmd_status(int argc, char **argv)
{
    const char *given[F_COUNT] = {0};
    int first, rc = tool_begin_values(&cli_status_cmd, argc, argv, given, &first);
    if (rc >= 0)
        return rc;
    const char *path = given[F_LEDGER];
    bool json = given[F_JSON] != NULL;
    char named[4096], from[64] = "--ledger";
    if (given[F_PID] && path) {
        tool_usage_error(&cli_status_cmd, "--ledger and --pid name two ledgers: give one");
        return TOOL_EXIT_USAGE;
    }
    if (given[F_PID]) {
        char *end;
        long pid = strtol(given[F_PID], &end, 10);
        if (*end || pid <= 0) {
            tool_usage_error(&cli_status_cmd, "--pid takes a process id, not '%s'", given[F_PID]);
            return TOOL_EXIT_USAGE;
        }
        int e = cli_ledger_of_pid(pid, named, sizeof named);
        if (e != 0) {
            tool_error("gpucap status", "process %ld (or its children) names no GPUCAP_LEDGER (%s)", pid, strerror(-e));
            return 1;
        }
        path = named;
        snprintf(from, sizeof from, "--pid %ld", pid);
    }
    if (!path) {
        extern char **environ;
        struct gpc_settings s, platform;
        cli_settings_quiet(&s, &platform, environ);
        gpc_ledger_path(&s, named, sizeof named);
        path = named;
        const struct gpc_value *v = &s.opt[GPC_OPT_LEDGER];
        snprintf(from, sizeof from, "%s", v->set && v->src == GPC_SRC_ENV    ? "GPUCAP_LEDGER"
                                          : v->set && v->src == GPC_SRC_FILE ? "the ini file"
                                                                             : "the default: GPUCAP_LEDGER is not set");
    }
    if (strcmp(path, "off") == 0) {
        tool_error("gpucap status", "GPUCAP_LEDGER=off: every process has a private budget, there is no ledger to "
                   "show");
        return 1;
    }
    char why[256];
    uint64_t mtime_age = 0;
    struct gpc_ledger *l = cli_read_ledger(path, why, sizeof why, &mtime_age, &ledger_fd);
    if (!l) {
        tool_error("gpucap status", "ledger %s (%s) %s", path, from, why);
        return 1;
    }

    /* The ledger's age: since a process last attached to it, or the file last changed. */
    uint64_t now = realtime_ns(), written = l->identity.written_ns, age = mtime_age;
    if (written && written < now && now - written < age)
        age = now - written;
    int live = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++)
        if (atomic_load(&l->proc[i].pid) != 0 && alive(l, i))
            live++;
    char agetext[32];
    cli_age(age, agetext, sizeof agetext);
    if (json) {
        printf("{\"ledger\":");
        tool_json_string(stdout, path);
        printf(",\"ledger_from\":\"%s\",\"age_seconds\":%llu,\"live_processes\":%d,\"stale\":%s,", from,
               (unsigned long long)(age / 1000000000u), live, live ? "false" : "true");
    } else {
        printf("ledger %s (%s), last written %s ago", path, from, agetext);
        if (!live)
            printf("; stale: no live process uses it");
        printf("\n");
    }
    print_identity(l, json);
    if (json)
        printf("\"devices\":[");
    int shown = 0;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        const struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1)
            continue;
        char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], p[GPC_SIZE_TEXT], name[96];
        int index;
        gpc_uuid_format(d->uuid, uuid);
        cli_device_name(uuid, &index, name, sizeof name);
        /* The peak is never below what is in use (gpc_ledger_peak); dead processes' shares are left
         * out of the use shown, not out of the peak they made. */
        uint64_t limit = atomic_load(&d->slot.limit), used = gpc_ledger_in_use(l, i), peak = gpc_ledger_peak(l, i),
                 dead = dead_share(l, i), denials = atomic_load(&d->slot.denials);
        used = used > dead ? used - dead : 0;
        /* The context reserves are part of what is in use: a dead process's are gone with it. */
        uint64_t contexts = atomic_load(&d->slot.contexts);
        if (contexts > used)
            contexts = used;
        if (json) {
            printf("%s{\"uuid\":\"%s\",", shown ? "," : "", uuid);
            if (index >= 0) {
                printf("\"index\":%d,\"name\":", index);
                tool_json_string(stdout, name);
                printf(",");
            } else
                printf("\"index\":null,\"name\":null,");
            printf("\"physical\":%llu,\"budget\":", (unsigned long long)d->physical);
            if (limit == GPC_UNLIMITED)
                printf("null");
            else
                printf("%llu", (unsigned long long)limit);
            uint64_t drv = gpc_drv_recorded(atomic_load(&d->driver_limit), d->physical); /* none at or above the card */
            printf(",\"enforced_by\":\"%s\",\"driver_limit\":", gpc_enforced_by(drv));
            if (drv)
                printf("%llu", (unsigned long long)drv);
            else
                printf("null");
            printf(",\"in_use\":%llu,\"contexts\":%llu,\"peak\":%llu,\"denials\":%llu", (unsigned long long)used,
                   (unsigned long long)contexts, (unsigned long long)peak,
                   (unsigned long long)denials);
            print_change(d, limit, used, true);
            print_qos(d, used, true);
            printf("}");
        } else {
            budget_text(limit, a, sizeof a);
            char x[GPC_SIZE_TEXT], who[128] = "", den[48];
            if (index >= 0)
                snprintf(who, sizeof who, " (GPU %d, %s)", index, name);
            printf("device %s%s  budget %s  in use %s (contexts %s)  peak %s  (card %s, %s)\n", uuid, who, a,
                   gpc_format_size(used, b, sizeof b), gpc_format_size(contexts, x, sizeof x),
                   gpc_format_size(peak, c, sizeof c), gpc_format_size(d->physical, p, sizeof p),
                   cli_count(denials, "denial", "denials", den, sizeof den));
            uint64_t drv = gpc_drv_recorded(atomic_load(&d->driver_limit), d->physical); /* none at or above the card */
            if (drv)
                printf("  enforced by: %s (the driver's limit %s)\n", gpc_enforced_by(drv),
                       gpc_format_size(drv, x, sizeof x));
            else
                printf("  enforced by: %s\n", gpc_enforced_by(0));
            print_change(d, limit, used, false);
            print_qos(d, used, false);
        }
        shown++;
    }
    if (!json && !shown)
        printf("no device registered yet\n");
    if (json)
        printf("],\"processes\":[");
    else
        printf("%-8s %-16s %-8s %-6s %-44s %12s %12s\n", "pid", "command", "age", "alive", "device", "in use", "peak");
    int procs = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load(&p->pid);
        if (pid == 0)
            continue;
        bool live = alive(l, i);
        char comm[32], pa[32] = "?";
        uint64_t page = 0;
        bool have_age = live && proc_age(atomic_load(&p->start_time), &page);
        if (have_age)
            cli_age(page, pa, sizeof pa);
        comm_of(pid, live, comm, sizeof comm);
        for (int dv = 0; dv < GPC_LEDGER_DEVICES; dv++) {
            const struct gpc_ledger_share *s = &p->share[dv];
            uint64_t used = gpc_ledger_share_in_use(s), peak = atomic_load(&s->peak);
            if (atomic_load(&l->dev[dv].state) != 1 || (used == 0 && peak == 0 && atomic_load(&s->limit) == 0))
                continue;
            /* A dead process holds nothing: the driver freed its memory when it died (its share is
             * taken back at the library's next reap; the device figure above leaves it out too). */
            if (peak < used)
                peak = used;
            if (!live)
                used = 0;
            char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
            gpc_uuid_format(l->dev[dv].uuid, uuid);
            if (json) {
                printf("%s{\"pid\":%d,\"command\":\"%s\",\"age_seconds\":", procs ? "," : "", (int)pid, comm);
                if (have_age)
                    printf("%llu", (unsigned long long)(page / 1000000000u));
                else
                    printf("null");
                printf(",\"alive\":%s,\"uuid\":\"%s\",\"in_use\":%llu,\"peak\":%llu}", live ? "true" : "false", uuid,
                       (unsigned long long)used, (unsigned long long)peak);
            } else {
                printf("%-8d %-16s %-8s %-6s %-44s %12s %12s\n", (int)pid, comm, pa, live ? "yes" : "no", uuid,
                       gpc_format_size(used, a, sizeof a), gpc_format_size(peak, b, sizeof b));
            }
            procs++;
        }
    }
    if (json)
        printf("]}\n");
    else if (!procs)
        printf("no process entries\n");
    free(l);
    if (ledger_fd >= 0)
        close(ledger_fd);
    return 0;
}
