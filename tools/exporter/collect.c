/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collect.c: one scrape of gpucap-exporter: find every container's ledger under the kubelet's pod
 * directory, read the parts of it that the metrics show, check them, and write the metrics.
 *
 * The ledgers belong to tenants and are read from the node, so every file is treated as hostile.
 * Each path step is opened with O_NOFOLLOW relative to the previous one (no symbolic link is ever
 * followed), the ledger with O_NONBLOCK (a FIFO put in its place cannot hang the scrape) and only
 * when fstat(2) says it is a regular file of at most a ledger's size (a huge sparse file is never
 * read). Only what is shown is read, with pread(2), never mapped (a file truncated under a mapping
 * is SIGBUS): gpc_ledger_copy_used, the readers' one copy routine (common/ledger.h), takes the
 * header, the identity and the device entries in one read (some 8 KiB), checks them with
 * gpc_ledger_check(), the same check the library runs, whose typed fault names the skip, then the
 * process entries below the header's procs_used (the ones that may hold a share), not the whole
 * 1 MiB file; the identity block is taken only when its sequence number is even and the same before
 * and after the copy (the writer holds the ledger's lock, we take none: a scrape never blocks a
 * tenant). Every loop is bounded by the layout's constants or the limits below, never by a count
 * from the file, and every string from the file is bounded by its field and reduced to a name's
 * characters.
 *
 * Which labels are trusted: uid (the pod's) and container come from the path, which the kubelet made
 * and the tenant cannot rename; namespace and pod are what the tenant's library recorded (the webhook
 * sets them from the downward API). A ledger whose recorded pod UID or container name differs from
 * its path is skipped ("mismatch"). Cards: a device entry naming a card the node does not have
 * (cards.c says which it has) is left out and counted, so a forged ledger adds no card series.
 * Figures: every byte figure of a ledger is at most the card's size where the node's source (NVML)
 * gives it, the driver's limit too; a driver's limit that is not below the card (that size, else
 * the ledger's own) is no limit, and is neither shown nor said to enforce; a time is not in the
 * future. A card's size taken from the ledgers (no NVML) is labelled source="ledger": the
 * containers' claim, not the node's.
 *
 * Burstable memory (issue 35): a ledger's QoS fields (request, limit, grant, loan asks, the most
 * held above the request) are the tenant's, bounded like the rest; where the node arbiter wrote a
 * container's qos.state beside its settings file (the pod's gpucap-lib volume, which the container
 * mounts read-only) its request, limit, grant, reclaims and best-effort flag replace the ledger's,
 * and its cards.state (--arbiter-state) gives the per-card series; both read by qos.c.
 *
 * Bounds: GPC_EXPORTER_MAX_LEDGERS ledgers per scrape (documented; past it the rest are counted as
 * skipped, reason "limit", and main.c warns), MAX_POD_ENTRIES pod directories, MAX_CONTAINERS_PER_POD.
 *
 * Live processes: the pids in a ledger are in the container's PID namespace, which the node's
 * namespace cannot check. Each process's entry is held by an OFD lock on its byte of the ledger
 * file (common/ledger.h), which the kernel drops when the last descriptor of it goes (its death,
 * its exec, the exit of a fork child that kept it) and which F_OFD_GETLK sees from any namespace:
 * an entry not held counts nothing, not in gpucap_container_processes, not in the use (nor in the
 * context reserve, which is part of it), as `gpucap status` counts it inside the container. Its
 * peak stays.
 */
#include "collect.h"
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

#include "cards.h"
#include "qos.h"
#include "common/drvlimit.h"
#include "common/ledger.h"
#include "common/units.h"
#include "promtext.h"

#define GPC_UNLIMITED UINT64_MAX
/* Bounds of one scrape besides GPC_EXPORTER_MAX_LEDGERS (collect.h): the entries of the pod
 * directory looked at (pods without gpucap too), and the container directories of one pod. */
#define MAX_POD_ENTRIES 65536
#define MAX_CONTAINERS_PER_POD 128
#define MAX_CARDS 64
/* What the steps of a scrape return when there is nothing to skip; else an enum gpc_skip. */
#define NO_SKIP (-1)

const char *const gpc_skip_names[GPC_SKIP__COUNT] = {
    [GPC_SKIP_SYMLINK] = "symlink",       [GPC_SKIP_NOT_REGULAR] = "not_regular",
    [GPC_SKIP_OPEN] = "open_failed",      [GPC_SKIP_READ] = "read_failed",
    [GPC_SKIP_TRUNCATED] = "truncated",   [GPC_SKIP_TOO_LARGE] = "too_large",
    [GPC_SKIP_MAGIC] = "bad_magic",       [GPC_SKIP_VERSION] = "bad_version",
    [GPC_SKIP_CORRUPT] = "corrupt",       [GPC_SKIP_TORN] = "torn",
    [GPC_SKIP_MISMATCH] = "mismatch",     [GPC_SKIP_NAME] = "bad_name",
    [GPC_SKIP_LIMIT] = "limit",
};

/* ---- what one ledger says ---- */

