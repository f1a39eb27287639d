/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serve.c: the HTTP server loop gpucap-webhook and gpucap-exporter share (serve.h). The options of
 * both servers are one array here, so a bound against hostile clients is set in one place: the
 * connection limits, the guard's notices, the idle timeout, TLS where asked.
 */
#include "serve.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int gpc_serve_run(struct gpc_serve *s, volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    socklen_t addrlen;
    err[0] = '\0';
    if (gpc_parse_listen(s->listen, &addr, &addrlen) != 0) {
        snprintf(err, errlen, "listen \"%s\": expected HOST:PORT, [IPV6]:PORT or :PORT with a numeric host and "
                              "port", s->listen);
        return -EINVAL;
    }
    if (gpc_http_guard_init(&s->guard, s->max_connections, s->header_deadline) != 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    unsigned flags = MHD_USE_ERROR_LOG | MHD_USE_AUTO_INTERNAL_THREAD; /* epoll where there is one */
    if (s->tls_cert_callback)
        flags |= MHD_USE_TLS;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem ops[16];
    unsigned n = 0;
#define OPT(o, v, p) (ops[n++] = (struct MHD_OptionItem){(o), (intptr_t)(v), (p)})
    OPT(MHD_OPTION_EXTERNAL_LOGGER, s->logger, s->logger_cls);
    OPT(MHD_OPTION_SOCK_ADDR, 0, (struct sockaddr *)&addr);
    OPT(MHD_OPTION_CONNECTION_LIMIT, s->max_connections, NULL);
    if (s->max_per_ip)
        OPT(MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->max_per_ip, NULL);
    OPT(MHD_OPTION_CONNECTION_TIMEOUT, s->idle_timeout, NULL);
    OPT(MHD_OPTION_NOTIFY_CONNECTION, gpc_http_guard_notify, &s->guard);
    if (s->completed)
        OPT(MHD_OPTION_NOTIFY_COMPLETED, s->completed, s->completed_cls);
    if (s->threads > 1)
        OPT(MHD_OPTION_THREAD_POOL_SIZE, s->threads, NULL);
    if (s->tls_cert_callback) {
        OPT(MHD_OPTION_HTTPS_CERT_CALLBACK, 0, s->tls_cert_callback);
        OPT(MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)s->tls_priorities);
    }
    OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, s->handler, s->handler_cls, MHD_OPTION_ARRAY, ops,
                                            MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "cannot listen on %s: %s", s->listen, strerror(errno));
        gpc_http_guard_free(&s->guard);
        return -1;
    }
    if (s->started) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        char host[64] = "?", url[128];
        getnameinfo((struct sockaddr *)&addr, addrlen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
        bool v6 = addr.ss_family == AF_INET6;
        snprintf(url, sizeof url, "%s://%s%s%s:%u", s->tls_cert_callback ? "https" : "http", v6 ? "[" : "", host,
                 v6 ? "]" : "", info ? info->port : 0);
        s->started(s->started_ctx, url);
    }
    /* The deadline sweep, in steps of 100 ms; the stop signal cuts a sleep short. */
    while (!*stop) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        nanosleep(&tick, NULL);
        unsigned closed = gpc_http_guard_sweep(&s->guard);
        if (s->tick)
            s->tick(s->tick_ctx, closed);
    }
    MHD_stop_daemon(d);
    gpc_http_guard_free(&s->guard);
    return 0;
}
