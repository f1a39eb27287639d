/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podstream.h: the API server's answers about pods read as a stream (yajl): a page of a LIST, a
 * watch's events, a Status. Of each pod only what the agent uses is kept; everything else is
 * skipped as it passes, so the memory needed does not grow with what a pod carries.
 */
#ifndef GPUCAP_AGENT_PODSTREAM_H
#define GPUCAP_AGENT_PODSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#define GPC_RECORD_ANNOTATION "gpucap.io/budgets"
#define GPC_RECORD_MAX 16384 /* the webhook's record is a few hundred bytes */

/* What the agent uses of one pod (or of a watch event's object). */
struct gpc_pod_meta {
    char ns[64], name[254], uid[64], rv[64], node[254]; /* "" when absent */
    bool has_record;                /* annotation GPC_RECORD_ANNOTATION is there */
    bool record_bad;                /* ... but not a string, too long, or given twice */
    char record[GPC_RECORD_MAX + 1];
    size_t record_len;              /* may hold NULs: the record's reader refuses them */
    bool bad;                       /* a field used is of the wrong type, too long, holds a NUL or comes twice */
    /* A Status object (an error answer, a watch's ERROR event): its code, reason and message. */
    long code;
    char reason[64], message[256];
};

enum gpc_stream_kind { GPC_STREAM_LIST, GPC_STREAM_WATCH };

/* A LIST page's own metadata, and the Status when the answer is one. */
struct gpc_list_meta {
    char rv[64];
    char cont[4096];   /* metadata.continue: "" on the last page */
    bool rv_bad, cont_bad; /* too long or not a string */
    long code;         /* a Status answer's code, else 0 */
    char reason[64], message[256];
};

struct gpc_podstream;

/*
 * Called for each pod of a LIST page (type NULL) or each watch event (type "ADDED", "MODIFIED",
 * "DELETED", "BOOKMARK", "ERROR"; "" when the object is not an event: a Status answer). `p` is
 * valid during the call. Return 0 to go on, non-zero to stop reading (the feed returns -ECANCELED).
 */
typedef int gpc_pod_fn(const char *type, const struct gpc_pod_meta *p, void *arg);

/* A reader of one answer of `kind`. NULL when memory ran out. */
struct gpc_podstream *gpc_podstream_new(enum gpc_stream_kind kind, gpc_pod_fn *fn, void *arg);
void gpc_podstream_free(struct gpc_podstream *s);

/*
 * Feeds the next `len` bytes of the answer (any split: a token may straddle two calls). 0, or
 * -EBADMSG with `err` set when it is not JSON of the expected shape (nesting deeper than 512 levels,
 * one token over 4 MiB included), -ECANCELED when fn asked to stop.
 */
int gpc_podstream_feed(struct gpc_podstream *s, const char *buf, size_t len, char *err, size_t errlen);

/* The end of the answer: 0 when it was complete (*meta filled for a LIST), else -EBADMSG with err. */
int gpc_podstream_end(struct gpc_podstream *s, struct gpc_list_meta *meta, char *err, size_t errlen);

#endif