struct dev_rec {
    uint8_t uuid[16];
    char uuid_text[GPC_UUID_TEXT];
    uint64_t physical, limit, used, contexts, peak, denials, allocs;
    uint64_t driver_limit; /* the NVIDIA driver's own limit seen in force, GPC_UNLIMITED: none */
    /* Live budget changes: the budget before the last one, when (s), how many; used > limit. */
    uint64_t limit_was, changed_s, changes, above;
    uint64_t pending; /* a budget `gpucap set-memory` asked that no process applied yet, GPC_UNLIMITED: none */
    /* Burstable memory (issue 35): request, limit, grant, loaned (grant above request), from the
     * arbiter's qos.state where it has the card, else the ledger's own record; loan asks and the
     * most in use above the request at once, from the ledger; reclaims, from the arbiter. */
    uint64_t q_request, q_limit, q_grant, q_loaned, q_asks, q_loaned_peak, q_over;
    uint64_t q_reclaims[GPC_RECLAIM__COUNT];
    bool qos;         /* burstable by its ledger, or on the arbiter's books: the QoS series are shown */
    bool q_arbiter;   /* the figures are the arbiter's */
    unsigned procs;
};

struct ctr_rec {
    char pod_uid[GPC_IDENTITY_NAME], container[GPC_IDENTITY_NAME];
    char ns[GPC_IDENTITY_NAME], pod[GPC_IDENTITY_POD], version[32];
    const char *mode; /* "enforce", "audit" or "unknown" (a writer that did not record it) */
    unsigned first, ndev; /* its device records: scan.dev[first .. first + ndev) */
};

struct scan {
    struct gpc_ledger *copy; /* one buffer of a ledger's size, reused for every file: only the parts
                              * read are current (the head, the process entries below procs_used) */
    struct ctr_rec *ctr;
    unsigned nctr, cap;
    struct dev_rec *dev;
    unsigned ndev, dev_cap;
    struct gpc_scrape *s;
    const struct gpc_cards *cards;
    uint64_t now_s;
    struct gpc_card_line arb_cards[GPC_QOS_STATE_LINES]; /* cards.state (--arbiter-state) */
    int n_arb_cards;                                     /* its lines, or a negative errno */
};

/* Copies what is shown of the open ledger into sc->copy (gpc_ledger_copy_used: the head, then the
 * process entries below procs_used); returns NO_SKIP or the skip reason of its fault. */
static int copy_ledger(struct scan *sc, int fd)
{
    static const int skip_of[] = {
        [GPC_LEDGER_UNREADABLE] = GPC_SKIP_READ,    [GPC_LEDGER_NOT_REGULAR] = GPC_SKIP_NOT_REGULAR,
        [GPC_LEDGER_TOO_LARGE] = GPC_SKIP_TOO_LARGE, [GPC_LEDGER_TRUNCATED] = GPC_SKIP_TRUNCATED,
        [GPC_LEDGER_NOT_LEDGER] = GPC_SKIP_MAGIC,   [GPC_LEDGER_OTHER_VERSION] = GPC_SKIP_VERSION,
        [GPC_LEDGER_CORRUPT] = GPC_SKIP_CORRUPT,    [GPC_LEDGER_TORN] = GPC_SKIP_TORN,
    };
    enum gpc_ledger_fault f = gpc_ledger_copy_used(fd, sc->copy, NULL);
    return f == GPC_LEDGER_USABLE ? NO_SKIP : skip_of[f];
}

/* Room for one more element of `size` bytes in the array *p of *cap (doubling from 64); false
 * when memory ran out. */
static bool room(void **p, unsigned n, unsigned *cap, size_t size)
{
    if (n < *cap)
        return true;
    unsigned more = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, more * size);
    if (!q)
        return false;
    *p = q;
    *cap = more;
    return true;
}

static struct ctr_rec *new_record(struct scan *sc)
{
    return room((void **)&sc->ctr, sc->nctr, &sc->cap, sizeof *sc->ctr) ? &sc->ctr[sc->nctr] : NULL;
}

static struct dev_rec *new_dev(struct scan *sc)
{
    return room((void **)&sc->dev, sc->ndev, &sc->dev_cap, sizeof *sc->dev) ? &sc->dev[sc->ndev] : NULL;
}

static void bound_qos(struct dev_rec *o, uint64_t card);

/*
 * The figures of one device entry, bounded: every byte figure at most the card's size where the
 * node's source gives it (`card`, 0: unknown), the driver's limit counted only below the card (that
 * size, else the entry's own), a time at most now.
 */
static void bound(struct dev_rec *o, uint64_t card, uint64_t now_s)
{
    if (card) {
        uint64_t *fig[] = {&o->physical, &o->limit,     &o->used,         &o->contexts,
                           &o->peak,     &o->limit_was, &o->driver_limit, &o->pending};
        for (size_t k = 0; k < sizeof fig / sizeof fig[0]; k++)
            if (*fig[k] > card && *fig[k] != GPC_UNLIMITED) /* unlimited stays so */
                *fig[k] = card;
    }
    uint64_t drv = gpc_drv_recorded(o->driver_limit == GPC_UNLIMITED ? 0 : o->driver_limit, card ? card : o->physical);
    o->driver_limit = drv ? drv : GPC_UNLIMITED;
    if (o->changed_s > now_s)
        o->changed_s = now_s;
    bound_qos(o, card);
}

/* The QoS figures of a device record, bounded: at most the card's size (`card`, 0: unknown), a
 * request and a grant at most the limit, as the library reads them; the loan from those. */
