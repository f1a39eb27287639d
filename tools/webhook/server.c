/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c: HTTPS for the webhook: routing, request bodies, the memory their parses take,
 * certificate reload, the metrics, the log. The server loop and its bounds against hostile clients
 * are tools/common/serve.c's, shared with the exporter.
 *
 * libmicrohttpd serves on a thread pool with GnuTLS. The certificate is not given to microhttpd as
 * bytes but through MHD_OPTION_HTTPS_CERT_CALLBACK, so each handshake takes whatever credential set
 * is current: a rotation (cert-manager renewing the Secret, the kubelet swapping the mounted files)
 * is picked up without a restart and without dropping connections. The main thread checks the two
 * files every reload interval and swaps in a new set only when the pair loads and matches; a
 * half-written or mismatched pair keeps the previous one serving. Superseded sets stay allocated
 * until exit because a handshake in flight may still hold them; a Secret rotates every few weeks.
 *
 * Any pod can reach the webhook and a failed answer denies pod creation, so hostile clients are
 * bounded here (README.md of examples/kubernetes, "Limits", has the measured worst case), and so
 * are legitimate ones as large as the API server makes them: an UPDATE review carries two pods, each
 * up to the API server's object size with 256 KiB of annotations. A body limit (admission.h), a cap
 * on request bytes buffered across all connections, and a bound on the memory of all the parses in
 * flight together: each body's parse is estimated before it runs (shape.c) and waits, briefly,
 * until the estimates of the parses running leave room for it (a body whose estimate alone passes
 * the bound is refused). Total and per-address connection limits, deadlines from accept to complete
 * request headers (TLS handshake included) and from there to a complete body, enforced by the main
 * thread, an idle timeout, and error lines rate-limited: serve.c and http.c. The per-address limit
 * is set high by default (main.c): the API server opens one connection per review in flight. TLS is
 * 1.3, or 1.2 with ECDHE and an AEAD cipher only.
 *
 * Besides POST /mutate: GET /livez (the process serves), GET /readyz (a certificate is loaded and
 * has not expired), GET /healthz (the same as /readyz, kept for older manifests) and GET /metrics,
 * Prometheus text: admissions by result, their latency as a histogram, the certificate's expiry, the
 * connections closed by a deadline, the parses that waited. The counters are atomics: a request
 * takes no lock for them.
 */
#include "server.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <jansson.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "gpucap_version.h"
#include "http.h"
#include "promtext.h"
#include "serve.h"
#include "shape.h"

#define MAX_CHAIN 8
#define MAX_PEM (1u << 20)

/* Limits against hostile clients: README.md of examples/kubernetes, "Limits". */
#define BUFFERED_MAX (24u << 20) /* request bytes held across all connections: four bodies of the largest */
#define PARSE_BUDGET (40u << 20) /* estimated memory of all the parses in flight together (shape.c) */
#define PARSE_WAIT_MS 3000       /* the longest a parse waits for room before a 503 (the API server waits 5 s) */
#define TRIM_AT (4u << 20)       /* a parse estimated above this gives its pages back before the next one runs */
#define HEADER_DEADLINE 5 /* seconds from accept to complete request headers */
#define BODY_DEADLINE 10  /* seconds from the headers to the end of the body */
#define IDLE_TIMEOUT 30   /* seconds without traffic before a connection is closed */
#define LOG_BURST 10      /* microhttpd error lines per LOG_WINDOW seconds; the rest are counted */
#define LOG_WINDOW 10

/*
 * TLS 1.3, and TLS 1.2 only with an ECDHE key exchange (forward secrecy) and an AEAD cipher: no
 * static RSA, no finite-field DHE, no CBC with SHA-1 MACs. Key exchange settings do not apply to
 * TLS 1.3, whose groups stay GnuTLS's defaults.
 */
#define TLS_PRIORITIES                                                                                          \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-CIPHER-ALL:+AES-128-GCM:"     \
    "+AES-256-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD"

