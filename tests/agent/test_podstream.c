/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_podstream.c CASE: the agent's reading of API answers (podstream.c) and of the budget record
 * (record.c), one case per behaviour:
 *   split    a page read in one piece and one byte at a time gives the same pods
 *   nul      a NUL in a value not used leaves the pod whole; in a used one makes it bad
 *   twice    a used field given twice makes the pod bad; the record given twice is refused
 *   types    a used field of the wrong type makes the pod bad, the page goes on
 *   watch    a stream of events, bookmarks and a 410 ERROR, with the Status's code
 *   limits   nesting past 512 levels and a token past 4 MiB end the answer with an error
 *   record   the webhook's exact form is read; every other form is refused
 */
#include "podstream.h"
#include "record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c)                                                        \
    do {                                                                \
        if (!(c)) {                                                     \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                    \
        }                                                               \
    } while (0)

struct seen {
    int n;
    char type[8][16];
    struct gpc_pod_meta pod[8];
};

static int keep(const char *type, const struct gpc_pod_meta *p, void *arg)
{
    struct seen *s = arg;
    if (s->n < 8) {
        snprintf(s->type[s->n], sizeof s->type[0], "%s", type ? type : "-");
        s->pod[s->n] = *p;
    }
    s->n++;
    return 0;
}

/* Reads `text` as one answer of `kind`, in pieces of `step` bytes (0: whole). */
static int read_all(enum gpc_stream_kind kind, const char *text, size_t len, size_t step, struct seen *s,
                    struct gpc_list_meta *m)
{
    memset(s, 0, sizeof *s);
    struct gpc_podstream *ps = gpc_podstream_new(kind, keep, s);
    char err[200];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < len; i += step ? step : len)
        rc = gpc_podstream_feed(ps, text + i, step && len - i > step ? step : len - i, err, sizeof err);
    if (rc == 0)
        rc = gpc_podstream_end(ps, m, err, sizeof err);
    gpc_podstream_free(ps);
    return rc;
}

#define LIST_OF(items) "{\"kind\":\"PartialObjectMetadataList\",\"metadata\":{\"resourceVersion\":\"42\"," \
                       "\"continue\":\"tok\"},\"items\":[" items "]}"
#define POD(name, extra) "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"uid\":\"u-" name "\"," \
                         "\"resourceVersion\":\"7\",\"annotations\":{\"gpucap.io/budgets\":\"{}\"" extra "}}}"

static void case_split(void)
{
    static const char t[] = LIST_OF(POD("a", ",\"x\":\"\\u00e9\\ud83d\\ude00\"") "," POD("b", "") ","
                                    "{\"metadata\":{\"name\":\"c\",\"managedFields\":[{\"f\":{\"g\":[1,2.5e300,true,null]}}]},"
                                    "\"spec\":{\"nodeName\":\"n1\"}}");
    struct seen whole, bytes;
    struct gpc_list_meta m1, m2;
    CHECK(read_all(GPC_STREAM_LIST, t, sizeof t - 1, 0, &whole, &m1) == 0);
    CHECK(read_all(GPC_STREAM_LIST, t, sizeof t - 1, 1, &bytes, &m2) == 0);
    CHECK(whole.n == 3 && bytes.n == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(whole.pod[i].name, bytes.pod[i].name) == 0 && strcmp(whole.pod[i].uid, bytes.pod[i].uid) == 0);
        CHECK(whole.pod[i].has_record == bytes.pod[i].has_record && !whole.pod[i].bad && !bytes.pod[i].bad);
    }
    CHECK(strcmp(whole.pod[2].node, "n1") == 0 && strcmp(bytes.pod[2].node, "n1") == 0);
    CHECK(strcmp(m1.rv, "42") == 0 && strcmp(m2.cont, "tok") == 0);
    CHECK(strcmp(whole.pod[0].record, "{}") == 0 && whole.pod[0].record_len == 2);
}

