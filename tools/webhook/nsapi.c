/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nsapi.c: the per-namespace budget policy from annotations on the Namespace objects, read from the
 * Kubernetes API: GET /api/v1/namespaces/NAME with the service account's token, the TLS peer
 * checked against the cluster's CA (libcurl with GnuTLS). Tenants usually cannot edit their
 * Namespace; the platform sets
 *
 *   gpucap.io/max-memory: "50%"       no container of the namespace gets more
 *   gpucap.io/default-memory: "25%"   budget of containers that ask for none
 *   gpucap.io/trusted: "true"         tenant GPUCAP_* variables and mounts over gpucap's paths allowed
 *   gpucap.io/allow-opt-out: "true"   a pod's gpucap.io/inject: "false" is honoured (annotation or label)
 *   gpucap.io/driver-limits: "auto"   on, off, auto: the NVIDIA driver's own limits too
 *   gpucap.io/qos: "burstable"        burstable, guaranteed: containers without a request best effort
 *
 * A fetched policy is kept for a TTL. When the API cannot be reached, an expired entry is used
 * (said in the log); with none, the lookup fails and the pod is denied: never an unbounded cap.
 * The lock is not held during a fetch, so one slow answer does not stall the other workers.
 */
#include "admission.h"
#include "kubeapi.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ANN_MAX "gpucap.io/max-memory"
#define ANN_DEFAULT "gpucap.io/default-memory"
#define ANN_TRUSTED "gpucap.io/trusted"
#define ANN_OPT_OUT "gpucap.io/allow-opt-out"
#define ANN_DRIVER "gpucap.io/driver-limits"
#define ANN_QOS "gpucap.io/qos"
#define CACHE_SIZE 1024
#define MAX_ANSWER (1u << 20) /* a Namespace object is a few kB */

struct cached {
    char ns[64];
    struct gpc_ns_policy policy;
    time_t fetched; /* CLOCK_MONOTONIC seconds; 0: free slot */
};

struct gpc_nsapi {
    char url[512];
    char token_file[4096];
    char ca_file[4096];
    unsigned ttl;
    long timeout_ms;
    pthread_mutex_t lock;
    struct cached cache[CACHE_SIZE];
    unsigned long fetches;
};

struct answer {
    char *buf;
    size_t len;
};

static time_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1; /* never 0, the free-slot mark */
}

static size_t on_data(char *data, size_t size, size_t n, void *user)
{
    struct answer *a = user;
    size_t add = size * n;
    if (a->len + add > MAX_ANSWER)
        return 0; /* curl fails the transfer */
    char *more = realloc(a->buf, a->len + add + 1);
    if (!more)
        return 0;
    memcpy(more + a->len, data, add);
    a->buf = more;
    a->len += add;
    a->buf[a->len] = '\0';
    return add;
}

/* The policy in a Namespace object's annotations; 0 or -EINVAL with err set. */
/* Whether `v` is absent (NULL) or one of `words` (NULL-terminated). */
static bool one_of(const char *v, const char *const *words)
{
    for (; v && *words; words++)
        if (strcmp(v, *words) == 0)
            return true;
    return !v;
}

