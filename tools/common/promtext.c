/* SPDX-License-Identifier: Apache-2.0 */
/*
 * promtext.c: the Prometheus text writer of gpucap-webhook and gpucap-exporter (promtext.h). The
 * buffer doubles as it grows, from 64 KiB; one scrape is one buffer.
 */
#include "promtext.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void gpc_text_printf(struct gpc_text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        size_t room = t->cap - t->len;
        va_list ap;
        va_start(ap, fmt);
        int n = t->text ? vsnprintf(t->text + t->len, room, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 65536;
        while (n >= 0 && cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(t->text, cap);
        if (!p) {
            free(t->text);
            *t = (struct gpc_text){.failed = 1};
            return;
        }
        t->text = p;
        t->cap = cap;
    }
}

void gpc_prom_family(struct gpc_text *t, const char *name, const char *type, const char *help)
{
    gpc_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void gpc_text_free(struct gpc_text *t)
{
    free(t->text);
    *t = (struct gpc_text){0};
}
