/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_parse.c: the node agent's reading of a budget record (record.c), for the webhook's tests:
 * a record on stdin; prints what the agent takes, {"max":SIZE,"containers":{NAME:SIZE}} ("max" only
 * where the record has one), and exits 0, or prints "refused: REASON" and exits 1. So a test can
 * hold every record the webhook writes to the agent's strict rules.
 */
#include "record.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, stdin);
    struct gpc_record r;
    char err[256];
    if (gpc_record_parse(text, n, &r, err, sizeof err) != 0) {
        printf("refused: %s\n", err);
        return 1;
    }
    /* Names are DNS labels and values sizes of plain characters (record.c): no escaping needed. */
    printf("{");
    if (r.max[0])
        printf("\"max\":\"%s\",", r.max);
    printf("\"containers\":{");
    for (unsigned i = 0; i < r.n; i++)
        printf("%s\"%s\":\"%s\"", i ? "," : "", r.c[i].name, r.c[i].value);
    printf("}}\n");
    return 0;
}
