/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podstream.c: the API server's answers about pods, read as they arrive (yajl's event parser).
 *
 * A LIST page is {"kind":..,"metadata":{"resourceVersion":..,"continue":..},"items":[POD,...]}, a
 * watch is a stream of {"type":..,"object":POD} values, an error is a Status object. Any pod an API
 * server can store must be read: annotations of 256 KiB, managedFields of a megabyte, U+0000 in a
 * value (`\u0000`, which the API server stores and returns), numbers of any size. So nothing is built
 * but what the agent uses of each pod (name, namespace, uid, resourceVersion, spec.nodeName, the
 * budget record): every other value is passed over as it streams by, and the memory needed is that of
 * the longest single token (bounded: 4 MiB), whatever the page holds. Strings are not checked for
 * UTF-8 here: the values used have narrow forms of their own, checked where they are used, and a
 * value not used cannot make a page fail. A value used that is of the wrong type, too long, holds a
 * NUL or is given twice marks its pod `bad` (the agent then leaves that pod alone); the page goes on.
 */
#include "podstream.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#define MAX_DEPTH 512
#define MAX_TOKEN (4u << 20) /* bytes fed with no token completed: a string or number that long */
#define SLICE 65536u

/* What a container (map or array) at some depth is. */
enum ctx { X_IGNORE, X_TOP_LIST, X_LIST_META, X_ITEMS, X_TOP_WATCH, X_POD, X_POD_META, X_POD_ANN, X_POD_SPEC };
/* The keys that matter, per container. */
enum key { K_OTHER, K_METADATA, K_ITEMS, K_CODE, K_REASON, K_MESSAGE, K_RV, K_CONTINUE, K_SPEC, K_NAME, K_NAMESPACE,
           K_UID, K_ANNOTATIONS, K_RECORD, K_NODENAME, K_TYPE, K_OBJECT };

/* Bits of `seen`: a used field given twice makes its object bad. */
enum { S_NAME = 1, S_NS = 2, S_UID = 4, S_RV = 8, S_NODE = 16, S_RECORD = 32, S_TYPE = 64, S_CODE = 128,
       S_REASON = 256, S_MESSAGE = 512, S_META = 1024, S_ANN = 2048, S_SPEC = 4096, S_OBJECT = 8192, S_CONT = 16384 };

struct gpc_podstream {
    enum gpc_stream_kind kind;
    gpc_pod_fn *fn;
    void *arg;
    yajl_handle y;
    int depth;                        /* containers open */
    unsigned char ctx[MAX_DEPTH + 1]; /* ctx[d]: the container at depth d (1 = the top value) */
    unsigned char key[MAX_DEPTH + 1]; /* the key last read in the map at depth d */
    size_t since_token;               /* bytes fed since a token last completed */
    bool stopped, shape_bad, items_seen;
    unsigned pod_seen, top_seen;
    char type[16];
    bool type_bad;
    struct gpc_pod_meta pod;
    struct gpc_list_meta list;
    char err[160];
};

static bool key_is(const unsigned char *k, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(k, want, n) == 0;
}

static enum key key_of(enum ctx c, const unsigned char *k, size_t n)
{
    switch (c) {
    case X_TOP_LIST:
        return key_is(k, n, "metadata") ? K_METADATA : key_is(k, n, "items") ? K_ITEMS : key_is(k, n, "code") ? K_CODE
               : key_is(k, n, "reason") ? K_REASON : key_is(k, n, "message") ? K_MESSAGE : K_OTHER;
    case X_LIST_META:
        return key_is(k, n, "resourceVersion") ? K_RV : key_is(k, n, "continue") ? K_CONTINUE : K_OTHER;
    case X_TOP_WATCH:
        return key_is(k, n, "type") ? K_TYPE : key_is(k, n, "object") ? K_OBJECT : key_is(k, n, "code") ? K_CODE
               : key_is(k, n, "reason") ? K_REASON : key_is(k, n, "message") ? K_MESSAGE : K_OTHER;
    case X_POD:
        return key_is(k, n, "metadata") ? K_METADATA : key_is(k, n, "spec") ? K_SPEC : key_is(k, n, "code") ? K_CODE
               : key_is(k, n, "reason") ? K_REASON : key_is(k, n, "message") ? K_MESSAGE : K_OTHER;
    case X_POD_META:
        return key_is(k, n, "name") ? K_NAME : key_is(k, n, "namespace") ? K_NAMESPACE : key_is(k, n, "uid") ? K_UID
               : key_is(k, n, "resourceVersion") ? K_RV : key_is(k, n, "annotations") ? K_ANNOTATIONS : K_OTHER;
    case X_POD_ANN:
        return key_is(k, n, GPC_RECORD_ANNOTATION) ? K_RECORD : K_OTHER;
    case X_POD_SPEC:
        return key_is(k, n, "nodeName") ? K_NODENAME : K_OTHER;
    default:
        return K_OTHER;
    }
}