void wh_log(const char *fmt, ...)
{
    char line[2200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line: stdio's stream lock keeps lines from different threads whole. */
    fprintf(stderr, "gpucap-webhook: %s\n", line);
}

/*
 * Lines a client can cause at will go through here: LOG_BURST per window, then a count of the rest
 * when the window ends (NULL: only that check, from the main thread).
 */
static pthread_mutex_t limited_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t limited_since;
static unsigned limited_said, limited_dropped;

static void log_limited(const char *line)
{
    time_t now = time(NULL);
    pthread_mutex_lock(&limited_lock);
    if (now - limited_since >= LOG_WINDOW) {
        if (limited_dropped)
            wh_log("%u more lines of client errors in the last %d s not shown (rate limit)", limited_dropped,
                    LOG_WINDOW);
        limited_since = now;
        limited_said = limited_dropped = 0;
    }
    if (line && limited_said < LOG_BURST) {
        limited_said++;
        wh_log("%s", line);
    } else if (line) {
        limited_dropped++;
    }
    pthread_mutex_unlock(&limited_lock);
}

/* ---- credentials ---- */

struct creds {
    gnutls_pcert_st chain[MAX_CHAIN];
    unsigned n;
    time_t not_after; /* the serving certificate's expiry; 0 if unknown */
    gnutls_privkey_t key;
    struct creds *older;
};

/* The current set, read by every handshake; written by the reloading thread only. */
static _Atomic(struct creds *) current;

/* Identity of both files as loaded: a changed inode, size or time means "look again". */
struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

static int sig_of(const char *path, struct file_sig *s)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    *s = (struct file_sig){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return 0;
}

static bool sig_eq(const struct file_sig *a, const struct file_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
           a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static int read_file(const char *path, gnutls_datum_t *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    unsigned char *buf = malloc(MAX_PEM + 1);
    size_t n = buf ? fread(buf, 1, MAX_PEM + 1, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (!buf || err || n == 0 || n > MAX_PEM) {
        free(buf);
        return buf ? -EINVAL : -ENOMEM;
    }
    out->data = buf;
    out->size = (unsigned)n;
    return 0;
}

static void creds_free(struct creds *c)
{
    while (c) {
        struct creds *next = c->older;
        for (unsigned i = 0; i < c->n; i++)
            gnutls_pcert_deinit(&c->chain[i]);
        gnutls_privkey_deinit(c->key);
        free(c);
        c = next;
    }
}

/* Loads a cert/key pair; *why gets a reason on failure. The pair must match. */
static struct creds *creds_load(const char *cert_path, const char *key_path, const char **why)
{
    gnutls_datum_t cert = {0}, key = {0};
    struct creds *c = NULL;
    gnutls_certificate_credentials_t check = NULL;
    *why = "cannot read the certificate file";
    if (read_file(cert_path, &cert) != 0)
        goto out;
    *why = "cannot read the key file";
    if (read_file(key_path, &key) != 0)
        goto out;

    /* GnuTLS checks here that the key belongs to the certificate. */
    int rc = gnutls_certificate_allocate_credentials(&check);
    if (rc == 0)
        rc = gnutls_certificate_set_x509_key_mem2(check, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        *why = gnutls_strerror(rc);
        goto out;
    }

    c = calloc(1, sizeof *c);
    *why = "out of memory";
    if (!c)
        goto out;
    c->n = MAX_CHAIN;
    rc = gnutls_pcert_list_import_x509_raw(c->chain, &c->n, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        c->n = 0;
        goto fail;
    }
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) == 0) {
        if (gnutls_x509_crt_import(crt, &c->chain[0].cert, GNUTLS_X509_FMT_DER) == 0)
            c->not_after = gnutls_x509_crt_get_expiration_time(crt);
        gnutls_x509_crt_deinit(crt);
    }
    rc = gnutls_privkey_init(&c->key);
    if (rc == 0)
        rc = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0)
        goto fail;
    goto out;
fail:
    *why = gnutls_strerror(rc);
    creds_free(c);
    c = NULL;
out:
    if (check)
        gnutls_certificate_free_credentials(check);
    if (key.data) {
        gnutls_memset(key.data, 0, key.size);
        free(key.data);
    }
    free(cert.data);
    return c;
}

