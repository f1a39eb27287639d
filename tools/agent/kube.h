/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube.h: gpucap-agent's client of the Kubernetes API (libcurl's multi interface, one thread): a
 * few requests in flight at once (the list or watch, an Event), each answer handed over as it
 * arrives, all on kept-alive connections (one, multiplexed, over HTTP/2; one per request in flight
 * over HTTP/1.1). The service account's token is read again at every request (the kubelet rotates
 * it); the peer is checked against --ca-file alone.
 */
#ifndef GPUCAP_AGENT_KUBE_H
#define GPUCAP_AGENT_KUBE_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

struct gpc_kube {
    char url[512];        /* https://HOST:PORT, no trailing slash (http:// only with plain_http) */
    char token_file[1024];
    char ca_file[1024];
    bool plain_http;      /* tests: a local server without TLS */
    long timeout_ms;      /* to connect */
    CURLM *multi;
    unsigned long connects; /* connections opened, all requests together */
};

/* One request, reused: its curl handle (and so its connection) is kept from one request to the next. */
struct gpc_kube_req {
    /* The caller's: the answer's bytes as they come (return false to end the request), and the
     * end: rc 0 (complete), -ECANCELED (data ended it), -ETIMEDOUT, -EIO (err says why); code is
     * the HTTP status (0 when none came). */
    bool (*data)(struct gpc_kube_req *r, const char *buf, size_t len);
    void (*done)(struct gpc_kube_req *r, int rc, long code, const char *err);
    void *arg;
    /* kube.c's */
    CURL *c;
    struct curl_slist *headers;
    bool busy, stopped;
    char errbuf[CURL_ERROR_SIZE];
};

/* The API server's address from `url`, else from KUBERNETES_SERVICE_HOST/_PORT: 0 or -EINVAL/-EIO. */
int gpc_kube_init(struct gpc_kube *k, const char *url, char *err, size_t errlen);
void gpc_kube_close(struct gpc_kube *k);

/*
 * Starts `r` (not busy): GET `path` (`body` NULL) or POST the JSON `body` (copied), with Accept
 * `accept` (NULL: application/json). The request ends after `timeout_ms` in all (0: never), or when
 * fewer than 1 byte a second came for `idle_s` seconds (0: no such check). 0, or -errno with err
 * set (the token cannot be read, out of memory); r->done is then not called.
 */
int gpc_kube_start(struct gpc_kube *k, struct gpc_kube_req *r, const char *path, const char *accept,
                   const char *body, long timeout_ms, long idle_s, char *err, size_t errlen);

/* The HTTP status of `r`'s answer once its headers came (from its data callback), else 0. */
long gpc_kube_code(struct gpc_kube_req *r);

/*
 * Runs the requests started for at most `wait_ms` (returning sooner once one ended: its done was
 * called). 0, or -EIO when libcurl failed.
 */
int gpc_kube_run(struct gpc_kube *k, int wait_ms);

/* Ends `r` now if it is busy: its done is called with -ECANCELED (its connection is closed). */
void gpc_kube_abort(struct gpc_kube *k, struct gpc_kube_req *r);

/* Ends `r` now if it is busy (its done is not called) and frees its handle. */
void gpc_kube_req_free(struct gpc_kube *k, struct gpc_kube_req *r);

#endif
