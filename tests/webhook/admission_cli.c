/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission_cli.c: the webhook's request handler as a filter, for the Python patch test.
 *
 * usage: admission_cli [--default-memory SIZE] [--max-memory SIZE] [--image REF] [--preload file|env]
 *                      [--dra-claims true|false] [--visible-devices cap|deny|ignore]
 *                      [--trusted-namespaces LIST] [--namespace-policy FILE] [--pod-opt-out true|false]
 *                      [--driver-limits off|on|auto] [--driver-limits-label LABEL] [--qos guaranteed|burstable]
 *                      [--kube-api URL --kube-token FILE --kube-ca FILE] < request.json
 * Prints the HTTP status on the first line and the response body after it. Exit 0, or 1 when the
 * configuration is refused or memory runs out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"

int main(int argc, char **argv)
{
    struct gpc_admission_config cfg = {.image = "ghcr.io/example/gpucap:0.1.0"};
    const char *policy_file = NULL;
    struct gpc_nsapi_options api_opt = {.ttl = 30, .timeout_ms = 20000}; /* a loaded test machine */
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--default-memory") == 0)
            cfg.default_memory = v;
        else if (strcmp(k, "--max-memory") == 0)
            cfg.max_memory = v;
        else if (strcmp(k, "--image") == 0)
            cfg.image = v;
        else if (strcmp(k, "--preload") == 0)
            cfg.preload = strcmp(v, "env") == 0 ? GPC_PRELOAD_ENV : GPC_PRELOAD_FILE;
        else if (strcmp(k, "--dra-claims") == 0)
            cfg.dra_claims = strcmp(v, "true") == 0;
        else if (strcmp(k, "--visible-devices") == 0)
            cfg.visible = strcmp(v, "deny") == 0 ? GPC_VISIBLE_DENY
                          : strcmp(v, "ignore") == 0 ? GPC_VISIBLE_IGNORE : GPC_VISIBLE_CAP;
        else if (strcmp(k, "--trusted-namespaces") == 0)
            cfg.trusted_namespaces = v;
        else if (strcmp(k, "--pod-opt-out") == 0)
            cfg.pod_opt_out = strcmp(v, "true") == 0;
        else if (strcmp(k, "--driver-limits") == 0)
            cfg.driver = strcmp(v, "on") == 0 ? GPC_DRIVER_ON : strcmp(v, "auto") == 0 ? GPC_DRIVER_AUTO : GPC_DRIVER_OFF;
        else if (strcmp(k, "--driver-limits-label") == 0)
            cfg.driver_label = v;
        else if (strcmp(k, "--qos") == 0)
            cfg.qos = strcmp(v, "burstable") == 0 ? GPC_QOS_BURSTABLE : GPC_QOS_GUARANTEED;
        else if (strcmp(k, "--namespace-policy") == 0)
            policy_file = v;
        else if (strcmp(k, "--kube-api") == 0)
            api_opt.url = v;
        else if (strcmp(k, "--kube-token") == 0)
            api_opt.token_file = v;
        else if (strcmp(k, "--kube-ca") == 0)
            api_opt.ca_file = v;
        else {
            fprintf(stderr, "unknown argument %s\n", k);
            return 1;
        }
    }
    char err[512];
    struct gpc_nspolicy *policy = NULL;
    if (gpc_admission_check_config(&cfg, err, sizeof err) != 0 ||
        (policy_file && gpc_nspolicy_open(policy_file, &policy, err, sizeof err) != 0)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (policy) {
        cfg.ns_lookup = gpc_nspolicy_lookup;
        cfg.ns_ctx = policy;
    }
    struct gpc_nsapi *api = NULL;
    if (api_opt.url && gpc_nsapi_open(&api_opt, &api, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct gpc_ns_chain chain = {gpc_nsapi_lookup, api, gpc_nspolicy_lookup, policy};
    if (api) {
        cfg.ns_lookup = policy ? gpc_ns_chain_lookup : gpc_nsapi_lookup;
        cfg.ns_ctx = policy ? (void *)&chain : (void *)api;
    }
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, stdin)) > 0) {
        len += n;
        if (len == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    if (!buf)
        return 1;
    struct gpc_admission_result res;
    int rc = gpc_admission_handle(&cfg, buf, len, &res);
    printf("%d\n%s", res.status, res.body ? res.body : "");
    fprintf(stderr, "%s\n", res.log);
    gpc_admission_result_free(&res);
    free(buf);
    gpc_nspolicy_close(policy);
    gpc_nsapi_close(api);
    return rc == 0 ? 0 : 1;
}