static void bound_qos(struct dev_rec *o, uint64_t card)
{
    uint64_t *fig[] = {&o->q_request, &o->q_limit, &o->q_grant, &o->q_loaned_peak};
    for (size_t k = 0; card && k < sizeof fig / sizeof fig[0]; k++)
        if (*fig[k] > card)
            *fig[k] = card;
    /* As the library reads them: a request at most the limit, a grant at most the limit. */
    if (o->q_request > o->q_limit)
        o->q_request = o->q_limit;
    if (o->q_grant > o->q_limit)
        o->q_grant = o->q_limit;
    o->q_loaned = o->q_grant > o->q_request ? o->q_grant - o->q_request : 0;
}

/*
 * The arbiter's qos.state of one container (in `lib`, its gpucap-lib directory) laid over its device
 * records (those of a card the state names): the request, limit, grant and reclaims are then the
 * arbiter's, bounded as every figure. A file that cannot be read leaves the ledger's figures.
 */
static void take_state(struct scan *sc, struct ctr_rec *r, int lib, const char *container)
{
    if (lib < 0)
        return;
    int cfd = openat(lib, container, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0)
        return;
    struct gpc_qos_line lines[GPC_QOS_STATE_LINES];
    int n = gpc_qos_read_member(cfd, GPC_QOS_STATE_FILE, lines, GPC_QOS_STATE_LINES, &sc->s->state_refused);
    close(cfd);
    for (int i = 0; i < n; i++) {
        for (unsigned d = 0; d < r->ndev; d++) {
            struct dev_rec *o = &sc->dev[r->first + d];
            if (strcasecmp(o->uuid_text, lines[i].uuid) != 0)
                continue;
            o->qos = o->q_arbiter = true;
            o->q_request = lines[i].request;
            o->q_limit = lines[i].limit;
            o->q_grant = lines[i].grant;
            o->q_over = lines[i].overcommitted;
            memcpy(o->q_reclaims, lines[i].reclaims, sizeof o->q_reclaims);
            const struct gpc_card *kc = sc->cards->known ? gpc_cards_find(sc->cards, o->uuid_text) : NULL;
            bound_qos(o, kc ? kc->memory : 0);
        }
    }
}

/* Takes the figures out of a checked copy. Returns NO_SKIP or the skip reason. */
static int take(struct scan *sc, const char *pod_uid, const char *container, int fd)
{
    const struct gpc_ledger *l = sc->copy;
    struct ctr_rec *r = new_record(sc);
    if (!r)
        return GPC_SKIP_LIMIT;
    memset(r, 0, sizeof *r);
    r->first = sc->ndev;
    tool_field_text(r->pod_uid, sizeof r->pod_uid, pod_uid, sizeof r->pod_uid);
    tool_field_text(r->container, sizeof r->container, container, sizeof r->container);
    char uid[GPC_IDENTITY_NAME], ctr[GPC_IDENTITY_NAME];
    tool_field_text(uid, sizeof uid, l->identity.pod_uid, sizeof l->identity.pod_uid);
    tool_field_text(ctr, sizeof ctr, l->identity.container_name, sizeof l->identity.container_name);
    if ((uid[0] && strcmp(uid, pod_uid) != 0) || (ctr[0] && strcmp(ctr, container) != 0))
        return GPC_SKIP_MISMATCH;
    tool_field_text(r->ns, sizeof r->ns, l->identity.pod_namespace, sizeof l->identity.pod_namespace);
    tool_field_text(r->pod, sizeof r->pod, l->identity.pod_name, sizeof l->identity.pod_name);
    tool_field_text(r->version, sizeof r->version, l->identity.gpucap_version,
                    sizeof l->identity.gpucap_version);
    r->mode = l->identity.mode == GPC_IDENTITY_MODE_ENFORCE ? "enforce"
              : l->identity.mode == GPC_IDENTITY_MODE_AUDIT ? "audit"
                                                            : "unknown";
    uint32_t used = atomic_load(&l->procs_used); /* bounded by copy_ledger */
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        const struct gpc_ledger_dev *e = &l->dev[d];
        if (atomic_load(&e->state) != 1)
            continue;
        /* gpucap registers a card once, under the table lock: a second entry is a forged file,
         * and its series would repeat the first one's labels. */
        for (unsigned k = 0; k < r->ndev; k++)
            if (memcmp(sc->dev[r->first + k].uuid, e->uuid, sizeof e->uuid) == 0) {
                sc->ndev = r->first; /* the records taken so far are dropped with the ledger */
                return GPC_SKIP_CORRUPT;
            }
        /* A card this node does not have: the tenant's own invention, shown nowhere. */
        char text[GPC_UUID_TEXT];
        gpc_uuid_format(e->uuid, text);
        const struct gpc_card *kc = sc->cards->known ? gpc_cards_find(sc->cards, text) : NULL;
        if (sc->cards->known && !kc) {
            sc->s->foreign_cards++;
            continue;
        }
        struct dev_rec *o = new_dev(sc);
        if (!o) {
            sc->ndev = r->first;
            return GPC_SKIP_LIMIT;
        }
        memset(o, 0, sizeof *o);
        memcpy(o->uuid, e->uuid, sizeof o->uuid);
        memcpy(o->uuid_text, text, sizeof text);
        o->physical = e->physical;
        o->limit = atomic_load(&e->slot.limit);
        /* What live processes hold: an entry held by its lock is alive exactly while the lock is
         * (in whichever PID namespace), as `gpucap status` counts it in the container. */
        o->used = gpc_ledger_in_use_held(l, d, fd);
        o->contexts = atomic_load(&e->slot.contexts);
        if (o->contexts > o->used) /* part of used_bytes: the reserves of processes gone since */
            o->contexts = o->used;
        o->peak = gpc_ledger_peak(l, d);
        o->denials = atomic_load(&e->slot.denials);
        o->allocs = atomic_load(&e->slot.allocs);
        o->driver_limit = atomic_load(&e->driver_limit);
        if (!o->driver_limit)
            o->driver_limit = GPC_UNLIMITED;
        o->limit_was = atomic_load(&e->limit_was);
        o->changed_s = atomic_load(&e->limit_changed_s);
        o->changes = atomic_load(&e->limit_changes);
        o->pending = gpc_ledger_pending_limit(e);
        if (!o->pending)
            o->pending = GPC_UNLIMITED;
        /* The library's record of its QoS settings: the tenant's file, so bounded like the rest. */
        o->qos = (atomic_load(&e->qos_flags) & GPC_QOS_BURSTABLE) != 0;
        if (o->qos) {
            o->q_request = atomic_load(&e->qos_request);
            o->q_limit = atomic_load(&e->qos_limit);
            o->q_grant = atomic_load(&e->qos_grant);
        }
        o->q_asks = atomic_load(&e->loan_asks);
        o->q_loaned_peak = atomic_load(&e->loaned_peak);
        /* A tenant's ledger is writable: a 1 PiB budget on a real card would fire the over-commit
         * alert, a 1 PiB driver limit would say the driver enforces. A budget above the card caps
         * nothing more than one of the card's size. */
        bound(o, kc ? kc->memory : 0, sc->now_s);
        o->above = o->limit != GPC_UNLIMITED && o->used > o->limit;
        for (uint32_t p = 0; p < used; p++) {
            const struct gpc_ledger_proc *pr = &l->proc[p];
            if (atomic_load(&pr->pid) != 0 && gpc_ledger_entry_held(l, (int)p, fd) &&
                (atomic_load(&pr->share[d].lease) || atomic_load(&pr->share[d].limit) ||
                 atomic_load(&pr->share[d].peak)))
                o->procs++;
        }
        sc->ndev++;
        r->ndev++;
    }
    sc->nctr++;
    return NO_SKIP;
}

