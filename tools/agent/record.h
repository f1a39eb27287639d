/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h: the budget record (pod annotation gpucap.io/budgets) read as the webhook writes it, and
 * nothing else: {"max":SIZE,"containers":{NAME:SIZE,...}}, "max" optional.
 */
#ifndef GPUCAP_AGENT_RECORD_H
#define GPUCAP_AGENT_RECORD_H

#include <stddef.h>

#define GPC_RECORD_CONTAINERS 64 /* gpucap inject's own bound */

struct gpc_record {
    char max[64];                /* "" when the record has none */
    unsigned n;
    struct {
        char name[64];
        char value[64];
    } c[GPC_RECORD_CONTAINERS];
};

/*
 * Reads the record `text` (`len` bytes, which may hold NULs). 0 with *r filled, or -EINVAL with
 * `err` set when it is not one the webhook writes: not a JSON object of exactly those keys, a key
 * given twice, a NUL anywhere, a name that is not a container name (DNS label), a value or maximum
 * that is not a positive size, more than 64 containers, or a budget above the record's own maximum
 * (when both are in the same unit). Such a record is left alone as a whole.
 */
int gpc_record_parse(const char *text, size_t len, struct gpc_record *r, char *err, size_t errlen);

#endif