static void case_nul(void)
{
    static const char t[] = LIST_OF(POD("a", ",\"t\":\"a\\u0000b\",\"\\u0000\":\"x\"") ","
                                    "{\"metadata\":{\"name\":\"b\\u0000\",\"uid\":\"u\",\"namespace\":\"ns\"}},"
                                    "{\"metadata\":{\"name\":\"c\",\"uid\":\"u\",\"namespace\":\"ns\",\"annotations\":"
                                    "{\"gpucap.io/budgets\":\"{\\u0000}\"}}}");
    struct seen s;
    struct gpc_list_meta m;
    CHECK(read_all(GPC_STREAM_LIST, t, sizeof t - 1, 7, &s, &m) == 0);
    CHECK(s.n == 3);
    CHECK(!s.pod[0].bad && s.pod[0].has_record && !s.pod[0].record_bad);
    CHECK(s.pod[1].bad);
    CHECK(!s.pod[2].bad && s.pod[2].record_len == 3 && s.pod[2].record[1] == '\0');
    struct gpc_record r;
    char err[100];
    CHECK(gpc_record_parse(s.pod[2].record, s.pod[2].record_len, &r, err, sizeof err) == -EINVAL);
}

static void case_twice(void)
{
    static const char t[] = LIST_OF("{\"metadata\":{\"name\":\"a\",\"uid\":\"u1\",\"uid\":\"u2\",\"namespace\":\"n\"}},"
                                    "{\"metadata\":{\"name\":\"b\",\"uid\":\"u\",\"namespace\":\"n\",\"annotations\":"
                                    "{\"gpucap.io/budgets\":\"x\",\"gpucap.io/budgets\":\"y\"}}},"
                                    "{\"metadata\":{\"name\":\"c\"},\"metadata\":{\"name\":\"d\"}}");
    struct seen s;
    struct gpc_list_meta m;
    CHECK(read_all(GPC_STREAM_LIST, t, sizeof t - 1, 0, &s, &m) == 0);
    CHECK(s.n == 3 && s.pod[0].bad && !s.pod[1].bad && s.pod[1].record_bad && s.pod[2].bad);
    static const char u[] = "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[],\"items\":[]}";
    CHECK(read_all(GPC_STREAM_LIST, u, sizeof u - 1, 0, &s, &m) == -EBADMSG);
}

static void case_types(void)
{
    static const char t[] = LIST_OF("{\"metadata\":{\"name\":\"a\",\"uid\":7,\"namespace\":\"n\"}},"
                                    "{\"metadata\":{\"name\":\"b\",\"uid\":\"u\",\"namespace\":\"n\",\"annotations\":"
                                    "{\"gpucap.io/budgets\":{\"max\":1}}}},"
                                    "{\"metadata\":[1]}, 17, \"text\","
                                    "{\"metadata\":{\"name\":\"c\",\"uid\":\"u\",\"namespace\":\"n\",\"annotations\":null},"
                                    "\"spec\":{\"nodeName\":false}}," POD("d", ""));
    struct seen s;
    struct gpc_list_meta m;
    CHECK(read_all(GPC_STREAM_LIST, t, sizeof t - 1, 3, &s, &m) == 0);
    CHECK(s.n == 5);
    CHECK(s.pod[0].bad && s.pod[1].record_bad && s.pod[2].bad && s.pod[3].bad && !s.pod[4].bad);
    static const char notlist[] = "{\"kind\":\"Status\",\"items\":{\"a\":1}}";
    CHECK(read_all(GPC_STREAM_LIST, notlist, sizeof notlist - 1, 0, &s, &m) == -EBADMSG);
    static const char st[] = "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"gone\"}";
    CHECK(read_all(GPC_STREAM_LIST, st, sizeof st - 1, 0, &s, &m) == 0 && m.code == 410);
    CHECK(strcmp(m.reason, "Expired") == 0);
}

