/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: gpucap-exporter, the node exporter: settings, HTTP, the exporter's own metrics.
 *
 * Serves GET /metrics (the Prometheus text format, collected afresh by collect.c at every scrape)
 * GET /livez (the process serves), GET /readyz and /healthz (200 when the pod directory can be
 * read and the node's cards are known, or not checked: an exporter that found no card shows no
 * container, so it is not ready, and says why; the webhook's probe names) over plain HTTP with
 * libmicrohttpd, on
 * one internal thread: scrapes run one at a time, so a burst of scrapers costs one scrape's memory
 * at a time. Every setting is one row of the table below: a flag and the GPUCAP_EXPORTER_* variable
 * with the same meaning; a flag overrides the variable. `--once` prints one scrape and exits.
 *
 * Any pod of the node may connect, so clients are bounded as the webhook's are, by the same server
 * loop (tools/common/serve.h): connections in all and per address, a deadline from accept to
 * complete request headers swept by the main thread, an idle timeout. Card series only for the
 * cards of this node (cards.c). A scrape that reaches the bound on ledgers (collect.h) says so in
 * the log when it starts and when it ends, as one that cannot read the pod directory does. A source
 * that found no card (the driver not loaded yet when the pod started) is asked again, at most every
 * --cards-retry seconds, from the requests (/readyz, /metrics), until it gives some.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cards.h"
#include "collect.h"
#include "gpucap_version.h"
#include "http.h"
#include "promtext.h"
#include "serve.h"
#include "tool.h"

enum opt_id {
    OPT_LISTEN, OPT_ROOT, OPT_CARDS, OPT_CARDS_RETRY, OPT_MAX_CONNECTIONS_PER_IP, OPT_ARBITER_STATE, OPT_ONCE, OPT_COUNT
};

#define MAX_CONNECTIONS 64
#define HEADER_DEADLINE 5 /* seconds from accept to complete request headers */
#define IDLE_TIMEOUT 10   /* seconds without traffic before a connection is closed */

/* Every setting: a flag, its variable, default and help (tools/common's table: --help, the man page
 * and the parser read it). */
static const struct tool_flag rows[OPT_COUNT] = {
    [OPT_LISTEN] = {"listen", 'l', "ADDR", "GPUCAP_EXPORTER_LISTEN", ":9477",
                    "address to serve HTTP on: HOST:PORT, [IPV6]:PORT or :PORT (port 0: any free port)"},
    [OPT_ROOT] = {"root", 'r', "DIR", "GPUCAP_EXPORTER_ROOT", "/var/lib/kubelet/pods",
                  "the kubelet's pod directory (mounted read-only): <pod-uid>/volumes/kubernetes.io~empty-dir/\n"
                  "gpucap-ledger/<container>/gpucap.ledger"},
    [OPT_CARDS] = {"cards", 0, "SOURCE", "GPUCAP_EXPORTER_CARDS", "auto",
                   "where the node's GPUs are read, whose series alone are shown: auto (NVML, else\n"
                   "/proc/driver/nvidia/gpus, else none shown), nvml, proc[:DIR], list:UUID[,UUID...], none (no check)"},
    [OPT_CARDS_RETRY] = {"cards-retry", 0, "SECONDS", "GPUCAP_EXPORTER_CARDS_RETRY", "30",
                         "a source that found no card (the driver not loaded yet) is asked again this often, 1 to\n"
                         "3600; meanwhile /readyz fails and no container is shown"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"max-connections-per-ip", 0, "N", "GPUCAP_EXPORTER_MAX_CONNECTIONS_PER_IP", "4",
                                    "open connections from one address, 1 to 64 (64 in all)"},
    [OPT_ARBITER_STATE] = {"arbiter-state", 0, "DIR", "GPUCAP_EXPORTER_ARBITER_STATE", NULL,
                           "the node arbiter's state directory (gpucap-agent --state-dir, mounted read-only):\n"
                           "cards.state, for the burstable-memory card series (unset: none)"},
    [OPT_ONCE] = {"once", 0, NULL, NULL, NULL, "print one scrape on stdout and exit, without serving HTTP"},
};

static const struct tool_cmd exporter_cmd = {
    TOOL_COMMAND("gpucap-exporter", rows,
                 "[--listen ADDR] [--root DIR] [--cards SOURCE] [--cards-retry SECONDS] [--max-connections-per-ip N] "
                 "[--arbiter-state DIR] [--once]",
                 "Prometheus exporter of the gpucap ledgers of a node"),
    .about = "Prometheus exporter of the gpucap ledgers on this node: GET /metrics, GET /livez, GET /readyz\n"
             "(and /healthz: the pod directory can be read and the node's cards are known). Reads the\n"
             "ledgers only (no lock, no write). Each option may also be given in the variable shown; a flag\n"
             "overrides the variable.",
    .tail = "Exit 0, 1 when it cannot serve (or --once cannot read DIR), 2 for a usage error.\n",
    .man_description = "Serves GET /metrics (the Prometheus text format), GET /livez (the process serves), GET "
                       "/readyz and /healthz (the pod directory can be read, and the node's cards are known: a "
                       "source that found no card is asked again every --cards-retry seconds, and the body says why) over "
                       "plain HTTP. Every "
                       "scrape walks the kubelet's pod directory and reads each gpucap container's ledger: no "
                       "lock is taken and nothing is written. The ledgers are the tenants' files: each is opened "
                       "without following links, copied and checked, and cards this node does not have are left "
                       "out (--cards). Connections are bounded per address and in all (64), with a deadline of 5 "
                       "seconds for the request headers and an idle timeout of 10 seconds.",
    .man_exit = "0 after SIGTERM or SIGINT, or after --once when the pod directory could be read; 1 when it "
                "could not be read (--once) or the address cannot be served; 2 for a bad option or value.",
    .man_files = "/var/lib/kubelet/pods/<pod-uid>/volumes/kubernetes.io~empty-dir/gpucap-ledger/<container>/"
                 "gpucap.ledger: the ledgers read (under --root); beside them, gpucap-lib/<container>/qos.state: "
                 "the node arbiter's figures of a burstable container. --arbiter-state DIR/cards.state: the "
                 "arbiter's figures of each card. libnvidia-ml.so.1: NVML, for the node's cards "
                 "(--cards auto or nvml). /proc/driver/nvidia/gpus/*/information: the driver's list of cards "
                 "(--cards auto or proc).",
    .man_see_also = ".BR gpucap (1),\n.BR gpucap\\-webhook (1),\n.BR gpucap\\-agent (1),\n.BR gpucap.ini (5)",
};

static volatile sig_atomic_t stop;
static const char *root;
static const char *arbiter_state; /* --arbiter-state */
static struct gpc_cards cards;
static const char *cards_source; /* --cards */
static unsigned cards_retry;     /* --cards-retry: seconds between two asks of a source that found none */
static char cards_why[512];      /* why the source gave no card, when it gave none */
static struct gpc_serve server;
static atomic_ullong scrape_errors;

#define say(...) tool_error("gpucap-exporter", __VA_ARGS__)

/* No card known from a source that checks: every container's series is left out. */
static bool no_cards(void)
{
    return cards.known && cards.n == 0;
}

/* The card source asked again, when it gave no card and was last asked --cards-retry seconds ago. */
static void retry_cards(void)
{
    static time_t last;
    time_t now = time(NULL);
    if (!no_cards() || now - last < (time_t)cards_retry)
        return;
    last = now;
    struct gpc_cards c;
    char why[sizeof cards_why];
    if (gpc_cards_load(cards_source, &c, why, sizeof why) == 0 && c.n > 0) {
        cards = c;
        say("cards: %u from %s, found after start; card entries of other cards are left out", cards.n, cards.source);
    } else if (why[0]) {
        snprintf(cards_why, sizeof cards_why, "%s", why);
    }
}

/* One scrape with the exporter's own metrics; NULL on allocation failure. */
static char *scrape(size_t *len, bool *ok)
{
    struct timespec t0, t1;
    retry_cards();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct gpc_text t = {0};
    struct gpc_scrape s;
    int rc = gpc_collect(root, arbiter_state, &cards, &t, &s);
    /* Said when it starts and when it ends, not at every scrape. */
    static int said;
    static unsigned over;
    if (rc != 0)
        atomic_fetch_add(&scrape_errors, 1);
    if (rc != 0 && rc != said)
        say("cannot read %s: %s", root, strerror(-rc));
    else if (rc == 0 && said != 0)
        say("%s can be read again", root);
    said = rc;
    /* The arbiter's cards.state: said when it cannot be read (not when it is merely absent: no
     * arbiter yet), and when it can again. */
    static int state_said;
    int st = arbiter_state && s.arbiter_cards < 0 && s.arbiter_cards != -ENOENT ? s.arbiter_cards : 0;
    if (st != 0 && st != state_said)
        say("--arbiter-state %s: cards.state cannot be read: %s; no card QoS series", arbiter_state,
            st == -EINVAL ? "not a regular file of at most 16 KiB without a NUL" : strerror(-st));
    else if (st == 0 && state_said != 0)
        say("--arbiter-state %s: cards.state read again", arbiter_state);
    state_said = st;
    unsigned limited = s.skipped[GPC_SKIP_LIMIT];
    if (limited && !over)
        say("warning: %u ledgers not read: past the bound of %u ledgers per scrape (or of pods and containers "
            "per pod); gpucap_exporter_ledgers_skipped{reason=\"limit\"} counts them", limited,
            (unsigned)GPC_EXPORTER_MAX_LEDGERS);
    else if (!limited && over)
        say("every ledger read again: within the bound of %u", (unsigned)GPC_EXPORTER_MAX_LEDGERS);
    over = limited;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    gpc_prom_family(&t, "gpucap_exporter_scrape_errors_total", "counter",
                    "Scrapes that could not read the pod directory.");
    gpc_text_printf(&t, "gpucap_exporter_scrape_errors_total %llu\n", (unsigned long long)atomic_load(&scrape_errors));
    gpc_prom_family(&t, "gpucap_exporter_scrape_duration_seconds", "gauge",
                    "Time the last scrape took to read the ledgers.");
    gpc_text_printf(&t, "gpucap_exporter_scrape_duration_seconds %.6f\n",
                    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    gpc_prom_family(&t, "gpucap_exporter_connections_closed_slow_total", "counter",
                    "Connections closed for not sending their request headers in time.");
    gpc_text_printf(&t, "gpucap_exporter_connections_closed_slow_total %llu\n",
                    (unsigned long long)atomic_load(&server.guard.closed));
    if (cards.known) {
        gpc_prom_family(&t, "gpucap_exporter_cards", "gauge",
                        "Cards of this node, from the exporter's --cards source; 0: none found, and no container "
                        "is shown (absent: --cards none, not checked).");
        gpc_text_printf(&t, "gpucap_exporter_cards %u\n", cards.n);
    }
    gpc_prom_family(&t, "gpucap_exporter_build_info", "gauge", "The exporter's version.");
    gpc_text_printf(&t, "gpucap_exporter_build_info{version=\"%s\"} 1\n", GPUCAP_VERSION_STRING);
    *len = t.len;
    *ok = rc == 0;
    return t.failed ? NULL : t.text;
}

/* ---- HTTP ---- */

/* A text response from a C string. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type, const char *body,
                             const char *allow)
{
    return gpc_http_reply(conn, status, type, body, strlen(body), allow);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **state)
{
    /* The headers are complete (a GET has no body): no deadline while the scrape runs. */
    gpc_http_guard_deadline(&server.guard, conn, 0);
    bool metrics = strcmp(url, "/metrics") == 0, livez = strcmp(url, "/livez") == 0;
    if (!metrics && !livez && strcmp(url, "/readyz") != 0 && strcmp(url, "/healthz") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found: GET /metrics, /livez, /readyz or /healthz\n",
                     NULL);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "use GET\n", "GET, HEAD");
    if (livez)
        return reply(conn, MHD_HTTP_OK, "text/plain", "ok\n", NULL);
    if (!metrics) {
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            char msg[600];
            snprintf(msg, sizeof msg, "cannot read %s: %s\n", root, strerror(errno));
            return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", msg, NULL);
        }
        close(fd);
        retry_cards();
        if (no_cards()) {
            char msg[800];
            snprintf(msg, sizeof msg, "no card of this node is known (--cards %s: %s): every container's series is "
                     "left out; asked again every %u s\n", cards_source, cards_why[0] ? cards_why : "none found",
                     cards_retry);
            return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", msg, NULL);
        }
        return reply(conn, MHD_HTTP_OK, "text/plain", "ok\n", NULL);
    }
    size_t len;
    bool ok;
    char *body = scrape(&len, &ok);
    if (!body)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", NULL);
    /* A root that cannot be read is still a scrape: gpucap_exporter_scrape_errors_total says so. */
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* A request answered: the connection waits for the next one under the idle timeout only. */
static void on_done(void *cls, struct MHD_Connection *conn, void **state, enum MHD_RequestTerminationCode why)
{
    gpc_http_guard_deadline(&server.guard, conn, 0);
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    say("microhttpd: %s", line);
}

