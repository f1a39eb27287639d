/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: gpucap-agent, the node agent of live budgets: its options (one table: flag, variable,
 * default, text; --help and gpucap-agent(1) are written from it), then the loop (watch.c).
 *
 * It runs beside gpucap-exporter in the gpucap-node DaemonSet, as a second container: the
 * exporter holds no API credentials and mounts the pods read-only, the agent holds a token that
 * may only list and watch pods and create events, and writes only the settings files (apply.c).
 */
#include "agent.h"
#include "gpucap_version.h"
#include "man.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum opt { OPT_NODE, OPT_ROOT, OPT_KUBE_API, OPT_TOKEN, OPT_CA, OPT_WATCH_TIMEOUT, OPT_ROUNDS, OPT_COUNT };
static const struct row {
    const char *flag, *arg, *env, *def, *doc;
} rows[OPT_COUNT] = {
    [OPT_NODE] = {"node", "NAME", "GPUCAP_AGENT_NODE", "NODE_NAME",
                  "this node: the pods whose spec.nodeName it is (the downward API's spec.nodeName)"},
    [OPT_ROOT] = {"root", "DIR", "GPUCAP_AGENT_ROOT", "/var/lib/kubelet/pods", "the kubelet's pod directory"},
    [OPT_KUBE_API] = {"kube-api", "URL", "GPUCAP_AGENT_KUBE_API", "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT",
                      "the API server"},
    [OPT_TOKEN] = {"token-file", "FILE", "GPUCAP_AGENT_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token",
                   "the bearer token, read again at every request (the kubelet rotates it)"},
    [OPT_CA] = {"ca-file", "FILE", "GPUCAP_AGENT_CA_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
                "the cluster's CA, the only one the API server's certificate is checked against"},
    [OPT_WATCH_TIMEOUT] = {"watch-timeout", "SECONDS", "GPUCAP_AGENT_WATCH_TIMEOUT", "300",
                           "how long the server keeps a watch before the pods are listed again"},
    [OPT_ROUNDS] = {"rounds", "N", "GPUCAP_AGENT_ROUNDS", "0",
                    "list N times (each followed by a watch), then exit; 0: forever (tests)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpucap-agent [options]\n\n"
               "Applies the budgets the webhook records on the pods of this node (annotation gpucap.io/budgets)\n"
               "to their containers' gpucap settings files, in place, while they run; one Event per change.\n"
               "Each option may also be given in the variable shown; a flag overrides the variable.\n\n");
    for (int i = 0; i < OPT_COUNT; i++)
        fprintf(f, "  --%s %s\n      %s\n      %s, default %s\n", rows[i].flag, rows[i].arg, rows[i].doc, rows[i].env,
                rows[i].def);
    fprintf(f, "  --plain-http\n      allow an http:// API address (tests only)\n");
}

/* gpucap-agent(1), from the same rows as --help (`--help-man`, run by the build). */
static void usage_man(FILE *f)
{
    fprintf(f, ".TH GPUCAP-AGENT 1 \"\" \"gpucap %s\" \"User Commands\"\n", GPUCAP_VERSION_STRING);
    gpc_man_section(f, "NAME", "gpucap-agent - applies budgets changed on running pods (the node agent of gpucap)");
    fputs(".SH SYNOPSIS\n.B gpucap\\-agent\n", f);
    for (int i = 0; i < OPT_COUNT; i++) {
        fputs("[\\fB\\-\\-", f);
        gpc_man_text(f, rows[i].flag);
        fprintf(f, "\\fR \\fI%s\\fR]\n", rows[i].arg);
    }
    fputs("[\\fB\\-\\-plain\\-http\\fR]\n.br\n.B gpucap\\-agent\n\\-\\-version | \\-\\-help\n", f);
    gpc_man_section(f, "DESCRIPTION",
                    "Lists the pods of its node from the Kubernetes API (fieldSelector spec.nodeName), applies "
                    "each pod's budget record (annotation gpucap.io/budgets, written by gpucap-webhook) to the "
                    "gpucap settings file of each of its containers, then watches and applies every change as "
                    "it comes; every end of a watch, a 410 Gone included, is followed by a fresh list. A file "
                    "is rewritten in place, never replaced: the container sees it through a subPath mount, "
                    "which binds the file's inode. Each change is one Event on the pod, from what to what, a "
                    "Warning when the container holds more than a lowered budget. The processes of the "
                    "container apply it at their next CUDA call.");
    fputs(".SH OPTIONS\n", f);
    for (int i = 0; i < OPT_COUNT; i++) {
        char text[600];
        snprintf(text, sizeof text, "%s. Variable %s, default %s.", rows[i].doc, rows[i].env, rows[i].def);
        gpc_man_option(f, rows[i].flag, rows[i].arg, text);
    }
    gpc_man_option(f, "plain-http", NULL, "Allow an http:// API address (tests only).");
    gpc_man_option(f, "version", NULL, "Print the version and exit.");
    gpc_man_option(f, "help", NULL, "Print the options and exit.");
    gpc_man_section(f, "EXIT STATUS",
                    "0 after --rounds lists; 1 when the API address or its files cannot be used; 2 for a bad "
                    "option or value. Otherwise it runs until it is stopped.");
    fputs(".SH ENVIRONMENT\n", f);
    for (int i = 0; i < OPT_COUNT; i++) {
        char text[64];
        snprintf(text, sizeof text, "As --%s; the flag wins.", rows[i].flag);
        fprintf(f, ".TP\n.B %s\n", rows[i].env);
        gpc_man_text(f, text);
        fputc('\n', f);
    }
    fputs(".TP\n.B NODE_NAME\n", f);
    gpc_man_text(f, "This node, when neither --node nor GPUCAP_AGENT_NODE is given.");
    fputc('\n', f);
    gpc_man_section(f, "FILES",
                    "<root>/<pod-uid>/volumes/kubernetes.io~empty-dir/gpucap-lib/<container>/gpucap.ini: each "
                    "container's locked settings file, rewritten; <root>/<pod-uid>/volumes/"
                    "kubernetes.io~empty-dir/gpucap-ledger/<container>/gpucap.ledger: its ledger, read for the "
                    "Event's message.");
}