static void log_creds(const char *verb, const struct creds *c)
{
    unsigned char digest[32];
    size_t size = sizeof digest;
    char hex[3 * sizeof digest] = "";
    if (gnutls_fingerprint(GNUTLS_DIG_SHA256, &c->chain[0].cert, digest, &size) == 0)
        for (size_t i = 0; i < size; i++)
            snprintf(hex + 3 * i, sizeof hex - 3 * i, "%02X%s", digest[i], i + 1 < size ? ":" : "");
    wh_log("%s certificate, sha256 fingerprint %s", verb, hex);
}

static int pick_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                     const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **chain, unsigned *n,
                     gnutls_privkey_t *key)
{
    struct creds *c = atomic_load(&current);
    if (!c)
        return -1;
    *chain = c->chain;
    *n = c->n;
    *key = c->key;
    return 0;
}

struct watch {
    const char *cert, *key;
    struct file_sig cert_sig, key_sig;
    bool failed; /* the files as they are now did not load; said once */
};

/* Swaps in the files' pair when they changed since the last look. Returns 0 when a set is current. */
static int reload(struct watch *w, bool first)
{
    struct file_sig cs, ks;
    if (sig_of(w->cert, &cs) != 0 || sig_of(w->key, &ks) != 0) {
        if (first || !w->failed)
            wh_log("cannot stat %s or %s: %s%s", w->cert, w->key, strerror(errno),
                    first ? "" : "; keeping the previous certificate");
        w->failed = true;
        return first ? -1 : 0;
    }
    if (!first && sig_eq(&cs, &w->cert_sig) && sig_eq(&ks, &w->key_sig))
        return 0;
    const char *why;
    struct creds *c = creds_load(w->cert, w->key, &why);
    if (!c) {
        /* Remember these files so that a bad pair is reported once, not every interval. */
        if (first || !w->failed || !sig_eq(&cs, &w->cert_sig) || !sig_eq(&ks, &w->key_sig))
            wh_log("cannot load %s with %s: %s%s", w->cert, w->key, why,
                    first ? "" : "; keeping the previous certificate");
        w->cert_sig = cs;
        w->key_sig = ks;
        w->failed = true;
        return first ? -1 : 0;
    }
    c->older = atomic_load(&current);
    atomic_store(&current, c);
    w->cert_sig = cs;
    w->key_sig = ks;
    w->failed = false;
    log_creds(first ? "serving" : "reloaded", c);
    return 0;
}

/* ---- connections ---- */

/* The server: its loop, its bounds and its deadlines (tools/common/serve.h). */
static struct gpc_serve server;

static void set_deadline(struct MHD_Connection *conn, unsigned seconds)
{
    gpc_http_guard_deadline(&server.guard, conn, seconds);
}

/* ---- metrics ---- */

/*
 * Results of POST /mutate: allowed (no change), patched (allowed with a patch), denied (a policy
 * said no), bad_request (not an admission review, too large, too costly to parse), error (the
 * webhook could not decide: out of memory, too busy, or a denial with a 5xx code, which says "retry").
 */
