/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube.h: the few Kubernetes API calls gpucap-agent makes (libcurl): a GET, a watch read as a
 * stream of JSON lines, a POST. The service account's token is read again at every call (the
 * kubelet rotates it); the peer is checked against the cluster's CA.
 */
#ifndef GPUCAP_AGENT_KUBE_H
#define GPUCAP_AGENT_KUBE_H

#include <stdbool.h>
#include <stddef.h>

struct gpc_kube {
    char url[512];        /* https://HOST:PORT, no trailing slash (http:// only with plain_http) */
    char token_file[1024];
    char ca_file[1024];
    bool plain_http;      /* tests: a local server without TLS */
    long timeout_ms;      /* connect, and whole requests but watches */
};

/* The API server's address from `url`, else from KUBERNETES_SERVICE_HOST/_PORT: 0 or -EINVAL. */
int gpc_kube_init(struct gpc_kube *k, const char *url, char *err, size_t errlen);

/* GET `path`: 0 with *body (malloc'd, NUL-terminated; free it) and *code, or -errno with err set
 * (transport errors; an HTTP status is a success here, read *code). */
int gpc_kube_get(const struct gpc_kube *k, const char *path, char **body, long *code, char *err, size_t errlen);

/* POST `json` to `path`: 0 with *code, or -errno with err set. */
int gpc_kube_post(const struct gpc_kube *k, const char *path, const char *json, long *code, char *err, size_t errlen);

/*
 * GET `path` as a watch: calls line(text, arg) for each line of the answer as it arrives (one
 * watch event each); a non-zero return ends the watch. Returns 0 when the server ended it (or
 * line did), with *code; -errno with err set on a transport error. An answer other than 200 is
 * read whole and handed to line as one line.
 */
int gpc_kube_watch(const struct gpc_kube *k, const char *path, int (*line)(const char *text, void *arg), void *arg,
                   long *code, char *err, size_t errlen);

#endif
