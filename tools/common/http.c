/* SPDX-License-Identifier: Apache-2.0 */
/* http.c: what gpucap's two HTTP servers share (http.h). */
#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

static time_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

int gpc_http_guard_init(struct gpc_http_guard *g, unsigned max_connections, unsigned header_deadline)
{
    *g = (struct gpc_http_guard){.header_deadline = header_deadline};
    pthread_mutex_init(&g->lock, NULL);
    g->slots = calloc(max_connections, sizeof *g->slots);
    if (!g->slots)
        return -ENOMEM;
    g->nslots = max_connections;
    return 0;
}

void gpc_http_guard_free(struct gpc_http_guard *g)
{
    free(g->slots);
    g->slots = NULL;
    g->nslots = 0;
    pthread_mutex_destroy(&g->lock);
}

void gpc_http_guard_notify(void *guard, struct MHD_Connection *conn, void **ctx,
                           enum MHD_ConnectionNotificationCode code)
{
    struct gpc_http_guard *g = guard;
    pthread_mutex_lock(&g->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (unsigned i = 0; fd && i < g->nslots; i++) {
            if (!g->slots[i].conn) {
                g->slots[i] = (struct gpc_http_slot){conn, fd->connect_fd, now_s() + g->header_deadline};
                *ctx = &g->slots[i];
                break;
            }
        }
    } else if (*ctx) {
        ((struct gpc_http_slot *)*ctx)->conn = NULL;
        *ctx = NULL;
    }
    pthread_mutex_unlock(&g->lock);
}

void gpc_http_guard_deadline(struct gpc_http_guard *g, struct MHD_Connection *conn, unsigned seconds)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!info || !info->socket_context)
        return;
    pthread_mutex_lock(&g->lock);
    ((struct gpc_http_slot *)info->socket_context)->deadline = seconds ? now_s() + seconds : 0;
    pthread_mutex_unlock(&g->lock);
}

unsigned gpc_http_guard_sweep(struct gpc_http_guard *g)
{
    time_t now = now_s();
    unsigned n = 0;
    pthread_mutex_lock(&g->lock);
    for (unsigned i = 0; i < g->nslots; i++) {
        if (g->slots[i].conn && g->slots[i].deadline && now > g->slots[i].deadline) {
            atomic_fetch_add(&g->closed, 1);
            shutdown(g->slots[i].fd, SHUT_RDWR);
            g->slots[i].deadline = 0;
            n++;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return n;
}