/* A used field given a value of the wrong type (a container, a number, a boolean, null). */
static void wrong_type(struct gpc_podstream *s, enum ctx parent, enum key k)
{
    if (parent == X_POD_ANN && k == K_RECORD)
        s->pod.has_record = s->pod.record_bad = true;
    else if ((parent == X_POD_META && (k == K_NAME || k == K_NAMESPACE || k == K_UID || k == K_RV)) ||
             (parent == X_POD_SPEC && k == K_NODENAME))
        s->pod.bad = true;
    else if (parent == X_TOP_WATCH && k == K_TYPE)
        s->type_bad = true;
    else if (parent == X_LIST_META && k == K_RV)
        s->list.rv_bad = true;
    else if (parent == X_LIST_META && k == K_CONTINUE)
        s->list.cont_bad = true;
}

/* The container a value that opens under (parent, key) is. */
static enum ctx child_of(struct gpc_podstream *s, enum ctx parent, enum key k, bool is_map)
{
    enum ctx want = X_IGNORE;
    unsigned bit = 0, *seen = parent == X_TOP_LIST || parent == X_LIST_META ? &s->top_seen : &s->pod_seen;
    bool want_map = true;
    if (parent == X_TOP_LIST && k == K_METADATA)
        want = X_LIST_META, bit = S_META;
    else if (parent == X_TOP_LIST && k == K_ITEMS)
        want = X_ITEMS, want_map = false, bit = S_OBJECT;
    else if (parent == X_ITEMS)
        want = X_POD;
    else if (parent == X_TOP_WATCH && k == K_OBJECT)
        want = X_POD, bit = S_OBJECT;
    else if (parent == X_POD && k == K_METADATA)
        want = X_POD_META, bit = S_META;
    else if (parent == X_POD && k == K_SPEC)
        want = X_POD_SPEC, bit = S_SPEC;
    else if (parent == X_POD_META && k == K_ANNOTATIONS)
        want = X_POD_ANN, bit = S_ANN;
    if (want == X_IGNORE) {
        wrong_type(s, parent, k);
        return X_IGNORE;
    }
    if (want_map != is_map || (bit && (*seen & bit))) {
        /* The page's own structure is wrong: it cannot be read. A pod's: that pod is left alone
         * (an item that is not an object is passed over). */
        if (parent == X_TOP_LIST)
            s->shape_bad = true;
        else if (parent != X_ITEMS)
            s->pod.bad = true;
        return X_IGNORE;
    }
    *seen |= bit;
    return want;
}

static void reset_pod(struct gpc_podstream *s)
{
    /* All but the record's buffer (16 KiB, written before it is read). */
    memset(&s->pod, 0, offsetof(struct gpc_pod_meta, record));
    s->pod.record[0] = '\0';
    memset(&s->pod.record_len, 0, sizeof s->pod - offsetof(struct gpc_pod_meta, record_len));
    s->pod_seen = 0;
    s->type[0] = '\0';
    s->type_bad = false;
}

static int fail(struct gpc_podstream *s, const char *why)
{
    if (!s->err[0])
        snprintf(s->err, sizeof s->err, "%s", why);
    return 0; /* yajl stops */
}

static int open_container(struct gpc_podstream *s, bool is_map)
{
    s->since_token = 0;
    if (s->depth == MAX_DEPTH)
        return fail(s, "JSON nested deeper than 512 levels");
    int d = ++s->depth;
    enum ctx c;
    if (d == 1) {
        if (!is_map)
            return fail(s, "the answer is not a JSON object");
        c = s->kind == GPC_STREAM_LIST ? X_TOP_LIST : X_TOP_WATCH;
        if (c == X_TOP_WATCH)
            reset_pod(s);
    } else {
        enum ctx parent = (enum ctx)s->ctx[d - 1];
        c = parent == X_IGNORE ? X_IGNORE : child_of(s, parent, (enum key)s->key[d - 1], is_map);
        if (s->shape_bad)
            return fail(s, "the answer is not a list of objects");
        if (c == X_POD && parent == X_ITEMS)
            reset_pod(s);
    }
    s->ctx[d] = (unsigned char)c;
    s->key[d] = K_OTHER;
    return 1;
}

static int on_start_map(void *ctx)
{
    return open_container(ctx, true);
}

static int on_start_array(void *ctx)
{
    return open_container(ctx, false);
}

