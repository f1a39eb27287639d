/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cards.h: the GPUs this node has (cards.c), which gpucap-exporter trusts over the ledgers.
 */
#ifndef GPUCAP_EXPORTER_CARDS_H
#define GPUCAP_EXPORTER_CARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPC_CARDS_MAX 64
#define GPC_CARDS_PROC_DIR "/proc/driver/nvidia/gpus"

struct gpc_card {
    char uuid[48];   /* "GPU-...", lower case */
    int index;       /* NVML's index (the `gpu` label of DCGM), the /proc minor number, or -1 */
    char model[96];  /* "NVIDIA H100 80GB HBM3"; "" when the source does not say */
    uint64_t memory; /* bytes (NVML); 0 when the source does not say */
};

struct gpc_cards {
    bool known;      /* false: no source (`none`): every card a ledger names is shown */
    unsigned n;
    struct gpc_card card[GPC_CARDS_MAX];
    char source[16]; /* what answered: nvml, proc, list, none, "none found" */
};

/*
 * Fills `c` from `source`: "auto" (NVML, else /proc/driver/nvidia/gpus; when both fail, an empty
 * known list, so that no card is shown, with the reasons in `why`), "nvml", "proc" or
 * "proc:DIR", "list:UUID,UUID..." (the platform's list), or "none" (no check: local use and tests).
 * Returns 0, -ENOENT when the one source asked for cannot be read, -EINVAL for a malformed source
 * or UUID; `why` says why.
 */
int gpc_cards_load(const char *source, struct gpc_cards *c, char *why, size_t whylen);

/* The card with this UUID text (any case), or NULL. */
const struct gpc_card *gpc_cards_find(const struct gpc_cards *c, const char *uuid);

#endif
