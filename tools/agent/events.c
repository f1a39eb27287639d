/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events.c: gpucap-agent's Events (events.h). A change is queued when it is applied; the queue is
 * a fixed ring, so a burst of changes or an API server that answers slowly costs a bounded memory
 * and never delays the watch: when the ring is full the Event is dropped and counted (the change
 * itself is in the file already, and said in the log). The container's use, which the message
 * tells against a lowered budget, is read from its ledger when the Event is posted, off the path
 * from a watch event to the rewritten file.
 */
#include "events.h"

#include "common/units.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void gpc_events_init(struct gpc_events *e, struct gpc_kube *kube, const char *node, const char *root)
{
    memset(e, 0, sizeof *e);
    e->kube = kube;
    e->node = node;
    e->root = root;
}

void gpc_events_push(struct gpc_events *e, const char *ns, const char *name, const char *uid, const char *container,
                     const struct gpc_agent_change *ch)
{
    if (e->len == GPC_EVENTS_QUEUE) {
        if (e->dropped++ % 100 == 0)
            fprintf(stderr, "gpucap-agent: the Event queue is full (%d): %lu Events not created so far (the changes "
                    "are applied)\n", GPC_EVENTS_QUEUE, e->dropped);
        return;
    }
    struct gpc_event *ev = &e->q[(e->head + e->len++) % GPC_EVENTS_QUEUE];
    snprintf(ev->ns, sizeof ev->ns, "%s", ns);
    snprintf(ev->name, sizeof ev->name, "%s", name);
    snprintf(ev->uid, sizeof ev->uid, "%s", uid);
    snprintf(ev->container, sizeof ev->container, "%s", container);
    ev->ch = *ch;
    ev->kind = GPC_EVENT_CHANGE;
    ev->reason[0] = ev->text[0] = '\0';
    ev->warning = false;
}

void gpc_events_push_arbiter(struct gpc_events *e, enum gpc_event_kind kind, const char *ns, const char *name,
                             const char *uid, const char *container, const char *reason, const char *text,
                             bool warning)
{
    struct gpc_agent_change none;
    memset(&none, 0, sizeof none);
    unsigned len = e->len;
    gpc_events_push(e, ns, name, uid, container, &none);
    if (e->len == len)
        return; /* dropped */
    struct gpc_event *ev = &e->q[(e->head + e->len - 1) % GPC_EVENTS_QUEUE];
    ev->kind = kind;
    snprintf(ev->reason, sizeof ev->reason, "%s", reason ? reason : "");
    snprintf(ev->text, sizeof ev->text, "%s", text ? text : "");
    ev->warning = warning;
}

static void utc_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The Event's message: from what to what, the ceiling when the record asked for more, the use. */
static void message(const struct gpc_event *ev, char *msg, size_t len)
{
    const struct gpc_agent_change *ch = &ev->ch;
    char used[32], budget[32];
    int n = snprintf(msg, len, "container %s: GPU memory budget changed from %s to %s", ev->container,
                     ch->from[0] ? ch->from : "none", ch->to);
    if (ch->max_to[0] && strcmp(ch->max_from, ch->max_to) != 0)
        n += snprintf(msg + n, len - (size_t)n, " (maximum %s, was %s)", ch->max_to,
                      ch->max_from[0] ? ch->max_from : "none");
    if (ch->clamped)
        n += snprintf(msg + n, len - (size_t)n, "; the record asked for %s, above the maximum %s fixed when the pod "
                      "was created", ch->asked, ch->ceiling);
    if (ch->above)
        snprintf(msg + n, len - (size_t)n, "; it holds %s, above the new budget %s: nothing more is admitted "
                 "until its use is below it (nothing held is taken away)", gpc_format_size(ch->in_use, used, sizeof used),
                 gpc_format_size(ch->budget, budget, sizeof budget));
}

static bool discard(struct gpc_kube_req *r, const char *buf, size_t len)
{
    (void)r, (void)buf, (void)len;
    return true;
}

