/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c: the budget record, read strictly (record.h). The record is on the pod, and pod
 * annotations are the tenant's to write wherever the webhook is not asked (pods/status, a pod
 * injected before records existed, an uncovered namespace): so it is read as a request, never as
 * an order. Only the webhook's exact shape is taken; anything else is refused whole, and what is
 * taken is still bounded by the maximum fixed when the pod was created (apply.c).
 */
#include "record.h"

#include "common/units.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
            return false;
    return true;
}

/* A positive size of the project's forms, short, in plain characters. */
static bool size_text(json_t *v, struct gpc_size *out)
{
    const char *s = json_string_value(v);
    if (!s || json_string_length(v) != strlen(s) || strlen(s) >= 64)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == ';' || *p == '#' || *p == '[' || *p == '=')
            return false;
    if (gpc_parse_size(s, out) != 0)
        return false;
    return out->is_percent ? out->ppm > 0 : out->bytes > 0;
}

static bool above(const struct gpc_size *a, const struct gpc_size *b)
{
    return a->is_percent == b->is_percent && (a->is_percent ? a->ppm > b->ppm : a->bytes > b->bytes);
}

int gpc_record_parse(const char *text, size_t len, struct gpc_record *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    json_error_t je;
    /* No JSON_ALLOW_NUL: a NUL in the record is a parse error. Duplicate keys are refused, not
     * resolved one way or the other. */
    json_t *root = memchr(text, '\0', len) ? NULL : json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    int rc = -EINVAL;
    const char *why = NULL;
    struct gpc_size max, v;
    if (!root) {
        why = memchr(text, '\0', len) ? "it holds a NUL" : "not JSON, or a key given twice";
        goto out;
    }
    json_t *jmax = json_object_get(root, "max"), *ctrs = json_object_get(root, "containers");
    if (!json_is_object(root) || !json_is_object(ctrs) || json_object_size(root) != 1u + (jmax != NULL)) {
        why = "not {\"max\":SIZE,\"containers\":{NAME:SIZE,...}}";
        goto out;
    }
    if (jmax && !size_text(jmax, &max)) {
        why = "its maximum is not a size";
        goto out;
    }
    if (json_object_size(ctrs) == 0 || json_object_size(ctrs) > GPC_RECORD_CONTAINERS) {
        why = "it names no container, or more than 64";
        goto out;
    }
    const char *name;
    json_t *val;
    json_object_foreach(ctrs, name, val) {
        if (!dns_label(name)) {
            why = "a container name is not a DNS label";
            goto out;
        }
        if (!size_text(val, &v)) {
            why = "a budget is not a size";
            goto out;
        }
        if (jmax && above(&v, &max)) {
            why = "a budget is above the record's own maximum";
            goto out;
        }
        snprintf(r->c[r->n].name, sizeof r->c[r->n].name, "%s", name);
        snprintf(r->c[r->n].value, sizeof r->c[r->n].value, "%s", json_string_value(val));
        r->n++;
    }
    if (jmax)
        snprintf(r->max, sizeof r->max, "%s", json_string_value(jmax));
    rc = 0;
out:
    if (rc != 0) {
        snprintf(err, errlen, "%s", why);
        memset(r, 0, sizeof *r);
    }
    json_decref(root);
    return rc;
}
