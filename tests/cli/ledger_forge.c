/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ledger_forge.c: what a tenant can do to its own ledger, and many ledgers at once, for the
 * exporter's tests and benchmark.
 *
 * usage: ledger_forge set FILE [FIELD=VALUE...]
 *          rewrites figures of the first device entry in use (physical, limit, peak, contexts,
 *          denials, allocs, driver_limit, limit_was, changed_s, changes; the QoS fields qos_request,
 *          qos_limit, qos_grant, qos_flags, loan_asks, loaned_peak) and `used` (process entry 0
 *          made to hold VALUE bytes on it: pid 1, its lease, procs_used 1 at least, no liveness lock
 *          said), `alive_lock` (entry 0 says it is held by its lock, `locked`), as a tenant root writing
 *          into its file would;
 *        ledger_forge make ROOT N [CARD_UUID] [--links]
 *          writes N ledgers under ROOT laid out like /var/lib/kubelet/pods (two containers a pod),
 *          each with its identity, one device entry (a 16 GiB card, a budget, one process holding
 *          memory); with --links, one ledger hard-linked N times (no identity: the path names it).
 * Exit 0, 1 on an error (said on stderr), 2 for a usage error.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/ledger.h"

#define GiB (1ull << 30)

static int device_in_use(struct gpc_ledger *l)
{
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++)
        if (atomic_load(&l->dev[d].state) == 1)
            return d;
    return -1;
}

/* The device entry's figures `set` rewrites, by name. */
#define FIELD(name, member) {name, offsetof(struct gpc_ledger_dev, member), sizeof(((struct gpc_ledger_dev *)0)->member)}
static const struct {
    const char *name;
    size_t offset, size;
} fields[] = {
    FIELD("physical", physical), FIELD("limit", slot.limit), FIELD("peak", slot.peak),
    FIELD("contexts", slot.contexts), FIELD("denials", slot.denials), FIELD("allocs", slot.allocs),
    FIELD("driver_limit", driver_limit), FIELD("limit_was", limit_was), FIELD("changed_s", limit_changed_s),
    FIELD("changes", limit_changes), FIELD("qos_request", qos_request), FIELD("qos_limit", qos_limit),
    FIELD("qos_grant", qos_grant), FIELD("qos_flags", qos_flags), FIELD("loan_asks", loan_asks),
    FIELD("loaned_peak", loaned_peak),
};

/* Stores v (cut to the field's width) into the field named `name` of e: false when there is none. */
static bool dev_field(struct gpc_ledger_dev *e, const char *name, uint64_t v)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(fields[i].name, name) != 0)
            continue;
        char *p = (char *)e + fields[i].offset;
        if (fields[i].size == 8)
            atomic_store((_Atomic uint64_t *)p, v);
        else if (fields[i].size == 4)
            atomic_store((_Atomic uint32_t *)p, (uint32_t)v);
        else
            atomic_store((_Atomic uint16_t *)p, (uint16_t)v);
        return true;
    }
    return false;
}

static int set(const char *path, int argc, char **argv)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct gpc_ledger *l = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED) {
        fprintf(stderr, "ledger_forge: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int d = device_in_use(l);
    if (d < 0) {
        fprintf(stderr, "ledger_forge: %s: no device entry in use\n", path);
        return 1;
    }
    struct gpc_ledger_dev *e = &l->dev[d];
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "ledger_forge: %s: expected FIELD=VALUE\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        uint64_t v = strtoull(eq + 1, NULL, 0);
        const char *f = argv[i];
        if (strcmp(f, "alive_lock") == 0)
            atomic_store(&l->proc[0].locked, (uint32_t)v);
        else if (strcmp(f, "used") == 0) {
            /* A process the exporter cannot tell dead (no liveness lock said): what it claims counts. */
            atomic_store(&l->proc[0].pid, 1);
            atomic_store(&l->proc[0].locked, 0);
            atomic_store(&l->proc[0].share[d].lease, v);
            atomic_store(&l->proc[0].share[d].spare, 0);
            if (atomic_load(&l->procs_used) < 1)
                atomic_store(&l->procs_used, 1);
        } else if (!dev_field(e, f, v)) {
            fprintf(stderr, "ledger_forge: unknown field %s\n", f);
            return 2;
        }
    }
    munmap(l, sizeof *l);
    close(fd);
    return 0;
}