enum result { R_ALLOWED, R_PATCHED, R_DENIED, R_BAD_REQUEST, R_ERROR, R__COUNT };
static const char *const result_names[R__COUNT] = {"allowed", "patched", "denied", "bad_request", "error"};
static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof buckets / sizeof *buckets)
static atomic_ullong admissions[R__COUNT];
static atomic_ullong latency_count[NBUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
static atomic_ullong latency_sum_ns;
static atomic_ullong parse_waits, busy_refusals;

static void count_result(enum result r, const struct timespec *t0)
{
    atomic_fetch_add(&admissions[r], 1);
    if (!t0)
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ns = (uint64_t)(t1.tv_sec - t0->tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0->tv_nsec);
    unsigned b = 0;
    while (b < NBUCKETS && (double)ns / 1e9 > buckets[b])
        b++;
    atomic_fetch_add(&latency_count[b], 1);
    atomic_fetch_add(&latency_sum_ns, ns);
}

/* The result of a handled review, from the response it carries (status 200) or its status. */
static enum result classify(const struct gpc_admission_result *res)
{
    if (!res->body || res->status >= 500)
        return R_ERROR;
    if (res->status != 200)
        return R_BAD_REQUEST;
    json_t *root = json_loadb(res->body, res->body_len, 0, NULL);
    json_t *resp = json_object_get(root, "response");
    enum result r = R_ERROR;
    if (json_is_true(json_object_get(resp, "allowed")))
        r = json_object_get(resp, "patch") ? R_PATCHED : R_ALLOWED;
    else if (json_is_false(json_object_get(resp, "allowed")))
        r = json_integer_value(json_object_get(json_object_get(resp, "status"), "code")) >= 500 ? R_ERROR : R_DENIED;
    json_decref(root);
    return r;
}

static enum MHD_Result metrics(struct MHD_Connection *conn)
{
    struct gpc_text t = {0};
    gpc_prom_family(&t, "gpucap_webhook_admissions_total", "counter", "Pod admission reviews answered, by result.");
    for (int r = 0; r < R__COUNT; r++)
        gpc_text_printf(&t, "gpucap_webhook_admissions_total{result=\"%s\"} %llu\n", result_names[r],
                        (unsigned long long)atomic_load(&admissions[r]));
    gpc_prom_family(&t, "gpucap_webhook_admission_duration_seconds", "histogram",
                    "Time from a complete review to its answer.");
    unsigned long long cum = 0;
    for (unsigned b = 0; b <= NBUCKETS; b++) {
        cum += atomic_load(&latency_count[b]);
        if (b < NBUCKETS)
            gpc_text_printf(&t, "gpucap_webhook_admission_duration_seconds_bucket{le=\"%g\"} %llu\n", buckets[b], cum);
        else
            gpc_text_printf(&t, "gpucap_webhook_admission_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    gpc_text_printf(&t, "gpucap_webhook_admission_duration_seconds_sum %.9f\n"
                        "gpucap_webhook_admission_duration_seconds_count %llu\n",
                    (double)atomic_load(&latency_sum_ns) / 1e9, cum);
    struct creds *c = atomic_load(&current);
    gpc_prom_family(&t, "gpucap_webhook_certificate_expiry_timestamp_seconds", "gauge",
                    "When the serving certificate expires (Unix time).");
    gpc_text_printf(&t, "gpucap_webhook_certificate_expiry_timestamp_seconds %lld\n", (long long)(c ? c->not_after : 0));
    gpc_prom_family(&t, "gpucap_webhook_connections_closed_slow_total", "counter",
                    "Connections closed for not finishing a request in time.");
    gpc_text_printf(&t, "gpucap_webhook_connections_closed_slow_total %llu\n",
                    (unsigned long long)atomic_load(&server.guard.closed));
    gpc_prom_family(&t, "gpucap_webhook_parse_waits_total", "counter",
                    "Reviews whose parse waited for the parses in flight to leave room (the memory bound).");
    gpc_text_printf(&t, "gpucap_webhook_parse_waits_total %llu\n", (unsigned long long)atomic_load(&parse_waits));
    gpc_prom_family(&t, "gpucap_webhook_busy_total", "counter",
                    "Reviews answered 503 because the request bytes or the parses in flight were at their bound.");
    gpc_text_printf(&t, "gpucap_webhook_busy_total %llu\n", (unsigned long long)atomic_load(&busy_refusals));
    gpc_prom_family(&t, "gpucap_webhook_build_info", "gauge", "The webhook's version.");
    gpc_text_printf(&t, "gpucap_webhook_build_info{version=\"%s\"} 1\n", GPUCAP_VERSION_STRING);
    if (t.failed)
        return gpc_http_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", 14, NULL);
    enum MHD_Result rc = gpc_http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", t.text, t.len, NULL);
    gpc_text_free(&t);
    return rc;
}

/* Ready: a certificate is loaded and has not expired. */
static bool ready(void)
{
    struct creds *c = atomic_load(&current);
    return c && (c->not_after == 0 || c->not_after > time(NULL));
}

/* ---- request bodies ---- */

/* Request bytes held by all connections together, against BUFFERED_MAX. */
static atomic_size_t buffered;

static bool reserve(size_t n)
{
    size_t was = atomic_fetch_add(&buffered, n);
    if (was + n <= BUFFERED_MAX)
        return true;
    atomic_fetch_sub(&buffered, n);
    return false;
}

/*
 * The estimated memory of the parses in flight, against PARSE_BUDGET. A parse takes its estimate
 * before it runs, waiting (on the worker's thread) until the others leave room; a wait that would
 * pass PARSE_WAIT_MS gives up (the review is answered 503: retry). One estimate alone above the
 * budget never waits (refused before).
 */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t parse_room;
static size_t parsing;

static bool parse_take(size_t cost)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += PARSE_WAIT_MS / 1000;
    until.tv_nsec += (long)(PARSE_WAIT_MS % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    bool ok = true, waited = false;
    pthread_mutex_lock(&parse_lock);
    while (parsing + cost > PARSE_BUDGET) {
        waited = true;
        if (pthread_cond_timedwait(&parse_room, &parse_lock, &until) == ETIMEDOUT && parsing + cost > PARSE_BUDGET) {
            ok = false;
            break;
        }
    }
    if (ok)
        parsing += cost;
    pthread_mutex_unlock(&parse_lock);
    if (waited)
        atomic_fetch_add(&parse_waits, 1);
    return ok;
}

static void parse_give(size_t cost)
{
    pthread_mutex_lock(&parse_lock);
    parsing -= cost;
    pthread_cond_broadcast(&parse_room);
    pthread_mutex_unlock(&parse_lock);
}

struct upload {
    char *buf;
    size_t len, cap;
    size_t reserved; /* counted in buffered */
    size_t dropped; /* bytes past the limit, read and thrown away */
};

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
    return gpc_http_reply(conn, status, "text/plain", msg, strlen(msg), NULL);
}

static enum MHD_Result too_big(struct MHD_Connection *conn)
{
    count_result(R_BAD_REQUEST, NULL);
    char line[120];
    snprintf(line, sizeof line, "rejected: request body larger than %u bytes", GPC_ADMISSION_MAX_BODY);
    log_limited(line);
    return text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body larger than " GPC_ADMISSION_MAX_BODY_TEXT "\n");
}

static enum MHD_Result busy(struct MHD_Connection *conn, const char *what)
{
    count_result(R_ERROR, NULL);
    atomic_fetch_add(&busy_refusals, 1);
    char line[160];
    snprintf(line, sizeof line, "rejected: %s", what);
    log_limited(line);
    return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "too many requests in flight; retry\n");
}

