/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serve.h: the one HTTP server loop of gpucap's servers (gpucap-webhook over TLS, gpucap-exporter
 * over plain HTTP): microhttpd started with the bounds both keep against hostile clients (http.h's
 * guard, connections in all and per address, an idle timeout), and the main thread's loop that
 * sweeps the deadlines until the stop signal.
 */
#ifndef GPUCAP_TOOLS_SERVE_H
#define GPUCAP_TOOLS_SERVE_H

#include <signal.h>
#include <stddef.h>

#include <microhttpd.h>

#include "http.h"

struct gpc_serve {
    /* Set by the caller. */
    const char *listen;          /* HOST:PORT, [IPV6]:PORT or :PORT (gpc_parse_listen) */
    unsigned threads;            /* worker threads; 0 or 1: one internal polling thread */
    unsigned max_connections;    /* open connections in all (also the guard's slots) */
    unsigned max_per_ip;         /* open connections from one address; 0: the total alone bounds it */
    unsigned idle_timeout;       /* seconds without traffic before a connection is closed */
    unsigned header_deadline;    /* seconds from accept to complete request headers (the guard) */
    void *tls_cert_callback;     /* TLS: MHD_OPTION_HTTPS_CERT_CALLBACK's function; NULL: plain HTTP */
    const char *tls_priorities;  /* TLS: GnuTLS priority string */
    MHD_AccessHandlerCallback handler;
    void *handler_cls;
    MHD_RequestCompletedCallback completed; /* NULL: none */
    void *completed_cls;
    MHD_LogCallback logger;      /* microhttpd's error lines */
    void *logger_cls;
    /* Main thread, every 100 ms: `closed` connections the sweep just ended. NULL: none. */
    void (*tick)(void *ctx, unsigned closed);
    void *tick_ctx;
    /* Once listening: the URL served, "https://127.0.0.1:8443". NULL: none. */
    void (*started)(void *ctx, const char *url);
    void *started_ctx;
    /* Set up by gpc_serve_run(); request callbacks move deadlines with it (gpc_http_guard_deadline). */
    struct gpc_http_guard guard;
};

/*
 * Serves until *stop becomes nonzero (set it from a signal handler), sweeping the guard's deadlines
 * and calling s->tick every 100 ms on the calling thread. Returns 0 after a clean stop; -EINVAL
 * when s->listen is not an address; -ENOMEM; or -1 when microhttpd could not start (the address
 * taken), with errno's text in err.
 */
int gpc_serve_run(struct gpc_serve *s, volatile sig_atomic_t *stop, char *err, size_t errlen);

#endif