static void case_watch(void)
{
    static const char t[] =
        "{\"type\":\"ADDED\",\"object\":" POD("a", "") "}\n"
        "{\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}},\"type\":\"BOOKMARK\"}\n"
        "{\"type\":\"MODIFIED\",\"type\":\"DELETED\",\"object\":" POD("b", "") "}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";
    struct seen s;
    CHECK(read_all(GPC_STREAM_WATCH, t, sizeof t - 1, 5, &s, NULL) == 0);
    CHECK(s.n == 4);
    CHECK(strcmp(s.type[0], "ADDED") == 0 && strcmp(s.pod[0].name, "a") == 0 && !s.pod[0].bad);
    CHECK(strcmp(s.type[1], "BOOKMARK") == 0 && strcmp(s.pod[1].rv, "9") == 0);
    CHECK(s.pod[2].bad); /* a type given twice */
    CHECK(strcmp(s.type[3], "ERROR") == 0 && s.pod[3].code == 410);
    static const char garbage[] = "{\"type\":\"ADDED\",\"object\":{}}\nnot json\n";
    CHECK(read_all(GPC_STREAM_WATCH, garbage, sizeof garbage - 1, 0, &s, NULL) == -EBADMSG && s.n == 1);
    static const char cut[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":";
    CHECK(read_all(GPC_STREAM_WATCH, cut, sizeof cut - 1, 0, &s, NULL) == -EBADMSG);
}

static void case_limits(void)
{
    size_t n = 5000;
    char *deep = malloc(2 * n + 32);
    int k = sprintf(deep, "{\"items\":");
    memset(deep + k, '[', n);
    memset(deep + k + n, ']', n);
    strcpy(deep + k + 2 * n, "}");
    struct seen s;
    struct gpc_list_meta m;
    CHECK(read_all(GPC_STREAM_LIST, deep, strlen(deep), 0, &s, &m) == -EBADMSG);
    free(deep);
    size_t big = (5u << 20);
    char *tok = malloc(big + 64);
    k = sprintf(tok, "{\"x\":\"");
    memset(tok + k, 'z', big);
    strcpy(tok + k + big, "\",\"items\":[]}");
    CHECK(read_all(GPC_STREAM_LIST, tok, strlen(tok), 16384, &s, &m) == -EBADMSG);
    /* 3 MiB is a token the agent reads (an annotation of a pod is at most 256 KiB; it passes over it). */
    memset(tok + k + (3u << 20), 0, 1);
    strcpy(tok + k + (3u << 20), "\",\"items\":[]}");
    CHECK(read_all(GPC_STREAM_LIST, tok, strlen(tok), 16384, &s, &m) == 0);
    free(tok);
}

static void case_record(void)
{
    struct gpc_record r;
    char err[100];
    const char *ok = "{\"max\":\"10GiB\",\"containers\":{\"train\":\"8GiB\",\"helper\":\"25%\"}}";
    CHECK(gpc_record_parse(ok, strlen(ok), &r, err, sizeof err) == 0 && r.n == 2 && strcmp(r.max, "10GiB") == 0);
    const char *nomax = "{\"containers\":{\"a\":\"1GiB\"}}";
    CHECK(gpc_record_parse(nomax, strlen(nomax), &r, err, sizeof err) == 0 && r.n == 1 && !r.max[0]);
    const char *bad[] = {
        "", "null", "[]", "{}", "{\"containers\":{}}", "{\"containers\":[]}", "{\"containers\":{\"a\":\"1GiB\"},\"x\":1}",
        "{\"containers\":{\"a\":\"1GiB\",\"a\":\"2GiB\"}}", "{\"max\":\"1GiB\",\"max\":\"9GiB\",\"containers\":{\"a\":\"1GiB\"}}",
        "{\"max\":\"1GiB\",\"containers\":{\"a\":\"2GiB\"}}", "{\"max\":\"50%\",\"containers\":{\"a\":\"60%\"}}",
        "{\"containers\":{\"A\":\"1GiB\"}}", "{\"containers\":{\"-a\":\"1GiB\"}}", "{\"containers\":{\"a\":1}}",
        "{\"containers\":{\"a\":\"0\"}}", "{\"containers\":{\"a\":\"lots\"}}", "{\"containers\":{\"a\":\"1GiB\\n\"}}",
        "{\"containers\":{\"a\":\"1GiB;x\"}}", "{\"max\":5,\"containers\":{\"a\":\"1GiB\"}}",
        "{\"containers\":{\"a\":\"1GiB\"}} trailing", "{\"containers\":{\"a\\u0000\":\"1GiB\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = gpc_record_parse(bad[i], strlen(bad[i]), &r, err, sizeof err);
        if (rc != -EINVAL)
            fprintf(stderr, "FAIL record accepted: %s\n", bad[i]);
        fails += rc != -EINVAL;
    }
    const char nul[] = "{\"containers\":{\"a\":\"1GiB\"}}\0x";
    CHECK(gpc_record_parse(nul, sizeof nul - 1, &r, err, sizeof err) == -EINVAL);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"split", case_split}, {"nul", case_nul},       {"twice", case_twice},  {"types", case_types},
                 {"watch", case_watch}, {"limits", case_limits}, {"record", case_record}};
    for (size_t i = 0; argc > 1 && i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            if (!fails)
                printf("ok: %s\n", argv[1]);
            return fails ? 1 : 0;
        }
    }
    fprintf(stderr, "usage: test_podstream CASE\n");
    return 2;
}
