/* SPDX-License-Identifier: Apache-2.0 */
/* kubeapi.c: the API server's address and the service account's bearer token (kubeapi.h). */
#include "kubeapi.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "token %s: %s", path, strerror(e));
        return -e;
    }
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
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
