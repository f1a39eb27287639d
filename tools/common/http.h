/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h: what gpucap's two HTTP servers (gpucap-webhook, gpucap-exporter) share: the listen
 * address, a whole response in one call (libmicrohttpd), and the guard that ends connections
 * which do not finish their request in time.
 */
#ifndef GPUCAP_TOOLS_HTTP_H
#define GPUCAP_TOOLS_HTTP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <sys/socket.h>

#include <microhttpd.h>

/*
 * Parses HOST:PORT, [IPV6]:PORT or :PORT (all addresses) with numeric hosts and ports only (no
 * name lookup) into `ss`/`len`. 0, or -EINVAL for anything else.
 */
int gpc_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len);

/*
 * Queues a response of `len` bytes of `body` (copied) with its Content-Type and, for a 405, the
 * Allow header (`allow`, else NULL). MHD_NO when it could not be made.
 */
enum MHD_Result gpc_http_reply(struct MHD_Connection *conn, unsigned status, const char *type, const char *body,
                               size_t len, const char *allow);

/*
 * Deadlines per connection, against clients that connect and send nothing, or trickle: from
 * accept to complete request headers (TLS handshake included), then whatever the server sets for
 * the body, none between requests (microhttpd's idle timeout applies there). Filled by
 * microhttpd's connection notices, moved on by the request callbacks, swept by the server's main
 * thread, which shuts down the socket of a connection past its deadline; microhttpd then sees the
 * end of the stream and closes it. A slot is freed in the "closed" notice, before microhttpd
 * closes the descriptor, so a sweep never touches a reused descriptor.
 */
struct gpc_http_slot {
    struct MHD_Connection *conn; /* NULL: free */
    int fd;
    time_t deadline; /* CLOCK_MONOTONIC seconds; 0: none */
};
struct gpc_http_guard {
    pthread_mutex_t lock;
    struct gpc_http_slot *slots; /* one per allowed connection */
    unsigned nslots;
    unsigned header_deadline; /* seconds */
    atomic_ullong closed;     /* connections the sweep ended: counted before the shutdown a client sees */
};

/* Sets up a guard for `max_connections` (the daemon's MHD_OPTION_CONNECTION_LIMIT). 0 or -ENOMEM. */
int gpc_http_guard_init(struct gpc_http_guard *g, unsigned max_connections, unsigned header_deadline);
void gpc_http_guard_free(struct gpc_http_guard *g);
/* MHD_OPTION_NOTIFY_CONNECTION's callback; its closure is the guard. */
void gpc_http_guard_notify(void *guard, struct MHD_Connection *conn, void **ctx,
                           enum MHD_ConnectionNotificationCode code);
/* From a request callback: the connection's next deadline is `seconds` from now (0: none). */
void gpc_http_guard_deadline(struct gpc_http_guard *g, struct MHD_Connection *conn, unsigned seconds);
/* Main thread: shuts down the connections past their deadline (each counted in `closed` first, so a
 * client that sees its connection end and then scrapes finds it counted); returns how many. */
unsigned gpc_http_guard_sweep(struct gpc_http_guard *g);

#endif
