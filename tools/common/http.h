/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h: what gpucap's two HTTP servers (gpucap-webhook, gpucap-exporter) share: the listen
 * address and a whole response in one call (libmicrohttpd).
 */
#ifndef GPUCAP_TOOLS_HTTP_H
#define GPUCAP_TOOLS_HTTP_H

#include <stddef.h>
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

#endif
