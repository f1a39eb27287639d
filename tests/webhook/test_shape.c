/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_shape.c: the estimate of a body's parse (tools/webhook/shape.c) against what jansson really
 * allocates for it, and the managedFields it blanks.
 *
 * For each shape a hostile client can send (empty objects and arrays, strings, numbers, literals,
 * distinct keys of each, long and escaped strings, deep nesting, a mix), the bytes malloc hands out
 * while jansson parses the body (mallinfo2) must stay below the estimate, and the estimate within
 * a few times of them (a bound that refuses what it need not is no bound). Then a review whose pods
 * carry managedFields: blanked in request.object and request.oldObject only (not in other objects,
 * not under an escaped key), the body still parses, and the handler answers it exactly as it
 * answers the body left whole. Nesting past GPC_SHAPE_MAX_DEPTH is refused. Exit 0 pass, 1 fail.
 */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "check.h"
#include "shape.h"

static size_t in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* A buffer that grows as shapes are written into it. */
struct buf {
    char *p;
    size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        REQUIRE(b->p, "out of memory");
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* `[item,item,...]` with n items, or `{"kI":item,...}` when keyed. */
static struct buf shape(const char *item, size_t n, int keyed)
{
    struct buf b = {0};
    puts_(&b, keyed ? "{" : "[");
    char key[32];
    for (size_t i = 0; i < n; i++) {
        if (i)
            puts_(&b, ",");
        if (keyed) {
            snprintf(key, sizeof key, "\"k%zx\":", i);
            puts_(&b, key);
        }
        puts_(&b, item);
    }
    puts_(&b, keyed ? "}" : "]");
    return b;
}

static void check_estimate(const char *what, struct buf b)
{
    struct gpc_shape s;
    const char *why = gpc_shape_scan(b.p, b.len, &s);
    CHECK(!why, "%s: refused: %s", what, why ? why : "");
    size_t before = in_use();
    json_t *j = json_loadb(b.p, b.len, JSON_REJECT_DUPLICATES, NULL);
    size_t took = in_use() - before;
    CHECK(j, "%s: parses", what);
    if (took == 0) {
        /* A sanitizer's allocator: glibc's counters see none of it, and its sizes are its own. */
        printf("%-28s %8zu bytes: estimate %8zu (the allocator is not glibc's: not compared)\n", what, b.len, s.cost);
    } else {
        CHECK(s.cost >= took, "%s: the estimate %zu is below what the parse took, %zu", what, s.cost, took);
        CHECK(s.cost <= 4 * took + b.len, "%s: the estimate %zu is far above what the parse took, %zu", what, s.cost,
              took);
        printf("%-28s %8zu bytes: parse %8zu, estimate %8zu (%.2f)\n", what, b.len, took, s.cost, (double)s.cost / took);
    }
    json_decref(j);
    free(b.p);
}

/* An UPDATE review whose two pods carry annotations and managedFields, and a ConfigMap-like object
 * beside them with its own managedFields (not a pod's: left alone). */
static struct buf review(const char *managed_key)
{
    char text[4096];
    const char *pod = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"bare\",\"namespace\":\"ml\","
                      "\"annotations\":{\"gpucap.io/memory\":\"8GiB\"},\"%s\":[{\"manager\":\"kubectl\","
                      "\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\"f:gpucap.io/memory\":{}}}}}]},"
                      "\"spec\":{\"containers\":[{\"name\":\"train\",\"image\":\"x\",\"resources\":{\"limits\":"
                      "{\"nvidia.com/gpu\":\"1\"}}}]}}";
    char one[1500];
    snprintf(one, sizeof one, pod, managed_key);
    snprintf(text, sizeof text,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u1\","
             "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":\"UPDATE\","
             "\"namespace\":\"ml\",\"other\":{\"metadata\":{\"managedFields\":[{\"x\":1}]}},"
             "\"object\":%s,\"oldObject\":%s}}",
             one, one);
    struct buf b = {0};
    puts_(&b, text);
    return b;
}

static void check_managed_fields(void)
{
    struct buf whole = review("managedFields"), blank = review("managedFields");
    struct gpc_shape s;
    CHECK(!gpc_shape_scan(blank.p, blank.len, &s), "a review scans");
    CHECK(blank.len == whole.len && s.stripped > 0, "managedFields blanked in place: %zu bytes", s.stripped);
    json_t *j = json_loadb(blank.p, blank.len, 0, NULL);
    CHECK(j, "the blanked review parses");
    json_t *req = json_object_get(j, "request");
    CHECK(json_is_null(json_object_get(json_object_get(json_object_get(req, "object"), "metadata"), "managedFields")) &&
              json_is_null(json_object_get(json_object_get(json_object_get(req, "oldObject"), "metadata"),
                                           "managedFields")),
          "the pods' managedFields are null");
    CHECK(json_is_array(json_object_get(json_object_get(json_object_get(req, "other"), "metadata"), "managedFields")),
          "another object's managedFields are left alone");
    CHECK(json_string_value(json_object_get(json_object_get(json_object_get(json_object_get(req, "object"), "metadata"),
                                                            "annotations"),
                                            "gpucap.io/memory")),
          "the annotations are kept");
    json_decref(j);
    /* The handler answers both alike. */
    struct gpc_admission_config cfg = {.image = "gpucap:t", .max_memory = "10GiB"};
    struct gpc_admission_result a, b;
    CHECK(gpc_admission_handle(&cfg, whole.p, whole.len, &a) == 0 && gpc_admission_handle(&cfg, blank.p, blank.len, &b) == 0,
          "both handled");
    CHECK(a.status == b.status && a.body && b.body && strcmp(a.body, b.body) == 0, "the same answer: %s / %s",
          a.body ? a.body : "", b.body ? b.body : "");
    gpc_admission_result_free(&a);
    gpc_admission_result_free(&b);
    free(whole.p);
    free(blank.p);
    /* A key written with escapes is not recognised: parsed, and counted, as it is. */
    struct buf escaped = review("managed\\u0046ields");
    CHECK(!gpc_shape_scan(escaped.p, escaped.len, &s) && s.stripped == 0, "an escaped key is not blanked");
    free(escaped.p);
}

static void check_depth(void)
{
    struct buf b = {0};
    for (int i = 0; i < GPC_SHAPE_MAX_DEPTH; i++)
        puts_(&b, "[");
    for (int i = 0; i < GPC_SHAPE_MAX_DEPTH; i++)
        puts_(&b, "]");
    struct gpc_shape s;
    CHECK(!gpc_shape_scan(b.p, b.len, &s), "%d levels pass", GPC_SHAPE_MAX_DEPTH);
    b.len = 0;
    for (int i = 0; i <= GPC_SHAPE_MAX_DEPTH; i++)
        puts_(&b, "{\"a\":");
    puts_(&b, "1");
    for (int i = 0; i <= GPC_SHAPE_MAX_DEPTH; i++)
        puts_(&b, "}");
    const char *why = gpc_shape_scan(b.p, b.len, &s);
    CHECK(why && strstr(why, "nested deeper"), "%d levels are refused: %s", GPC_SHAPE_MAX_DEPTH + 1, why ? why : "");
    free(b.p);
}

int main(void)
{
    static const struct {
        const char *what, *item;
        int keyed;
    } shapes[] = {
        {"empty objects", "{}", 0},     {"empty arrays", "[]", 0},      {"empty strings", "\"\"", 0},
        {"numbers", "1", 0},            {"reals", "1.5e3", 0},          {"literals", "null", 0},
        {"true", "true", 0},            {"objects of one member", "{\"a\":1}", 0},
        {"arrays of one", "[1]", 0},    {"keys of {}", "{}", 1},        {"keys of \"\"", "\"\"", 1},
        {"keys of 1", "1", 1},          {"keys of []", "[]", 1},        {"escaped strings", "\"\\u003c\\u003c\\u003c\"", 0},
        {"mixed", "{\"a\":[1,\"x\",{}],\"b\":null}", 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_estimate(shapes[i].what, shape(shapes[i].item, 100000, shapes[i].keyed));
    struct buf big = {0};
    char *s = malloc(1 << 20);
    memset(s, 'x', 1 << 20);
    s[0] = '"';
    s[(1 << 20) - 1] = '"';
    puts_(&big, "[");
    for (int i = 0; i < 4; i++) {
        put(&big, s, 1 << 20);
        puts_(&big, i < 3 ? "," : "]");
    }
    free(s);
    check_estimate("long strings", big);
    check_managed_fields();
    check_depth();
    return test_result();
}
