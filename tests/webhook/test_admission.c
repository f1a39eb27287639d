/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_admission.c: the webhook's request handler over the fixtures, then over broken input.
 *
 * usage: test_admission FIXTURE_DIR. For each fixture: the HTTP status, allowed or denied, the
 * operations of the patch (op, path, and a value fragment), the response uid. Then every fixture
 * cut short at many lengths and with bytes flipped, an oversize body, deep nesting and wrong types:
 * the handler must answer each with a sensible status and a body, and ASan (in the sanitized CI
 * build) must see no leak or bad access. Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "check.h"
#include "common/units.h"

static const struct gpc_admission_config annotated_only = {.image = "gpucap:t"};
static const struct gpc_admission_config with_default = {.image = "gpucap:t", .default_memory = "25%"};
static const struct gpc_admission_config env_mode = {.image = "gpucap:t", .preload = GPC_PRELOAD_ENV};
static const struct gpc_admission_config max_10g = {.image = "gpucap:t", .default_memory = "4GiB",
                                                    .max_memory = "10GiB"};
static const struct gpc_admission_config max_4g = {.image = "gpucap:t", .max_memory = "4GiB"};
static const struct gpc_admission_config trusted_ml = {.image = "gpucap:t", .trusted_namespaces = "dev, ml"};
static const struct gpc_admission_config max_1g = {.image = "gpucap:t", .max_memory = "1GiB"};
static const struct gpc_admission_config default_25_max_60 = {.image = "gpucap:t", .default_memory = "25%",
                                                              .max_memory = "60%"};
static const struct gpc_admission_config opt_out_flag = {.image = "gpucap:t", .default_memory = "25%",
                                                         .pod_opt_out = true};

/* A namespace policy for the tests: "ml" allows opting out; "down" cannot be read (the API away);
 * "broken" is malformed. */
static int test_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (strcmp(ns, "down") == 0) {
        snprintf(err, errlen, "GET https://api/api/v1/namespaces/down: Connection refused");
        return -EIO;
    }
    if (strcmp(ns, "broken") == 0) {
        snprintf(err, errlen, "annotation gpucap.io/trusted is not \"true\" or \"false\"");
        return -EINVAL;
    }
    out->allow_opt_out = strcmp(ns, "ml") == 0;
    return 0;
}
static const struct gpc_admission_config opt_out_ns = {.image = "gpucap:t", .default_memory = "25%",
                                                       .ns_lookup = test_lookup};

struct expect_op {
    const char *op, *path, *fragment; /* fragment: text the op's value (as JSON) must contain */
};

struct fixture_case {
    const char *file;
    const struct gpc_admission_config *cfg;
    int status;
    int allowed;              /* 1, 0, or -1 when no review comes back */
    int nops;                 /* operations in the patch; 0: no patch */
    struct expect_op ops[20]; /* operations, in order, from the first; a NULL op is not checked */
    const char *message;      /* a fragment of the denial or 400 text */
};

#define IDENTITY(at, first, name)                                                                                \
    {"add", at "/env" first, "\"GPUCAP_POD_NAMESPACE\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\","     \
                             "\"fieldPath\":\"metadata.namespace\"}}"},                                            \
        {"add", at "/env/-", "\"fieldPath\":\"metadata.name\""}, {"add", at "/env/-", "\"metadata.uid\""},           \
        {"add", at "/env/-", "{\"name\":\"GPUCAP_CONTAINER_NAME\",\"value\":\"" name "\"}"}
#define MOUNTS(at, first, name)                                                                                  \
    {"add", at "/volumeMounts" first, "\"name\":\"gpucap-lib\",\"mountPath\":\"/usr/local/gpucap\",\"readOnly\":true"}, \
        {"add", at "/volumeMounts/-", "\"mountPath\":\"/etc/ld.so.preload\",\"subPath\":\"ld.so.preload\",\"readOnly\":true"}, \
        {"add", at "/volumeMounts/-", "\"mountPath\":\"/etc/gpucap/gpucap.ini\",\"subPath\":\"" name "/gpucap.ini\",\"readOnly\":true"}, \
        {"add", at "/volumeMounts/-", "{\"name\":\"gpucap-ledger\",\"mountPath\":\"/run/gpucap/ledger/gpucap.ledger\",\"subPath\":\"" name "/gpucap.ledger\"}"}