static void posted(struct gpc_kube_req *r, int rc, long code, const char *err)
{
    struct gpc_events *e = r->arg;
    if (rc == 0 && code >= 200 && code <= 299) {
        e->posted++;
        return;
    }
    e->failed++;
    char why[64];
    snprintf(why, sizeof why, "HTTP %ld", code);
    bool evict = e->sending.kind == GPC_EVENT_EVICT;
    fprintf(stderr, "gpucap-agent: pod %s/%s: the %s (%s)\n", e->sending.ns, e->sending.name,
            evict ? "eviction was not done" : "event was not created",
            rc ? err : code == 403 ? (evict ? "HTTP 403: the agent's service account needs create on pods/eviction"
                                            : "HTTP 403: the agent's service account needs create on events")
               : code == 429 ? "HTTP 429: the pod's disruption budget allows no eviction now" : why);
}

/* Starts the POST of the object `j` (taken) to `path` for the pod of `ev`; 0 or -errno, a failure to
 * start said as "the `what` was not ...". */
static int send_object(struct gpc_events *e, const struct gpc_event *ev, json_t *j, const char *path,
                       const char *what)
{
    char err[512];
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return -ENOMEM;
    e->post.data = discard;
    e->post.done = posted;
    e->post.arg = e;
    int rc = gpc_kube_start(e->kube, &e->post, path, NULL, body, 30000, 0, err, sizeof err);
    free(body);
    if (rc != 0) {
        e->failed++;
        fprintf(stderr, "gpucap-agent: pod %s/%s: the %s (%s)\n", ev->ns, ev->name, what, err);
    }
    return rc;
}

/* Asks the Eviction API for the pod of `ev` (policy/v1: the pod's disruption budget is honoured);
 * 0 or -errno (said). */
static int post_eviction(struct gpc_events *e, struct gpc_event *ev)
{
    char path[400];
    json_t *j = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind", "Eviction", "metadata", "name",
                          ev->name, "namespace", ev->ns);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/eviction", ev->ns, ev->name);
    return send_object(e, ev, j, path, "eviction was not asked");
}

/* Posts `ev`; 0 or -errno (said). */
static int post(struct gpc_events *e, struct gpc_event *ev)
{
    if (ev->kind == GPC_EVENT_EVICT)
        return post_eviction(e, ev);
    char msg[768], when[32], path[400], field[128], gen[300];
    bool warn;
    const char *reason;
    if (ev->kind == GPC_EVENT_ARBITER) {
        snprintf(msg, sizeof msg, "container %s: %s", ev->container, ev->text);
        warn = ev->warning;
        reason = ev->reason;
    } else {
        gpc_agent_use(e->root, ev->uid, ev->container, ev->ch.to, &ev->ch);
        message(ev, msg, sizeof msg);
        warn = ev->ch.above || ev->ch.clamped;
        reason = ev->ch.clamped ? "GpuBudgetAboveMaximum" : ev->ch.above ? "GpuBudgetBelowUse" : "GpuBudgetChanged";
    }
    utc_now(when, sizeof when);
    snprintf(field, sizeof field, "spec.containers{%s}", ev->container);
    snprintf(gen, sizeof gen, "%s.", ev->name);
    json_t *j = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:s},"
                          " s:s, s:s, s:i, s:s, s:s}",
                          "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", ev->ns,
                          "involvedObject", "apiVersion", "v1", "kind", "Pod", "namespace", ev->ns, "name", ev->name,
                          "uid", ev->uid, "fieldPath", field, "reason", reason, "message", msg, "type",
                          warn ? "Warning" : "Normal", "source", "component", "gpucap-agent", "host", e->node,
                          "firstTimestamp", when, "lastTimestamp", when, "count", 1, "reportingComponent",
                          "gpucap.io/agent", "reportingInstance", e->node);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ev->ns);
    return send_object(e, ev, j, path, "event was not created");
}

bool gpc_events_pump(struct gpc_events *e)
{
    while (!e->post.busy && e->len) {
        e->sending = e->q[e->head];
        e->head = (e->head + 1) % GPC_EVENTS_QUEUE;
        e->len--;
        post(e, &e->sending);
    }
    return e->post.busy || e->len;
}

void gpc_events_free(struct gpc_events *e)
{
    gpc_kube_req_free(e->kube, &e->post);
}
