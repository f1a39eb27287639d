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
#include "arbiter.h"
#include "kubeapi.h"
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum opt { OPT_NODE, OPT_ROOT, OPT_KUBE_API, OPT_TOKEN, OPT_CA, OPT_WATCH_TIMEOUT, OPT_RELIST_SPREAD,
           OPT_REQUEST_TIMEOUT, OPT_PAGE_SIZE, OPT_ROUNDS, OPT_PLAIN_HTTP, OPT_ARBITER, OPT_LOCAL, OPT_RUNS_DIR,
           OPT_STATE_DIR, OPT_RECLAIM, OPT_RECLAIM_GRACE, OPT_CARD_RESERVE, OPT_COUNT };
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
    [OPT_ARBITER] = {"arbiter", 0, NULL, "GPUCAP_AGENT_ARBITER", NULL,
                     "also arbitrate burstable GPU memory on this node: lend what no container requested to the\n"
                     "containers with a memory_request, take it back when a request needs it (hostPID, NVML)"},
    [OPT_LOCAL] = {"local", 0, NULL, "GPUCAP_AGENT_LOCAL", NULL,
                   "outside Kubernetes: arbitrate this user's `gpucap run --memory-request` jobs (no API server)"},
    [OPT_RUNS_DIR] = {"runs-dir", 0, "DIR", "GPUCAP_AGENT_RUNS_DIR", "$XDG_RUNTIME_DIR/gpucap, else /tmp/gpucap-<uid>",
                      "--local: where the runs register (DIR/runs) and the arbiter's socket is"},
    [OPT_STATE_DIR] = {"state-dir", 0, "DIR", "GPUCAP_AGENT_STATE_DIR", "/run/gpucap (--local: the runs' directory)",
                       "where the arbiter writes cards.state (per card: size, lendable, loaned, requested)"},
    [OPT_RECLAIM] = {"reclaim", 0, "kill|evict|deny", "GPUCAP_AGENT_RECLAIM", "kill",
                     "when a request is still short after the grace: kill the borrowing process furthest above\n"
                     "its request, evict its pod (a run: SIGTERM), or deny (kill nothing: the request waits)"},
    [OPT_RECLAIM_GRACE] = {"reclaim-grace", 0, "SECONDS", "GPUCAP_AGENT_RECLAIM_GRACE", "10",
                           "how long borrowers have to give a loan back (their grants lowered) before the reclaim\n"
                           "acts; decimals allowed, at most 600"},
    [OPT_CARD_RESERVE] = {"card-reserve", 0, "SIZE", "GPUCAP_AGENT_CARD_RESERVE", "0",
                          "of each card, never counted as lendable (what the driver and others keep)"},
};

