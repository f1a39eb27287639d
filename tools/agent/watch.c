/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c: gpucap-agent's loop. It lists the pods of its node (fieldSelector spec.nodeName), applies
 * each pod's budget record, then watches from the list's resourceVersion and applies every added
 * or modified pod's record as it comes. Any end of a watch (the server's timeout, a dropped
 * connection, an error) is followed by a fresh list: whatever was missed meanwhile is seen then
 * (a resync on every reconnect); a 410 Gone (the resourceVersion is too old) forces the same. A
 * change is one Event on the pod: from what to what, and whether the container holds more than a
 * lowered budget.
 *
 * The record is the webhook's (pod annotation gpucap.io/budgets, one JSON object: {"max":SIZE,
 * "containers":{NAME:SIZE,...}}); the webhook puts back any value a tenant writes there, and the
 * locked settings file's maximum bounds it in the library anyway. The agent applies exactly it and
 * decides nothing: no policy is re-implemented here. The files are the state: a record the file
 * already says (however spelled) is no change, so a restarted agent or a resync makes no Events.
 */
#include "agent.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORD "gpucap.io/budgets"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpucap-agent: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void utc_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The Event of one change on pod ns/name (uid), container c. */
static void post_event(struct gpc_agent *a, const char *ns, const char *name, const char *uid, const char *c,
                       const struct gpc_agent_change *ch)
{
    char msg[512], when[32], used[32], budget[32], path[400], field[128], gen[300];
    int n = snprintf(msg, sizeof msg, "container %s: GPU memory budget changed from %s to %s", c,
                     ch->from[0] ? ch->from : "none", ch->to);
    if (ch->max_to[0] && strcmp(ch->max_from, ch->max_to) != 0)
        n += snprintf(msg + n, sizeof msg - (size_t)n, " (maximum %s, was %s)", ch->max_to,
                      ch->max_from[0] ? ch->max_from : "none");
    if (ch->above)
        snprintf(msg + n, sizeof msg - (size_t)n, "; it holds %s, above the new budget %s: nothing more is admitted "
                 "until its use is below it (nothing held is taken away)", gpc_format_size(ch->in_use, used, sizeof used),
                 gpc_format_size(ch->budget, budget, sizeof budget));
    utc_now(when, sizeof when);
    snprintf(field, sizeof field, "spec.containers{%s}", c);
    snprintf(gen, sizeof gen, "%s.", name);
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:s},"
                           " s:s, s:s, s:i, s:s, s:s}",
                           "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", ns,
                           "involvedObject", "apiVersion", "v1", "kind", "Pod", "namespace", ns, "name", name, "uid",
                           uid, "fieldPath", field, "reason", ch->above ? "GpuBudgetBelowUse" : "GpuBudgetChanged",
                           "message", msg, "type", ch->above ? "Warning" : "Normal", "source", "component",
                           "gpucap-agent", "host", a->node, "firstTimestamp", when, "lastTimestamp", when, "count", 1,
                           "reportingComponent", "gpucap.io/agent", "reportingInstance", a->node);
    char *body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!body)
        return;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns);
    long code = 0;
    char err[512] = "";
    int rc = gpc_kube_post(&a->kube, path, body, &code, err, sizeof err);
    free(body);
    if (rc != 0 || code < 200 || code > 299)
        say("pod %s/%s: the event was not created (%s)", ns, name, rc ? err : code == 403 ? "HTTP 403: the agent's "
            "service account needs create on events" : "HTTP error");
    else
        a->events++;
    say("pod %s/%s: %s", ns, name, msg);
}

