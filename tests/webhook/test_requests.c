/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_requests.c: the schedulers' requests as budgets (tools/webhook/requests.c), one table row per
 * case: KAI's fraction and memory annotations, the container they apply to (first, named, init),
 * several devices, HAMi's gpumem and gpumem-percentage, gpucores reported, conflicts, and malformed
 * values, each with the message that names the annotation or resource and the accepted forms;
 * Run:ai's request/limit pairs (gpu-fraction-limit, gpu-memory-limit: the budget is the limit, the
 * request the plain annotation). Every
 * budget given must read back through the library's size parser and name its source.
 */
#include "requests.h"
#include "common/units.h"

#include <stdio.h>
#include <string.h>

struct row {
    const char *name;
    const char *pod;       /* the Pod object */
    const char *container; /* its container, by name, the budget is asked for */
    bool gpu_pod;          /* gpc_wh_sched_gpu_pod() */
    int rc;                /* gpc_wh_sched_budget() */
    const char *want;      /* the budget (rc 1), or a part of the message (rc -1) */
};

#define POD(ann, containers) "{\"metadata\":{\"name\":\"p\",\"annotations\":{" ann "}},\"spec\":{" containers "}}"
#define ONE "\"containers\":[{\"name\":\"main\"}]"
#define TWO "\"containers\":[{\"name\":\"main\"},{\"name\":\"sidecar\"}]"
#define INIT "\"initContainers\":[{\"name\":\"warmup\"}],\"containers\":[{\"name\":\"main\"},{\"name\":\"sidecar\"}]"
#define HAMI(res) "\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{" res "}}}]"

