/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c: HTTPS for the webhook: routing, request bodies, certificate reload, the log.
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
 * bounded here (README.md of examples/kubernetes, "Limits", has the measured worst case): a body
 * limit, a cap on request bytes buffered across all connections, a cheap scan that refuses JSON whose
 * nesting or number of values would cost far more to parse than its size, total and per-address
 * connection limits, deadlines from accept to complete request headers (TLS handshake included) and
 * from there to a complete body, enforced by the main thread, an idle timeout, and error lines
 * rate-limited. TLS is 1.3, or 1.2 with
 * ECDHE and an AEAD cipher only.
 *
 * Besides POST /mutate: GET /livez (the process serves), GET /readyz (a certificate is loaded and
 * has not expired), GET /healthz (the same as /readyz, kept for older manifests) and GET /metrics,
 * Prometheus text: admissions by result, their latency as a histogram, the certificate's expiry, the
 * connections closed by a deadline. The counters are atomics: a request takes no lock for them.
 */
#include "server.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <jansson.h>
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

#define MAX_CHAIN 8
#define MAX_PEM (1u << 20)

/* Limits against hostile clients: README.md of examples/kubernetes, "Limits". */
#define BUFFERED_MAX (8u << 20)   /* request bytes held across all connections */
#define JSON_MAX_DEPTH 64         /* a pod with managedFields nests about 15 deep */
#define JSON_MAX_CONTAINERS 16384 /* objects and arrays in one body (about 200 bytes each parsed) */
#define JSON_MAX_VALUES 65536     /* values of any kind in one body */
#define HEADER_DEADLINE 5 /* seconds from accept to complete request headers */
#define BODY_DEADLINE 10  /* seconds from the headers to the end of the body */
#define IDLE_TIMEOUT 30   /* seconds without traffic before a connection is closed */
#define LOG_BURST 10      /* microhttpd error lines per LOG_WINDOW seconds; the rest are counted */
#define LOG_WINDOW 10
#define STR_(x) #x
#define STR(x) STR_(x)

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

/* Deadlines from accept to headers, and from there to the body: http.h, gpc_http_guard. */
static struct gpc_http_guard guard;

static void set_deadline(struct MHD_Connection *conn, unsigned seconds)
{
    gpc_http_guard_deadline(&guard, conn, seconds);
}

/* Main thread: ends the connections past their deadline. */
static void sweep_slow(void)
{
    unsigned n = gpc_http_guard_sweep(&guard);
    if (n) {
        char line[160];
        snprintf(line, sizeof line,
                 "closed %u connection%s that did not finish a request in time (headers %d s, body %d s)", n,
                 n == 1 ? "" : "s", HEADER_DEADLINE, BODY_DEADLINE);
        log_limited(line);
    }
}

/* ---- metrics ---- */

/*
 * Results of POST /mutate: allowed (no change), patched (allowed with a patch), denied (a policy
 * said no), bad_request (not an admission review, too large, too deep), error (the webhook could not
 * decide: out of memory, too busy, or a denial with a 5xx code, which says "retry").
 */
