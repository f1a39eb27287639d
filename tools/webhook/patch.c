/* SPDX-License-Identifier: Apache-2.0 */
/*
 * patch.c: the scratch of one review (review.h): the JSONPatch operations as they are appended, the
 * denial and warning texts, the typed readers of the request's JSON and the helpers for sizes, names
 * and mount paths that every other file of the handler uses, and the patch of the pod's annotations.
 * Nothing here decides anything.
 */
#include "review.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wh_say(struct review *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* Copies text for a log line or a message: bounded, one line, printable ASCII only. */
void wh_clean(char *dst, size_t len, const char *src)
{
    size_t i = 0;
    for (; src && *src && i + 1 < len; src++)
        dst[i++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
    dst[i] = '\0';
}

void wh_trim_copy(char *dst, size_t len, const char *src)
{
    while (isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Two paths are the same mount point when they differ only by trailing slashes. */
bool wh_same_path(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (lb > 1 && b[lb - 1] == '/')
        lb--;
    return la == lb && memcmp(a, b, la) == 0;
}

/* True when `path` is `dir` or lies under it ("/etc/gpucap/x" under "/etc/gpucap", not "/etc/gpucapx"). */
bool wh_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* RFC 6901: '~' becomes "~0" and '/' becomes "~1" inside one reference token. */
static void pointer_escape(char *dst, size_t len, const char *key)
{
    size_t i = 0;
    for (; *key && i + 3 < len; key++) {
        if (*key == '~' || *key == '/') {
            dst[i++] = '~';
            dst[i++] = *key == '~' ? '0' : '1';
        } else {
            dst[i++] = *key;
        }
    }
    dst[i] = '\0';
}

void wh_op(struct review *r, const char *kind, const char *path, json_t *value)
{
    json_t *o = json_pack("{s:s, s:s, s:o}", "op", kind, "path", path, "value", value);
    if (!o || json_array_append_new(r->patch, o) != 0)
        r->oom = true;
}

/* Appends `item` to the array at `at`/`field`, creating the array when it is absent. */
void wh_append(struct review *r, const char *at, const char *field, bool exists, json_t *item)
{
    char path[160];
    if (!item) {
        r->oom = true;
        return;
    }
    snprintf(path, sizeof path, "%s/%s%s", at, field, exists ? "/-" : "");
    wh_op(r, "add", path, exists ? item : json_pack("[o]", item));
}

json_t *wh_env_var(const char *name, const char *value)
{
    return json_pack("{s:s, s:s}", "name", name, "value", value);
}

/* A string member, or NULL when absent or null; *bad is set when it is there with another type. */
const char *wh_get_string(json_t *obj, const char *key, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        *bad = true;
        return NULL;
    }
    return json_string_value(v);
}

/* An object or array member, or NULL when absent or null; *bad is set for another type. */
json_t *wh_get_typed(json_t *obj, const char *key, json_type type, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return NULL;
    if (json_typeof(v) != type) {
        *bad = true;
        return NULL;
    }
    return v;
}

/* Parses a size as the library will; false when it is not one. */
bool wh_size_of(const char *text, struct gpc_size *out)
{
    return text && *text && gpc_parse_size(text, out) == 0;
}

void wh_append_name(char *list, size_t len, const char *name)
{
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s%s", used ? "," : "", name);
}

/* True when the comma-separated `list` holds `name`. */
bool wh_list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t tok = strcspn(p, ", ");
        if (tok == n && n && memcmp(p, name, n) == 0)
            return true;
        p += tok;
    }
    return false;
}

/* True when both sizes are of one kind (bytes or share) and a is above b. */
bool wh_above(const char *a, const char *b)
{
    struct gpc_size sa, sb;
    if (!wh_size_of(a, &sa) || !wh_size_of(b, &sb) || sa.is_percent != sb.is_percent)
        return false;
    return sa.is_percent ? sa.ppm > sb.ppm : sa.bytes > sb.bytes;
}

/* Adds one line to the response's warnings (cleaned, bounded). */
void wh_warn(struct review *r, const char *fmt, ...)
{
    char text[256], cleaned[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    wh_clean(cleaned, sizeof cleaned, text);
    if (json_array_append_new(r->warnings, json_string(cleaned)) != 0)
        r->oom = true;
}

static void op_remove(struct review *r, const char *path)
{
    json_t *o = json_pack("{s:s, s:s}", "op", "remove", "path", path);
    if (!o || json_array_append_new(r->patch, o) != 0)
        r->oom = true;
}

/*
 * Sets the pod's annotations keys[i] to values[i] (NULL: removed), creating metadata and
 * annotations as needed; only what differs is patched, so a second pass patches nothing.
 */
void wh_patch_annotations(struct review *r, json_t *meta, json_t *ann, const char *const keys[],
                              const char *const values[], size_t n)
{
    json_t *all = json_object();
    bool any = false;
    for (size_t k = 0; all && k < n; k++) {
        const char *now = json_string_value(json_object_get(ann, keys[k]));
        char key[64], path[96];
        pointer_escape(key, sizeof key, keys[k]);
        snprintf(path, sizeof path, "/metadata/annotations/%s", key);
        if (!values[k]) {
            if (json_object_get(ann, keys[k]))
                op_remove(r, path);
            continue;
        }
        if (json_object_set_new(all, keys[k], json_string(values[k])) != 0)
            r->oom = true;
        if (now && strcmp(now, values[k]) == 0)
            continue;
        any = true;
        if (ann)
            wh_op(r, "add", path, json_string(values[k])); /* "add" replaces an existing member */
    }
    if (!all)
        r->oom = true;
    else if (any && !meta)
        wh_op(r, "add", "/metadata", json_pack("{s:O}", "annotations", all));
    else if (any && !ann)
        wh_op(r, "add", "/metadata/annotations", json_incref(all));
    json_decref(all);
}