/* The paths alone of IDENTITY's, MOUNTS' and the two volumes' operations, where a case checks others. */
#define ENV_PATHS(at, first)                                                                                     \
    {"add", at "/env" first, ""}, {"add", at "/env/-", ""}, {"add", at "/env/-", ""}, {"add", at "/env/-", ""}
#define MOUNT_PATHS(at, first)                                                                                   \
    {"add", at "/volumeMounts" first, ""}, {"add", at "/volumeMounts/-", ""}, {"add", at "/volumeMounts/-", ""}, \
        {"add", at "/volumeMounts/-", ""}
#define VOLUME_PATHS(first) {"add", "/spec/volumes" first, ""}, {"add", "/spec/volumes/-", ""}
#define INIT_ARGS "\"command\":[\"/usr/local/gpucap/bin/gpucap\",\"inject\",\"--to\",\"/gpucap-out/lib\",\"--ledgers\",\"/gpucap-out/ledger\","
/* The patch of a pod without volumes whose one GPU container NAME (at AT) gets BUDGET: its identity and
 * mounts, the two volumes, our init container added at INIT, the injected annotation. */
#define ONE_INJECTED(at, name, init, budget)                                                                     \
    IDENTITY(at, "", name), MOUNTS(at, "", name), {"add", "/spec/volumes", "gpucap-lib"},                        \
        {"add", "/spec/volumes/-", "gpucap-ledger"}, {"add", init, INIT_ARGS "\"" name "=" budget "\"]"},        \
        {"add", "/metadata/annotations/gpucap.io~1injected", "\"" name "\""}

