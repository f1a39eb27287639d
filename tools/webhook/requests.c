/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requests.c: the GPU shares that schedulers already ask for, read as gpucap budgets, so that a
 * cluster whose pods are written for KAI Scheduler or HAMi gets them enforced unchanged.
 *
 * KAI Scheduler (kai-scheduler/KAI-Scheduler, docs/gpu-sharing/README.md) takes the request from
 * pod annotations and, by its own account, "does not enforce memory allocation limit":
 *   - `gpu-fraction`: a share of one GPU's memory, a decimal in (0, 1]. It becomes a percentage
 *     ("0.5" -> "50%") that the library resolves against the card the pod lands on, so one pod spec
 *     gets the right bytes on every kind of card (KAI knows the bytes only after scheduling).
 *   - `gpu-memory`: MiB of one GPU's memory ("2000" -> "2000MiB").
 *   - The share goes to one container: the first of spec.containers, or the one (init or regular)
 *     named by `gpu-fraction-container-name`. The pod's other containers get no GPU from KAI, so no
 *     scheduler budget here (0).
 *   - `gpu-fraction-num-devices`: the number of devices, each shared by the same `gpu-fraction` or
 *     `gpu-memory` (Run:ai's annotation reference, and KAI's GpuFractionsNumDevices): gpucap's
 *     budget applies per device, so the budget is unchanged; the count is only validated.
 *   - Run:ai's dynamic fractions (issue 35): `gpu-fraction-limit` beside `gpu-fraction`, and
 *     `gpu-memory-limit` (MiB) beside `gpu-memory`, make the pair a request and a limit: the budget
 *     (the limit) is the `-limit` annotation, the request (guaranteed) the plain one
 *     (gpc_wh_sched_request). A limit needs its own kind of request (a fraction limit beside a
 *     fraction, MiB beside MiB) and is at least the request; without a `-limit` the plain
 *     annotation is both, as before.
 * HAMi (Project-HAMi/HAMi, README) takes it from container resources, per GPU of the container:
 *   - `nvidia.com/gpumem`: MiB of each GPU ("3000" -> "3000MiB").
 *   - `nvidia.com/gpumem-percentage`: a whole percentage of each GPU (1 to 100).
 *   - `nvidia.com/gpucores`: a share of each GPU's compute. gpucap caps memory only: reported as
 *     not enforced (gpc_wh_sched_warning).
 * A value that cannot be read denies the pod (the caller turns -1 into a denial): never a guess,
 * never uncapped. Two requests for one container (KAI's and HAMi's, or both forms of either) are a
 * conflict, also a denial: which one the user meant is not ours to pick.
 */
#include "requests.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define KAI_FRACTION "gpu-fraction"
#define KAI_MEMORY "gpu-memory"
#define KAI_FRACTION_LIMIT "gpu-fraction-limit"
#define KAI_MEMORY_LIMIT "gpu-memory-limit"
#define KAI_DEVICES "gpu-fraction-num-devices"
#define KAI_CONTAINER "gpu-fraction-container-name"
#define HAMI_MEM "nvidia.com/gpumem"
#define HAMI_PERCENT "nvidia.com/gpumem-percentage"
#define HAMI_CORES "nvidia.com/gpucores"

/* The largest MiB figure accepted: 2^32 MiB (4 PiB) is beyond any card, and far from overflow. */
#define MAX_MIB ((uint64_t)1 << 32)

/* The pod's annotation `key` as text; NULL when absent (or not text, which the API server forbids). */
static const char *annotation(const json_t *pod, const char *key)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

/* A whole number of 1 to `max` written in decimal digits only; false otherwise. */
static bool whole(const char *text, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!text || !*text || strlen(text) > 12)
        return false;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v == 0 || v > max)
        return false;
    *out = v;
    return true;
}

/* A share of a GPU in (0, 1] ("0.5", ".25", "1", "1.0") in parts per million, digits past the sixth
 * decimal dropped (rounded down: never more than asked); false for anything else. */