/* Opens directory `name` under `dir` without following a link; -1 with errno when it cannot. */
static int open_dir_at(int dir, const char *name)
{
    return openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The skip reason of a failed open of `name` in `dir`, or NO_SKIP when it simply is not there. A
 * link opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR, not ELOOP: lstat tells them apart. */
static int open_reason(int err, int dir, const char *name)
{
    struct stat st;
    if (err == ENOENT)
        return NO_SKIP;
    if (err == ELOOP || (err == ENOTDIR && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)))
        return GPC_SKIP_SYMLINK;
    if (err == ENOTDIR)
        return GPC_SKIP_NOT_REGULAR;
    return GPC_SKIP_OPEN;
}

static void skip(struct scan *sc, int reason)
{
    if (reason >= 0 && reason < GPC_SKIP__COUNT)
        sc->s->skipped[reason]++;
}

/* One container directory: <...>/gpucap-ledger/<container>/gpucap.ledger, and the arbiter's
 * <...>/gpucap-lib/<container>/qos.state (lib_fd: -1 when the pod has no gpucap-lib). */
static void scan_container(struct scan *sc, int ledgers_fd, int lib_fd, const char *pod_uid, const char *container)
{
    int cfd = open_dir_at(ledgers_fd, container);
    if (cfd < 0) {
        skip(sc, open_reason(errno, ledgers_fd, container));
        return;
    }
    int fd = openat(cfd, "gpucap.ledger", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        skip(sc, open_reason(errno, cfd, "gpucap.ledger"));
    close(cfd);
    if (fd < 0)
        return;
    if (sc->nctr >= GPC_EXPORTER_MAX_LEDGERS) {
        close(fd);
        skip(sc, GPC_SKIP_LIMIT);
        return;
    }
    int reason = copy_ledger(sc, fd);
    /* The descriptor read holds no lock: whose entries are held is asked through it (take). */
    if (reason == NO_SKIP)
        reason = take(sc, pod_uid, container, fd);
    close(fd);
    if (reason == NO_SKIP)
        take_state(sc, &sc->ctr[sc->nctr - 1], lib_fd, container);
    if (reason == NO_SKIP)
        sc->s->ledgers++;
    else
        skip(sc, reason);
}

/* One pod directory: a pod without gpucap has no gpucap-ledger volume and is passed over. */
static void scan_pod(struct scan *sc, int root_fd, const char *pod_uid)
{
    int fd = open_dir_at(root_fd, pod_uid), lib = -1;
    const char *steps[] = {"volumes", "kubernetes.io~empty-dir", "gpucap-ledger"};
    for (unsigned i = 0; i < sizeof steps / sizeof *steps && fd >= 0; i++) {
        if (i == 2)
            lib = open_dir_at(fd, "gpucap-lib");
        int next = open_dir_at(fd, steps[i]);
        close(fd);
        fd = next;
    }
    if (fd < 0) {
        if (lib >= 0)
            close(lib);
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        if (lib >= 0)
            close(lib);
        return;
    }
    struct dirent *e;
    unsigned seen = 0;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++seen > MAX_CONTAINERS_PER_POD) {
            skip(sc, GPC_SKIP_LIMIT);
            break;
        }
        if (!tool_name_ok(e->d_name)) {
            skip(sc, GPC_SKIP_NAME);
            continue;
        }
        scan_container(sc, dirfd(d), lib, pod_uid, e->d_name);
    }
    closedir(d);
    if (lib >= 0)
        close(lib);
}

