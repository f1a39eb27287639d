/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c: `gpucap status [--ledger FILE] [--json]`: the ledger as it is now, read-only: whose it
 * is (pod, container, the writer's gpucap version); per device (by UUID) budget, in use and peak, and
 * who enforces it (`enforced by: driver + gpucap` where the NVIDIA driver's own limit was seen in
 * force, else `gpucap`); per process pid, in use, peak and whether it is alive.
 * The file is mapped read-only with the layout of ledger.h; nothing is locked or written, so a
 * status never disturbs the processes it looks at. A ledger that cannot be read is one line with
 * the reason, exit 1.
 */
#include "cli.h"
#include "common/drvlimit.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char status_usage[] =
    "usage: gpucap status [--ledger FILE] [--json]\n"
    "\n"
    "Shows the ledger (FILE, else the ledger setting: GPUCAP_LEDGER or `ledger` in the ini file, else\n"
    "/tmp/gpucap-<euid>.ledger): per device its budget, use and peak; per process its use, peak and whether it is alive. Read-only.\n"
    "Exit 0, or 1 when the ledger cannot be read (the reason is said).\n"
    "\n";

static bool alive(const struct gpc_ledger_proc *p)
{
    return gpc_ledger_proc_alive(atomic_load(&p->pid), atomic_load(&p->start_time), p);
}

/* What dead processes still hold on device entry `dv`: not in use any more (the library takes it
 * back at its next reap; status is read-only and leaves it out of the figure). */
static uint64_t dead_share(const struct gpc_ledger *l, int dv)
{
    uint64_t sum = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        uint64_t in_use = gpc_ledger_share_in_use(&p->share[dv]);
        if (atomic_load(&p->pid) != 0 && in_use != 0 && !alive(p))
            sum += in_use;
    }
    return sum;
}

/* A string field of the ledger as text: bounded by the field, and anything but a name's
 * characters shown as '?' (the file is the tenant's; this also keeps the JSON valid). */
