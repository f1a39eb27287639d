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
 * projected tokens are rotated by the kubelet. Opened without blocking and read only when it is a
 * regular file (a FIFO there cannot hang the caller). 0, or a negative errno with `err` set (the file
 * cannot be read or is not a regular file; -EINVAL: empty, longer than len - 1, or more than one line).
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
    const char *accept;     /* the Accept header's value; NULL: application/json */
};

/*
 * A curl handle set up for `r`: its URL, headers (Authorization: Bearer, Accept: r->accept or
 * application/json, and the Content-Type of a JSON body), protocols, CA, connect timeout, no signals
 * (the webhook's worker threads), the answer to r->write. The server's certificate is checked against
 * r->ca_file alone: never the system's trust store (libcurl's built-in CA path, the TLS library's
 * native store), which would let any public or locally added CA speak for the API server. 0 with
 * *handle and *headers (after the request: curl_easy_cleanup, curl_slist_free_all), or a negative
 * errno with `err` set (the token cannot be read, out of memory).
 */
int tool_kube_open(const struct tool_kube_request *r, CURL **handle, struct curl_slist **headers, char *err,
                   size_t errlen);

/*
 * The same on an existing handle `c` (a kept one, after curl_easy_reset: its live connection and TLS
 * session are kept, so the next request to the same server reuses them). 0 with *headers (free them
 * after the request), or a negative errno with `err` set.
 */
int tool_kube_setup(CURL *c, const struct tool_kube_request *r, struct curl_slist **headers, char *err,
                    size_t errlen);

#endif