/* ---- the exposition ---- */

struct card {
    char uuid[GPC_UUID_TEXT];
    int index;           /* -1: not known */
    const char *model;   /* "": not known */
    uint64_t physical, budgets, used;
    unsigned containers;
    bool claimed; /* its size is the ledgers' (no NVML figure) */
};

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The value of one field of a device record, by offset: one loop writes every family. */
struct dev_family {
    const char *name, *type, *help;
    size_t offset;
    bool finite_only; /* leave out GPC_UNLIMITED (no budget) */
    bool mode;        /* carries the container's `mode` label */
    bool changed_only; /* only for a budget changed live */
    bool qos_only;     /* only for a burstable container, or one the arbiter has on its books */
};

static const struct dev_family dev_families[] = {
    {"gpucap_container_budget_bytes", "gauge",
     "Device memory budget of the container on this card (absent: no budget).", offsetof(struct dev_rec, limit),
     true, false, false, false},
    {"gpucap_container_used_bytes", "gauge", "Device memory the container's processes hold on this card.",
     offsetof(struct dev_rec, used), false, false, false, false},
    {"gpucap_container_context_reserve_bytes", "gauge",
     "Of gpucap_container_used_bytes, the reserves charged for CUDA contexts.", offsetof(struct dev_rec, contexts),
     false, false, false, false},
    {"gpucap_container_peak_bytes", "gauge", "Highest device memory in use by the container on this card.",
     offsetof(struct dev_rec, peak), false, false, false, false},
    {"gpucap_container_denials_total", "counter",
     "Allocations over the container's budget on this card: answered out-of-memory when mode=\"enforce\", "
     "only counted when mode=\"audit\".",
     offsetof(struct dev_rec, denials), false, true, false, false},
    {"gpucap_container_allocations_total", "counter", "Charges admitted for the container on this card (allocations and context reserves).",
     offsetof(struct dev_rec, allocs), false, false, false, false},
    {"gpucap_container_driver_limit_bytes", "gauge",
     "The NVIDIA driver's own memory limit for the container on this card, as gpucap saw it in force (absent: "
     "none; gpucap alone enforces).", offsetof(struct dev_rec, driver_limit), true, false, false, false},
    {"gpucap_container_budget_changes_total", "counter",
     "Live changes of the container's budget on this card (the node agent, gpucap set-memory).",
     offsetof(struct dev_rec, changes), false, false, false, false},
    {"gpucap_container_budget_previous_bytes", "gauge",
     "The budget before its last live change (absent: never changed).", offsetof(struct dev_rec, limit_was), true,
     false, true, false},
    {"gpucap_container_budget_changed_timestamp_seconds", "gauge",
     "When the budget last changed live, Unix time (absent: never changed).", offsetof(struct dev_rec, changed_s),
     false, false, true, false},
    {"gpucap_container_budget_pending_bytes", "gauge",
     "A budget gpucap set-memory asked for that no process of the container applied yet: in force from the next "
     "process's first allocation (absent: none pending).", offsetof(struct dev_rec, pending), true, false, false, false},
    {"gpucap_container_above_budget", "gauge",
     "1 when the container holds more than its budget (after a lowering: nothing more is admitted until it is "
     "below), else 0.", offsetof(struct dev_rec, above), false, false, false, false},
    {"gpucap_container_request_bytes", "gauge",
     "Burstable memory: the container's request on this card, guaranteed (0: best effort; the limit for a "
     "guaranteed container the arbiter counts). The arbiter's figure where it has one, else the ledger's.",
     offsetof(struct dev_rec, q_request), false, false, false, true},
    {"gpucap_container_limit_bytes", "gauge",
     "Burstable memory: the most the container may use on this card (its budget in force is min(limit, "
     "max(request, grant))).", offsetof(struct dev_rec, q_limit), false, false, false, true},
    {"gpucap_container_grant_bytes", "gauge",
     "Burstable memory: the grant the node arbiter wrote for the container on this card (0: none, it runs at "
     "its request).", offsetof(struct dev_rec, q_grant), false, false, false, true},
    {"gpucap_container_loaned_bytes", "gauge",
     "Burstable memory: memory lent to the container on this card, its grant above its request.",
     offsetof(struct dev_rec, q_loaned), false, false, false, true},
    {"gpucap_container_loaned_peak_bytes", "gauge",
     "Burstable memory: the most the container held above its request at once on this card (its ledger).",
     offsetof(struct dev_rec, q_loaned_peak), false, false, false, true},
    {"gpucap_container_loan_asks_total", "counter",
     "Burstable memory: loans the container's processes asked the arbiter for on this card (its ledger).",
     offsetof(struct dev_rec, q_asks), false, false, false, true},
    {"gpucap_container_overcommitted", "gauge",
     "Burstable memory: 1 when the container's request is not honoured on this card (requests there add up "
     "past its size, and it came last: best effort), else 0. The arbiter's.",
     offsetof(struct dev_rec, q_over), false, false, false, true},
};

/*
 * The labels of a container's series, named as the neighbours name them: `uid` as kube-state-metrics
 * names the pod UID, `UUID` as DCGM's exporter names the card.
 */
#define CTR_LABELS "namespace=\"%s\",pod=\"%s\",uid=\"%s\",container=\"%s\""