static const char *field_text(const char *field, size_t size, char *out)
{
    size_t n = strnlen(field, size);
    for (size_t i = 0; i < n; i++) {
        char c = field[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '.' || c == '_' || c == '+';
        out[i] = ok ? c : '?';
    }
    out[n] = '\0';
    return out;
}

/* The identity block: who the ledger belongs to (the GPUCAP_POD_* settings of its writers). */
static void print_identity(const struct gpc_ledger *l, bool json)
{
    const struct gpc_ledger_identity *id = &l->identity;
    char ns[GPC_IDENTITY_NAME + 1], pod[GPC_IDENTITY_POD + 1], uid[GPC_IDENTITY_NAME + 1],
        ctr[GPC_IDENTITY_NAME + 1], ver[sizeof id->gpucap_version + 1];
    field_text(id->pod_namespace, sizeof id->pod_namespace, ns);
    field_text(id->pod_name, sizeof id->pod_name, pod);
    field_text(id->pod_uid, sizeof id->pod_uid, uid);
    field_text(id->container_name, sizeof id->container_name, ctr);
    field_text(id->gpucap_version, sizeof id->gpucap_version, ver);
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

static void budget_text(uint64_t limit, char *buf, size_t len)
{
    if (limit == GPC_UNLIMITED)
        snprintf(buf, len, "none");
    else
        gpc_format_size(limit, buf, len);
}

int cmd_status(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(status_usage, stdout);
            cli_print_settings_note(stdout);
            return 0;
        } else if (strcmp(argv[i], "--ledger") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(argv[i], "--ledger=", 9) == 0) {
            path = argv[i] + 9;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "gpucap status: unexpected argument '%s'\n%s", argv[i], status_usage);
            return CLI_USAGE;
        }
    }
    char named[512];
    if (!path) {
        extern char **environ;
        struct gpc_settings s;
        cli_settings_quiet(&s, environ);
        gpc_ledger_path(&s, named, sizeof named);
        path = named;
    }
    if (strcmp(path, "off") == 0) {
        fprintf(stderr, "gpucap status: GPUCAP_LEDGER=off: every process has a private budget, there is no "
                "ledger to show\n");
        return 1;
    }
    char why[256];
    const struct gpc_ledger *l = cli_map_ledger(path, why, sizeof why);
    if (!l) {
        fprintf(stderr, "gpucap status: ledger %s %s\n", path, why);
        return 1;
    }

    if (json)
        printf("{\"ledger\":\"%s\",", path);
    else
        printf("ledger %s\n", path);
    print_identity(l, json);
    if (json)
        printf("\"devices\":[");
    int shown = 0;
    for (int i = 0; i < GPC_LEDGER_DEVICES; i++) {
        const struct gpc_ledger_dev *d = &l->dev[i];
        if (atomic_load(&d->state) != 1)
            continue;
        char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT], p[GPC_SIZE_TEXT];
        gpc_uuid_format(d->uuid, uuid);
        uint64_t limit = atomic_load(&d->slot.limit), used = gpc_ledger_in_use(l, i), peak = gpc_ledger_peak(l, i),
                 dead = dead_share(l, i);
        used = used > dead ? used - dead : 0;
        if (json) {
            printf("%s{\"uuid\":\"%s\",\"physical\":%llu,\"budget\":", shown ? "," : "", uuid,
                   (unsigned long long)d->physical);
            if (limit == GPC_UNLIMITED)
                printf("null");
            else
                printf("%llu", (unsigned long long)limit);
            uint64_t drv = atomic_load(&d->driver_limit);
            printf(",\"enforced_by\":\"%s\",\"driver_limit\":", gpc_enforced_by(drv));
            if (drv)
                printf("%llu", (unsigned long long)drv);
            else
                printf("null");
            printf(",\"in_use\":%llu,\"contexts\":%llu,\"peak\":%llu,\"denials\":%llu}", (unsigned long long)used,
                   (unsigned long long)atomic_load(&d->slot.contexts), (unsigned long long)peak,
                   (unsigned long long)atomic_load(&d->slot.denials));
        } else {
            budget_text(limit, a, sizeof a);
            char x[GPC_SIZE_TEXT];
            printf("device %s  budget %s  in use %s (contexts %s)  peak %s  (card %s, %llu denials)\n", uuid, a,
                   gpc_format_size(used, b, sizeof b), gpc_format_size(atomic_load(&d->slot.contexts), x, sizeof x),
                   gpc_format_size(peak, c, sizeof c), gpc_format_size(d->physical, p, sizeof p),
                   (unsigned long long)atomic_load(&d->slot.denials));
            uint64_t drv = atomic_load(&d->driver_limit);
            if (drv)
                printf("  enforced by: %s (the driver's limit %s)\n", gpc_enforced_by(drv), gpc_format_size(drv, x, sizeof x));
            else
                printf("  enforced by: %s\n", gpc_enforced_by(0));
        }
        shown++;
    }
    if (!json && !shown)
        printf("no device registered yet\n");
    if (json)
        printf("],\"processes\":[");
    else
        printf("%-8s %-6s %-44s %12s %12s\n", "pid", "alive", "device", "in use", "peak");
    int procs = 0;
    for (int i = 0; i < GPC_LEDGER_PROCS; i++) {
        const struct gpc_ledger_proc *p = &l->proc[i];
        int32_t pid = atomic_load(&p->pid);
        if (pid == 0)
            continue;
        bool live = alive(p);
        for (int dv = 0; dv < GPC_LEDGER_DEVICES; dv++) {
            const struct gpc_ledger_share *s = &p->share[dv];
            uint64_t used = gpc_ledger_share_in_use(s), peak = atomic_load(&s->peak);
            if (atomic_load(&l->dev[dv].state) != 1 || (used == 0 && peak == 0 && atomic_load(&s->limit) == 0))
                continue;
            char uuid[GPC_UUID_TEXT], a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
            gpc_uuid_format(l->dev[dv].uuid, uuid);
            if (json)
                printf("%s{\"pid\":%d,\"alive\":%s,\"uuid\":\"%s\",\"in_use\":%llu,\"peak\":%llu}", procs ? "," : "",
                       (int)pid, live ? "true" : "false", uuid, (unsigned long long)used, (unsigned long long)peak);
            else
                printf("%-8d %-6s %-44s %12s %12s\n", (int)pid, live ? "yes" : "no", uuid,
                       gpc_format_size(used, a, sizeof a), gpc_format_size(peak, b, sizeof b));
            procs++;
        }
    }
    if (json)
        printf("]}\n");
    else if (!procs)
        printf("no process entries\n");
    munmap((void *)l, sizeof *l);
    return 0;
}