static int deliver(struct gpc_podstream *s, const char *type)
{
    if (s->fn(type, &s->pod, s->arg) != 0) {
        s->stopped = true;
        return 0;
    }
    return 1;
}

static int close_container(void *ctx)
{
    struct gpc_podstream *s = ctx;
    s->since_token = 0;
    int d = s->depth--;
    enum ctx c = (enum ctx)s->ctx[d];
    if (c == X_POD && d >= 2 && s->ctx[d - 1] == X_ITEMS)
        return deliver(s, NULL);
    if (c == X_TOP_WATCH) {
        if (s->type_bad)
            s->pod.bad = true;
        return deliver(s, s->type);
    }
    if (c == X_ITEMS)
        s->items_seen = true;
    return 1;
}

/* Copies a used string: false when it is too long or holds a NUL. */
static bool take(char *dst, size_t cap, const unsigned char *v, size_t n)
{
    if (n >= cap || memchr(v, '\0', n))
        return false;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return true;
}

/* A text only said in the log: cut at its length or at a NUL. */
static void take_text(char *dst, size_t cap, const unsigned char *v, size_t n)
{
    size_t m = strnlen((const char *)v, n < cap - 1 ? n : cap - 1);
    memcpy(dst, v, m);
    dst[m] = '\0';
}

/* A used field, once: false (the object bad) when it came before. */
static bool once(unsigned *seen, unsigned bit)
{
    bool first = !(*seen & bit);
    *seen |= bit;
    return first;
}

static int on_string(void *ctx, const unsigned char *v, size_t n)
{
    struct gpc_podstream *s = ctx;
    s->since_token = 0;
    if (s->depth == 0)
        return fail(s, "the answer is not a JSON object");
    enum ctx c = (enum ctx)s->ctx[s->depth];
    enum key k = (enum key)s->key[s->depth];
    struct gpc_pod_meta *p = &s->pod;
    switch (c) {
    case X_POD_ANN:
        if (k == K_RECORD) {
            p->has_record = true;
            if (!once(&s->pod_seen, S_RECORD) || n > GPC_RECORD_MAX) {
                p->record_bad = true;
            } else if (!p->record_bad) {
                memcpy(p->record, v, n);
                p->record[n] = '\0';
                p->record_len = n;
            }
        }
        break;
    case X_POD_META:
        if (k == K_NAME)
            p->bad |= !once(&s->pod_seen, S_NAME) || !take(p->name, sizeof p->name, v, n);
        else if (k == K_NAMESPACE)
            p->bad |= !once(&s->pod_seen, S_NS) || !take(p->ns, sizeof p->ns, v, n);
        else if (k == K_UID)
            p->bad |= !once(&s->pod_seen, S_UID) || !take(p->uid, sizeof p->uid, v, n);
        else if (k == K_RV)
            p->bad |= !once(&s->pod_seen, S_RV) || !take(p->rv, sizeof p->rv, v, n);
        break;
    case X_POD_SPEC:
        if (k == K_NODENAME)
            p->bad |= !once(&s->pod_seen, S_NODE) || !take(p->node, sizeof p->node, v, n);
        break;
    case X_TOP_WATCH:
        if (k == K_TYPE)
            s->type_bad |= !once(&s->pod_seen, S_TYPE) || !take(s->type, sizeof s->type, v, n);
        __attribute__((fallthrough)); /* a Status at the top */
    case X_POD:
        if (k == K_REASON && once(&s->pod_seen, S_REASON))
            take_text(p->reason, sizeof p->reason, v, n);
        else if (k == K_MESSAGE && once(&s->pod_seen, S_MESSAGE))
            take_text(p->message, sizeof p->message, v, n);
        break;
    case X_LIST_META:
        if (k == K_RV)
            s->list.rv_bad |= !once(&s->top_seen, S_RV) || !take(s->list.rv, sizeof s->list.rv, v, n);
        else if (k == K_CONTINUE)
            s->list.cont_bad |= !once(&s->top_seen, S_CONT) || !take(s->list.cont, sizeof s->list.cont, v, n);
        break;
    case X_TOP_LIST:
        if (k == K_REASON && once(&s->top_seen, S_REASON))
            take_text(s->list.reason, sizeof s->list.reason, v, n);
        else if (k == K_MESSAGE && once(&s->top_seen, S_MESSAGE))
            take_text(s->list.message, sizeof s->list.message, v, n);
        break;
    default:
        break;
    }
    return 1;
}