/* A card's labels as DCGM's exporter writes them: UUID, gpu (index), modelName, where known. */
static void card_labels(const struct card *c, char *out, size_t len)
{
    int n = snprintf(out, len, "UUID=\"%s\"", c->uuid);
    if (c->index >= 0 && n > 0 && (size_t)n < len)
        n += snprintf(out + n, len - (size_t)n, ",gpu=\"%d\"", c->index);
    if (c->model[0] && n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, ",model_name=\"%s\"", c->model);
}

/* The start of container r's series on its card d: NAME{its labels,UUID="..."; the caller ends it. */
static void ctr_card_series(struct gpc_text *t, const char *name, const struct ctr_rec *r, const struct dev_rec *dv)
{
    gpc_text_printf(t, "%s{" CTR_LABELS ",UUID=\"%s\"", name, r->ns, r->pod, r->pod_uid, r->container, dv->uuid_text);
}

/* Where the card of a container's device record `dv` (its `d`th) comes in the container's order:
 * the node's index first (GPC_CARDS_MAX apart), the ledger's position among cards without one. */
static long card_order(const struct scan *sc, const struct dev_rec *dv, unsigned d)
{
    const struct gpc_card *kc = sc->cards->known ? gpc_cards_find(sc->cards, dv->uuid_text) : NULL;
    long index = kc && kc->index >= 0 ? kc->index : GPC_LEDGER_DEVICES + GPC_CARDS_MAX;
    return index * (GPC_LEDGER_DEVICES + 1) + (long)d;
}

/*
 * Per card, the arbiter's view (cards.state, --arbiter-state): what it may lend, what is lent, the
 * requests against the card, and whether they add up past it. Only cards the exporter shows (the
 * node's, or with no list those the ledgers name), each figure at most the card's size where the
 * node's source gives it; overcommitted when the requests pass the size it wrote, or when it made a
 * container on the card best effort (its qos.state says overcommitted=1).
 */
static void write_arbiter_cards(const struct scan *sc, struct gpc_text *t, const struct card *cards, unsigned ncards)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } fam[] = {
        {"gpucap_card_lendable_bytes", "Burstable memory: what the node arbiter may lend on the card (its usable "
                                       "size less every container's request or use, the larger).",
         offsetof(struct gpc_card_line, lendable)},
        {"gpucap_card_loaned_bytes", "Burstable memory: memory lent on the card (the grants above the requests).",
         offsetof(struct gpc_card_line, loaned)},
        {"gpucap_card_requested_bytes", "Burstable memory: the requests of the card's containers added up.",
         offsetof(struct gpc_card_line, requested)},
        {"gpucap_card_overcommitted", "Burstable memory: 1 when the requests on the card add up past its size (the "
                                      "last-scheduled containers are then best effort), else 0.",
         0},
    };
    char labels[256];
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        gpc_prom_family(t, fam[f].name, "gauge", fam[f].help);
        for (int i = 0; i < sc->n_arb_cards; i++) {
            const struct gpc_card_line *l = &sc->arb_cards[i];
            unsigned c = 0;
            while (c < ncards && strcasecmp(cards[c].uuid, l->uuid) != 0)
                c++;
            if (c == ncards)
                continue; /* a card this node does not have (or no ledger names, without a list) */
            const struct gpc_card *kc = sc->cards->known ? gpc_cards_find(sc->cards, l->uuid) : NULL;
            uint64_t size = kc && kc->memory ? kc->memory : 0, v;
            if (f == 3) {
                /* The requests past the card's size, or a container on it the arbiter made best effort
                 * (its usable size is the card's less its reserve). */
                v = l->requested > l->size;
                for (unsigned d = 0; !v && d < sc->ndev; d++)
                    v = sc->dev[d].q_over && strcasecmp(sc->dev[d].uuid_text, l->uuid) == 0;
            } else {
                memcpy(&v, (const char *)l + fam[f].offset, sizeof v);
                if (size && v > size)
                    v = size;
            }
            card_labels(&cards[c], labels, sizeof labels);
            gpc_text_printf(t, "%s{%s} %llu\n", fam[f].name, labels, (unsigned long long)v);
        }
    }
}

