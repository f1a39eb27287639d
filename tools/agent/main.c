/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: gpucap-agent, the node agent of live budgets: its options (tools/common's table: --help,
 * gpucap-agent(1) and the parser read it), then the loop (watch.c).
 *
 * It runs beside gpucap-exporter in the gpucap-node DaemonSet, as a second container: the
 * exporter holds no API credentials and mounts the pods read-only, the agent holds a token that
 * may only list and watch pods and create events, and writes only the settings files (apply.c).
 * Its files: watch.c (the loop), podstream.c (answers read as a stream), record.c (the record),
 * apply.c (the files), events.c (the Events), kube.c (the API client).
 */
#include "agent.h"
#include "kubeapi.h"
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum opt { OPT_NODE, OPT_ROOT, OPT_KUBE_API, OPT_TOKEN, OPT_CA, OPT_WATCH_TIMEOUT, OPT_RELIST_SPREAD,
           OPT_REQUEST_TIMEOUT, OPT_PAGE_SIZE, OPT_ROUNDS, OPT_PLAIN_HTTP, OPT_COUNT };
static const struct tool_flag rows[OPT_COUNT] = {
    [OPT_NODE] = {"node", 'n', "NAME", "GPUCAP_AGENT_NODE", "$NODE_NAME",
                  "this node: the pods whose spec.nodeName it is (the downward API's spec.nodeName)"},
    [OPT_ROOT] = {"root", 'r', "DIR", "GPUCAP_AGENT_ROOT", "/var/lib/kubelet/pods", "the kubelet's pod directory"},
    [OPT_KUBE_API] = {"kube-api", 0, "URL", "GPUCAP_AGENT_KUBE_API",
                      "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT", "the API server"},
    [OPT_TOKEN] = {"token-file", 0, "FILE", "GPUCAP_AGENT_TOKEN_FILE", TOOL_KUBE_TOKEN_FILE,
                   "the bearer token, read again at every request (the kubelet rotates it)"},
    [OPT_CA] = {"ca-file", 0, "FILE", "GPUCAP_AGENT_CA_FILE", TOOL_KUBE_CA_FILE,
                "the cluster's CA, the only one the API server's certificate is checked against"},
    [OPT_WATCH_TIMEOUT] = {"watch-timeout", 0, "SECONDS", "GPUCAP_AGENT_WATCH_TIMEOUT", "300",
                           "each watch asks the server to end it after a random time between SECONDS and\n"
                           "twice SECONDS (then it watches again from where it was: no list)"},
    [OPT_RELIST_SPREAD] = {"relist-spread", 0, "SECONDS", "GPUCAP_AGENT_RELIST_SPREAD", "60",
                           "after a 410 Gone, list again after a random wait of up to SECONDS (the agents of\n"
                           "a cluster do not list together after an API server restart); 0: at once"},
    [OPT_REQUEST_TIMEOUT] = {"request-timeout", 0, "SECONDS", "GPUCAP_AGENT_REQUEST_TIMEOUT", "60",
                             "the longest a page of the list may take"},
    [OPT_PAGE_SIZE] = {"page-size", 0, "N", "GPUCAP_AGENT_PAGE_SIZE", "100", "pods per page of the list (limit=N)"},
    [OPT_ROUNDS] = {"rounds", 0, "N", "GPUCAP_AGENT_ROUNDS", "0",
                    "exit after N watches have ended (a failed list counts as one); 0: never (tests)"},
    [OPT_PLAIN_HTTP] = {"plain-http", 0, NULL, NULL, NULL, "allow an http:// API address (tests only)"},
};

