/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h: what gpucap-agent's files share (main.c options, watch.c loop, apply.c files, record.c
 * records, podstream.c answers, events.c Events, kube.c API).
 */
#ifndef GPUCAP_AGENT_H
#define GPUCAP_AGENT_H

#include "apply.h"
#include "events.h"
#include "kube.h"
#include "common/units.h"

#include <stdarg.h>

struct gpc_agent {
    char node[254];            /* this node's name (spec.nodeName of its pods) */
    char root[1024];           /* the kubelet's pod directory */
    struct gpc_kube kube;
    struct gpc_events events;
    unsigned watch_timeout;    /* seconds: each watch asks for timeoutSeconds in [this, 2 x this) */
    unsigned relist_spread;    /* seconds: a relist after a 410 waits a random time in [0, this) */
    unsigned request_timeout;  /* seconds a LIST page may take */
    unsigned page_size;        /* limit= of a LIST page */
    unsigned max_rounds;       /* tests: watches ended (and lists failed) before returning; 0: forever */
    /* Figures, said at the end of a bounded run. */
    unsigned long lists, pages, watches, watched, applied, changes, clamped, refused, skipped, relists_gone, errors;
};

/* Lists, applies, then watches, resuming after each end, forever (or max_rounds times). 0. */
int gpc_agent_run(struct gpc_agent *a);

#endif
