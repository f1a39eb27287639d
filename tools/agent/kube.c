/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube.c: gpucap-agent's Kubernetes API client (kube.h). One libcurl multi handle drives every
 * request from the agent's one thread; each gpc_kube_req keeps its easy handle from one request to
 * the next (curl_easy_reset keeps the live connection and the TLS session), and the multi handle's
 * connection cache lends a finished request's connection to the next. So a TLS handshake, and a
 * read of the CA file, happen once per connection, not per request: over HTTP/2 (ALPN h2, what
 * API servers speak) every request is a stream of one connection; over HTTP/1.1 a request in
 * flight beside the watch takes a second one, kept too. At most two connections are ever open.
 * Set-up of each request (token, headers, CA: --ca-file alone) is tools/common/kubeapi.c's.
 */
#include "kube.h"
#include "kubeapi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpc_kube_init(struct gpc_kube *k, const char *url, char *err, size_t errlen)
{
    int rc = tool_kube_api_url(url, k->url, sizeof k->url, err, errlen);
    if (rc != 0)
        return rc;
    if (strncmp(k->url, "https://", 8) != 0 && !(k->plain_http && strncmp(k->url, "http://", 7) == 0)) {
        snprintf(err, errlen, "the API address %s is not https://", k->url);
        return -EINVAL;
    }
    if (!k->timeout_ms)
        k->timeout_ms = 10000;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(k->multi = curl_multi_init())) {
        snprintf(err, errlen, "libcurl cannot be initialised");
        return -EIO;
    }
    curl_multi_setopt(k->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(k->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 2L);
    curl_multi_setopt(k->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 2L);
    curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, 2L);
    return 0;
}

void gpc_kube_close(struct gpc_kube *k)
{
    if (k->multi)
        curl_multi_cleanup(k->multi);
    k->multi = NULL;
    curl_global_cleanup();
}

static size_t on_data(char *buf, size_t size, size_t n, void *user)
{
    struct gpc_kube_req *r = user;
    size_t len = size * n;
    if (r->stopped)
        return 0;
    if (!r->data(r, buf, len)) {
        r->stopped = true;
        return 0; /* curl ends the transfer (CURLE_WRITE_ERROR) */
    }
    return len;
}

int gpc_kube_start(struct gpc_kube *k, struct gpc_kube_req *r, const char *path, const char *accept,
                   const char *body, long timeout_ms, long idle_s, char *err, size_t errlen)
{
    if (r->busy) {
        snprintf(err, errlen, "a request is still running");
        return -EBUSY;
    }
    if (!r->c && !(r->c = curl_easy_init())) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    curl_easy_reset(r->c);
    curl_slist_free_all(r->headers);
    r->headers = NULL;
    char url[8192];
    if ((size_t)snprintf(url, sizeof url, "%s%s", k->url, path) >= sizeof url) {
        snprintf(err, errlen, "request path too long");
        return -ENAMETOOLONG;
    }
    r->errbuf[0] = '\0';
    struct tool_kube_request q = {url,      k->token_file, k->ca_file, k->plain_http, body != NULL, k->timeout_ms,
                                  on_data,  r,             r->errbuf,  accept};
    int rc = tool_kube_setup(r->c, &q, &r->headers, err, errlen);
    if (rc != 0)
        return rc;
    curl_easy_setopt(r->c, CURLOPT_PRIVATE, r);
    if (body)
        curl_easy_setopt(r->c, CURLOPT_COPYPOSTFIELDS, body);
    if (timeout_ms > 0)
        curl_easy_setopt(r->c, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (idle_s > 0) {
        curl_easy_setopt(r->c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(r->c, CURLOPT_LOW_SPEED_TIME, idle_s);
    }
    /* Over HTTP/2, wait to share the connection being set up rather than open a second one. */
    curl_easy_setopt(r->c, CURLOPT_PIPEWAIT, 1L);
    /* A dead peer of a quiet watch is noticed by TCP keep-alives too. */
    curl_easy_setopt(r->c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(r->c, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(r->c, CURLOPT_TCP_KEEPINTVL, 10L);
    r->stopped = false;
    if (curl_multi_add_handle(k->multi, r->c) != CURLM_OK) {
        snprintf(err, errlen, "libcurl refused the request");
        return -EIO;
    }
    r->busy = true;
    return 0;
}

long gpc_kube_code(struct gpc_kube_req *r)
{
    long code = 0;
    if (r->c)
        curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

/* The finished transfers: each request's done called once its handle is out of the multi handle
 * (so done may start the next request on it). Returns how many. */
static int reap(struct gpc_kube *k)
{
    int n = 0, left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(k->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct gpc_kube_req *r = NULL;
        CURL *c = m->easy_handle;
        CURLcode res = m->data.result;
        curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&r);
        long code = 0, connects = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        k->connects += (unsigned long)connects;
        curl_multi_remove_handle(k->multi, c);
        if (!r)
            continue;
        r->busy = false;
        char err[CURL_ERROR_SIZE + 64];
        int rc = 0;
        err[0] = '\0';
        if (res != CURLE_OK) {
            rc = r->stopped ? -ECANCELED : res == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
            snprintf(err, sizeof err, "%s", r->errbuf[0] ? r->errbuf : curl_easy_strerror(res));
        }
        r->done(r, rc, code, err);
        n++;
    }
    return n;
}

int gpc_kube_run(struct gpc_kube *k, int wait_ms)
{
    int running = 0;
    if (curl_multi_perform(k->multi, &running) != CURLM_OK)
        return -EIO;
    if (reap(k) > 0)
        return 0;
    if (wait_ms > 0 && curl_multi_poll(k->multi, NULL, 0, wait_ms, NULL) != CURLM_OK)
        return -EIO;
    if (curl_multi_perform(k->multi, &running) != CURLM_OK)
        return -EIO;
    reap(k);
    return 0;
}

void gpc_kube_abort(struct gpc_kube *k, struct gpc_kube_req *r)
{
    if (!r->busy)
        return;
    long code = 0;
    curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(k->multi, r->c);
    r->busy = false;
    r->done(r, -ECANCELED, code, "ended by the agent");
}

void gpc_kube_req_free(struct gpc_kube *k, struct gpc_kube_req *r)
{
    if (r->busy)
        curl_multi_remove_handle(k->multi, r->c);
    r->busy = false;
    if (r->c)
        curl_easy_cleanup(r->c);
    r->c = NULL;
    curl_slist_free_all(r->headers);
    r->headers = NULL;
}
