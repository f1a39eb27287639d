/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube.c: gpucap-agent's Kubernetes API client: the service account's bearer token (read at every
 * call, as the webhook's nsapi.c does), the cluster CA, libcurl. A watch is a long GET whose answer
 * is one JSON object per line; lines are handed over as they complete.
 */
#include "kube.h"
#include "kubeapi.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ANSWER (64u << 20) /* a node's pods, listed */
#define MAX_LINE (8u << 20)    /* one watch event: one pod */

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
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl cannot be initialised");
        return -EIO;
    }
    return 0;
}

struct sink {
    char *buf;
    size_t len, cap, limit;
    int (*line)(const char *text, void *arg); /* watch: lines handed over as they complete */
    void *arg;
    bool stopped;
    long code;
    CURL *c;
};

static size_t on_data(char *data, size_t size, size_t n, void *user)
{
    struct sink *s = user;
    size_t add = size * n;
    if (s->len + add > s->limit)
        return 0; /* curl fails the transfer */
    if (s->len + add + 1 > s->cap) {
        size_t cap = (s->len + add + 1) * 2;
        char *more = realloc(s->buf, cap);
        if (!more)
            return 0;
        s->buf = more;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, add);
    s->len += add;
    s->buf[s->len] = '\0';
    if (!s->line)
        return add;
    if (!s->code)
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &s->code);
    if (s->code != 200)
        return add; /* an error answer: handed over whole at the end */
    char *start = s->buf, *nl;
    while ((nl = memchr(start, '\n', (size_t)(s->buf + s->len - start)))) {
        *nl = '\0';
        if (nl > start && s->line(start, s->arg) != 0) {
            s->stopped = true;
            return 0;
        }
        start = nl + 1;
    }
    s->len -= (size_t)(start - s->buf);
    memmove(s->buf, start, s->len);
    s->buf[s->len] = '\0';
    return add;
}

/* One request: method GET (json NULL) or POST; watch lines to `line`. */
static int request(const struct gpc_kube *k, const char *path, const char *json, struct sink *s, long *code, char *err,
                   size_t errlen)
{
    char url[2048], cerr[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "%s%s", k->url, path);
    struct tool_kube_request r = {url, k->token_file, k->ca_file, k->plain_http, json != NULL, k->timeout_ms,
                                  on_data, s, cerr};
    CURL *c;
    struct curl_slist *headers;
    int rc = tool_kube_open(&r, &c, &headers, err, errlen);
    if (rc != 0)
        return rc;
    s->c = c;
    if (!s->line)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, k->timeout_ms);
    else {
        /* A watch lasts as long as the server keeps it (timeoutSeconds); a dead peer is noticed
         * when nothing arrives for a minute (the server sends bookmarks more often). */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 90L);
    }
    if (json)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    CURLcode res = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
    if (res != CURLE_OK && !s->stopped) {
        snprintf(err, errlen, "%s %s: %s", json ? "POST" : "GET", path, cerr[0] ? cerr : curl_easy_strerror(res));
        rc = -EIO;
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return rc;
}

int gpc_kube_get(const struct gpc_kube *k, const char *path, char **body, long *code, char *err, size_t errlen)
{
    struct sink s = {.limit = MAX_ANSWER};
    int rc = request(k, path, NULL, &s, code, err, errlen);
    if (rc == 0 && !s.buf)
        s.buf = calloc(1, 1);
    if (rc != 0 || !s.buf) {
        free(s.buf);
        return rc ? rc : -ENOMEM;
    }
    *body = s.buf;
    return 0;
}

int gpc_kube_post(const struct gpc_kube *k, const char *path, const char *json, long *code, char *err, size_t errlen)
{
    struct sink s = {.limit = 1u << 20};
    int rc = request(k, path, json, &s, code, err, errlen);
    free(s.buf);
    return rc;
}

int gpc_kube_watch(const struct gpc_kube *k, const char *path, int (*line)(const char *text, void *arg), void *arg,
                   long *code, char *err, size_t errlen)
{
    struct sink s = {.limit = MAX_LINE, .line = line, .arg = arg};
    int rc = request(k, path, NULL, &s, code, err, errlen);
    /* What is left: a last line without its newline, or a whole error answer. */
    if (rc == 0 && !s.stopped && s.len)
        line(s.buf, arg);
    free(s.buf);
    return rc;
}
