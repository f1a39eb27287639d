/* SPDX-License-Identifier: Apache-2.0 */
/* kubeapi.c: the API server's address, the service account's bearer token and a request's set-up
 * (kubeapi.h). */
#include "kubeapi.h"

#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    /* Not O_NOFOLLOW: a projected token is a link into the volume's current data directory. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        snprintf(err, errlen, "token %s: %s", path, fd < 0 ? strerror(e) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -e;
    }
    size_t n = tool_read_full(fd, buf, len - 1);
    close(fd);
    buf[n] = '\0';
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    if (!n || n == len - 1 || strpbrk(buf, "\r\n")) {
        snprintf(err, errlen, "token %s: empty, too long or not one line", path);
        return -EINVAL;
    }
    return 0;
}

int tool_kube_api_url(const char *given, char *out, size_t len, char *err, size_t errlen)
{
    if (given && *given) {
        snprintf(out, len, "%s", given);
        for (size_t n = strlen(out); n && out[n - 1] == '/';)
            out[--n] = '\0';
        return 0;
    }
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host) {
        snprintf(err, errlen, "no --kube-api and no KUBERNETES_SERVICE_HOST (not in a pod?)");
        return -EINVAL;
    }
    bool v6 = strchr(host, ':') != NULL;
    snprintf(out, len, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port && *port ? port : "443");
    return 0;
}

int tool_kube_setup(CURL *c, const struct tool_kube_request *r, struct curl_slist **headers, char *err,
                    size_t errlen)
{
    char token[8192], auth[8300], accept[512];
    int rc = tool_read_token(r->token_file, token, sizeof token, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    snprintf(accept, sizeof accept, "Accept: %s", r->accept ? r->accept : "application/json");
    struct curl_slist *h = curl_slist_append(NULL, auth);
    struct curl_slist *h2 = h ? curl_slist_append(h, accept) : NULL;
    struct curl_slist *h3 = h2 && r->json_body ? curl_slist_append(h2, "Content-Type: application/json") : h2;
    /* No "Expect: 100-continue" (libcurl's for bodies over 1 KiB): a round trip per POST for nothing. */
    if (h3 && r->json_body)
        h3 = curl_slist_append(h3, "Expect:");
    if (!h3) {
        curl_slist_free_all(h);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    curl_easy_setopt(c, CURLOPT_URL, r->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, r->plain_http ? "http,https" : "https");
    /* The CA file alone: libcurl would also trust its built-in CA directory (/etc/ssl/certs on
     * Debian) unless told not to, and the native store with CURLSSLOPT_NATIVE_CA. */
    curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_file);
    curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(c, CURLOPT_SSL_OPTIONS, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h3);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* worker threads: no SIGALRM for timeouts */
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, r->write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r->data);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
    *headers = h3;
    return 0;
}

int tool_kube_open(const struct tool_kube_request *r, CURL **handle, struct curl_slist **headers, char *err,
                   size_t errlen)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = tool_kube_setup(c, r, headers, err, errlen);
    if (rc != 0) {
        curl_easy_cleanup(c);
        return rc;
    }
    *handle = c;
    return 0;
}
