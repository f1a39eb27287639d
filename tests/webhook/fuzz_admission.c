/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_admission.c: libFuzzer harness over the webhook's request handler.
 *
 * Any bytes go to gpc_admission_handle() under one of two configurations (chosen by the input's
 * length, so the corpus stays plain JSON). Beyond the sanitizers' checks it asserts the handler's
 * contract: a status of 200, 400 or 413, a body, a log line, and for 200 a JSON review that carries a
 * response with a uid and, if any, warnings of printable text. Built by tests/webhook/fuzz.sh (or by CMake when the compiler is clang).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"

static const struct gpc_admission_config configs[2] = {
    {.image = "gpucap:fuzz", .driver = GPC_DRIVER_AUTO},
    {.image = "gpucap:fuzz", .default_memory = " 25% ", .max_memory = "8GiB", .preload = GPC_PRELOAD_ENV,
     .dra_claims = true, .visible = GPC_VISIBLE_DENY, .trusted_namespaces = "ml", .pod_opt_out = true,
     .driver = GPC_DRIVER_ON, .qos = GPC_QOS_BURSTABLE},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gpc_admission_result res;
    gpc_admission_handle(&configs[size & 1], (const char *)data, size, &res);
    if (res.status != 200 && res.status != 400 && res.status != 413)
        abort();
    if (!res.body || res.body_len != strlen(res.body) || !res.log[0] || strchr(res.log, '\n'))
        abort();
    if (res.status == 200) {
        json_t *review = json_loadb(res.body, res.body_len, 0, NULL);
        json_t *resp = json_object_get(review, "response");
        if (!json_is_string(json_object_get(resp, "uid")) || !json_is_boolean(json_object_get(resp, "allowed")))
            abort();
        /* Warnings, when there are any: one printable line each, as the API server passes them on. */
        json_t *warnings = json_object_get(resp, "warnings"), *w;
        size_t i;
        if (warnings && (!json_is_array(warnings) || !json_array_size(warnings)))
            abort();
        json_array_foreach(warnings, i, w)
            for (const char *p = json_string_value(w) ? json_string_value(w) : "\n"; *p; p++)
                if (*p < 0x20 || *p > 0x7e)
                    abort();
        json_decref(review);
    }
    gpc_admission_result_free(&res);
    return 0;
}