static int parse_namespace(const char *body, size_t len, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    /* JSON_ALLOW_NUL: a NUL in a value not read here (the API server stores U+0000) must not make
     * the Namespace unreadable; the values read are refused when they hold one (below). */
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    json_t *ann = json_object_get(json_object_get(root, "metadata"), "annotations");
    int rc = 0;
    if (!json_is_object(json_object_get(root, "metadata"))) {
        snprintf(err, errlen, "the API answered with something that is not a Namespace");
        rc = -EINVAL;
        goto out;
    }
    const char *max = json_string_value(json_object_get(ann, ANN_MAX));
    const char *def = json_string_value(json_object_get(ann, ANN_DEFAULT));
    const char *trusted = json_string_value(json_object_get(ann, ANN_TRUSTED));
    const char *driver = json_string_value(json_object_get(ann, ANN_DRIVER));
    const char *qos = json_string_value(json_object_get(ann, ANN_QOS));
    const char *opt_out = json_string_value(json_object_get(ann, ANN_OPT_OUT));
    if (!opt_out) /* a label too: the Namespace's labels are the platform's as much as its annotations */
        opt_out = json_string_value(json_object_get(json_object_get(json_object_get(root, "metadata"), "labels"),
                                                    ANN_OPT_OUT));
    json_t *used[] = {json_object_get(ann, ANN_MAX), json_object_get(ann, ANN_DEFAULT), json_object_get(ann, ANN_TRUSTED),
                      json_object_get(ann, ANN_DRIVER), json_object_get(ann, ANN_OPT_OUT), json_object_get(ann, ANN_QOS),
                      json_object_get(json_object_get(json_object_get(root, "metadata"), "labels"), ANN_OPT_OUT)};
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        if (json_is_string(used[i]) && json_string_length(used[i]) != strlen(json_string_value(used[i]))) {
            snprintf(err, errlen, "a gpucap.io annotation of the Namespace holds a NUL");
            rc = -EINVAL;
            goto out;
        }
    }
    if ((max && strlen(max) >= sizeof out->max_memory) || (def && strlen(def) >= sizeof out->default_memory)) {
        snprintf(err, errlen, "annotation " ANN_MAX " or " ANN_DEFAULT " is too long");
        rc = -EINVAL;
        goto out;
    }
    static const char *const bools[] = {"true", "false", NULL}, *const drivers[] = {"on", "off", "auto", NULL},
                             *const qoses[] = {"burstable", "guaranteed", NULL};
    const char *bad = !one_of(trusted, bools)   ? "annotation " ANN_TRUSTED " is not \"true\" or \"false\""
                      : !one_of(opt_out, bools) ? ANN_OPT_OUT " is not \"true\" or \"false\""
                      : !one_of(driver, drivers) ? "annotation " ANN_DRIVER " is not \"on\", \"off\" or \"auto\""
                      : !one_of(qos, qoses)      ? "annotation " ANN_QOS " is not \"burstable\" or \"guaranteed\""
                                                 : NULL;
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        rc = -EINVAL;
        goto out;
    }
    snprintf(out->qos, sizeof out->qos, "%s", qos ? qos : "");
    snprintf(out->driver_limits, sizeof out->driver_limits, "%s", driver ? driver : "");
    out->allow_opt_out = opt_out && strcmp(opt_out, "true") == 0;
    snprintf(out->max_memory, sizeof out->max_memory, "%s", max ? max : "");
    snprintf(out->default_memory, sizeof out->default_memory, "%s", def ? def : "");
    out->trusted = trusted && strcmp(trusted, "true") == 0;
out:
    json_decref(root);
    return rc;
}

/* One GET of the Namespace; 0 with *out, or a negative errno with err set. */
static int fetch(struct gpc_nsapi *p, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    char url[700], cerr[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "%s/api/v1/namespaces/%s", p->url, ns);
    struct answer a = {NULL, 0};
    struct tool_kube_request r = {url, p->token_file, p->ca_file, false, false, p->timeout_ms, on_data, &a, cerr, NULL};
    CURL *c;
    struct curl_slist *hdr;
    int rc = tool_kube_open(&r, &c, &hdr, err, errlen);
    if (rc != 0)
        return rc;
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, p->timeout_ms);
    CURLcode res = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (res != CURLE_OK) {
        snprintf(err, errlen, "GET %s: %s", url, cerr[0] ? cerr : curl_easy_strerror(res));
        rc = -EIO;
    } else if (code != 200) {
        snprintf(err, errlen, "GET %s: HTTP %ld%s", url, code,
                 code == 401 || code == 403 ? " (the webhook's service account needs get on namespaces)" : "");
        /* 429 and 5xx pass (the caller answers "retry"); a refusal or a missing Namespace does not. */
        rc = code == 404 ? -ENOENT : code == 429 || code >= 500 ? -EAGAIN : -EACCES;
    } else {
        rc = parse_namespace(a.buf ? a.buf : "", a.len, out, err, errlen);
    }
    free(a.buf);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return rc;
}