static void write_metrics(struct scan *sc, struct gpc_text *t)
{
    gpc_prom_family(t, "gpucap_container_info", "gauge",
           "A gpucap container's ledger: identity as recorded; mode and gpucap version of its last writer.");
    for (unsigned i = 0; i < sc->nctr; i++) {
        const struct ctr_rec *r = &sc->ctr[i];
        gpc_text_printf(t, "gpucap_container_info{" CTR_LABELS ",mode=\"%s\",gpucap_version=\"%s\"} 1\n", r->ns,
                        r->pod, r->pod_uid, r->container, r->mode, r->version);
    }
    for (size_t f = 0; f < sizeof dev_families / sizeof *dev_families; f++) {
        const struct dev_family *df = &dev_families[f];
        gpc_prom_family(t, df->name, df->type, df->help);
        for (unsigned i = 0; i < sc->nctr; i++) {
            const struct ctr_rec *r = &sc->ctr[i];
            for (unsigned d = 0; d < r->ndev; d++) {
                const struct dev_rec *dv = &sc->dev[r->first + d];
                uint64_t v;
                memcpy(&v, (const char *)dv + df->offset, sizeof v);
                if ((df->finite_only && v == GPC_UNLIMITED) || (df->changed_only && !dv->changes) ||
                    (df->qos_only && !dv->qos))
                    continue;
                ctr_card_series(t, df->name, r, dv);
                gpc_text_printf(t, "%s%s%s} %llu\n", df->mode ? ",mode=\"" : "", df->mode ? r->mode : "",
                                df->mode ? "\"" : "", (unsigned long long)v);
            }
        }
    }
    gpc_prom_family(t, "gpucap_container_reclaims_total", "counter",
           "Burstable memory: loans the node arbiter took back from the container on this card past the grace "
           "period, by action: kill (its process furthest above its request), evict (its pod), deny (nothing "
           "killed, the requester waited). The arbiter's.");
    for (unsigned i = 0; i < sc->nctr; i++) {
        const struct ctr_rec *r = &sc->ctr[i];
        for (unsigned d = 0; d < r->ndev; d++) {
            const struct dev_rec *dv = &sc->dev[r->first + d];
            for (int a = 0; dv->q_arbiter && a < GPC_RECLAIM__COUNT; a++) {
                ctr_card_series(t, "gpucap_container_reclaims_total", r, dv);
                gpc_text_printf(t, ",action=\"%s\"} %llu\n", gpc_reclaim_names[a], (unsigned long long)dv->q_reclaims[a]);
            }
        }
    }
    gpc_prom_family(t, "gpucap_container_enforcement_info", "gauge",
           "Who enforces the container's budget on this card, as its ledger records it: \"driver + gpucap\" where "
           "the driver's limit is below the card's size, else \"gpucap\".");
    for (unsigned i = 0; i < sc->nctr; i++) {
        const struct ctr_rec *r = &sc->ctr[i];
        for (unsigned d = 0; d < r->ndev; d++) {
            const struct dev_rec *dv = &sc->dev[r->first + d];
            ctr_card_series(t, "gpucap_container_enforcement_info", r, dv);
            gpc_text_printf(t, ",enforced_by=\"%s\"} 1\n",
                            gpc_enforced_by(dv->driver_limit == GPC_UNLIMITED ? 0 : dv->driver_limit));
        }
    }
    gpc_prom_family(t, "gpucap_container_processes", "gauge",
           "Live processes of the container that use this card (an entry whose process is gone, as the lock on "
           "its entry says, counts nothing).");
    for (unsigned i = 0; i < sc->nctr; i++) {
        const struct ctr_rec *r = &sc->ctr[i];
        for (unsigned d = 0; d < r->ndev; d++) {
            const struct dev_rec *dv = &sc->dev[r->first + d];
            ctr_card_series(t, "gpucap_container_processes", r, dv);
            gpc_text_printf(t, "} %u\n", dv->procs);
        }
    }

    /*
     * The card's index among the container's own cards, as CUDA numbers them in the container
     * (HAMi's vdeviceid): its cards in the order of the node's index (NVML's, PCI order, which CUDA
     * follows for cards of one model), those without one after, in the ledger's order.
     */
    gpc_prom_family(t, "gpucap_container_device_info", "gauge",
           "1 per card of the container; device: the card's index among the container's own cards (in the order "
           "of the node's card index, as CUDA numbers cards of one model; HAMi's vdeviceid).");
    for (unsigned i = 0; i < sc->nctr; i++) {
        const struct ctr_rec *r = &sc->ctr[i];
        for (unsigned d = 0; d < r->ndev; d++) {
            unsigned rank = 0;
            long kd = card_order(sc, &sc->dev[r->first + d], d);
            for (unsigned e = 0; e < r->ndev; e++)
                rank += e != d && card_order(sc, &sc->dev[r->first + e], e) < kd;
            ctr_card_series(t, "gpucap_container_device_info", r, &sc->dev[r->first + d]);
            gpc_text_printf(t, ",device=\"%u\"} 1\n", rank);
        }
    }

    /*
     * Per card: budgets added up over the containers, against the card's size. With a list of the
     * node's cards, every card of the list is shown (with nothing on it too), with its size from
     * NVML where NVML gave one; without one, the cards the ledgers name.
     */
    struct card cards[MAX_CARDS];
    unsigned ncards = 0;
    const struct gpc_cards *known = sc->cards;
    for (unsigned k = 0; known->known && k < known->n && ncards < MAX_CARDS; k++) {
        const struct gpc_card *kc = &known->card[k];
        cards[ncards] = (struct card){.index = kc->index, .model = kc->model, .physical = kc->memory};
        snprintf(cards[ncards++].uuid, GPC_UUID_TEXT, "%s", kc->uuid);
    }
    for (unsigned i = 0; i < sc->ndev; i++) {
        const struct dev_rec *dv = &sc->dev[i];
        unsigned c = 0;
        while (c < ncards && strcasecmp(cards[c].uuid, dv->uuid_text) != 0)
            c++;
        if (c == ncards) {
            if (ncards == MAX_CARDS || known->known)
                continue;
            cards[ncards++] = (struct card){.index = -1, .model = ""};
            memcpy(cards[c].uuid, dv->uuid_text, sizeof dv->uuid_text);
        }
        {
            /* The ledgers' figure only where the node's own source gave none: the containers' claim. */
            const struct gpc_card *kc = known->known ? gpc_cards_find(known, dv->uuid_text) : NULL;
            if (!kc || !kc->memory) {
                cards[c].claimed = true;
                if (dv->physical > cards[c].physical)
                    cards[c].physical = dv->physical;
            }
            if (dv->limit != GPC_UNLIMITED)
                cards[c].budgets = add_sat(cards[c].budgets, dv->limit);
            cards[c].used = add_sat(cards[c].used, dv->used);
            cards[c].containers++;
        }
    }
    static const struct {
        const char *name, *help;
        size_t offset;
    } card_families[] = {
        {"gpucap_gpu_memory_bytes", "Memory of the card: from NVML where the exporter reads it (source=\"nvml\"), "
                                    "else the largest the containers' ledgers claim (source=\"ledger\").",
         offsetof(struct card, physical)},
        {"gpucap_gpu_budgets_bytes", "Sum of the budgets of the gpucap containers on the card.",
         offsetof(struct card, budgets)},
        {"gpucap_gpu_containers_used_bytes", "Sum of the device memory the gpucap containers hold on the card (not the "
                                             "card's whole use: DCGM_FI_DEV_FB_USED is).",
         offsetof(struct card, used)},
    };
    char labels[256];
    for (size_t f = 0; f < sizeof card_families / sizeof *card_families; f++) {
        gpc_prom_family(t, card_families[f].name, "gauge", card_families[f].help);
        for (unsigned c = 0; c < ncards; c++) {
            uint64_t v;
            memcpy(&v, (const char *)&cards[c] + card_families[f].offset, sizeof v);
            bool size = card_families[f].offset == offsetof(struct card, physical);
            if (size && v == 0)
                continue; /* a listed card nobody reported a size for */
            card_labels(&cards[c], labels, sizeof labels);
            gpc_text_printf(t, "%s{%s%s} %llu\n", card_families[f].name, labels,
                            !size ? "" : cards[c].claimed ? ",source=\"ledger\"" : ",source=\"nvml\"",
                            (unsigned long long)v);
        }
    }
    gpc_prom_family(t, "gpucap_gpu_containers", "gauge", "gpucap containers whose ledger has the card.");
    for (unsigned c = 0; c < ncards; c++) {
        card_labels(&cards[c], labels, sizeof labels);
        gpc_text_printf(t, "gpucap_gpu_containers{%s} %u\n", labels, cards[c].containers);
    }
    write_arbiter_cards(sc, t, cards, ncards);
}