enum result { R_ALLOWED, R_PATCHED, R_DENIED, R_BAD_REQUEST, R_ERROR, R__COUNT };
static const char *const result_names[R__COUNT] = {"allowed", "patched", "denied", "bad_request", "error"};
static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof buckets / sizeof *buckets)
static atomic_ullong admissions[R__COUNT];
static atomic_ullong latency_count[NBUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
static atomic_ullong latency_sum_ns;

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

/* A growing text for /metrics; NULL text after an allocation failure. */
struct mtext {
    char *p;
    size_t len, cap;
};

static void mprintf(struct mtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mprintf(struct mtext *t, const char *fmt, ...)
{
    for (int tries = 0; tries < 8; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = t->p ? vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        if (t->cap && !t->p)
            return; /* failed before */
        size_t cap = t->cap ? 2 * t->cap : 8192;
        char *p = realloc(t->p, cap);
        if (!p) {
            free(t->p);
            t->p = NULL;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

static enum MHD_Result metrics(struct MHD_Connection *conn)
{
    struct mtext t = {0};
    mprintf(&t, "# HELP gpucap_webhook_admissions_total Pod admission reviews answered, by result.\n"
                "# TYPE gpucap_webhook_admissions_total counter\n");
    for (int r = 0; r < R__COUNT; r++)
        mprintf(&t, "gpucap_webhook_admissions_total{result=\"%s\"} %llu\n", result_names[r],
                (unsigned long long)atomic_load(&admissions[r]));
    mprintf(&t, "# HELP gpucap_webhook_admission_duration_seconds Time from a complete review to its answer.\n"
                "# TYPE gpucap_webhook_admission_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (unsigned b = 0; b <= NBUCKETS; b++) {
        cum += atomic_load(&latency_count[b]);
        if (b < NBUCKETS)
            mprintf(&t, "gpucap_webhook_admission_duration_seconds_bucket{le=\"%g\"} %llu\n", buckets[b], cum);
        else
            mprintf(&t, "gpucap_webhook_admission_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    mprintf(&t, "gpucap_webhook_admission_duration_seconds_sum %.9f\n"
                "gpucap_webhook_admission_duration_seconds_count %llu\n",
            (double)atomic_load(&latency_sum_ns) / 1e9, cum);
    struct creds *c = atomic_load(&current);
    mprintf(&t, "# HELP gpucap_webhook_certificate_expiry_timestamp_seconds When the serving certificate expires "
                "(Unix time).\n# TYPE gpucap_webhook_certificate_expiry_timestamp_seconds gauge\n"
                "gpucap_webhook_certificate_expiry_timestamp_seconds %lld\n",
            (long long)(c ? c->not_after : 0));
    mprintf(&t, "# HELP gpucap_webhook_connections_closed_slow_total Connections closed for not finishing a request "
                "in time.\n# TYPE gpucap_webhook_connections_closed_slow_total counter\n"
                "gpucap_webhook_connections_closed_slow_total %llu\n",
            (unsigned long long)atomic_load(&guard.closed));
    mprintf(&t, "# HELP gpucap_webhook_build_info The webhook's version.\n# TYPE gpucap_webhook_build_info gauge\n"
                "gpucap_webhook_build_info{version=\"%s\"} 1\n", GPUCAP_VERSION_STRING);
    if (!t.p)
        return gpc_http_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", 14, NULL);
    enum MHD_Result rc = gpc_http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", t.p, t.len, NULL);
    free(t.p);
    return rc;
}

/* Ready: a certificate is loaded and has not expired. */
static bool ready(void)
{
    struct creds *c = atomic_load(&current);
    return c && (c->not_after == 0 || c->not_after > time(NULL));
}

/* ---- requests ---- */

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

static enum MHD_Result busy(struct MHD_Connection *conn)
{
    count_result(R_ERROR, NULL);
    log_limited("rejected: too many request bytes in flight");
    return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "too many requests in flight; retry\n");
}

/*
 * A scan over the body before jansson parses it: NULL when its shape is within the limits, else why
 * not. Parsing `{}` costs about 200 bytes of memory for 2 bytes of input; the limits keep one parse
 * to a few MiB whatever the body holds. Malformed JSON is left to the parser.
 */
static const char *json_shape(const char *p, size_t len)
{
    unsigned depth = 0;
    size_t containers = 0, values = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_MAX_DEPTH)
                return "JSON nested deeper than " STR(JSON_MAX_DEPTH) " levels";
            if (++containers > JSON_MAX_CONTAINERS)
                return "JSON with more than " STR(JSON_MAX_CONTAINERS) " objects and arrays";
            values++;
        } else if (c == '}' || c == ']') {
            depth -= depth > 0;
        } else if (c == ',') {
            values++;
        }
        if (values > JSON_MAX_VALUES)
            return "JSON with more than " STR(JSON_MAX_VALUES) " values";
    }
    return NULL;
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
            return busy(conn);
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
    const char *shape = json_shape(up->buf, up->len);
    if (shape) {
        char line[160];
        snprintf(line, sizeof line, "rejected: %s", shape);
        log_limited(line);
        char msg[160];
        snprintf(msg, sizeof msg, "%s\n", shape);
        count_result(R_BAD_REQUEST, NULL);
        return text(conn, MHD_HTTP_BAD_REQUEST, msg);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct gpc_admission_result res;
    gpc_admission_handle(cfg, up->buf, up->len, &res);
    count_result(classify(&res), &t0);
    wh_log("%s", res.log);
    enum MHD_Result rc = res.body ? gpc_http_reply(conn, (unsigned)res.status, res.content_type, res.body, res.body_len, NULL)
                                  : text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    gpc_admission_result_free(&res);
    return rc;
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
    struct watch w = {.cert = opt->cert, .key = opt->key};
    if (reload(&w, true) != 0)
        return -1;
    if (gpc_http_guard_init(&guard, opt->max_connections, HEADER_DEADLINE) != 0) {
        wh_log("out of memory");
        creds_free(atomic_load(&current));
        atomic_store(&current, NULL);
        return -1;
    }

    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_TLS | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, (void *)&opt->admission, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_HTTPS_CERT_CALLBACK, pick_cert, MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES,
        MHD_OPTION_THREAD_POOL_SIZE, opt->threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT,
        MHD_OPTION_CONNECTION_LIMIT, opt->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        opt->max_connections_per_ip, MHD_OPTION_NOTIFY_CONNECTION, gpc_http_guard_notify, &guard,
        MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END);
    if (!d) {
        wh_log("cannot listen on %s: %s", opt->listen, strerror(errno));
        creds_free(atomic_load(&current));
        atomic_store(&current, NULL);
        gpc_http_guard_free(&guard);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char host[64] = "?";
    getnameinfo((struct sockaddr *)&addr, addrlen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
    wh_log("listening on https://%s%s%s:%u with %u threads; image %s, preload %s, default-memory %s, "
            "max-memory %s", addr.ss_family == AF_INET6 ? "[" : "", host, addr.ss_family == AF_INET6 ? "]" : "",
            info ? info->port : 0, opt->threads, opt->admission.image,
            opt->admission.preload == GPC_PRELOAD_ENV ? "env" : "file",
            opt->admission.default_memory ? opt->admission.default_memory : "none (annotated pods only)",
            opt->admission.max_memory ? opt->admission.max_memory : "none");
    char policy[600];
    gpc_admission_describe(&opt->admission, policy, sizeof policy);
    wh_log("%s", policy);

    /* Sleeps are cut short by the stop signal; the interval is checked in steps of 100 ms. */
    unsigned ticks = 0;
    while (!*stop) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        nanosleep(&tick, NULL);
        sweep_slow();
        if (ticks % 10 == 0)
            log_limited(NULL);
        if (++ticks >= opt->reload_interval * 10) {
            ticks = 0;
            reload(&w, false);
        }
    }
    wh_log("stopping");
    MHD_stop_daemon(d);
    gpc_http_guard_free(&guard);
    creds_free(atomic_load(&current));
    atomic_store(&current, NULL);
    return 0;
}
