/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qos.h: the node arbiter's state files (burstable GPU memory, issue 35) as gpucap-exporter reads
 * them (qos.c): qos.state beside each container's platform settings file, cards.state in the
 * agent's state directory (--arbiter-state).
 */
#ifndef GPUCAP_EXPORTER_QOS_H
#define GPUCAP_EXPORTER_QOS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/units.h"

/* The most bytes of one state file read; a larger one is refused whole. */
#define GPC_QOS_STATE_MAX 16384
/* The most lines taken from one state file (a container's cards, a node's cards). */
#define GPC_QOS_STATE_LINES 64
#define GPC_QOS_STATE_FILE "qos.state"
#define GPC_CARDS_STATE_FILE "cards.state"

/* Reclaim actions, the `action` label of gpucap_container_reclaims_total. */
enum gpc_reclaim_action { GPC_RECLAIM_KILL, GPC_RECLAIM_EVICT, GPC_RECLAIM_DENY, GPC_RECLAIM__COUNT };
extern const char *const gpc_reclaim_names[GPC_RECLAIM__COUNT];

/* One line of a container's qos.state: its figures on one card, as the arbiter last wrote them. */
struct gpc_qos_line {
    char uuid[GPC_UUID_TEXT]; /* "GPU-...", lower case */
    uint64_t request, limit, grant, used;
    uint64_t reclaims[GPC_RECLAIM__COUNT];
    bool overcommitted; /* its request is not honoured: requests on the card add up past it */
};

/* One line of cards.state: a card of the node as the arbiter sees it. */
struct gpc_card_line {
    char uuid[GPC_UUID_TEXT];
    uint64_t size, lendable, loaned, requested;
};

/*
 * Reads `name` in directory fd `dir` (no link followed, no FIFO opened blocking, a regular file of
 * at most GPC_QOS_STATE_MAX bytes) into `lines` (at most `max`): one line per card, "UUID key=N
 * ...". A line whose UUID is not a card UUID, that repeats a card, lacks a figure of its kind or
 * has one that is not a decimal number of 64 bits is left out and counted in *refused; unknown keys
 * are passed over (a newer arbiter). Returns the number of lines taken, or a negative errno
 * (-ENOENT: no file; -EINVAL: not a regular file, too large, or holding a NUL).
 */
int gpc_qos_read_member(int dir, const char *name, struct gpc_qos_line *lines, unsigned max, unsigned *refused);
int gpc_qos_read_cards(int dir, const char *name, struct gpc_card_line *lines, unsigned max, unsigned *refused);

#endif
