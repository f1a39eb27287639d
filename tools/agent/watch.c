/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c: gpucap-agent's loop, a reflector as client-go's is. It lists the pods of its node once
 * (fieldSelector spec.nodeName, metadata only, in pages of `limit`, from the API server's watch
 * cache: resourceVersion=0), applies each pod's budget record, then watches from the list's
 * resourceVersion and applies every added or modified pod's record as it comes. Bookmarks keep
 * that resourceVersion fresh. After a watch ends cleanly (the server's timeout, asked at random
 * between --watch-timeout and twice it, so that a node's watches do not end together) it watches
 * again from the last resourceVersion seen: no list. It lists again only when the server says that
 * resourceVersion is gone (410), and then after a random wait of up to --relist-spread, so that
 * the agents of a cluster do not all list at once after an API server restart. Errors, and watches
 * that end at once with nothing in them, back off exponentially with jitter (0.8 s to 30 s). A
 * 410 in the middle of a paged list (its continue token expired) makes one list of all pages in
 * one answer, read as a stream all the same (podstream.c).
 *
 * The record is read strictly (record.c) and applied within the ceiling the platform fixed when the
 * pod was created (apply.c): the files are the state, so a record the file already says (however
 * spelled) is no change, and a restarted agent or a relist makes no Events. Each change is queued
 * as an Event (events.c), posted beside the watch.
 */
#include "agent.h"
#include "podstream.h"
#include "record.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_MIN 0.8
#define BACKOFF_MAX 30.0
#define SHORT_WATCH 1.0 /* seconds: a watch that ends sooner with nothing in it is a failure */
#define MAX_PAGES 10000 /* a node runs a few hundred pods: a server that pages on forever is wrong */
#define ACCEPT_LIST "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
#define ACCEPT_WATCH "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Uniform in [0, 1): jitter differs between agents (seeded from the kernel), not only between runs. */
static double rand01(void)
{
    static uint64_t x;
    if (!x && (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x || !x))
        x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15u;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* ---- one pod ---- */

static bool dns_chars(const char *s, size_t max, bool dots)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || (dots && *s == '.')))
            return false;
    return true;
}

/* One pod's record applied to each of its containers' files. */
static void handle_pod(struct gpc_agent *a, const struct gpc_pod_meta *p)
{
    if (!p->bad && a->arbiter && (!p->node[0] || strcmp(p->node, a->node) == 0) && dns_chars(p->uid, 63, false))
        gpc_agent_pod_seen(a, p->uid, p->ns, p->name);
    if (p->bad || !p->has_record)
        return;
    if (!dns_chars(p->ns, 63, false) || !dns_chars(p->name, 253, true) || !dns_chars(p->uid, 63, false)) {
        a->skipped++;
        return;
    }
    if (p->node[0] && strcmp(p->node, a->node) != 0)
        return; /* the field selector says it is ours; the object must agree */
    struct gpc_record rec;
    char why[160];
    if (p->record_bad || gpc_record_parse(p->record, p->record_len, &rec, why, sizeof why) != 0) {
        say("pod %s/%s: annotation " GPC_RECORD_ANNOTATION " is not a budget record (%s); left as it is", p->ns,
            p->name, p->record_bad ? "not one string of at most 16 KiB" : why);
        a->refused++;
        return;
    }
    for (unsigned i = 0; i < rec.n; i++) {
        const char *c = rec.c[i].name;
        struct gpc_agent_change ch;
        char err[512];
        int rc = gpc_agent_apply(a->root, p->uid, c, rec.c[i].value, rec.max[0] ? rec.max : NULL, &ch, err,
                                 sizeof err);
        a->applied += rc >= 0;
        if (rc >= 0 && ch.clamped) {
            a->clamped++;
            say("pod %s/%s: container %s: the record asks for %s, above the maximum %s fixed when the pod was "
                "created: %s", p->ns, p->name, c, ch.asked, ch.ceiling, rc == 1 ? "that maximum applied" : "kept");
        }
        if (rc == 1) {
            a->changes++;
            say("pod %s/%s: container %s: GPU memory budget changed from %s to %s", p->ns, p->name, c,
                ch.from[0] ? ch.from : "none", ch.to);
            gpc_events_push(&a->events, p->ns, p->name, p->uid, c, &ch);
        } else if (rc == -ENOENT) {
            /* Not started on this node yet: seen again at its next event (or the next list). */
        } else if (rc < 0) {
            a->refused++;
            say("pod %s/%s: %s", p->ns, p->name, err);
        }
    }
}