static void started(void *ctx, const char *url)
{
    say("listening on %s; ledgers under %s", url, root);
}

static int serve(const char *listen, unsigned per_ip)
{
    server = (struct gpc_serve){
        .listen = listen,
        .threads = 1, /* one internal thread: scrapes run one at a time, one scrape's memory at a time */
        .max_connections = MAX_CONNECTIONS,
        .max_per_ip = per_ip,
        .idle_timeout = IDLE_TIMEOUT,
        .header_deadline = HEADER_DEADLINE,
        .handler = on_request,
        .completed = on_done,
        .logger = on_mhd_error,
        .started = started,
    };
    char err[300];
    int rc = gpc_serve_run(&server, &stop, err, sizeof err);
    if (rc != 0) {
        say("%s", err);
        return rc == -EINVAL ? 2 : 1;
    }
    say("stopping");
    return 0;
}

int main(int argc, char **argv)
{
    const char *val[OPT_COUNT];
    int first, rc = tool_settings(&exporter_cmd, argc, argv, val, NULL, &first);
    if (rc >= 0)
        return rc;
    bool once = val[OPT_ONCE] != NULL;
    root = val[OPT_ROOT];
    arbiter_state = val[OPT_ARBITER_STATE];
    unsigned per_ip;
    if (tool_number(&exporter_cmd, "--max-connections-per-ip", val[OPT_MAX_CONNECTIONS_PER_IP], 1, MAX_CONNECTIONS,
                    &per_ip) != 0 ||
        tool_number(&exporter_cmd, "--cards-retry", val[OPT_CARDS_RETRY], 1, 3600, &cards_retry) != 0)
        return TOOL_EXIT_USAGE;
    /* Bad values are usage errors, said before anything else (one line). */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (!once && gpc_parse_listen(val[OPT_LISTEN], &addr, &addrlen) != 0) {
        tool_usage_error(&exporter_cmd, "--listen '%s': expected HOST:PORT, [IPV6]:PORT or :PORT with a numeric "
                         "host and port", val[OPT_LISTEN]);
        return TOOL_EXIT_USAGE;
    }
    char *why = cards_why;
    cards_source = val[OPT_CARDS];
    if (gpc_cards_load(val[OPT_CARDS], &cards, why, sizeof cards_why) != 0) {
        tool_usage_error(&exporter_cmd, "--cards '%s': %s", val[OPT_CARDS], why);
        return TOOL_EXIT_USAGE;
    }
    if (!once) {
        if (!cards.known)
            say("cards: not checked (--cards none): every card a ledger names is shown");
        else if (no_cards())
            say("warning: cards: none found (%s): no container is shown and /readyz fails until the source gives "
                "some (asked again every %u s)", why[0] ? why : cards.source, cards_retry);
        else
            say("cards: %u from %s%s%s; card entries of other cards are left out", cards.n, cards.source,
                why[0] ? ": " : "", why);
    }
    if (once) {
        size_t len;
        bool ok;
        char *body = scrape(&len, &ok);
        if (!body) {
            say("out of memory");
            return 1;
        }
        fwrite(body, 1, len, stdout);
        free(body);
        return ok ? 0 : 1;
    }
    tool_stop_on_signals(&stop);
    return serve(val[OPT_LISTEN], per_ip);
}