/* A complete body: its shape checked, its parse given room, the review answered. */
static enum MHD_Result answer(struct MHD_Connection *conn, const struct gpc_admission_config *cfg, struct upload *up)
{
    struct gpc_shape shape;
    const char *refused = gpc_shape_scan(up->buf, up->len, &shape);
    char msg[200];
    if (!refused && shape.cost > PARSE_BUDGET) {
        snprintf(msg, sizeof msg, "JSON too costly to parse: about %zu MiB (objects %zu, arrays %zu, values %zu), "
                                  "more than the %u MiB all parses in flight may take", shape.cost >> 20,
                 shape.objects, shape.arrays, shape.strings + shape.scalars + shape.literals + shape.members,
                 PARSE_BUDGET >> 20);
        refused = msg;
    }
    if (refused) {
        char line[260];
        snprintf(line, sizeof line, "rejected: %s", refused);
        log_limited(line);
        char body[240];
        snprintf(body, sizeof body, "%s\n", refused);
        count_result(R_BAD_REQUEST, NULL);
        return text(conn, MHD_HTTP_BAD_REQUEST, body);
    }
    if (!parse_take(shape.cost))
        return busy(conn, "the parses in flight are at their memory bound");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct gpc_admission_result res;
    gpc_admission_handle(cfg, up->buf, up->len, &res);
    /*
     * The tree is freed, but malloc keeps its pages in this thread's arena, and the next large parse
     * may run in another thread's: without this, each of the worker threads would keep the pages of
     * the largest parse it ever ran, and resident memory would be threads x the bound.
     */
    if (shape.cost >= TRIM_AT)
        malloc_trim(0);
    parse_give(shape.cost);
    count_result(classify(&res), &t0);
    wh_log("%s", res.log);
    enum MHD_Result rc = res.body ? gpc_http_reply(conn, (unsigned)res.status, res.content_type, res.body, res.body_len, NULL)
                                  : text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    gpc_admission_result_free(&res);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **state)
{
    const struct gpc_admission_config *cfg = cls;
    if (!*state)
        set_deadline(conn, BODY_DEADLINE);
    bool livez = strcmp(url, "/livez") == 0, readyz = strcmp(url, "/readyz") == 0 || strcmp(url, "/healthz") == 0;
    if (livez || readyz || strcmp(url, "/metrics") == 0) {
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
            return gpc_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "use GET\n", 8, "GET, HEAD");
        if (livez)
            return text(conn, MHD_HTTP_OK, "ok\n");
        if (readyz)
            return ready() ? text(conn, MHD_HTTP_OK, "ok\n")
                           : text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no valid certificate\n");
        return metrics(conn);
    }
    if (strcmp(url, "/mutate") != 0)
        return text(conn, MHD_HTTP_NOT_FOUND, "not found: POST /mutate, GET /livez, /readyz, /healthz or /metrics\n");
    if (strcmp(method, "POST") != 0)
        return gpc_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "use POST\n", 9, "POST");

    struct upload *up = *state;
    if (!up) {
        /*
         * First call, headers only: refuse an announced oversize body before reading it, and hold
         * the announced size against the shared cap now, so that the body fits when it comes.
         */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long announced = cl ? strtoull(cl, NULL, 10) : 0;
        if (announced > GPC_ADMISSION_MAX_BODY)
            return too_big(conn);
        if (announced && !reserve(announced))
            return busy(conn, "too many request bytes in flight");
        up = calloc(1, sizeof *up);
        if (!up) {
            atomic_fetch_sub(&buffered, announced);
            return MHD_NO;
        }
        up->reserved = announced;
        *state = up;
        return MHD_YES;
    }
    if (*data_size) {
        if (up->dropped || up->len + *data_size > GPC_ADMISSION_MAX_BODY) {
            /*
             * A chunked body that grew too large. microhttpd cannot answer in the middle of an
             * upload: drop the rest and answer 413 at its end, or hang up on one that goes on.
             */
            up->dropped += *data_size;
            *data_size = 0;
            return up->dropped > 4 * GPC_ADMISSION_MAX_BODY ? MHD_NO : MHD_YES;
        }
        if (up->len + *data_size > up->cap) {
            size_t cap = up->cap ? up->cap : up->reserved ? up->reserved : 16384;
            while (cap < up->len + *data_size)
                cap *= 2;
            if (cap > GPC_ADMISSION_MAX_BODY)
                cap = GPC_ADMISSION_MAX_BODY;
            /* A chunked body reserves as it grows; past the shared cap the connection is dropped. */
            if (cap > up->reserved) {
                if (!reserve(cap - up->reserved)) {
                    log_limited("dropped a chunked upload: too many request bytes in flight");
                    return MHD_NO;
                }
                up->reserved = cap;
            }
            char *buf = realloc(up->buf, cap);
            if (!buf)
                return MHD_NO;
            up->buf = buf;
            up->cap = cap;
        }
        memcpy(up->buf + up->len, data, *data_size);
        up->len += *data_size;
        *data_size = 0;
        return MHD_YES;
    }
    if (up->dropped)
        return too_big(conn);
    return answer(conn, cfg, up);
}

