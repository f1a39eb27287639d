/* SPDX-License-Identifier: Apache-2.0 */
/*
 * man.h: what the generated man pages share (man.c): roff escaping and the shape of an option.
 * Each program writes its own page from its options table (`--help-man`, run by the build).
 */
#ifndef GPUCAP_TOOLS_MAN_H
#define GPUCAP_TOOLS_MAN_H

#include <stdio.h>

/* Writes `text` with roff's special characters escaped ('-', '\', a leading '.' or '\''). */
void gpc_man_text(FILE *f, const char *text);

/* An option as a tagged paragraph: ".TP", "\-\-FLAG ARG" (ARG in italics; NULL for none), then
 * the text, escaped. */
void gpc_man_option(FILE *f, const char *flag, const char *arg, const char *text);

/* The same for any item: NAME in bold (a key, a variable), ARG in italics (NULL: none). */
void gpc_man_item(FILE *f, const char *name, const char *arg, const char *text);

/* ".SH NAME" and the text escaped. */
void gpc_man_section(FILE *f, const char *name, const char *text);

#endif