static const struct fixture_case cases[] = {
    {"annotated-bare.json", &annotated_only, 200, 1, 13,
     {IDENTITY("/spec/containers/0", "", "train"), MOUNTS("/spec/containers/0", "", "train"),
      {"add", "/spec/volumes", "[{\"name\":\"gpucap-lib\",\"emptyDir\":{}}]"},
      {"add", "/spec/volumes/-", "{\"name\":\"gpucap-ledger\",\"emptyDir\":{}}"},
      {"add", "/spec/initContainers", INIT_ARGS "\"train=8GiB\"]"},
      {"add", "/metadata/annotations/gpucap.io~1injected", "\"train\""},
      {"add", "/metadata/annotations/gpucap.io~1budgets", "\"{\\\"containers\\\":{\\\"train\\\":\\\"8GiB\\\"}}\""}},
     NULL},
    {"annotated-env-volumes.json", &annotated_only, 200, 1, 13,
     {IDENTITY("/spec/containers/0", "/-", "train"), MOUNTS("/spec/containers/0", "/-", "train"),
      {"add", "/spec/volumes/-", "gpucap-lib"}, {"add", "/spec/volumes/-", "gpucap-ledger"},
      {"add", "/spec/initContainers", "\"train=12.5%\""}},
     NULL},
    /* The restricted profile's fields on the init container; its resources. */
    {"annotated-env-volumes.json", &annotated_only, 200, 1, 13,
     {ENV_PATHS("/spec/containers/0", "/-"), MOUNT_PATHS("/spec/containers/0", "/-"), VOLUME_PATHS("/-"),
      {"add", "/spec/initContainers", "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":65532,"
                                      "\"runAsGroup\":65532,\"allowPrivilegeEscalation\":false,"
                                      "\"readOnlyRootFilesystem\":true,\"capabilities\":{\"drop\":[\"ALL\"]},"
                                      "\"seccompProfile\":{\"type\":\"RuntimeDefault\"}}"}},
     NULL},
    /* LD_PRELOAD mode: the user's list kept first, no /etc/ld.so.preload mount. */
    {"existing-ld-preload.json", &env_mode, 200, 1, 13,
     {{"add", "/spec/containers/0/env/0/value",
       "\"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:/usr/local/gpucap/lib/libgpucap.so\""},
      {"add", "/spec/containers/0/env/-", "GPUCAP_POD_NAMESPACE"}},
     NULL},
    {"ld-preload-valuefrom.json", &env_mode, 200, 1, 14,
     {{"add", "/spec/containers/0/env/1", "\"LD_PRELOAD_BEFORE_GPUCAP\""},
      {"replace", "/spec/containers/0/env/2", "\"$(LD_PRELOAD_BEFORE_GPUCAP):/usr/local/gpucap/lib/libgpucap.so\""}},
     NULL},
    /* File mode leaves the user's LD_PRELOAD alone. */
    {"existing-ld-preload.json", &annotated_only, 200, 1, 13,
     {{"add", "/spec/containers/0/env/-", "GPUCAP_POD_NAMESPACE"}}, NULL},
    /* GPU init containers are patched at their old index, then ours goes first. */
    {"init-containers.json", &annotated_only, 200, 1, 21,
     {IDENTITY("/spec/initContainers/0", "", "warmup"), MOUNTS("/spec/initContainers/0", "", "warmup"),
      {"add", "/spec/containers/0/env/-", "GPUCAP_POD_NAMESPACE"}},
     NULL},
    {"several-containers.json", &annotated_only, 200, 0, 0, {{0}}, "container b sets GPUCAP_MEMORY_LIMIT=\"1GiB\""},
    {"several-containers.json", &trusted_ml, 200, 1, 21,
     {IDENTITY("/spec/containers/0", "", "a"), MOUNTS("/spec/containers/0", "/-", "a"),
      IDENTITY("/spec/containers/2", "/-", "b")},
     NULL},
    {"no-gpu.json", &with_default, 200, 1, 0, {{0}}, NULL},
    {"gpu-zero.json", &annotated_only, 200, 1, 0, {{0}}, NULL},
    {"default-budget.json", &annotated_only, 200, 1, 0, {{0}}, NULL},
    {"default-budget.json", &with_default, 200, 1, 12,
     {IDENTITY("/spec/containers/0", "", "train"), MOUNTS("/spec/containers/0", "/-", "train"),
      {"add", "/spec/volumes/-", "gpucap-lib"}, {"add", "/spec/volumes/-", "gpucap-ledger"},
      {"add", "/spec/initContainers", INIT_ARGS "\"--max\",\"25%\",\"train=25%\"]"},
      {"add", "/metadata/annotations",
       "{\"gpucap.io/injected\":\"train\",\"gpucap.io/budgets\":\"{\\\"max\\\":\\\"25%\\\",\\\"containers\\\":{\\\"train\\\":\\\"25%\\\"}}\"}"}},
     NULL},
    /* A cluster maximum: the default applies within it and the init container passes it on. */
    {"default-budget.json", &max_10g, 200, 1, 12,
     {ENV_PATHS("/spec/containers/0", ""), MOUNT_PATHS("/spec/containers/0", "/-"), VOLUME_PATHS("/-"),
      {"add", "/spec/initContainers", INIT_ARGS "\"--max\",\"10GiB\",\"train=4GiB\"]"}},
     NULL},
    {"annotated-bare.json", &max_10g, 200, 1, 13, {{0}}, NULL},
    {"annotated-bare.json", &max_4g, 200, 0, 0, {{0}},
     "container train asks for 8GiB (annotation gpucap.io/memory), above the maximum 4GiB (cluster --max-memory)"},
    /* Issue 23: the pod's opt-out holds only where the platform allows it (flag or namespace policy). */
    {"opt-out.json", &with_default, 200, 0, 0, {{0}},
     "annotation gpucap.io/inject: \"false\" is not allowed in namespace ml"},
    {"opt-out.json", &opt_out_flag, 200, 1, 0, {{0}}, NULL},
    {"opt-out.json", &opt_out_ns, 200, 1, 0, {{0}}, NULL},
    {"update.json", &with_default, 200, 1, 0, {{0}}, NULL},
    {"bad-memory.json", &with_default, 200, 0, 0, {{0}}, "annotation gpucap.io/memory: \"lots\" is not a size"},
    {"bad-inject.json", &with_default, 200, 0, 0, {{0}}, "annotation gpucap.io/inject: \"no\""},
    {"foreign-volume.json", &annotated_only, 200, 0, 0, {{0}}, "volume named gpucap-lib"},
    {"not-a-review.json", &with_default, 400, -1, 0, {{0}}, "not an admission.k8s.io/v1 AdmissionReview"},
    {"wrong-types.json", &with_default, 400, -1, 0, {{0}}, "wrong type"},
    /* Schedulers' requests (requests.c). KAI: a GPU pod without nvidia.com/gpu, the share on the first
     * container; the sidecar gets nothing without a default, the default with one. */
    {"kai-fraction.json", &annotated_only, 200, 1, 13,
     {ONE_INJECTED("/spec/containers/0", "trainer", "/spec/initContainers", "50%")},
     NULL},
    {"kai-fraction.json", &default_25_max_60, 200, 1, 21,
     {ENV_PATHS("/spec/containers/0", ""), MOUNT_PATHS("/spec/containers/0", ""),
      IDENTITY("/spec/containers/1", "", "log-shipper"), MOUNTS("/spec/containers/1", "", "log-shipper")},
     NULL},
    /* The init container named by gpu-fraction-container-name carries the share. */
    {"kai-init-container.json", &annotated_only, 200, 1, 13,
     {ONE_INJECTED("/spec/initContainers/1", "warmup", "/spec/initContainers/0", "25%")},
     NULL},
    {"kai-num-devices.json", &annotated_only, 200, 1, 13,
     {ENV_PATHS("/spec/containers/0", ""), MOUNT_PATHS("/spec/containers/0", ""), VOLUME_PATHS(""),
      {"add", "/spec/initContainers", INIT_ARGS "\"trainer=50%\"]"}},
     NULL},
    {"hami-gpumem.json", &with_default, 200, 1, 12, {[10] = {"add", "/spec/initContainers", "\"infer=3000MiB\"]"}},
     NULL},
    {"hami-gpumem-percentage.json", &annotated_only, 200, 1, 12,
     {[10] = {"add", "/spec/initContainers", "\"infer=50%\"]"}}, NULL},
    /* gpucores: not enforced, said in the response's warnings. */
    {"hami-gpucores.json", &annotated_only, 200, 1, 12, {[10] = {"add", "/spec/initContainers", "\"infer=1024MiB\"]"}},
     NULL},
    {"sched-several-containers.json", &annotated_only, 200, 1, 29,
     {[14] = {"add", "/spec/containers/1/volumeMounts/-", "\"subPath\":\"b/gpucap.ini\""},
      [16] = {"add", "/spec/containers/3/env", "GPUCAP_POD_NAMESPACE"},
      [19] = {"add", "/spec/containers/3/env/-", "{\"name\":\"GPUCAP_CONTAINER_NAME\",\"value\":\"c\"}"}},
     NULL},
    /* Precedence: the scheduler's request, then gpucap's annotation, both within the maximum. */
    {"sched-mixed.json", &max_10g, 200, 1, 21,
     {[18] = {"add", "/spec/initContainers", INIT_ARGS "\"--max\",\"10GiB\",\"trainer=2000MiB\",\"helper=6GiB\"]"}},
     NULL},
    {"sched-mixed.json", &max_4g, 200, 0, 0, {{0}},
     "container helper asks for 6GiB (annotation gpucap.io/memory), above the maximum 4GiB (cluster --max-memory)"},
    {"kai-mib.json", &max_1g, 200, 0, 0, {{0}},
     "container trainer asks for 2000MiB (KAI annotation gpu-memory), above the maximum 1GiB (cluster --max-memory)"},
    {"sched-bad-fraction.json", &with_default, 200, 0, 0, {{0}},
     "container trainer: annotation gpu-fraction: \"1.5\" is not valid; accepted: a decimal share"},
    {"sched-negative-mib.json", &with_default, 200, 0, 0, {{0}},
     "container trainer: annotation gpu-memory: \"-2000\" is not valid; accepted: a whole number of MiB"},
    {"sched-bad-text.json", &with_default, 200, 0, 0, {{0}},
     "container infer: resource nvidia.com/gpumem: \"3GB\" is not valid; accepted: a whole number of MiB per GPU"},
};

