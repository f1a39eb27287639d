/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h: the webhook's HTTPS server (server.c), started by main.c.
 */
#ifndef GPUCAP_WEBHOOK_SERVER_H
#define GPUCAP_WEBHOOK_SERVER_H

#include <signal.h>

#include "admission.h"

struct gpc_server_options {
    const char *listen;       /* "HOST:PORT", "[V6]:PORT" or ":PORT"; port 0 picks a free one */
    const char *cert;         /* PEM certificate (chain) file */
    const char *key;          /* PEM private key file */
    unsigned threads;         /* worker threads */
    unsigned reload_interval; /* seconds between checks of the certificate files */
    unsigned max_connections; /* open connections in all */
    unsigned max_connections_per_ip; /* 0: the total alone bounds one address */
    struct gpc_admission_config admission;
};

/*
 * Serves POST /mutate and GET /healthz over TLS until *stop becomes nonzero (set it from a signal
 * handler), reloading the certificate and key when their files change, on the server loop of
 * tools/common/serve.h. Logs to stderr, prefixed
 * "gpucap-webhook:", including "listening on https://ADDR:PORT" once ready. Returns 0 after a clean
 * stop, or -1 when it could not start (message already logged).
 */
int gpc_server_run(const struct gpc_server_options *opt, volatile sig_atomic_t *stop);

/* The one log sink of the webhook: a line on stderr with the prefix (wh_: not the library's gpc_log). */
void wh_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
