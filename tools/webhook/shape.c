/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shape.c: the cost of parsing a request body, found in one pass before jansson parses it, and the
 * pods' managedFields blanked on the way (shape.h).
 *
 * jansson builds the whole tree: `{}` costs about 235 bytes of memory for 3 bytes sent, so a body's
 * size says little about its parse. What each kind of value was measured to take with jansson 2.14
 * (glibc malloc, 64-bit; tests/webhook/test_shape.c checks the estimate against a real parse of
 * each shape): an empty object 235 bytes, an empty array 139, a string 91 plus its length, a number
 * or literal 43, an object member (its key and slot) about 90 more. The estimate rounds each up
 * (COST_*), so it stays above what the parse takes; the server holds the sum of the estimates of
 * the parses in flight under one bound.
 *
 * managedFields: the API server sends each pod with the fields of every manager that touched it,
 * one empty object per annotation, label and field, which the handler never reads. A pod with the
 * API server's maximum of annotations in small ones (256 KiB: some 65,000) carries as many objects
 * there, twice as costly to parse as the annotations themselves; an UPDATE carries two pods. The
 * value of "managedFields" in request.object.metadata and request.oldObject.metadata is rewritten
 * in place as `null` and spaces before the parse. A key written with escapes is not recognised and
 * simply parsed (counted like the rest): the bound holds either way.
 */
#include "shape.h"

#include <stdbool.h>
#include <string.h>

#define COST_OBJECT 256
#define COST_ARRAY 160
#define COST_STRING 96
#define COST_SCALAR 48
#define COST_LITERAL 16 /* null, true, false: jansson's singletons, a slot where they are held */
#define COST_MEMBER 112

struct frame {
    bool object;
    bool key_next;  /* in an object: the next string is a key */
    char key[16];   /* the last key of this object ("" when longer or escaped) */
};

/* The end of the string that starts at body[i] (its closing quote, or len). */
static size_t string_end(const char *body, size_t len, size_t i)
{
    for (size_t j = i + 1; j < len; j++) {
        if (body[j] == '\\')
            j++;
        else if (body[j] == '"')
            return j;
    }
    return len;
}

/* One past the end of the object or array that starts at body[i] (len when it never ends). */
static size_t value_end(const char *body, size_t len, size_t i)
{
    size_t depth = 0;
    for (size_t j = i; j < len; j++) {
        char c = body[j];
        if (c == '"')
            j = string_end(body, len, j);
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return j + 1;
    }
    return len;
}

static bool key_is(const struct frame *f, const char *name)
{
    return f->object && strcmp(f->key, name) == 0;
}

const char *gpc_shape_scan(char *body, size_t len, struct gpc_shape *out)
{
    memset(out, 0, sizeof *out);
    struct frame frames[GPC_SHAPE_MAX_DEPTH + 1];
    size_t depth = 0;
    bool in_scalar = false;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        bool scalar_char = !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '{' || c == '}' ||
                             c == '[' || c == ']' || c == ',' || c == ':');
        if (!scalar_char)
            in_scalar = false;
        struct frame *f = depth ? &frames[depth] : NULL;
        switch (c) {
        case '"': {
            size_t end = string_end(body, len, i);
            if (f && f->object && f->key_next) {
                out->members++;
                size_t n = end - i - 1;
                bool plain = n < sizeof f->key && !memchr(body + i + 1, '\\', n);
                memcpy(f->key, body + i + 1, plain ? n : 0);
                f->key[plain ? n : 0] = '\0';
                f->key_next = false;
            } else {
                out->strings++;
            }
            i = end;
            break;
        }
        case '{':
        case '[':
            if (depth == GPC_SHAPE_MAX_DEPTH)
                return "JSON nested deeper than 64 levels";
            frames[++depth] = (struct frame){.object = c == '{', .key_next = c == '{'};
            if (c == '{')
                out->objects++;
            else
                out->arrays++;
            break;
        case '}':
        case ']':
            depth -= depth > 0;
            break;
        case ',':
            if (f && f->object)
                f->key_next = true;
            break;
        case ':':
            /* root{request{object|oldObject{metadata{managedFields: VALUE */
            if (depth == 4 && key_is(&frames[1], "request") &&
                (key_is(&frames[2], "object") || key_is(&frames[2], "oldObject")) && key_is(&frames[3], "metadata") &&
                key_is(&frames[4], "managedFields")) {
                size_t k = i + 1;
                while (k < len && (body[k] == ' ' || body[k] == '\t' || body[k] == '\n' || body[k] == '\r'))
                    k++;
                if (k < len && (body[k] == '[' || body[k] == '{')) {
                    size_t e = value_end(body, len, k);
                    if (e < len && e - k >= 4) {
                        memcpy(body + k, "null", 4);
                        memset(body + k + 4, ' ', e - k - 4);
                        out->stripped += e - k;
                        out->literals++;
                        i = e - 1;
                    }
                }
            }
            break;
        default:
            if (scalar_char && !in_scalar) {
                if (c == 'n' || c == 't' || c == 'f')
                    out->literals++;
                else
                    out->scalars++;
                in_scalar = true;
            }
        }
    }
    out->cost = len + out->objects * COST_OBJECT + out->arrays * COST_ARRAY + out->strings * COST_STRING +
                out->scalars * COST_SCALAR + out->literals * COST_LITERAL + out->members * COST_MEMBER;
    return NULL;
}
