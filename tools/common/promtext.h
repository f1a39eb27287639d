/* SPDX-License-Identifier: Apache-2.0 */
/*
 * promtext.h: the Prometheus text exposition that gpucap's two servers write (/metrics of
 * gpucap-webhook and gpucap-exporter): one growing buffer, one way to open a metric family.
 */
#ifndef GPUCAP_TOOLS_PROMTEXT_H
#define GPUCAP_TOOLS_PROMTEXT_H

#include <stddef.h>

/* A growing text buffer; text is NUL-terminated, NULL (and failed set) after an allocation failure. */
struct gpc_text {
    char *text;
    size_t len, cap;
    int failed;
};

/* Appends printf-style text; after a failure, nothing (t->failed stays set and t->text NULL). */
void gpc_text_printf(struct gpc_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Opens a metric family: its # HELP and # TYPE lines. `name` is snake_case with the gpucap_ prefix
 * and its unit, `type` "counter", "gauge" or "histogram", `help` one line without a backslash.
 */
void gpc_prom_family(struct gpc_text *t, const char *name, const char *type, const char *help);

/* Releases the text (a zeroed one too) and zeroes it. */
void gpc_text_free(struct gpc_text *t);

#endif