/* A number: only a Status's code is one the agent reads; anywhere else a used field is wrong. */
static int on_number(void *ctx, const char *v, size_t n)
{
    struct gpc_podstream *s = ctx;
    s->since_token = 0;
    if (s->depth == 0)
        return fail(s, "the answer is not a JSON object");
    enum ctx c = (enum ctx)s->ctx[s->depth];
    enum key k = (enum key)s->key[s->depth];
    if (k == K_CODE && (c == X_TOP_LIST || c == X_TOP_WATCH || c == X_POD)) {
        long code = 0;
        for (size_t i = 0; i < n && i < 4; i++)
            code = v[i] >= '0' && v[i] <= '9' ? code * 10 + (v[i] - '0') : -1;
        if (n > 4 || code < 0)
            code = -1; /* not an HTTP status */
        if (c == X_TOP_LIST)
            s->list.code = code;
        else
            s->pod.code = code;
        return 1;
    }
    if (c != X_IGNORE)
        wrong_type(s, c, k);
    return 1;
}

static int on_scalar(struct gpc_podstream *s)
{
    s->since_token = 0;
    if (s->depth == 0)
        return fail(s, "the answer is not a JSON object");
    enum ctx c = (enum ctx)s->ctx[s->depth];
    if (c != X_IGNORE && c != X_ITEMS)
        wrong_type(s, c, (enum key)s->key[s->depth]);
    return 1;
}

static int on_null(void *ctx)
{
    struct gpc_podstream *s = ctx;
    if (s->depth == 1 && s->ctx[1] == X_TOP_LIST && s->key[1] == K_ITEMS && once(&s->top_seen, S_OBJECT)) {
        s->items_seen = true; /* "items": null, an empty list */
        return 1;
    }
    return on_scalar(ctx);
}

static int on_bool(void *ctx, int b)
{
    (void)b;
    return on_scalar(ctx);
}

static int on_key(void *ctx, const unsigned char *k, size_t n)
{
    struct gpc_podstream *s = ctx;
    s->since_token = 0;
    enum ctx c = (enum ctx)s->ctx[s->depth];
    s->key[s->depth] = (unsigned char)(c == X_IGNORE ? K_OTHER : key_of(c, k, n));
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_bool,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = close_container,
    .yajl_start_array = on_start_array,
    .yajl_end_array = close_container,
};

struct gpc_podstream *gpc_podstream_new(enum gpc_stream_kind kind, gpc_pod_fn *fn, void *arg)
{
    struct gpc_podstream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->kind = kind;
    s->fn = fn;
    s->arg = arg;
    s->y = yajl_alloc(&callbacks, NULL, s);
    if (!s->y) {
        free(s);
        return NULL;
    }
    yajl_config(s->y, yajl_dont_validate_strings, 1);
    if (kind == GPC_STREAM_WATCH)
        yajl_config(s->y, yajl_allow_multiple_values, 1);
    return s;
}

void gpc_podstream_free(struct gpc_podstream *s)
{
    if (!s)
        return;
    yajl_free(s->y);
    free(s);
}

/* yajl's status as ours, with the reason in err. */
static int status_of(struct gpc_podstream *s, yajl_status st, const char *buf, size_t len, char *err, size_t errlen)
{
    if (st == yajl_status_ok)
        return 0;
    if (s->stopped)
        return -ECANCELED;
    if (s->err[0]) {
        snprintf(err, errlen, "%s", s->err);
    } else {
        unsigned char *msg = yajl_get_error(s->y, 0, (const unsigned char *)buf, len);
        snprintf(err, errlen, "not JSON: %s", msg ? (const char *)msg : "?");
        if (msg)
            yajl_free_error(s->y, msg);
        for (char *p = err; *p; p++)
            if (*p == '\n')
                *p = ' ';
    }
    return -EBADMSG;
}

int gpc_podstream_feed(struct gpc_podstream *s, const char *buf, size_t len, char *err, size_t errlen)
{
    while (len) {
        size_t n = len < SLICE ? len : SLICE;
        if (s->since_token + n > MAX_TOKEN) {
            snprintf(err, errlen, "a JSON token longer than %u MiB", MAX_TOKEN >> 20);
            return -EBADMSG;
        }
        s->since_token += n;
        int rc = status_of(s, yajl_parse(s->y, (const unsigned char *)buf, n), buf, n, err, errlen);
        if (rc != 0)
            return rc;
        buf += n;
        len -= n;
    }
    return 0;
}

int gpc_podstream_end(struct gpc_podstream *s, struct gpc_list_meta *meta, char *err, size_t errlen)
{
    int rc = status_of(s, yajl_complete_parse(s->y), "", 0, err, errlen);
    if (rc != 0)
        return rc;
    if (meta) {
        *meta = s->list;
        if (s->kind == GPC_STREAM_LIST && !s->items_seen && !meta->code) {
            snprintf(err, errlen, "the answer is neither a list nor a Status");
            return -EBADMSG;
        }
    }
    return 0;
}