/* ---- list, then watch ---- */

struct reflector {
    struct gpc_agent *a;
    struct gpc_kube_req req;
    struct gpc_podstream *ps;
    char rv[64];      /* where the next watch starts */
    char cont[4096];  /* the next page of the list under way */
    bool need_list;   /* no usable resourceVersion: list */
    bool whole;       /* a 410 came in the middle of pages: one list without limit */
    unsigned pages;   /* pages of the list under way */
    double next_at;   /* CLOCK_MONOTONIC seconds before which no request starts */
    double started;
    double backoff;   /* seconds: the next failure waits [backoff, 2 x backoff) */
    unsigned long got; /* events in this watch */
    long http;        /* the answer's status, once its headers came */
    bool gone, failed;
    double stop_at;   /* a watch that said its last word (an ERROR): ended if the server does not end it by then */
    char why[400];
    unsigned rounds;
};

static void back_off(struct reflector *r)
{
    r->next_at = now() + r->backoff * (1 + rand01());
    r->backoff = r->backoff * 2 < BACKOFF_MAX ? r->backoff * 2 : BACKOFF_MAX;
}

static bool on_bytes(struct gpc_kube_req *q, const char *buf, size_t len)
{
    struct reflector *r = q->arg;
    if (!r->http)
        r->http = gpc_kube_code(q);
    if (r->stop_at)
        return true; /* read to its end, so that the connection can be used again */
    char err[200];
    int rc = gpc_podstream_feed(r->ps, buf, len, err, sizeof err);
    if (rc == 0)
        return true;
    if (rc != -ECANCELED && !r->failed) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "the answer cannot be read: %s", err);
    }
    return false;
}

static int on_list_item(const char *type, const struct gpc_pod_meta *p, void *arg)
{
    struct reflector *r = arg;
    (void)type;
    if (r->http == 200)
        handle_pod(r->a, p);
    return 0;
}

static int on_watch_item(const char *type, const struct gpc_pod_meta *p, void *arg)
{
    struct reflector *r = arg;
    struct gpc_agent *a = r->a;
    if (r->http != 200 || !type[0] || strcmp(type, "ERROR") == 0) {
        /* A Status: the answer of a refused watch, or an ERROR event. Either ends the watch. */
        if (p->code == 410 || r->http == 410) {
            r->gone = true;
        } else {
            r->failed = true;
            snprintf(r->why, sizeof r->why, "%s: %ld %s: %s", type[0] ? "error event" : "answer", p->code, p->reason,
                     p->message);
        }
        /* The server ends the stream after it: wait a second for that (the connection is kept),
         * then end it here. */
        r->stop_at = now() + 1;
        return 0;
    }
    if (p->bad) {
        a->skipped++;
        return 0;
    }
    bool change = strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0;
    if (change || strcmp(type, "DELETED") == 0 || strcmp(type, "BOOKMARK") == 0) {
        r->got++;
        if (change) {
            a->watched++;
            handle_pod(a, p);
        }
        if (p->rv[0])
            snprintf(r->rv, sizeof r->rv, "%s", p->rv);
    }
    return 0;
}

static void list_done(struct gpc_kube_req *q, int rc, long code, const char *err);
static void watch_done(struct gpc_kube_req *q, int rc, long code, const char *err);