static const struct row rows[] = {
    /* KAI: which pods, which budget. */
    {"no annotation", POD("", ONE), "main", false, 0, NULL},
    {"other annotations only", POD("\"a\":\"b\"", ONE), "main", false, 0, NULL},
    {"fraction 0.5", POD("\"gpu-fraction\":\"0.5\"", ONE), "main", true, 1, "50%"},
    {"fraction .25", POD("\"gpu-fraction\":\".25\"", ONE), "main", true, 1, "25%"},
    {"fraction 1", POD("\"gpu-fraction\":\"1\"", ONE), "main", true, 1, "100%"},
    {"fraction 1.000", POD("\"gpu-fraction\":\"1.000\"", ONE), "main", true, 1, "100%"},
    {"fraction 0.333", POD("\"gpu-fraction\":\"0.333\"", ONE), "main", true, 1, "33.3%"},
    {"fraction 0.1234567: rounded down", POD("\"gpu-fraction\":\"0.1234567\"", ONE), "main", true, 1, "12.3456%"},
    {"memory 2000", POD("\"gpu-memory\":\"2000\"", ONE), "main", true, 1, "2000MiB"},
    {"first container only", POD("\"gpu-fraction\":\"0.5\"", TWO), "sidecar", true, 0, NULL},
    {"named container", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-container-name\":\"sidecar\"", TWO),
     "sidecar", true, 1, "50%"},
    {"named container: not the first", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-container-name\":\"sidecar\"", TWO),
     "main", true, 0, NULL},
    {"named init container", POD("\"gpu-memory\":\"1024\",\"gpu-fraction-container-name\":\"warmup\"", INIT),
     "warmup", true, 1, "1024MiB"},
    {"several devices: the same share each", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-num-devices\":\"2\"", ONE),
     "main", true, 1, "50%"},
    {"several devices with memory", POD("\"gpu-memory\":\"4096\",\"gpu-fraction-num-devices\":\"4\"", ONE), "main",
     true, 1, "4096MiB"},
    /* KAI: malformed. */
    {"fraction 1.5", POD("\"gpu-fraction\":\"1.5\"", ONE), "main", true, -1,
     "annotation gpu-fraction: \"1.5\" is not valid; accepted: a decimal share"},
    {"fraction 0", POD("\"gpu-fraction\":\"0\"", ONE), "main", true, -1, "above 0 and at most 1"},
    {"fraction 1.0001", POD("\"gpu-fraction\":\"1.0001\"", ONE), "main", true, -1, "gpu-fraction: \"1.0001\""},
    {"fraction -0.5", POD("\"gpu-fraction\":\"-0.5\"", ONE), "main", true, -1, "gpu-fraction: \"-0.5\""},
    {"fraction text", POD("\"gpu-fraction\":\"half\"", ONE), "main", true, -1, "gpu-fraction: \"half\""},
    {"fraction empty", POD("\"gpu-fraction\":\"\"", ONE), "main", true, -1, "gpu-fraction: \"\""},
    {"fraction 5e-1", POD("\"gpu-fraction\":\"5e-1\"", ONE), "main", true, -1, "gpu-fraction: \"5e-1\""},
    {"fraction 0.5.5", POD("\"gpu-fraction\":\"0.5.5\"", ONE), "main", true, -1, "gpu-fraction"},
    {"fraction bad, other container asked", POD("\"gpu-fraction\":\"2\"", TWO), "sidecar", true, -1, "gpu-fraction"},
    {"memory negative", POD("\"gpu-memory\":\"-2000\"", ONE), "main", true, -1,
     "annotation gpu-memory: \"-2000\" is not valid; accepted: a whole number of MiB"},
    {"memory 0", POD("\"gpu-memory\":\"0\"", ONE), "main", true, -1, "gpu-memory: \"0\""},
    {"memory with a unit", POD("\"gpu-memory\":\"2Gi\"", ONE), "main", true, -1, "gpu-memory: \"2Gi\""},
    {"memory text", POD("\"gpu-memory\":\"lots\"", ONE), "main", true, -1, "gpu-memory: \"lots\""},
    {"fraction and memory", POD("\"gpu-fraction\":\"0.5\",\"gpu-memory\":\"2000\"", ONE), "main", true, -1,
     "both set"},
    {"devices 0", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-num-devices\":\"0\"", ONE), "main", true, -1,
     "annotation gpu-fraction-num-devices: \"0\" is not valid"},
    {"devices text", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-num-devices\":\"two\"", ONE), "main", true, -1,
     "gpu-fraction-num-devices: \"two\""},
    {"devices alone", POD("\"gpu-fraction-num-devices\":\"2\"", ONE), "main", false, -1, "without gpu-fraction"},
    {"named container missing", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-container-name\":\"gone\"", TWO),
     "main", true, -1, "gpu-fraction-container-name: \"gone\" names no container"},
    /* HAMi-style container resources. */
    {"gpumem 3000", POD("", HAMI("\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"3000\"")), "main", false, 1,
     "3000MiB"},
    {"gpumem as a number", POD("", HAMI("\"nvidia.com/gpumem\":3000")), "main", false, 1, "3000MiB"},
    {"gpumem-percentage 50", POD("", HAMI("\"nvidia.com/gpumem-percentage\":\"50\"")), "main", false, 1, "50%"},
    {"gpumem in requests only", POD("", "\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":"
                                        "{\"nvidia.com/gpumem\":\"1000\"}}}]"), "main", false, 1, "1000MiB"},
    {"gpucores alone: no budget", POD("", HAMI("\"nvidia.com/gpucores\":\"30\"")), "main", false, 0, NULL},
    {"gpumem 3Gi", POD("", HAMI("\"nvidia.com/gpumem\":\"3Gi\"")), "main", false, -1,
     "resource nvidia.com/gpumem: \"3Gi\" is not valid; accepted: a whole number of MiB per GPU"},
    {"gpumem negative", POD("", HAMI("\"nvidia.com/gpumem\":-5")), "main", false, -1, "nvidia.com/gpumem: \"-5\""},
    {"gpumem 1.5", POD("", HAMI("\"nvidia.com/gpumem\":1.5")), "main", false, -1, "not whole"},
    {"gpumem-percentage 150", POD("", HAMI("\"nvidia.com/gpumem-percentage\":\"150\"")), "main", false, -1,
     "resource nvidia.com/gpumem-percentage: \"150\" is not valid; accepted: a whole percentage"},
    {"gpumem-percentage 0", POD("", HAMI("\"nvidia.com/gpumem-percentage\":\"0\"")), "main", false, -1,
     "gpumem-percentage: \"0\""},
    {"gpumem and percentage", POD("", HAMI("\"nvidia.com/gpumem\":\"1000\",\"nvidia.com/gpumem-percentage\":\"50\"")),
     "main", false, -1, "both set"},
    /* Run:ai's dynamic fractions (issue 35): the budget is the limit. */
    {"fraction limit: the budget", POD("\"gpu-fraction\":\"0.25\",\"gpu-fraction-limit\":\"0.5\"", ONE), "main", true, 1,
     "50%"},
    {"memory limit: the budget", POD("\"gpu-memory\":\"10240\",\"gpu-memory-limit\":\"40960\"", ONE), "main", true,
     1, "40960MiB"},
    {"limit = request", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-limit\":\"0.5\"", ONE), "main", true, 1, "50%"},
    {"limit: other container", POD("\"gpu-fraction\":\"0.25\",\"gpu-fraction-limit\":\"0.5\"", TWO), "sidecar",
     true, 0, NULL},
    {"fraction limit alone", POD("\"gpu-fraction-limit\":\"0.5\"", ONE), "main", true, -1,
     "annotation gpu-fraction-limit without gpu-fraction"},
    {"memory limit alone", POD("\"gpu-memory-limit\":\"4000\"", ONE), "main", true, -1,
     "annotation gpu-memory-limit without gpu-memory"},
    {"fraction limit below the request", POD("\"gpu-fraction\":\"0.5\",\"gpu-fraction-limit\":\"0.25\"", ONE),
     "main", true, -1, "gpu-fraction-limit: \"0.25\" is below the request gpu-fraction \"0.5\""},
    {"memory limit below the request", POD("\"gpu-memory\":\"4000\",\"gpu-memory-limit\":\"2000\"", ONE), "main",
     true, -1, "is below the request gpu-memory"},
    {"fraction limit beside memory", POD("\"gpu-memory\":\"4000\",\"gpu-fraction-limit\":\"0.5\"", ONE), "main",
     true, -1, "a limit is of the request's kind"},
    {"memory limit beside fraction", POD("\"gpu-fraction\":\"0.1\",\"gpu-memory-limit\":\"4000\"", ONE), "main",
     true, -1, "a limit is of the request's kind"},
    {"two limits", POD("\"gpu-fraction\":\"0.1\",\"gpu-fraction-limit\":\"0.5\",\"gpu-memory-limit\":\"4000\"", ONE),
     "main", true, -1, "a limit is of the request's kind"},
    {"fraction limit 1.5", POD("\"gpu-fraction\":\"0.1\",\"gpu-fraction-limit\":\"1.5\"", ONE), "main", true, -1,
     "annotation gpu-fraction-limit: \"1.5\" is not valid"},
    {"memory limit text", POD("\"gpu-memory\":\"100\",\"gpu-memory-limit\":\"8Gi\"", ONE), "main", true, -1,
     "annotation gpu-memory-limit: \"8Gi\" is not valid"},
    {"limit bad, other container asked", POD("\"gpu-fraction\":\"0.1\",\"gpu-fraction-limit\":\"x\"", TWO), "sidecar",
     true, -1, "gpu-fraction-limit"},
    /* KAI and HAMi on one container. */
    {"KAI and HAMi", POD("\"gpu-fraction\":\"0.5\"", HAMI("\"nvidia.com/gpumem\":\"1000\"")), "main", true, -1,
     "KAI's annotation asks for 50% and HAMi's resource for 1000MiB"},
};

