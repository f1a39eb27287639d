/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeapi.h: what the tools that call the Kubernetes API from a pod (the webhook's namespace
 * policy, gpucap-agent) share: the API server's address and the service account's bearer token.
 */
#ifndef GPUCAP_TOOLS_KUBEAPI_H
#define GPUCAP_TOOLS_KUBEAPI_H

#include <stddef.h>

/*
 * Read the one-line token at `path` into buf (trailing white space removed). Read it at every call:
 * projected tokens are rotated by the kubelet. 0, or a negative errno with `err` set (the file
 * cannot be read; -EINVAL: empty, longer than len - 1, or more than one line).
 */
int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen);

/*
 * The API server's base URL into out: `given` when set (without trailing slashes), else https:// from the pod's
 * KUBERNETES_SERVICE_HOST (an IPv6 address bracketed) and _PORT (443 when unset). 0, or -EINVAL
 * with `err` set when neither is there.
 */
int tool_kube_api_url(const char *given, char *out, size_t len, char *err, size_t errlen);

#endif
