/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token.h: the service account's bearer token, as the tools that call the Kubernetes API (the
 * webhook's namespace policy, gpucap-agent) read it.
 */
#ifndef GPUCAP_TOOLS_TOKEN_H
#define GPUCAP_TOOLS_TOKEN_H

#include <stddef.h>

/*
 * Read the one-line token at `path` into buf (trailing white space removed). Read it at every call:
 * projected tokens are rotated by the kubelet. 0, or a negative errno with `err` set (the file
 * cannot be read; -EINVAL: empty, longer than len - 1, or more than one line).
 */
int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen);

#endif
