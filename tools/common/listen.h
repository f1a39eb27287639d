/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.h: the listen address of gpucap's HTTP servers (gpucap-webhook, gpucap-exporter), one
 * parser for both.
 */
#ifndef GPUCAP_TOOLS_LISTEN_H
#define GPUCAP_TOOLS_LISTEN_H

#include <sys/socket.h>

/*
 * Parses HOST:PORT, [IPV6]:PORT or :PORT (all addresses) with numeric hosts and ports only (no
 * name lookup) into `ss`/`len`. 0, or -EINVAL for anything else.
 */
int gpc_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len);

#endif
