/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shape.h: what parsing a request body will cost, found before jansson parses it (shape.c), so the
 * server can bound the memory of all the parses in flight together (server.c).
 */
#ifndef GPUCAP_WEBHOOK_SHAPE_H
#define GPUCAP_WEBHOOK_SHAPE_H

#include <stddef.h>

/* Deeper bodies are refused: a pod with managedFields nests about 15 levels. */
#define GPC_SHAPE_MAX_DEPTH 64

struct gpc_shape {
    size_t objects, arrays, strings, scalars, literals, members; /* what the parse will allocate, by kind */
    size_t stripped; /* bytes of managedFields blanked (the handler never reads them) */
    size_t cost;     /* an upper estimate of the bytes of memory the parse takes */
};

/*
 * Scans a request body in one pass: counts what jansson will allocate for it, refuses nesting deeper
 * than GPC_SHAPE_MAX_DEPTH, and blanks in place the value of metadata.managedFields of
 * request.object and request.oldObject (rewritten as `null` and spaces: the handler never reads it,
 * and in a pod with many annotations it costs more than everything else together). The estimate
 * (out->cost) is the body's length plus, per value, what jansson 2.14 was measured to take for it
 * (tools/webhook/shape.c), rounded up. Malformed JSON is left to the parser. Returns NULL, or the
 * reason the body is refused.
 */
const char *gpc_shape_scan(char *body, size_t len, struct gpc_shape *out);

#endif