/* mkdir -p */
static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* A ledger as one process of the library leaves it: identity, a card, a budget, 100 MiB held. */
static int fill(const char *path, const char *uuid_text, const char *uid, const char *ctr, unsigned n)
{
    int rc = gpc_ledger_create(path, 0644);
    if (rc != 0)
        return rc;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct gpc_ledger *l = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED)
        return -errno;
    if (uid) {
        snprintf(l->identity.pod_namespace, sizeof l->identity.pod_namespace, "ns-%u", n % 10);
        snprintf(l->identity.pod_name, sizeof l->identity.pod_name, "pod-%u", n / 2);
        snprintf(l->identity.pod_uid, sizeof l->identity.pod_uid, "%s", uid);
        snprintf(l->identity.container_name, sizeof l->identity.container_name, "%s", ctr);
        snprintf(l->identity.gpucap_version, sizeof l->identity.gpucap_version, "bench");
        l->identity.mode = GPC_IDENTITY_MODE_ENFORCE;
    }
    struct gpc_ledger_dev *e = &l->dev[0];
    char hex[40] = "";
    size_t h = 0;
    for (const char *p = uuid_text + 4; *p && h < 32; p++)
        if (*p != '-')
            hex[h++] = *p;
    for (int i = 0; i < 16 && h == 32; i++) {
        unsigned byte = 0;
        sscanf(hex + 2 * i, "%2x", &byte);
        e->uuid[i] = (uint8_t)byte;
    }
    e->physical = 16 * GiB;
    atomic_store(&e->slot.limit, 4 * GiB);
    atomic_store(&e->slot.allocs, 3);
    atomic_store(&e->state, 1);
    atomic_store(&l->proc[0].pid, 1000 + (int32_t)n);
    atomic_store(&l->proc[0].start_time, 1);
    atomic_store(&l->proc[0].share[0].lease, 100ull << 20);
    atomic_store(&l->proc[0].share[0].peak, 100ull << 20);
    atomic_store(&l->procs_used, 1);
    munmap(l, sizeof *l);
    close(fd);
    return 0;
}

static int make(const char *root, unsigned n, const char *uuid, int links)
{
    char first[4096] = "";
    for (unsigned i = 0; i < n; i++) {
        char uid[64], ctr[16], dir[4096], file[4200];
        snprintf(uid, sizeof uid, "%08x-0000-4000-8000-%012x", i / 2, i / 2);
        snprintf(ctr, sizeof ctr, "c%u", i % 2);
        snprintf(dir, sizeof dir, "%s/%s/volumes/kubernetes.io~empty-dir/gpucap-ledger/%s", root, uid, ctr);
        if (mkdirs(dir) != 0) {
            fprintf(stderr, "ledger_forge: %s: %s\n", dir, strerror(errno));
            return 1;
        }
        snprintf(file, sizeof file, "%s/gpucap.ledger", dir);
        int rc;
        if (links && first[0])
            rc = link(first, file) == 0 ? 0 : -errno;
        else
            rc = fill(file, uuid, links ? NULL : uid, ctr, i);
        if (rc != 0) {
            fprintf(stderr, "ledger_forge: %s: %s\n", file, strerror(-rc));
            return 1;
        }
        if (!first[0])
            memcpy(first, file, strlen(file) < sizeof first ? strlen(file) + 1 : 0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "set") == 0)
        return set(argv[2], argc - 3, argv + 3);
    if (argc >= 4 && strcmp(argv[1], "make") == 0) {
        int links = strcmp(argv[argc - 1], "--links") == 0;
        const char *uuid = argc - links > 4 ? argv[4] : "GPU-00000000-0000-4000-8000-0000000000aa";
        return make(argv[2], (unsigned)strtoul(argv[3], NULL, 10), uuid, links);
    }
    fprintf(stderr, "usage: ledger_forge set FILE [FIELD=VALUE...] | make ROOT N [CARD_UUID] [--links]\n");
    return 2;
}