static const struct tool_cmd agent_cmd = {
    TOOL_COMMAND("gpucap-agent", rows,
                 "[--node NAME] [--root DIR] [--kube-api URL] [--token-file FILE] [--ca-file FILE]\n"
                 "       [--watch-timeout SECONDS] [--relist-spread SECONDS] [--request-timeout SECONDS]\n"
                 "       [--page-size N] [--rounds N] [--plain-http]",
                 "applies budgets changed on running pods (the node agent of gpucap)"),
    .about = "Applies the budgets the webhook records on the pods of this node (annotation gpucap.io/budgets)\n"
             "to their containers' gpucap settings files, in place, while they run; one Event per change.\n"
             "Each option may also be given in the variable shown; a flag overrides the variable.",
    .tail = "Exit 0 after --rounds watches, 1 when the API address or its files cannot be used, 2 for a usage "
            "error.\n",
    .man_description = "Lists the pods of its node from the Kubernetes API once (fieldSelector spec.nodeName, "
                       "metadata only, in pages, from the API server's watch cache), applies each pod's budget "
                       "record (annotation gpucap.io/budgets, written by gpucap-webhook) to the gpucap settings "
                       "file of each of its containers, then watches and applies every change as it comes. As "
                       "client-go's reflector does, it watches again from the last resourceVersion (bookmarks "
                       "included) after a watch ends, lists again only after a 410 Gone (after a random wait of "
                       "up to --relist-spread), and backs off with jitter after errors. Answers are read as a "
                       "stream: its memory does not grow with what the pods carry. A record is taken only in the "
                       "webhook's exact form, and never above the maximum gpucap inject fixed in the file when "
                       "the pod was created. A file is rewritten in place, never replaced: the container sees it "
                       "through a subPath mount, which binds the file's inode; it is opened only as a regular "
                       "file with one link, owned by its directory's owner, without following links or blocking. "
                       "Each change is one Event on the pod, from what to what, a Warning when the container "
                       "holds more than a lowered budget or the record asked for more than the maximum; Events "
                       "are posted from a bounded queue beside the watch. The processes of the container apply "
                       "the change at their next CUDA call. All requests share kept-alive connections (one over "
                       "HTTP/2), trusting only --ca-file.",
    .man_exit = "0 after --rounds watches; 1 when the API address or its files cannot be used; 2 for a bad option "
                "or value. Otherwise it runs until it is stopped.",
    .man_files = "<root>/<pod-uid>/volumes/kubernetes.io~empty-dir/gpucap-lib/<container>/gpucap.ini: each "
                 "container's locked settings file, rewritten; <root>/<pod-uid>/volumes/kubernetes.io~empty-dir/"
                 "gpucap-ledger/<container>/gpucap.ledger: its ledger, read for the Event's message.",
    .man_see_also = ".BR gpucap (1),\n.BR gpucap\\-exporter (1),\n.BR gpucap\\-webhook (1),\n.BR gpucap.ini (5)",
};

int main(int argc, char **argv)
{
    static struct gpc_agent a;
    const char *val[OPT_COUNT];
    enum tool_origin from[OPT_COUNT];
    int first, rc = tool_settings(&agent_cmd, argc, argv, val, from, &first);
    if (rc >= 0)
        return rc;
    /* Two defaults the help only names: NODE_NAME's value, and the address kube.c makes of the
     * pod's KUBERNETES_SERVICE_HOST. */
    if (from[OPT_NODE] == TOOL_FROM_DEFAULT)
        val[OPT_NODE] = getenv("NODE_NAME");
    if (from[OPT_KUBE_API] == TOOL_FROM_DEFAULT)
        val[OPT_KUBE_API] = NULL;
    const char *node = val[OPT_NODE];
    if (!node || !*node || strlen(node) >= sizeof a.node || strpbrk(node, "&?#%/ ")) {
        tool_usage_error(&agent_cmd, "no valid --node (the downward API's spec.nodeName in NODE_NAME)");
        return TOOL_EXIT_USAGE;
    }
    /* One line for a bad value (tool_number says it). */
    if (tool_number(&agent_cmd, "--watch-timeout", val[OPT_WATCH_TIMEOUT], 1, 86400, &a.watch_timeout) ||
        tool_number(&agent_cmd, "--relist-spread", val[OPT_RELIST_SPREAD], 0, 3600, &a.relist_spread) ||
        tool_number(&agent_cmd, "--request-timeout", val[OPT_REQUEST_TIMEOUT], 1, 3600, &a.request_timeout) ||
        tool_number(&agent_cmd, "--page-size", val[OPT_PAGE_SIZE], 1, 10000, &a.page_size) ||
        tool_number(&agent_cmd, "--rounds", val[OPT_ROUNDS], 0, 1000000, &a.max_rounds))
        return TOOL_EXIT_USAGE;
    a.kube.plain_http = val[OPT_PLAIN_HTTP] != NULL;
    snprintf(a.node, sizeof a.node, "%s", node);
    snprintf(a.root, sizeof a.root, "%s", val[OPT_ROOT]);
    snprintf(a.kube.token_file, sizeof a.kube.token_file, "%s", val[OPT_TOKEN]);
    snprintf(a.kube.ca_file, sizeof a.kube.ca_file, "%s", val[OPT_CA]);
    char err[512];
    if (gpc_kube_init(&a.kube, val[OPT_KUBE_API], err, sizeof err) != 0) {
        tool_error(agent_cmd.name, "%s", err);
        return TOOL_EXIT_FAIL;
    }
    fprintf(stderr, "gpucap-agent: node %s, pods under %s, API %s\n", a.node, a.root, a.kube.url);
    gpc_agent_run(&a);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "gpucap-agent: lists=%lu pages=%lu watches=%lu watched=%lu applied=%lu changes=%lu clamped=%lu "
            "refused=%lu skipped=%lu errors=%lu connections=%lu events=%lu events_failed=%lu events_dropped=%lu "
            "peak_rss_kib=%ld relists_gone=%lu\n",
            a.lists, a.pages, a.watches, a.watched, a.applied, a.changes, a.clamped, a.refused, a.skipped, a.errors,
            a.kube.connects, a.events.posted, a.events.failed, a.events.dropped, ru.ru_maxrss, a.relists_gone);
    gpc_kube_close(&a.kube);
    return 0;
}