/* The path of the next request: a list page, or a watch. */
static int next_path(struct reflector *r, char *path, size_t len)
{
    struct gpc_agent *a = r->a;
    char *node = curl_easy_escape(NULL, a->node, 0);
    if (!node)
        return -ENOMEM;
    int n = snprintf(path, len, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", node);
    curl_free(node);
    if (r->need_list) {
        if (r->cont[0]) {
            char *c = curl_easy_escape(NULL, r->cont, 0);
            if (!c)
                return -ENOMEM;
            n += snprintf(path + n, len - (size_t)n, "&limit=%u&continue=%s", a->page_size, c);
            curl_free(c);
        } else if (r->whole) {
            n += snprintf(path + n, len - (size_t)n, "&resourceVersion=0");
        } else {
            n += snprintf(path + n, len - (size_t)n, "&limit=%u&resourceVersion=0", a->page_size);
        }
    } else {
        char *rv = curl_easy_escape(NULL, r->rv, 0);
        if (!rv)
            return -ENOMEM;
        unsigned t = a->watch_timeout + (unsigned)(rand01() * a->watch_timeout);
        n += snprintf(path + n, len - (size_t)n, "&watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%u",
                      rv, t);
        curl_free(rv);
    }
    return (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static void start_next(struct reflector *r)
{
    struct gpc_agent *a = r->a;
    char path[8192], err[512];
    int rc = next_path(r, path, sizeof path);
    bool list = r->need_list;
    if (rc == 0) {
        r->ps = gpc_podstream_new(list ? GPC_STREAM_LIST : GPC_STREAM_WATCH, list ? on_list_item : on_watch_item, r);
        rc = r->ps ? 0 : -ENOMEM;
        snprintf(err, sizeof err, "out of memory");
    }
    if (rc == 0) {
        r->http = 0;
        r->got = 0;
        r->gone = r->failed = false;
        r->stop_at = 0;
        r->why[0] = '\0';
        r->req.arg = r;
        r->req.data = on_bytes;
        r->req.done = list ? list_done : watch_done;
        r->started = now();
        /* A page has --request-timeout in all; a watch the time it asked for and a margin. Both end
         * when nothing comes for a while (a watch: the server sends bookmarks more often). */
        long total = list ? (long)a->request_timeout * 1000 : ((long)a->watch_timeout * 2 + 30) * 1000;
        long idle = list ? (a->request_timeout < 30 ? (long)a->request_timeout : 30) : 120;
        rc = gpc_kube_start(&a->kube, &r->req, path, list ? ACCEPT_LIST : ACCEPT_WATCH, NULL, total, idle, err,
                            sizeof err);
    }
    if (rc != 0) {
        say("%s: %s; again in a while", list ? "list" : "watch", err);
        gpc_podstream_free(r->ps);
        r->ps = NULL;
        a->errors++;
        r->rounds++;
        back_off(r);
    }
}

/* What a failed request says: its transport error, its parse error, or its Status. */
static void failure(struct reflector *r, int rc, long code, const char *err, const struct gpc_list_meta *m, char *out,
                    size_t len)
{
    if (rc != 0 && rc != -ECANCELED)
        snprintf(out, len, "%s", err);
    else if (r->why[0])
        snprintf(out, len, "%s", r->why);
    else if (code != 200)
        snprintf(out, len, "HTTP %ld%s%s%s", code, m && m->reason[0] ? " " : "", m ? m->reason : "",
                 code == 401 || code == 403 ? " (the agent's service account needs list and watch on pods)" : "");
    else
        snprintf(out, len, "%s", m && (m->rv_bad || m->cont_bad) ? "its resourceVersion or continue token is not usable"
                                                                   : "no resourceVersion in the answer");
}

static void list_done(struct gpc_kube_req *q, int rc, long code, const char *err)
{
    struct reflector *r = q->arg;
    struct gpc_agent *a = r->a;
    struct gpc_list_meta m = {0};
    char perr[200] = "";
    bool ok = rc == 0 && !r->failed && gpc_podstream_end(r->ps, &m, perr, sizeof perr) == 0;
    gpc_podstream_free(r->ps);
    r->ps = NULL;
    if (!ok && !r->failed && rc == 0) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "the answer cannot be read: %s", perr);
    }
    if (ok && code == 200 && !m.rv_bad && !m.cont_bad && (m.cont[0] || m.rv[0])) {
        r->pages++;
        a->pages++;
        if (m.cont[0] && r->pages < MAX_PAGES) {
            snprintf(r->cont, sizeof r->cont, "%s", m.cont);
            r->next_at = now();
            return;
        }
        if (!m.cont[0]) {
            snprintf(r->rv, sizeof r->rv, "%s", m.rv);
            r->need_list = r->whole = false;
            r->cont[0] = '\0';
            r->pages = 0;
            a->lists++;
            r->next_at = now();
            return;
        }
        snprintf(r->why, sizeof r->why, "more than %d pages", MAX_PAGES);
    }
    a->errors++;
    r->rounds++;
    long status = code != 200 ? code : m.code;
    if ((status == 410 || m.code == 410) && r->cont[0]) {
        /* The continue token expired between two pages: the whole list in one answer. */
        say("list: the continue token expired after %u pages (410); listing all pods in one answer", r->pages);
        r->whole = true;
    } else {
        char why[512];
        failure(r, rc, code, err, &m, why, sizeof why);
        say("list: %s; listing again in a while", why);
    }
    r->cont[0] = '\0';
    r->pages = 0;
    back_off(r);
}

static void watch_done(struct gpc_kube_req *q, int rc, long code, const char *err)
{
    struct reflector *r = q->arg;
    struct gpc_agent *a = r->a;
    char perr[200] = "";
    if (rc == 0 && !r->failed && !r->gone && gpc_podstream_end(r->ps, NULL, perr, sizeof perr) != 0) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "the stream ended inside an event: %s", perr);
    }
    gpc_podstream_free(r->ps);
    r->ps = NULL;
    a->watches++;
    r->rounds++;
    double lasted = now() - r->started;
    if (r->gone || code == 410) {
        double wait = rand01() * a->relist_spread;
        a->relists_gone++;
        say("watch: resourceVersion %s is gone (410); listing again in %.1f s", r->rv, wait);
        r->need_list = true;
        r->next_at = now() + wait;
        return;
    }
    if ((rc != 0 && rc != -ECANCELED) || r->failed || code != 200) {
        char why[512];
        failure(r, rc, code, err, NULL, why, sizeof why);
        a->errors++;
        back_off(r);
        say("watch: %s; watching again from %s in %.1f s", why, r->rv, r->next_at - now());
        return;
    }
    if (lasted < SHORT_WATCH && r->got == 0) {
        /* Ended at once with nothing in it: a server that does so to every watch must not get a
         * watch (let alone a list) in a tight loop. */
        back_off(r);
        return;
    }
    r->backoff = BACKOFF_MIN;
    r->next_at = now(); /* the server's timeout: watch again from where this one ended */
}