/* A flag's value, else the variable's, else NULL. */
static const char *value_of(const char *given[OPT_COUNT], enum opt o)
{
    if (given[o])
        return given[o];
    const char *e = getenv(rows[o].env);
    return e && *e ? e : NULL;
}

int main(int argc, char **argv)
{
    const char *given[OPT_COUNT] = {0};
    static struct gpc_agent a;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--help-man") == 0) {
            usage_man(stdout);
            return 0;
        } else if (strcmp(arg, "--version") == 0) {
            printf("gpucap-agent %s\n", GPUCAP_VERSION_STRING);
            return 0;
        } else if (strcmp(arg, "--plain-http") == 0) {
            a.kube.plain_http = true;
            continue;
        }
        int o = 0;
        while (o < OPT_COUNT && !(strncmp(arg, "--", 2) == 0 && strcmp(arg + 2, rows[o].flag) == 0))
            o++;
        if (o == OPT_COUNT) {
            fprintf(stderr, "gpucap-agent: unknown option %s\n", arg);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "gpucap-agent: %s needs a value\n", arg);
            return 2;
        }
        given[o] = argv[++i];
    }
    const char *node = value_of(given, OPT_NODE);
    if (!node)
        node = getenv("NODE_NAME");
    if (!node || !*node || strlen(node) >= sizeof a.node || strpbrk(node, "&?#%/ ")) {
        fprintf(stderr, "gpucap-agent: no valid --node (the downward API's spec.nodeName in NODE_NAME)\n");
        return 2;
    }
    const char *timeout = value_of(given, OPT_WATCH_TIMEOUT), *rounds = value_of(given, OPT_ROUNDS);
    char *end = NULL;
    a.watch_timeout = timeout ? (unsigned)strtoul(timeout, &end, 10) : 300;
    if ((timeout && (*end || !a.watch_timeout)) || (rounds && (a.max_rounds = (unsigned)strtoul(rounds, &end, 10), *end))) {
        fprintf(stderr, "gpucap-agent: --watch-timeout and --rounds take a number\n");
        return 2;
    }
    snprintf(a.node, sizeof a.node, "%s", node);
    const char *root = value_of(given, OPT_ROOT), *token = value_of(given, OPT_TOKEN), *ca = value_of(given, OPT_CA);
    snprintf(a.root, sizeof a.root, "%s", root ? root : rows[OPT_ROOT].def);
    snprintf(a.kube.token_file, sizeof a.kube.token_file, "%s", token ? token : rows[OPT_TOKEN].def);
    snprintf(a.kube.ca_file, sizeof a.kube.ca_file, "%s", ca ? ca : rows[OPT_CA].def);
    char err[512];
    if (gpc_kube_init(&a.kube, value_of(given, OPT_KUBE_API), err, sizeof err) != 0) {
        fprintf(stderr, "gpucap-agent: %s\n", err);
        return 1;
    }
    fprintf(stderr, "gpucap-agent: node %s, pods under %s, API %s\n", a.node, a.root, a.kube.url);
    gpc_agent_run(&a);
    fprintf(stderr, "gpucap-agent: lists=%lu watched=%lu applied=%lu changes=%lu events=%lu relists_gone=%lu\n",
            a.lists, a.watched, a.applied, a.changes, a.events, a.relists_gone);
    return 0;
}