int gpc_nsapi_open(const struct gpc_nsapi_options *o, struct gpc_nsapi **out, char *err, size_t errlen)
{
    struct gpc_nsapi *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    char why[200];
    if (tool_kube_api_url(o->url, p->url, sizeof p->url, why, sizeof why) != 0) {
        snprintf(err, errlen, "namespace annotations: %s", why);
        free(p);
        return -EINVAL;
    }
    snprintf(p->token_file, sizeof p->token_file, "%s", o->token_file);
    snprintf(p->ca_file, sizeof p->ca_file, "%s", o->ca_file);
    p->ttl = o->ttl;
    p->timeout_ms = o->timeout_ms ? (long)o->timeout_ms : 3000L;
    /* Once, before any worker thread: curl_global_init is not thread-safe. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl cannot be initialised");
        free(p);
        return -EIO;
    }
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return 0;
}

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-'))
            return false;
    return true;
}

/* The cache slot of `ns`, or NULL; call with the lock held. */
static struct cached *slot_of(struct gpc_nsapi *p, const char *ns)
{
    for (size_t i = 0; i < CACHE_SIZE; i++)
        if (p->cache[i].fetched && strcmp(p->cache[i].ns, ns) == 0)
            return &p->cache[i];
    return NULL;
}

int gpc_nsapi_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    struct gpc_nsapi *p = ctx;
    memset(out, 0, sizeof *out);
    if (!dns_label(ns)) {
        snprintf(err, errlen, "namespace name is not a DNS label");
        return -EINVAL;
    }
    time_t t = now();
    bool fresh = false, stale = false;
    pthread_mutex_lock(&p->lock);
    struct cached *c = slot_of(p, ns);
    if (c) {
        *out = c->policy;
        stale = true;
        fresh = (unsigned long)(t - c->fetched) < p->ttl;
    }
    pthread_mutex_unlock(&p->lock);
    if (fresh)
        return 0;

    struct gpc_ns_policy got = {0};
    int rc = fetch(p, ns, &got, err, errlen);
    pthread_mutex_lock(&p->lock);
    p->fetches++;
    if (rc == 0) {
        c = slot_of(p, ns);
        for (size_t i = 0; !c && i < CACHE_SIZE; i++)
            if (!p->cache[i].fetched)
                c = &p->cache[i];
        if (!c) {
            /* Full: more namespaces than slots; start over rather than grow without bound. */
            memset(p->cache, 0, sizeof p->cache);
            c = &p->cache[0];
        }
        snprintf(c->ns, sizeof c->ns, "%s", ns);
        c->policy = got;
        c->fetched = t;
        *out = got;
    }
    pthread_mutex_unlock(&p->lock);
    if (rc != 0 && stale && rc != -EINVAL) {
        /* The API is unreachable: the last known policy is still the platform's. */
        fprintf(stderr, "gpucap-webhook: namespace %s: %s; using the policy fetched before\n", ns, err);
        return 0;
    }
    return rc;
}

unsigned long gpc_nsapi_fetches(struct gpc_nsapi *p)
{
    pthread_mutex_lock(&p->lock);
    unsigned long n = p->fetches;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void gpc_nsapi_close(struct gpc_nsapi *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
    curl_global_cleanup();
}

int gpc_ns_chain_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    const struct gpc_ns_chain *ch = ctx;
    struct gpc_ns_policy file = {0};
    int rc = ch->annotations(ch->annotations_ctx, ns, out, err, errlen);
    if (rc == 0)
        rc = ch->file(ch->file_ctx, ns, &file, err, errlen);
    if (rc != 0)
        return rc;
    /* The file in gpucap-system wins where it says something; trust from either platform source. */
    if (file.max_memory[0])
        memcpy(out->max_memory, file.max_memory, sizeof out->max_memory);
    if (file.default_memory[0])
        memcpy(out->default_memory, file.default_memory, sizeof out->default_memory);
    if (file.driver_limits[0])
        memcpy(out->driver_limits, file.driver_limits, sizeof out->driver_limits);
    if (file.qos[0])
        memcpy(out->qos, file.qos, sizeof out->qos);
    out->trusted |= file.trusted;
    out->allow_opt_out |= file.allow_opt_out;
    return 0;
}