/* The warnings of the fixture cases: each case of the file gets exactly this one; every other none. */
static const struct {
    const char *file, *warning;
} warned[] = {
    {"hami-gpucores.json", "container infer: nvidia.com/gpucores (30) is not enforced: gpucap caps GPU memory only"},
    {"sched-several-containers.json", "container b: nvidia.com/gpucores (50) is not enforced"},
    /* Bytes under the default as the maximum (a share): the card decides, said with the cards. */
    {"hami-gpumem.json", "container infer: 3000MiB (HAMi resource nvidia.com/gpumem) is above the maximum 25% "
                         "(cluster --default-memory, the maximum where none is set) on cards under 11.72 GiB: there "
                         "its budget is 25%"},
};

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static json_t *unbase64_json(const char *in)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;
    unsigned char *out = malloc(n / 4 * 3 + 1);
    unsigned acc = 0, bits = 0;
    for (size_t i = 0; i < n && in[i] != '='; i++) {
        const char *p = strchr(abc, in[i]);
        if (!p || !in[i]) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)(p - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    json_t *j = json_loadb((const char *)out, o, 0, NULL);
    free(out);
    return j;
}

static void check_case(const char *dir, const struct fixture_case *c)
{
    size_t len;
    char *body = slurp(dir, c->file, &len);
    CHECK(body, "%s: cannot read", c->file);
    if (!body)
        return;
    struct gpc_admission_result res;
    gpc_admission_handle(c->cfg, body, len, &res);
    CHECK(res.status == c->status, "%s: status %d, expected %d (%s)", c->file, res.status, c->status,
          res.body ? res.body : "");
    CHECK(res.log[0], "%s: no log line", c->file);
    if (c->message && c->allowed < 0)
        CHECK(res.body && strstr(res.body, c->message), "%s: body lacks \"%s\": %s", c->file, c->message,
              res.body ? res.body : "");

    if (c->allowed >= 0 && res.status == 200) {
        json_t *in = json_loads(body, 0, NULL);
        json_t *rev = json_loads(res.body, 0, NULL);
        json_t *resp = json_object_get(rev, "response");
        CHECK(json_equal(json_object_get(json_object_get(in, "request"), "uid"), json_object_get(resp, "uid")),
              "%s: response uid differs", c->file);
        CHECK(json_is_boolean(json_object_get(resp, "allowed")) &&
                  json_is_true(json_object_get(resp, "allowed")) == (c->allowed == 1),
              "%s: allowed is not %d", c->file, c->allowed);
        if (c->allowed == 0) {
            const char *msg = json_string_value(json_object_get(json_object_get(resp, "status"), "message"));
            CHECK(msg && strstr(msg, c->message), "%s: denial lacks \"%s\": %s", c->file, c->message,
                  msg ? msg : "-");
            CHECK(msg && (strstr(c->file, "memory") == NULL || strstr(msg, gpc_size_forms)),
                  "%s: denial does not list the accepted forms", c->file);
        }
        json_t *warnings = json_object_get(resp, "warnings");
        const char *warning = json_string_value(json_array_get(warnings, 0)), *want = NULL;
        for (size_t i = 0; i < sizeof warned / sizeof warned[0]; i++)
            if (strcmp(c->file, warned[i].file) == 0)
                want = warned[i].warning;
        if (want)
            CHECK(json_array_size(warnings) == 1 && warning && strstr(warning, want), "%s: warnings lack \"%s\"",
                  c->file, want);
        else
            CHECK(!warnings, "%s: unexpected warnings %s", c->file, warning ? warning : "");
        const char *b64 = json_string_value(json_object_get(resp, "patch"));
        if (c->nops == 0) {
            CHECK(!b64 && !json_object_get(resp, "patchType"), "%s: unexpected patch", c->file);
        } else {
            CHECK(b64 && json_is_string(json_object_get(resp, "patchType")), "%s: no patch", c->file);
            json_t *patch = b64 ? unbase64_json(b64) : NULL;
            CHECK(json_array_size(patch) == (size_t)c->nops, "%s: %zu operations, expected %d", c->file,
                  json_array_size(patch), c->nops);
            for (size_t i = 0; i < sizeof c->ops / sizeof c->ops[0]; i++) {
                if (!c->ops[i].op)
                    continue;
                json_t *o = json_array_get(patch, i);
                const char *op = json_string_value(json_object_get(o, "op"));
                const char *path = json_string_value(json_object_get(o, "path"));
                char *value = json_dumps(json_object_get(o, "value"), JSON_COMPACT | JSON_ENCODE_ANY);
                CHECK(op && path && strcmp(op, c->ops[i].op) == 0 && strcmp(path, c->ops[i].path) == 0,
                      "%s: op %zu is %s %s, expected %s %s", c->file, i, op ? op : "-", path ? path : "-",
                      c->ops[i].op, c->ops[i].path);
                CHECK(value && strstr(value, c->ops[i].fragment), "%s: op %zu value %s lacks %s", c->file, i,
                      value ? value : "-", c->ops[i].fragment);
                free(value);
            }
            json_decref(patch);
        }
        json_decref(in);
        json_decref(rev);
    }
    gpc_admission_result_free(&res);
    free(body);
}

