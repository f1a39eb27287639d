/* SPDX-License-Identifier: Apache-2.0 */
/* http.c: what gpucap's two HTTP servers share (http.h). */
#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

int gpc_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[128], port[16];
    const char *colon = strrchr(text, ':');
    if (!colon || !colon[1] || strlen(colon + 1) >= sizeof port || (size_t)(colon - text) >= sizeof host)
        return -EINVAL;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    snprintf(port, sizeof port, "%s", colon + 1);
    size_t n = strlen(host);
    if (host[0] == '[') {
        if (n < 2 || host[n - 1] != ']')
            return -EINVAL;
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0)
        return -EINVAL;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

enum MHD_Result gpc_http_reply(struct MHD_Connection *conn, unsigned status, const char *type, const char *body,
                               size_t len, const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}