static const struct tool_cmd agent_cmd = {
    TOOL_COMMAND("gpucap-agent", rows,
                 "[--node NAME] [--root DIR] [--kube-api URL] [--token-file FILE] [--ca-file FILE]\n"
                 "       [--watch-timeout SECONDS] [--relist-spread SECONDS] [--request-timeout SECONDS]\n"
                 "       [--page-size N] [--rounds N] [--plain-http] [--arbiter] [ARBITER OPTION...]\n"
                 "gpucap-agent --local [--runs-dir DIR] [--state-dir DIR] [--reclaim kill|evict|deny]\n"
                 "       [--reclaim-grace SECONDS] [--card-reserve SIZE]",
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
                       "HTTP/2), trusting only --ca-file.\n"
                       ".PP\n"
                       "With --arbiter (Kubernetes, hostPID) or --local (outside Kubernetes: this user's `gpucap run "
                       "--memory-request` jobs, no API server) it is also the node arbiter of burstable GPU memory. "
                       "Per card, from NVML's per-process figures (each process mapped to its container by the "
                       "device and inode of the ledger its /proc/PID/maps lists; never from the ledgers, which the "
                       "tenants write), it lends what no container requested, uses or was lent already, one loan per "
                       "request on its socket (arbiter.sock in each container's ledger directory; --local: "
                       "RUNS-DIR/arbiter.sock), each written as memory_grant into the container's settings file in "
                       "place, the generation line bumped, within its limit. A request the card cannot hold, or "
                       "requests that no longer fit beside the loans, start a reclaim: lending stops on the card, "
                       "every grant there is lowered to nothing at once, and after --reclaim-grace the process "
                       "holding the most of the container furthest above its request (best effort first) is "
                       "killed, its pod evicted, or nothing is done (--reclaim). Requests that add up past the card "
                       "make the last scheduled best effort. Each is said (an Event on Kubernetes) and counted in "
                       "qos.state beside each settings file; cards.state in --state-dir has each card's size, "
                       "lendable, loaned and requested bytes.",
    .man_exit = "0 after --rounds watches; 1 when the API address or its files cannot be used; 2 for a bad option "
                "or value. Otherwise it runs until it is stopped.",
    .man_files = "<root>/<pod-uid>/volumes/kubernetes.io~empty-dir/gpucap-lib/<container>/gpucap.ini: each "
                 "container's locked settings file, rewritten; <root>/<pod-uid>/volumes/kubernetes.io~empty-dir/"
                 "gpucap-ledger/<container>/gpucap.ledger: its ledger, read for the Event's message; arbiter.sock "
                 "beside it (--arbiter); qos.state beside the settings file and STATE-DIR/cards.state (--arbiter, "
                 "--local); RUNS-DIR/runs/<job>/ (gpucap.ini, ledger, run) and RUNS-DIR/arbiter.sock, "
                 "RUNS-DIR/arbiter.conf (--local).",
    .man_see_also = ".BR gpucap (1),\n.BR gpucap\\-exporter (1),\n.BR gpucap\\-webhook (1),\n.BR gpucap.ini (5)",
};

/* The arbiter's settings from the flags: 0, or TOOL_EXIT_USAGE after saying why. */
static int arbiter_config(struct gpc_arb_config *cfg, const char **val, const enum tool_origin *from, const char *root)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->local = val[OPT_LOCAL] != NULL;
    cfg->tick_ms = 100;
    const char *r = val[OPT_RECLAIM];
    cfg->reclaim = strcmp(r, "kill") == 0 ? GPC_RECLAIM_KILL : strcmp(r, "evict") == 0 ? GPC_RECLAIM_EVICT
                   : strcmp(r, "deny") == 0 ? GPC_RECLAIM_DENY : (enum gpc_arb_reclaim)-1;
    if ((int)cfg->reclaim < 0)
        return tool_usage_error(&agent_cmd, "--reclaim takes kill, evict or deny, not '%s'", r), TOOL_EXIT_USAGE;
    char *end;
    double g = strtod(val[OPT_RECLAIM_GRACE], &end);
    if (end == val[OPT_RECLAIM_GRACE] || *end || !(g >= 0 && g <= 600))
        return tool_usage_error(&agent_cmd, "--reclaim-grace takes seconds from 0 to 600, not '%s'",
                                val[OPT_RECLAIM_GRACE]), TOOL_EXIT_USAGE;
    cfg->grace_ms = (unsigned)(g * 1000 + 0.5);
    struct gpc_size sz;
    if (gpc_parse_size(val[OPT_CARD_RESERVE], &sz) != 0 || sz.is_percent)
        return tool_usage_error(&agent_cmd, "--card-reserve takes a size in bytes (8GiB), not '%s'",
                                val[OPT_CARD_RESERVE]), TOOL_EXIT_USAGE;
    cfg->reserve = sz.bytes;
    if (cfg->local) {
        if (from[OPT_RUNS_DIR] == TOOL_FROM_DEFAULT)
            tool_qos_dir(cfg->base, sizeof cfg->base);
        else
            snprintf(cfg->base, sizeof cfg->base, "%s", val[OPT_RUNS_DIR]);
    } else {
        snprintf(cfg->base, sizeof cfg->base, "%s", root);
    }
    snprintf(cfg->state_dir, sizeof cfg->state_dir, "%s",
             from[OPT_STATE_DIR] != TOOL_FROM_DEFAULT ? val[OPT_STATE_DIR] : cfg->local ? cfg->base : "/run/gpucap");
    return 0;
}

static volatile sig_atomic_t stop_local;

static bool local_stopped(void *arg)
{
    (void)arg;
    return stop_local != 0;
}

/* gpucap-agent --local: the arbiter alone, until SIGTERM or SIGINT. */
static int run_local(struct gpc_arbiter *arb)
{
    char why[512];
    if (gpc_arb_init(arb, why, sizeof why) != 0) {
        tool_error(agent_cmd.name, "%s", why);
        return TOOL_EXIT_FAIL;
    }
    fprintf(stderr, "gpucap-agent: arbitrating the runs under %s/runs (%d card(s), reclaim = %s after %.1f s), "
            "socket %s\n", arb->cfg.base, arb->ncards,
            arb->cfg.reclaim == GPC_RECLAIM_KILL ? "kill" : arb->cfg.reclaim == GPC_RECLAIM_EVICT ? "evict" : "deny",
            arb->cfg.grace_ms / 1000.0, arb->sock_path);
    tool_stop_on_signals(&stop_local);
    gpc_arb_run(arb, local_stopped, NULL);
    gpc_arb_close(arb);
    return 0;
}

int main(int argc, char **argv)
{
    static struct gpc_agent a;
    static struct gpc_arbiter arb;
    const char *val[OPT_COUNT];
    enum tool_origin from[OPT_COUNT];
    int first, rc = tool_settings(&agent_cmd, argc, argv, val, from, &first);
    if (rc >= 0)
        return rc;
    /* The two switches, from a flag or their variable (1 or true: on). */
    for (int o = OPT_ARBITER; o <= OPT_LOCAL; o++)
        if (val[o] && from[o] == TOOL_FROM_ENV && strcmp(val[o], "1") != 0 && strcmp(val[o], "true") != 0)
            val[o] = NULL;
    if (val[OPT_LOCAL] || val[OPT_ARBITER]) {
        if ((rc = arbiter_config(&arb.cfg, val, from, val[OPT_ROOT])) != 0)
            return rc;
        if (val[OPT_LOCAL])
            return run_local(&arb);
    }
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
    pthread_mutex_init(&a.note_lock, NULL);
    if (val[OPT_ARBITER]) {
        if (gpc_arb_init(&arb, err, sizeof err) != 0 || gpc_agent_arbiter_start(&a, &arb) != 0) {
            tool_error(agent_cmd.name, "the arbiter cannot start: %s", err);
            return TOOL_EXIT_FAIL;
        }
    }
    gpc_agent_run(&a);
    if (a.arbiter) {
        gpc_agent_arbiter_stop(&a);
        gpc_arb_close(&arb);
    }
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
