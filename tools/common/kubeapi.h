/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeapi.h: what the tools that call the Kubernetes API from a pod (the webhook's namespace
 * policy, gpucap-agent) share: the API server's address, the service account's bearer token, and
 * how a request is set up (libcurl).
 */
#ifndef GPUCAP_TOOLS_KUBEAPI_H
#define GPUCAP_TOOLS_KUBEAPI_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* Where a pod's service account token and the cluster's CA are mounted: the defaults of the
 * webhook's --kube-token, --kube-ca and gpucap-agent's --token-file, --ca-file. */
#define TOOL_KUBE_TOKEN_FILE "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define TOOL_KUBE_CA_FILE "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

/*
 * Read the one-line token at `path` into buf (trailing white space removed). Read it at every call:
 * projected tokens are rotated by the kubelet. 0, or a negative errno with `err` set (the file
 * cannot be read; -EINVAL: empty, longer than len - 1, or more than one line).
 */
int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen);

/*
 * The API server's base URL into out: `given` when set (without trailing slashes), else https:// from the pod's
 * KUBERNETES_SERVICE_HOST (an IPv6 address bracketed) and _PORT (443 when unset). 0, or -EINVAL
 * with `err` set when neither is there.
 */
int tool_kube_api_url(const char *given, char *out, size_t len, char *err, size_t errlen);

/* One request to the API server (tool_kube_open). */
struct tool_kube_request {
    const char *url;        /* the whole URL */
    const char *token_file; /* the bearer token, read again for this request */
    const char *ca_file;    /* the only CA the server's certificate is checked against */
    bool plain_http;        /* http:// allowed too (tests); else https only */
    bool json_body;         /* a POST of JSON: Content-Type: application/json */
    long timeout_ms;        /* to connect */
    size_t (*write)(char *ptr, size_t size, size_t n, void *data); /* takes the answer */
    void *data;
    char *errbuf;           /* CURL_ERROR_SIZE bytes: curl's own error text */
};

/*
 * A curl handle set up for `r`: its URL, headers (Authorization: Bearer, Accept: application/json,
 * and the Content-Type of a JSON body), protocols, CA, connect timeout, no signals (the webhook's
 * worker threads), the answer to r->write. 0 with *handle and *headers (after the request:
 * curl_easy_cleanup, curl_slist_free_all), or a negative errno with `err` set (the token cannot be
 * read, out of memory).
 */
int tool_kube_open(const struct tool_kube_request *r, CURL **handle, struct curl_slist **headers, char *err,
                   size_t errlen);

#endif