static bool fraction(const char *text, uint32_t *ppm)
{
    uint64_t units = 0, part = 0;
    int decimals = 0;
    bool digits = false, dot = false, past = false;
    if (!text || strlen(text) > 32)
        return false;
    for (const char *p = text; *p; p++) {
        if (*p == '.' && !dot) {
            dot = true;
        } else if (*p >= '0' && *p <= '9') {
            digits = true;
            if (!dot) {
                units = units * 10 + (uint64_t)(*p - '0');
                if (units > 1)
                    return false;
            } else if (decimals < 6) {
                part = part * 10 + (uint64_t)(*p - '0');
                decimals++;
            } else if (*p != '0') {
                past = true;
            }
        } else {
            return false;
        }
    }
    while (decimals < 6) {
        part *= 10;
        decimals++;
    }
    uint64_t v = units * 1000000 + part;
    if (!digits || v == 0 || v > 1000000 || (v == 1000000 && past))
        return false;
    *ppm = (uint32_t)v;
    return true;
}

/* "50%", "33.3333%" from parts per million: the size parser reads it back exactly. */
static void percent_text(uint32_t ppm, char *out, size_t n)
{
    uint32_t units = ppm / 10000, rest = ppm % 10000;
    if (!rest) {
        snprintf(out, n, "%" PRIu32 "%%", units);
        return;
    }
    char dec[8];
    snprintf(dec, sizeof dec, "%04" PRIu32, rest);
    for (size_t i = strlen(dec); i > 0 && dec[i - 1] == '0'; i--)
        dec[i - 1] = '\0';
    snprintf(out, n, "%" PRIu32 ".%s%%", units, dec);
}

/* The value of a resource in the container's limits, else its requests, as text ("3000"); NULL
 * when absent. A JSON number is written into buf; anything else but a string gives "" (malformed). */
static const char *resource(const json_t *container, const char *name, char *buf, size_t n)
{
    const json_t *res = json_object_get(container, "resources");
    const json_t *v = json_object_get(json_object_get(res, "limits"), name);
    if (!v)
        v = json_object_get(json_object_get(res, "requests"), name);
    if (!v)
        return NULL;
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(buf, n, "%s", json_is_number(v) ? "a number that is not whole" : "");
    return buf;
}

/* True when `container` is the one KAI gives the pod's share to. *err set (and false) when the
 * annotation names a container the pod does not have. */
static bool kai_target(const json_t *pod, const json_t *container, char *err, size_t errn)
{
    const json_t *spec = json_object_get(pod, "spec");
    const char *name = json_string_value(json_object_get(container, "name"));
    const char *chosen = annotation(pod, KAI_CONTAINER);
    if (!chosen) {
        const json_t *first = json_array_get(json_object_get(spec, "containers"), 0);
        const char *first_name = json_string_value(json_object_get(first, "name"));
        return container == first || (name && first_name && strcmp(name, first_name) == 0);
    }
    static const char *const lists[] = {"initContainers", "containers"};
    bool found = false;
    for (size_t l = 0; l < 2; l++) {
        const json_t *list = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(list); i++) {
            const char *n = json_string_value(json_object_get(json_array_get(list, i), "name"));
            found = found || (n && strcmp(n, chosen) == 0);
        }
    }
    if (!found) {
        snprintf(err, errn, "annotation " KAI_CONTAINER ": \"%.64s\" names no container of the pod; accepted: "
                 "the name of one of its containers or init containers", chosen);
        return false;
    }
    return name && strcmp(name, chosen) == 0;
}

/*
 * KAI's (and Run:ai's) request for this container: 1 with the limit in budget and the request in
 * request ("" when the pod gives no `-limit`: the one value is both), 0 none, -1 with err.
 */