int gpc_agent_run(struct gpc_agent *a)
{
    static struct reflector r;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.need_list = true;
    r.backoff = BACKOFF_MIN;
    r.next_at = now();
    gpc_events_init(&a->events, &a->kube, a->node, a->root);
    while (!a->max_rounds || r.rounds < a->max_rounds) {
        double t = now();
        if (!r.req.busy && t >= r.next_at)
            start_next(&r);
        else if (r.req.busy && r.stop_at && t > r.stop_at)
            gpc_kube_abort(&a->kube, &r.req);
        if (a->arbiter)
            gpc_agent_arbiter_drain(a);
        gpc_events_pump(&a->events);
        double wait = r.req.busy ? 1.0 : r.next_at - now();
        if (gpc_kube_run(&a->kube, wait <= 0 ? 0 : wait > 1.0 ? 1000 : (int)(wait * 1000) + 1) != 0) {
            say("libcurl failed; stopping");
            break;
        }
    }
    /* A bounded run (tests) ends with its Events posted, for up to 10 s. */
    for (double end = now() + 10; gpc_events_pump(&a->events) && now() < end;)
        gpc_kube_run(&a->kube, 100);
    gpc_kube_req_free(&a->kube, &r.req);
    gpc_podstream_free(r.ps);
    gpc_events_free(&a->events);
    return 0;
}