static void on_done(void *cls, struct MHD_Connection *conn, void **state, enum MHD_RequestTerminationCode why)
{
    set_deadline(conn, 0);
    struct upload *up = *state;
    if (up) {
        atomic_fetch_sub(&buffered, up->reserved);
        free(up->buf);
        free(up);
        *state = NULL;
    }
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    char full[540];
    snprintf(full, sizeof full, "microhttpd: %s", line);
    log_limited(full);
}

/* ---- the daemon ---- */

struct loop {
    const struct gpc_server_options *opt;
    struct watch w;
    unsigned ticks;
};

/* Main thread, every 100 ms: the closed connections said, the rate limit's window, the certificate. */
static void tick(void *ctx, unsigned closed)
{
    struct loop *l = ctx;
    if (closed) {
        char line[160];
        snprintf(line, sizeof line,
                 "closed %u connection%s that did not finish a request in time (headers %d s, body %d s)", closed,
                 closed == 1 ? "" : "s", HEADER_DEADLINE, BODY_DEADLINE);
        log_limited(line);
    }
    if (l->ticks % 10 == 0)
        log_limited(NULL);
    if (++l->ticks >= l->opt->reload_interval * 10) {
        l->ticks = 0;
        reload(&l->w, false);
    }
}

static void started(void *ctx, const char *url)
{
    const struct gpc_server_options *opt = ctx;
    char per_ip[32];
    snprintf(per_ip, sizeof per_ip, "%u", opt->max_connections_per_ip);
    wh_log("listening on %s with %u threads, %u connections (%s from one address); image %s, preload %s, "
           "default-memory %s, max-memory %s", url, opt->threads, opt->max_connections,
           opt->max_connections_per_ip ? per_ip : "all", opt->admission.image,
           opt->admission.preload == GPC_PRELOAD_ENV ? "env" : "file",
           opt->admission.default_memory ? opt->admission.default_memory : "none (annotated pods only)",
           opt->admission.max_memory ? opt->admission.max_memory : "none");
    char policy[600];
    gpc_admission_describe(&opt->admission, policy, sizeof policy);
    wh_log("%s", policy);
}