/* The container named `name` in the pod's containers or init containers. */
static json_t *container_named(json_t *pod, const char *name)
{
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_t *list = json_object_get(json_object_get(pod, "spec"), lists[l]);
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *c = json_array_get(list, i);
            const char *n = json_string_value(json_object_get(c, "name"));
            if (n && strcmp(n, name) == 0)
                return c;
        }
    }
    return NULL;
}

int main(void)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        json_error_t jerr;
        json_t *pod = json_loads(r->pod, 0, &jerr);
        json_t *c = pod ? container_named(pod, r->container) : NULL;
        if (!c) {
            printf("FAIL %s: bad fixture (%s)\n", r->name, jerr.text);
            failures++;
            json_decref(pod);
            continue;
        }
        char budget[64] = "", err[512] = "";
        bool gpu = gpc_wh_sched_gpu_pod(pod);
        int rc = gpc_wh_sched_budget(pod, c, budget, sizeof budget, err, sizeof err);
        struct gpc_size size;
        bool ok = gpu == r->gpu_pod && rc == r->rc;
        if (ok && rc == 1)
            ok = strcmp(budget, r->want) == 0 && gpc_parse_size(budget, &size) == 0;
        /* The source names a request the pod makes: "KAI annotation gpu-fraction", ... */
        const char *source = gpc_wh_sched_source(pod, c), *key = strrchr(source, ' ');
        if (ok && rc == 1)
            ok = (strncmp(source, "KAI annotation ", 15) == 0 || strncmp(source, "HAMi resource ", 14) == 0) &&
                 strstr(r->pod, key + 1) != NULL;
        if (ok && rc == -1)
            ok = strstr(err, r->want) != NULL;
        if (!ok) {
            printf("FAIL %s: gpu_pod %d (want %d), rc %d (want %d), budget '%s' from %s, err '%s', want '%s'\n",
                   r->name, gpu, r->gpu_pod, rc, r->rc, budget, source, err, r->want ? r->want : "");
            failures++;
        }
        json_decref(pod);
    }

    /* The request of a request/limit pair (issue 35): the plain annotation; none without a limit. */
    static const struct {
        const char *pod, *container;
        int rc;
        const char *want, *source;
    } reqs[] = {
        {POD("\"gpu-fraction\":\"0.25\",\"gpu-fraction-limit\":\"0.5\"", ONE), "main", 1, "25%",
         "KAI annotation gpu-fraction"},
        {POD("\"gpu-memory\":\"10240\",\"gpu-memory-limit\":\"40960\"", ONE), "main", 1, "10240MiB",
         "KAI annotation gpu-memory"},
        {POD("\"gpu-fraction\":\"0.25\"", ONE), "main", 0, "", NULL},
        {POD("\"gpu-fraction\":\"0.25\",\"gpu-fraction-limit\":\"0.5\"", TWO), "sidecar", 0, "", NULL},
        {POD("\"gpu-fraction\":\"0.25\",\"gpu-fraction-limit\":\"0.5\",\"gpu-fraction-container-name\":\"sidecar\"",
             TWO), "sidecar", 1, "25%", "KAI annotation gpu-fraction"},
        {POD("", HAMI("\"nvidia.com/gpumem\":\"3000\"")), "main", 0, "", NULL},
        {POD("\"gpu-fraction-limit\":\"0.5\"", ONE), "main", -1, "without gpu-fraction", NULL},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        json_t *p = json_loads(reqs[i].pod, 0, NULL);
        char req[64] = "", err[512] = "";
        int rc = gpc_wh_sched_request(p, container_named(p, reqs[i].container), req, sizeof req, err, sizeof err);
        bool ok = rc == reqs[i].rc && (rc != 1 || (strcmp(req, reqs[i].want) == 0 &&
                                                   strcmp(gpc_wh_sched_request_source(p), reqs[i].source) == 0)) &&
                  (rc != -1 || strstr(err, reqs[i].want));
        if (!ok) {
            printf("FAIL request %zu: rc %d (want %d), request '%s', err '%s'\n", i, rc, reqs[i].rc, req, err);
            failures++;
        }
        json_decref(p);
    }

    /* gpucores: a warning the caller can surface; none without it. */
    json_t *pod = json_loads(POD("", HAMI("\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpucores\":\"30\"")), 0, NULL);
    char warn[256] = "";
    if (gpc_wh_sched_warning(container_named(pod, "main"), warn, sizeof warn) != 1 ||
        !strstr(warn, "container main: nvidia.com/gpucores (30) is not enforced")) {
        printf("FAIL gpucores warning: '%s'\n", warn);
        failures++;
    }
    json_decref(pod);
    pod = json_loads(POD("", HAMI("\"nvidia.com/gpumem\":\"3000\"")), 0, NULL);
    if (gpc_wh_sched_warning(container_named(pod, "main"), warn, sizeof warn) != 0) {
        printf("FAIL no gpucores, no warning\n");
        failures++;
    }
    json_decref(pod);

    printf("%zu cases, %d failed\n", sizeof rows / sizeof rows[0] + sizeof reqs / sizeof reqs[0] + 2, failures);
    return failures ? 1 : 0;
}
