/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter_agent.c: the node arbiter inside gpucap-agent on Kubernetes (--arbiter). It runs in a
 * thread of its own (a loan is answered in a few milliseconds; the watch loop waits on the API server
 * for up to a second); what it has to tell the API server (an Event on the pod, an eviction) it queues
 * here, under a lock, and the watch loop posts it with its own Events. The pods' namespaces and names
 * come from the list and the watch, by uid: the arbiter knows a container by its pod's directory.
 */
#include "agent.h"
#include "arbiter.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

void gpc_agent_pod_seen(struct gpc_agent *a, const char *uid, const char *ns, const char *name)
{
    pthread_mutex_lock(&a->note_lock);
    unsigned i;
    for (i = 0; i < a->npods && strcmp(a->pods[i].uid, uid) != 0; i++)
        ;
    if (i == a->npods) {
        if (a->npods == GPC_AGENT_PODS)
            i = (unsigned)(uid[0] + uid[1]) % GPC_AGENT_PODS; /* full: one name forgotten */
        else
            a->npods++;
    }
    snprintf(a->pods[i].uid, sizeof a->pods[i].uid, "%s", uid);
    snprintf(a->pods[i].ns, sizeof a->pods[i].ns, "%s", ns);
    snprintf(a->pods[i].name, sizeof a->pods[i].name, "%s", name);
    pthread_mutex_unlock(&a->note_lock);
}

/* The arbiter's notify callback (its thread). */
static void note(void *arg, const struct gpc_arb_member *m, const char *reason, const char *message, bool warning,
                 bool evict)
{
    struct gpc_agent *a = arg;
    if (!m->pod_uid[0])
        return;
    pthread_mutex_lock(&a->note_lock);
    if (a->nnotes == GPC_AGENT_NOTES) {
        a->notes_dropped++;
    } else {
        struct gpc_agent_note *n = &a->notes[a->nnotes++];
        snprintf(n->uid, sizeof n->uid, "%s", m->pod_uid);
        snprintf(n->container, sizeof n->container, "%s", m->container);
        snprintf(n->reason, sizeof n->reason, "%s", reason);
        snprintf(n->text, sizeof n->text, "%s", message);
        n->warning = warning;
        n->evict = evict;
    }
    pthread_mutex_unlock(&a->note_lock);
}

void gpc_agent_arbiter_drain(struct gpc_agent *a)
{
    static struct gpc_agent_note batch[GPC_AGENT_NOTES];
    pthread_mutex_lock(&a->note_lock);
    unsigned n = a->nnotes;
    memcpy(batch, a->notes, n * sizeof batch[0]);
    a->nnotes = 0;
    for (unsigned k = 0; k < n; k++) {
        struct gpc_agent_note *b = &batch[k];
        unsigned i;
        for (i = 0; i < a->npods && strcmp(a->pods[i].uid, b->uid) != 0; i++)
            ;
        if (i == a->npods) {
            fprintf(stderr, "gpucap-agent: arbiter: pod %s is not known from the API yet: no Event (%s)\n", b->uid,
                    b->reason);
            continue;
        }
        if (b->evict)
            gpc_events_push_arbiter(&a->events, GPC_EVENT_EVICT, a->pods[i].ns, a->pods[i].name, b->uid, b->container,
                                    NULL, NULL, true);
        gpc_events_push_arbiter(&a->events, GPC_EVENT_ARBITER, a->pods[i].ns, a->pods[i].name, b->uid, b->container,
                                b->reason, b->text, b->warning);
    }
    pthread_mutex_unlock(&a->note_lock);
}

static bool stopped(void *arg)
{
    struct gpc_agent *a = arg;
    return atomic_load(&a->arbiter_stop) != 0;
}

static void *arbiter_main(void *arg)
{
    struct gpc_agent *a = arg;
    gpc_arb_run(a->arbiter, stopped, a);
    return NULL;
}

int gpc_agent_arbiter_start(struct gpc_agent *a, struct gpc_arbiter *arb)
{
    a->arbiter = arb;
    arb->notify = note;
    arb->notify_arg = a;
    atomic_store(&a->arbiter_stop, 0);
    int rc = pthread_create(&a->arbiter_thread, NULL, arbiter_main, a);
    if (rc != 0)
        a->arbiter = NULL;
    return -rc;
}

void gpc_agent_arbiter_stop(struct gpc_agent *a)
{
    if (!a->arbiter)
        return;
    atomic_store(&a->arbiter_stop, 1);
    pthread_join(a->arbiter_thread, NULL);
    gpc_agent_arbiter_drain(a);
}