int gpc_server_run(const struct gpc_server_options *opt, volatile sig_atomic_t *stop)
{
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (gpc_parse_listen(opt->listen, &addr, &addrlen) != 0) {
        wh_log("listen \"%s\": expected HOST:PORT, [IPV6]:PORT or :PORT with a numeric host and port", opt->listen);
        return -1;
    }
    if (!MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK)) {
        wh_log("this libmicrohttpd has no TLS certificate callback");
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&parse_room, &ca);
    pthread_condattr_destroy(&ca);
    struct loop l = {.opt = opt, .w = {.cert = opt->cert, .key = opt->key}};
    if (reload(&l.w, true) != 0)
        return -1;
    server = (struct gpc_serve){
        .listen = opt->listen,
        .threads = opt->threads,
        .max_connections = opt->max_connections,
        .max_per_ip = opt->max_connections_per_ip,
        .idle_timeout = IDLE_TIMEOUT,
        .header_deadline = HEADER_DEADLINE,
        .tls_cert_callback = (void *)pick_cert,
        .tls_priorities = TLS_PRIORITIES,
        .handler = on_request,
        .handler_cls = (void *)&opt->admission,
        .completed = on_done,
        .logger = on_mhd_error,
        .tick = tick,
        .tick_ctx = &l,
        .started = started,
        .started_ctx = (void *)opt,
    };
    char err[300];
    int rc = gpc_serve_run(&server, stop, err, sizeof err);
    if (rc != 0)
        wh_log("%s", err);
    else
        wh_log("stopping");
    creds_free(atomic_load(&current));
    atomic_store(&current, NULL);
    return rc == 0 ? 0 : -1;
}
