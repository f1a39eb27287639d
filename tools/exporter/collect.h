/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collect.h: what gpucap-exporter's scrape (collect.c) gives its server (main.c).
 */
#ifndef GPUCAP_EXPORTER_COLLECT_H
#define GPUCAP_EXPORTER_COLLECT_H

#include <stddef.h>
#include <stdint.h>

#include "promtext.h"

/*
 * The most ledgers one scrape reads (a node with the kubelet's largest max-pods, 110 by default and
 * a few hundred at most, runs far fewer gpucap containers). Past it the rest are skipped and counted
 * (reason "limit"), gpucap_exporter_ledgers_limit says the bound, and the exporter warns.
 */
#define GPC_EXPORTER_MAX_LEDGERS 16384

/* Why a ledger file was skipped; each is a `reason` label of gpucap_exporter_ledgers_skipped. */
enum gpc_skip {
    GPC_SKIP_SYMLINK,      /* a symbolic link where the ledger or its directory should be */
    GPC_SKIP_NOT_REGULAR,  /* a directory, FIFO, device... */
    GPC_SKIP_OPEN,         /* open(2) or fstat(2) failed for another reason */
    GPC_SKIP_READ,         /* read(2) failed */
    GPC_SKIP_TRUNCATED,    /* shorter than a ledger (or shrank while read) */
    GPC_SKIP_TOO_LARGE,    /* longer than a ledger: not read at all */
    GPC_SKIP_MAGIC,        /* not a gpucap ledger */
    GPC_SKIP_VERSION,      /* another layout version */
    GPC_SKIP_CORRUPT,      /* header sizes or device states that no gpucap writes */
    GPC_SKIP_TORN,         /* the identity block changed during every copy */
    GPC_SKIP_MISMATCH,     /* records another pod UID or container than its path */
    GPC_SKIP_NAME,         /* a container directory whose name no kubelet makes */
    GPC_SKIP_LIMIT,        /* past the exporter's bounds: GPC_EXPORTER_MAX_LEDGERS, pods, containers */
    GPC_SKIP__COUNT
};

/* Counts of one scrape. */
struct gpc_scrape {
    unsigned ledgers;                /* read and shown */
    unsigned skipped[GPC_SKIP__COUNT];
    int root_error;                  /* 0, or the errno of opening the root directory */
    unsigned foreign_cards;          /* device entries naming a card the node does not have */
    unsigned state_refused;          /* lines of the arbiter's state files left out (qos.h) */
    int arbiter_cards;               /* lines of cards.state taken, or a negative errno (-ENOENT: none) */
};

/*
 * Walks `root` (laid out like /var/lib/kubelet/pods: <pod-uid>/volumes/kubernetes.io~empty-dir/
 * gpucap-ledger/<container>/gpucap.ledger, and the node arbiter's gpucap-lib/<container>/qos.state
 * where it wrote one), with `arbiter_state` (NULL: none) the arbiter's state directory holding
 * cards.state (burstable memory, issue 35: qos.h), reads the parts of each ledger it shows with pread(2)
 * (the header and device entries, the process entries in use), validates them and appends the
 * per-container, per-card and per-scrape metric families (cards and card entries only for the cards
 * in `cards`, when it is a known list: cards.h) to `out` in the Prometheus text format (the caller
 * appends the exporter's own counters and timings). Takes no lock and writes nothing. Returns 0, or
 * a negative errno when `root` cannot be read (then *s says so and `out` holds only the scrape
 * counts).
 */
struct gpc_cards;
int gpc_collect(const char *root, const char *arbiter_state, const struct gpc_cards *cards, struct gpc_text *out,
                struct gpc_scrape *s);

/* The label value of each skip reason. */
extern const char *const gpc_skip_names[GPC_SKIP__COUNT];

#endif
