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

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>

#define GPC_AGENT_PODS 2048
#define GPC_AGENT_NOTES 256

/* What the arbiter's thread asks the watch loop to post (an Event, an eviction), by pod uid. */
struct gpc_agent_note {
    char uid[64], container[64], reason[48], text[512];
    bool warning, evict;
};

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
    /* The node arbiter of burstable memory (--arbiter), in a thread of its own, and the pods' names
     * by uid (from the list and the watch) for its Events; notes under note_lock. */
    struct gpc_arbiter *arbiter;
    pthread_t arbiter_thread;
    _Atomic int arbiter_stop;
    pthread_mutex_t note_lock;
    struct gpc_agent_note notes[GPC_AGENT_NOTES];
    unsigned nnotes;
    unsigned long notes_dropped;
    struct gpc_agent_pod {
        char uid[64], ns[64], name[254];
    } pods[GPC_AGENT_PODS];
    unsigned npods;
    /* Figures, said at the end of a bounded run. */
    unsigned long lists, pages, watches, watched, applied, changes, clamped, refused, skipped, relists_gone, errors;
};

struct gpc_arbiter;
/* The arbiter `arb` (initialised) started in its own thread; its Events go through the watch loop. 0 or -errno. */
int gpc_agent_arbiter_start(struct gpc_agent *a, struct gpc_arbiter *arb);
/* Stops and joins it. */
void gpc_agent_arbiter_stop(struct gpc_agent *a);
/* The watch loop's part: the notes queued as Events (or evictions). */
void gpc_agent_arbiter_drain(struct gpc_agent *a);
/* The watch saw pod ns/name with uid `uid`. */
void gpc_agent_pod_seen(struct gpc_agent *a, const char *uid, const char *ns, const char *name);

/* Lists, applies, then watches, resuming after each end, forever (or max_rounds times). 0. */
int gpc_agent_run(struct gpc_agent *a);

#endif
