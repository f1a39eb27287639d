/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events.h: the Events gpucap-agent creates on pods, one per change applied, from a bounded queue:
 * queued by the loop that applies the changes, posted beside it (one POST in flight at a time) so
 * that a slow or failing API server never holds back the next change.
 */
#ifndef GPUCAP_AGENT_EVENTS_H
#define GPUCAP_AGENT_EVENTS_H

#include "apply.h"
#include "kube.h"

#define GPC_EVENTS_QUEUE 512

enum gpc_event_kind {
    GPC_EVENT_CHANGE,   /* a budget record applied: ch */
    GPC_EVENT_ARBITER,  /* the arbiter's (burstable memory): reason, text, warning */
    GPC_EVENT_EVICT,    /* not an Event: the Eviction API asked for the pod (reclaim = evict) */
};

struct gpc_event {
    char ns[64], name[254], uid[64], container[64];
    enum gpc_event_kind kind;
    struct gpc_agent_change ch;
    char reason[48], text[512];
    bool warning;
};

struct gpc_events {
    struct gpc_kube *kube;
    const char *node, *root;
    struct gpc_event q[GPC_EVENTS_QUEUE];
    unsigned head, len;
    struct gpc_kube_req post;
    struct gpc_event sending;
    unsigned long posted, failed, dropped;
};

/* Ready to queue Events for the API of `kube`, from node `node`, pods under `root`. */
void gpc_events_init(struct gpc_events *e, struct gpc_kube *kube, const char *node, const char *root);

/*
 * Queues the Event of change `ch` of container `container` of pod ns/name (uid) and says the change
 * in the log. When the queue is full the Event is dropped (counted, and said every 100th time):
 * the change itself is applied already.
 */
void gpc_events_push(struct gpc_events *e, const char *ns, const char *name, const char *uid, const char *container,
                     const struct gpc_agent_change *ch);

/* Queues an Event of the arbiter (GPC_EVENT_ARBITER: reason, text, warning), or an eviction of
 * the pod (GPC_EVENT_EVICT), as gpc_events_push does. */
void gpc_events_push_arbiter(struct gpc_events *e, enum gpc_event_kind kind, const char *ns, const char *name,
                             const char *uid, const char *container, const char *reason, const char *text,
                             bool warning);

/* Starts posting the next queued Event when none is in flight. True when one is queued or in flight. */
bool gpc_events_pump(struct gpc_events *e);

void gpc_events_free(struct gpc_events *e);

#endif