static void expect_status(const char *what, const char *body, size_t len, int lo, int hi)
{
    struct gpc_admission_result res;
    gpc_admission_handle(&with_default, body, len, &res);
    CHECK(res.status >= lo && res.status <= hi && res.body && res.log[0], "%s: status %d", what, res.status);
    gpc_admission_result_free(&res);
}

/* Whatever the bytes, an answer: cut short everywhere, then bytes flipped by a fixed generator. */
static void hostile(const char *dir)
{
    unsigned long long seed = 0x9e3779b97f4a7c15ULL;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t len;
        char *body = slurp(dir, cases[k].file, &len);
        if (!body)
            continue;
        for (size_t cut = 0; cut < len; cut += 1 + cut / 64)
            expect_status("truncated", body, cut, 400, 400);
        for (int round = 0; round < 300; round++) {
            char *copy = malloc(len);
            memcpy(copy, body, len);
            for (int flips = 0; flips < 1 + round % 4; flips++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                copy[(seed >> 33) % len] = (char)(seed >> 17);
            }
            expect_status("flipped", copy, len, 200, 400);
            free(copy);
        }
        free(body);
    }

    expect_status("NULL body", NULL, 0, 400, 400);
    size_t big = GPC_ADMISSION_MAX_BODY + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    expect_status("oversize", huge, big, 413, 413);
    size_t deep = 100000;
    memset(huge, '[', deep);
    expect_status("deep nesting", huge, deep, 400, 400);
    memset(huge, '{', 1);
    expect_status("one brace", huge, 1, 400, 400);
    free(huge);

    static const char *const odd[] = {
        "null", "[]", "\"AdmissionReview\"", "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":{\"spec\":[]}}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":"
        "{\"metadata\":{\"annotations\":{\"gpucap.io/memory\":5}},\"spec\":{}}}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":"
        "{\"spec\":{\"containers\":[{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},"
        "\"volumeMounts\":[7]}]}}}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"uid\":\"v\"}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\\u0000\"}}",
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        expect_status(odd[i], odd[i], strlen(odd[i]), 400, 400);

    /* No budget and no default: a GPU pod passes untouched. */
    static const char empty_pod[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":"
        "{\"spec\":{\"containers\":[{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}}}";
    struct gpc_admission_result res;
    gpc_admission_handle(&annotated_only, empty_pod, strlen(empty_pod), &res);
    CHECK(res.status == 200 && res.body && !strstr(res.body, "patch"), "no budget: %s", res.body ? res.body : "-");
    gpc_admission_result_free(&res);
    /* No metadata at all, with a default: the annotation op creates /metadata. */
    gpc_admission_handle(&with_default, empty_pod, strlen(empty_pod), &res);
    CHECK(res.status == 200 && res.body && strstr(res.body, "\"patch\""), "no metadata: %s", res.body ? res.body : "-");
    gpc_admission_result_free(&res);
}

/* A GPU pod of namespace `ns`, through a handler whose namespace policy comes from test_lookup(). */
static void policy_status(const char *ns, int code, const char *fragment)
{
    char body[600];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
             "\"namespace\":\"%s\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{},\"spec\":{\"containers\":"
             "[{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}}}", ns);
    struct gpc_admission_result res;
    gpc_admission_handle(&opt_out_ns, body, strlen(body), &res);
    json_t *rev = res.body ? json_loads(res.body, 0, NULL) : NULL;
    json_t *st = json_object_get(json_object_get(rev, "response"), "status");
    const char *msg = json_string_value(json_object_get(st, "message"));
    CHECK(res.status == 200 && json_is_false(json_object_get(json_object_get(rev, "response"), "allowed")) &&
              json_integer_value(json_object_get(st, "code")) == code && msg && strstr(msg, fragment),
          "namespace %s: want code %d and \"%s\": %s", ns, code, fragment, res.body ? res.body : "-");
    if (code == 503)
        CHECK(json_is_string(json_object_get(st, "reason")) &&
                  strcmp(json_string_value(json_object_get(st, "reason")), "ServiceUnavailable") == 0,
              "503 with reason ServiceUnavailable: %s", res.body ? res.body : "-");
    json_decref(rev);
    gpc_admission_result_free(&res);
}

static void config_checks(void)
{
    /* Issue 24: a policy that cannot be read now is a 503 that says retry; a malformed one is not. */
    policy_status("down", 503, "cannot be read now (GET https://api/api/v1/namespaces/down: Connection refused); "
                               "retry later");
    policy_status("broken", 400, "is not valid");

    /* Issue 23: the start-up line says what bounds a tenant's request. */
    char line[600];
    gpc_admission_describe(&with_default, line, sizeof line);
    CHECK(strstr(line, "no max-memory: the default 25% is the maximum") && strstr(line, "only where the namespace"),
          "describe, default only: %s", line);
    gpc_admission_describe(&max_10g, line, sizeof line);
    CHECK(strstr(line, "max-memory 10GiB") && strstr(line, "driver limits off"), "describe, max: %s", line);
    struct gpc_admission_config auto_cfg = {.image = "gpucap:t", .driver = GPC_DRIVER_AUTO, .pod_opt_out = true};
    gpc_admission_describe(&auto_cfg, line, sizeof line);
    CHECK(strstr(line, "driver limits auto (pods selecting nodes labelled gpucap.io/driver-limits=true)") &&
              strstr(line, "honoured everywhere") && strstr(line, "annotated pods only"),
          "describe, auto: %s", line);

    char err[512];
    struct gpc_admission_config c = {.image = "ghcr.io/x/gpucap:1", .default_memory = "2GiB", .max_memory = "4GiB"};
    CHECK(gpc_admission_check_config(&c, err, sizeof err) == 0, "good config refused: %s", err);
    c.default_memory = "two gigs";
    CHECK(gpc_admission_check_config(&c, err, sizeof err) != 0 && strstr(err, "default-memory"), "bad default");
    c.default_memory = "8GiB";
    CHECK(gpc_admission_check_config(&c, err, sizeof err) != 0 && strstr(err, "above max-memory"),
          "default above the maximum");
    c.default_memory = "50%"; /* not comparable with bytes at admission: the library bounds it */
    CHECK(gpc_admission_check_config(&c, err, sizeof err) == 0, "percent default, byte maximum: %s", err);
    c.max_memory = "lots";
    CHECK(gpc_admission_check_config(&c, err, sizeof err) != 0 && strstr(err, "max-memory"), "bad maximum");
    c.max_memory = NULL;
    c.image = NULL;
    CHECK(gpc_admission_check_config(&c, err, sizeof err) != 0 && strstr(err, "image"), "no image");
    c.image = "a b";
    CHECK(gpc_admission_check_config(&c, err, sizeof err) != 0 && strstr(err, "image"), "image with a blank");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(argv[1], &cases[i]);
    hostile(argv[1]);
    config_checks();
    return test_result();
}