static int kai_pair(const json_t *pod, const json_t *container, char *budget, size_t n, char *request, size_t rn,
                    char *err, size_t errn)
{
    const char *frac = annotation(pod, KAI_FRACTION), *mem = annotation(pod, KAI_MEMORY);
    const char *flim = annotation(pod, KAI_FRACTION_LIMIT), *mlim = annotation(pod, KAI_MEMORY_LIMIT);
    const char *devices = annotation(pod, KAI_DEVICES);
    uint64_t count;
    request[0] = '\0';
    if (devices && !whole(devices, 1024, &count)) {
        snprintf(err, errn, "annotation " KAI_DEVICES ": \"%.64s\" is not valid; accepted: a whole number of "
                 "devices from 1, each given the pod's " KAI_FRACTION " or " KAI_MEMORY, devices);
        return -1;
    }
    if (!frac && !mem) {
        if (flim || mlim) {
            snprintf(err, errn, "annotation %s without %s: a limit needs the request it is the limit of (the "
                     "request is guaranteed, the limit the most the container may use)",
                     flim ? KAI_FRACTION_LIMIT : KAI_MEMORY_LIMIT, flim ? KAI_FRACTION : KAI_MEMORY);
            return -1;
        }
        if (!devices)
            return 0;
        snprintf(err, errn, "annotation " KAI_DEVICES " without " KAI_FRACTION " or " KAI_MEMORY
                 ": it says how many devices share that request");
        return -1;
    }
    if (frac && mem) {
        snprintf(err, errn, "annotations " KAI_FRACTION " and " KAI_MEMORY " both set: a pod asks for one of a "
                 "share of the GPU or MiB of it");
        return -1;
    }
    if ((frac && mlim) || (mem && flim)) {
        snprintf(err, errn, "annotation %s beside %s: a limit is of the request's kind (" KAI_FRACTION_LIMIT
                 " beside " KAI_FRACTION ", " KAI_MEMORY_LIMIT " beside " KAI_MEMORY ")",
                 frac ? KAI_MEMORY_LIMIT : KAI_FRACTION_LIMIT, frac ? KAI_FRACTION : KAI_MEMORY);
        return -1;
    }
    if (flim && mlim) {
        snprintf(err, errn, "annotations " KAI_FRACTION_LIMIT " and " KAI_MEMORY_LIMIT " both set: a pod gives one "
                 "limit");
        return -1;
    }
    /* Read the values before choosing the container: a bad value denies the pod whichever is asked. */
    uint32_t ppm = 0, lppm = 0;
    uint64_t mib = 0, lmib = 0;
    const char *lim = flim ? flim : mlim;
    if (frac && !fraction(frac, &ppm)) {
        snprintf(err, errn, "annotation " KAI_FRACTION ": \"%.64s\" is not valid; accepted: a decimal share of "
                 "one GPU's memory above 0 and at most 1, such as 0.5", frac);
        return -1;
    }
    if (mem && !whole(mem, MAX_MIB, &mib)) {
        snprintf(err, errn, "annotation " KAI_MEMORY ": \"%.64s\" is not valid; accepted: a whole number of MiB "
                 "above 0, such as 2000", mem);
        return -1;
    }
    if (flim && !fraction(flim, &lppm)) {
        snprintf(err, errn, "annotation " KAI_FRACTION_LIMIT ": \"%.64s\" is not valid; accepted: a decimal share "
                 "of one GPU's memory above 0 and at most 1, at least " KAI_FRACTION ", such as 0.8", flim);
        return -1;
    }
    if (mlim && !whole(mlim, MAX_MIB, &lmib)) {
        snprintf(err, errn, "annotation " KAI_MEMORY_LIMIT ": \"%.64s\" is not valid; accepted: a whole number of "
                 "MiB above 0, at least " KAI_MEMORY ", such as 8000", mlim);
        return -1;
    }
    if ((flim && lppm < ppm) || (mlim && lmib < mib)) {
        snprintf(err, errn, "annotation %s: \"%.32s\" is below the request %s \"%.32s\"; a limit is at least the "
                 "request", flim ? KAI_FRACTION_LIMIT : KAI_MEMORY_LIMIT, lim, frac ? KAI_FRACTION : KAI_MEMORY,
                 frac ? frac : mem);
        return -1;
    }
    err[0] = '\0';
    if (!kai_target(pod, container, err, errn))
        return err[0] ? -1 : 0;
    char one[32];
    if (frac)
        percent_text(ppm, one, sizeof one);
    else
        snprintf(one, sizeof one, "%" PRIu64 "MiB", mib);
    if (!lim) {
        snprintf(budget, n, "%s", one);
        return 1;
    }
    snprintf(request, rn, "%s", one);
    if (flim)
        percent_text(lppm, budget, n);
    else
        snprintf(budget, n, "%" PRIu64 "MiB", lmib);
    return 1;
}