/* One pod object: its record applied to each of its containers' files. */
static void handle_pod(struct gpc_agent *a, json_t *pod)
{
    json_t *meta = json_object_get(pod, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    const char *rec = json_string_value(json_object_get(json_object_get(meta, "annotations"), RECORD));
    if (!ns || !name || !uid || !rec)
        return;
    if (node && strcmp(node, a->node) != 0)
        return; /* the field selector says it is ours; the object must agree */
    json_t *r = json_loads(rec, 0, NULL);
    json_t *ctrs = json_object_get(r, "containers");
    json_t *max = json_object_get(r, "max");
    if (!json_is_object(ctrs) || (max && !json_is_string(max))) {
        say("pod %s/%s: annotation " RECORD " is not a budget record; left as it is", ns, name);
        json_decref(r);
        return;
    }
    const char *c;
    json_t *v;
    json_object_foreach(ctrs, c, v) {
        const char *value = json_string_value(v);
        struct gpc_agent_change ch;
        char err[512];
        int rc = value ? gpc_agent_apply(a->root, uid, c, value, json_string_value(max), &ch, err, sizeof err) : -EINVAL;
        a->applied += rc >= 0;
        if (rc == 1) {
            a->changes++;
            post_event(a, ns, name, uid, c, &ch);
        } else if (rc == -ENOENT) {
            /* Not started on this node yet: seen again at its next event or the next list. */
        } else if (rc < 0) {
            say("pod %s/%s: %s", ns, name, value ? err : "a budget in " RECORD " is not a string");
        }
    }
    json_decref(r);
}

/* ---- list, then watch ---- */

struct watch_state {
    struct gpc_agent *a;
    char rv[64];
    bool gone; /* a 410: list again */
};

static void remember_rv(struct watch_state *w, json_t *obj)
{
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv && strlen(rv) < sizeof w->rv)
        snprintf(w->rv, sizeof w->rv, "%s", rv);
}

static int on_event(const char *text, void *arg)
{
    struct watch_state *w = arg;
    json_t *e = json_loads(text, 0, NULL);
    const char *type = json_string_value(json_object_get(e, "type"));
    json_t *obj = json_object_get(e, "object");
    int stop = 0;
    if (!type) {
        /* Not an event: an error answer (a Status object) read whole. */
        long code = json_integer_value(json_object_get(e, "code"));
        w->gone = code == 410;
        stop = 1;
    } else if (strcmp(type, "ERROR") == 0) {
        w->gone = json_integer_value(json_object_get(obj, "code")) == 410;
        if (!w->gone)
            say("watch: error event: %s", json_string_value(json_object_get(obj, "message")) ?: "?");
        stop = 1;
    } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
        remember_rv(w, obj);
        w->a->watched++;
        handle_pod(w->a, obj);
    } else {
        remember_rv(w, obj); /* DELETED, BOOKMARK */
    }
    json_decref(e);
    return stop;
}

/* The node's pods, each applied; the list's resourceVersion in w->rv. 0 or -errno. */
static int list(struct gpc_agent *a, struct watch_state *w)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", a->node);
    char *body = NULL;
    long code = 0;
    int rc = gpc_kube_get(&a->kube, path, &body, &code, err, sizeof err);
    if (rc != 0) {
        say("list: %s", err);
        return rc;
    }
    json_t *l = json_loads(body, 0, NULL);
    free(body);
    json_t *items = json_object_get(l, "items");
    if (code != 200 || !json_is_array(items)) {
        say("list: HTTP %ld%s", code, code == 403 ? " (the agent's service account needs list and watch on pods)" : "");
        json_decref(l);
        return -EIO;
    }
    remember_rv(w, l);
    size_t i;
    json_t *pod;
    json_array_foreach(items, i, pod)
        handle_pod(a, pod);
    a->lists++;
    json_decref(l);
    return 0;
}

int gpc_agent_run(struct gpc_agent *a)
{
    unsigned backoff = 1;
    for (unsigned round = 0; !a->max_rounds || round < a->max_rounds; round++) {
        struct watch_state w = {.a = a};
        if (list(a, &w) != 0) {
            sleep(backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
            continue;
        }
        char path[600], err[512];
        snprintf(path, sizeof path,
                 "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                 "&timeoutSeconds=%u", a->node, w.rv, a->watch_timeout);
        long code = 0;
        int rc = gpc_kube_watch(&a->kube, path, on_event, &w, &code, err, sizeof err);
        if (w.gone || code == 410) {
            a->relists_gone++;
            say("watch: resourceVersion %s is gone (410); listing again", w.rv);
            backoff = 1;
        } else if (rc != 0 || code != 200) {
            say("watch: %s; listing again in %u s", rc ? err : "HTTP error", backoff);
            sleep(backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
        } else {
            backoff = 1; /* the server ended it: list again at once */
        }
    }
    return 0;
}
