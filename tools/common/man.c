/* SPDX-License-Identifier: Apache-2.0 */
/* man.c: roff for the generated man pages (man.h). */
#include "man.h"

#include <stdbool.h>

void gpc_man_text(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++) {
        bool line_start = p == text || p[-1] == '\n';
        if (line_start && (*p == '.' || *p == '\''))
            fputs("\\&", f);
        if (*p == '-')
            fputs("\\-", f);
        else if (*p == '\\')
            fputs("\\e", f);
        else
            fputc(*p, f);
    }
}

void gpc_man_option(FILE *f, const char *flag, const char *arg, const char *text)
{
    char name[128];
    snprintf(name, sizeof name, "--%s", flag);
    gpc_man_item(f, name, arg, text);
}

void gpc_man_item(FILE *f, const char *name, const char *arg, const char *text)
{
    fputs(".TP\n\\fB", f);
    gpc_man_text(f, name);
    fputs("\\fR", f);
    if (arg) {
        fputs(" \\fI", f);
        gpc_man_text(f, arg);
        fputs("\\fR", f);
    }
    fputc('\n', f);
    gpc_man_text(f, text);
    fputc('\n', f);
}

void gpc_man_section(FILE *f, const char *name, const char *text)
{
    fprintf(f, ".SH %s\n", name);
    gpc_man_text(f, text);
    fputc('\n', f);
}