/* HAMi's request for this container: 1 with budget, 0 none, -1 with err. */
static int hami_budget(const json_t *container, char *budget, size_t n, char *err, size_t errn)
{
    char b1[32], b2[32];
    const char *mem = resource(container, HAMI_MEM, b1, sizeof b1);
    const char *pct = resource(container, HAMI_PERCENT, b2, sizeof b2);
    uint64_t v;
    if (mem && pct) {
        snprintf(err, errn, "resources " HAMI_MEM " and " HAMI_PERCENT " both set: a container asks for one of "
                 "MiB per GPU or a percentage of each GPU");
        return -1;
    }
    if (mem) {
        if (!whole(mem, MAX_MIB, &v)) {
            snprintf(err, errn, "resource " HAMI_MEM ": \"%.64s\" is not valid; accepted: a whole number of MiB "
                     "per GPU above 0, such as 3000", mem);
            return -1;
        }
        snprintf(budget, n, "%" PRIu64 "MiB", v);
        return 1;
    }
    if (pct) {
        if (!whole(pct, 100, &v)) {
            snprintf(err, errn, "resource " HAMI_PERCENT ": \"%.64s\" is not valid; accepted: a whole percentage "
                     "of each GPU's memory from 1 to 100, such as 50", pct);
            return -1;
        }
        snprintf(budget, n, "%" PRIu64 "%%", v);
        return 1;
    }
    return 0;
}

bool gpc_wh_sched_gpu_pod(const json_t *pod)
{
    return annotation(pod, KAI_FRACTION) || annotation(pod, KAI_MEMORY) || annotation(pod, KAI_FRACTION_LIMIT) ||
           annotation(pod, KAI_MEMORY_LIMIT);
}

int gpc_wh_sched_budget(const json_t *pod, const json_t *container, char *budget, size_t n, char *err,
                        size_t errn)
{
    char kai[32] = "", hami[32] = "", request[32];
    int k = kai_pair(pod, container, kai, sizeof kai, request, sizeof request, err, errn);
    if (k < 0)
        return -1;
    int h = hami_budget(container, hami, sizeof hami, err, errn);
    if (h < 0)
        return -1;
    if (k && h) {
        const char *name = json_string_value(json_object_get(container, "name"));
        snprintf(err, errn, "container %.64s: KAI's annotation asks for %s and HAMi's resource for %s: use one "
                 "of them", name ? name : "(unnamed)", kai, hami);
        return -1;
    }
    if (!k && !h)
        return 0;
    snprintf(budget, n, "%s", k ? kai : hami);
    return 1;
}

const char *gpc_wh_sched_source(const json_t *pod, const json_t *container)
{
    char buf[32];
    /* A budget from both would have been a conflict: the container's own resource, else the pod's. */
    if (resource(container, HAMI_MEM, buf, sizeof buf))
        return "HAMi resource " HAMI_MEM;
    if (resource(container, HAMI_PERCENT, buf, sizeof buf))
        return "HAMi resource " HAMI_PERCENT;
    if (annotation(pod, KAI_FRACTION_LIMIT))
        return "KAI annotation " KAI_FRACTION_LIMIT;
    if (annotation(pod, KAI_MEMORY_LIMIT))
        return "KAI annotation " KAI_MEMORY_LIMIT;
    if (annotation(pod, KAI_FRACTION))
        return "KAI annotation " KAI_FRACTION;
    if (annotation(pod, KAI_MEMORY))
        return "KAI annotation " KAI_MEMORY;
    return "the scheduler's request";
}

int gpc_wh_sched_warning(const json_t *container, char *warn, size_t n)
{
    char buf[32];
    const char *cores = resource(container, HAMI_CORES, buf, sizeof buf);
    if (!cores)
        return 0;
    const char *name = json_string_value(json_object_get(container, "name"));
    snprintf(warn, n, "container %.64s: " HAMI_CORES " (%.32s) is not enforced: gpucap caps GPU memory only, "
             "compute is time-sliced as before", name ? name : "(unnamed)", cores);
    return 1;
}

int gpc_wh_sched_request(const json_t *pod, const json_t *container, char *request, size_t n, char *err,
                         size_t errn)
{
    char budget[32], req[32];
    int k = kai_pair(pod, container, budget, sizeof budget, req, sizeof req, err, errn);
    if (k <= 0 || !req[0])
        return k < 0 ? -1 : 0;
    snprintf(request, n, "%s", req);
    return 1;
}

const char *gpc_wh_sched_request_source(const json_t *pod)
{
    return annotation(pod, KAI_FRACTION) ? "KAI annotation " KAI_FRACTION : "KAI annotation " KAI_MEMORY;
}