static void write_scrape(const struct gpc_scrape *s, struct gpc_text *t)
{
    gpc_prom_family(t, "gpucap_exporter_ledgers", "gauge", "Ledgers read and shown by the last scrape.");
    gpc_text_printf(t, "gpucap_exporter_ledgers %u\n", s->ledgers);
    gpc_prom_family(t, "gpucap_exporter_ledgers_limit", "gauge",
                    "The most ledgers one scrape reads; past it the rest are skipped (reason=\"limit\").");
    gpc_text_printf(t, "gpucap_exporter_ledgers_limit %u\n", (unsigned)GPC_EXPORTER_MAX_LEDGERS);
    gpc_prom_family(t, "gpucap_exporter_ledgers_skipped", "gauge", "Ledger files the last scrape skipped, by reason.");
    for (int i = 0; i < GPC_SKIP__COUNT; i++)
        gpc_text_printf(t, "gpucap_exporter_ledgers_skipped{reason=\"%s\"} %u\n", gpc_skip_names[i], s->skipped[i]);
    gpc_prom_family(t, "gpucap_exporter_foreign_cards", "gauge",
           "Card entries of the ledgers read by the last scrape that name a card this node does not have (left out).");
    gpc_text_printf(t, "gpucap_exporter_foreign_cards %u\n", s->foreign_cards);
    gpc_prom_family(t, "gpucap_exporter_arbiter_state_lines_refused", "gauge",
           "Lines of the node arbiter's state files (qos.state, cards.state) the last scrape left out: not of the "
           "arbiter's form, or repeating a card.");
    gpc_text_printf(t, "gpucap_exporter_arbiter_state_lines_refused %u\n", s->state_refused);
}

int gpc_collect(const char *root, const char *arbiter_state, const struct gpc_cards *cards, struct gpc_text *out,
                struct gpc_scrape *s)
{
    memset(s, 0, sizeof *s);
    struct scan sc = {.s = s, .cards = cards, .now_s = (uint64_t)time(NULL), .n_arb_cards = -ENOENT};
    int rc = 0;
    if (arbiter_state) {
        int dir = open(arbiter_state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
            sc.n_arb_cards = gpc_qos_read_cards(dir, GPC_CARDS_STATE_FILE, sc.arb_cards, GPC_QOS_STATE_LINES,
                                                &s->state_refused);
            close(dir);
        }
        s->arbiter_cards = sc.n_arb_cards;
    }
    int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = root_fd >= 0 ? fdopendir(root_fd) : NULL;
    if (!d) {
        rc = -errno;
        s->root_error = errno;
        if (root_fd >= 0)
            close(root_fd);
        goto out;
    }
    sc.copy = malloc(sizeof *sc.copy);
    if (!sc.copy) {
        rc = -ENOMEM;
        s->root_error = ENOMEM;
        closedir(d);
        goto out;
    }
    struct dirent *e;
    unsigned seen = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !tool_name_ok(e->d_name))
            continue;
        if (++seen > MAX_POD_ENTRIES) {
            skip(&sc, GPC_SKIP_LIMIT);
            break;
        }
        scan_pod(&sc, dirfd(d), e->d_name);
    }
    closedir(d);
    write_metrics(&sc, out);
out:
    write_scrape(s, out);
    free(sc.copy);
    free(sc.ctr);
    free(sc.dev);
    return rc;
}
