/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: gpucap-agent, the node agent of live budgets: options, then the loop (watch.c).
 *
 * It runs beside gpucap-exporter in the gpucap-node DaemonSet, as a second container: the
 * exporter holds no API credentials and mounts the pods read-only, the agent holds a token that
 * may only list and watch pods and create events, and writes only the settings files (apply.c).
 */
#include "agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: gpucap-agent [options]\n"
    "\n"
    "Applies the budgets the webhook records on the pods of this node (annotation gpucap.io/budgets)\n"
    "to their containers' gpucap settings files, in place, while they run; one Event per change.\n"
    "\n"
    "  --node NAME          this node (GPUCAP_AGENT_NODE, else NODE_NAME; required)\n"
    "  --root DIR           the kubelet's pod directory (GPUCAP_AGENT_ROOT; /var/lib/kubelet/pods)\n"
    "  --kube-api URL       the API server (GPUCAP_AGENT_KUBE_API; default from KUBERNETES_SERVICE_HOST)\n"
    "  --token-file FILE    bearer token (GPUCAP_AGENT_TOKEN_FILE;\n"
    "                       /var/run/secrets/kubernetes.io/serviceaccount/token)\n"
    "  --ca-file FILE       the cluster CA (GPUCAP_AGENT_CA_FILE; .../serviceaccount/ca.crt)\n"
    "  --watch-timeout S    seconds before a watch is ended and the pods listed again (300)\n"
    "  --plain-http         allow an http:// API address (tests only)\n"
    "  --rounds N           list N times (each followed by a watch), then exit (tests; default: forever)\n"
    "  -h, --help           this text\n";

/* A flag's value, else the variable's, else the default. */
static const char *opt(const char *flag_value, const char *env, const char *def)
{
    if (flag_value)
        return flag_value;
    const char *e = env ? getenv(env) : NULL;
    return e && *e ? e : def;
}

int main(int argc, char **argv)
{
    const char *node = NULL, *root = NULL, *api = NULL, *token = NULL, *ca = NULL;
    static struct gpc_agent a = {.watch_timeout = 300};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(arg, "--plain-http") == 0) {
            a.kube.plain_http = true;
        } else if (!val) {
            fprintf(stderr, "gpucap-agent: %s needs a value\n%s", arg, usage);
            return 2;
        } else if (strcmp(arg, "--node") == 0) {
            node = val, i++;
        } else if (strcmp(arg, "--root") == 0) {
            root = val, i++;
        } else if (strcmp(arg, "--kube-api") == 0) {
            api = val, i++;
        } else if (strcmp(arg, "--token-file") == 0) {
            token = val, i++;
        } else if (strcmp(arg, "--ca-file") == 0) {
            ca = val, i++;
        } else if (strcmp(arg, "--watch-timeout") == 0) {
            a.watch_timeout = (unsigned)strtoul(val, NULL, 10), i++;
        } else if (strcmp(arg, "--rounds") == 0) {
            a.max_rounds = (unsigned)strtoul(val, NULL, 10), i++;
        } else {
            fprintf(stderr, "gpucap-agent: unknown option %s\n%s", arg, usage);
            return 2;
        }
    }
    node = opt(node, "GPUCAP_AGENT_NODE", getenv("NODE_NAME"));
    if (!node || !*node || strlen(node) >= sizeof a.node || strpbrk(node, "&?#%/ ")) {
        fprintf(stderr, "gpucap-agent: no valid --node (the downward API's spec.nodeName in NODE_NAME)\n");
        return 2;
    }
    snprintf(a.node, sizeof a.node, "%s", node);
    snprintf(a.root, sizeof a.root, "%s", opt(root, "GPUCAP_AGENT_ROOT", "/var/lib/kubelet/pods"));
    snprintf(a.kube.token_file, sizeof a.kube.token_file, "%s",
             opt(token, "GPUCAP_AGENT_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"));
    snprintf(a.kube.ca_file, sizeof a.kube.ca_file, "%s",
             opt(ca, "GPUCAP_AGENT_CA_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"));
    if (!a.watch_timeout)
        a.watch_timeout = 300;
    char err[512];
    if (gpc_kube_init(&a.kube, opt(api, "GPUCAP_AGENT_KUBE_API", NULL), err, sizeof err) != 0) {
        fprintf(stderr, "gpucap-agent: %s\n", err);
        return 1;
    }
    fprintf(stderr, "gpucap-agent: node %s, pods under %s, API %s\n", a.node, a.root, a.kube.url);
    gpc_agent_run(&a);
    fprintf(stderr, "gpucap-agent: lists=%lu watched=%lu applied=%lu changes=%lu events=%lu relists_gone=%lu\n",
            a.lists, a.watched, a.applied, a.changes, a.events, a.relists_gone);
    return 0;
}
