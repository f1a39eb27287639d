/* SPDX-License-Identifier: Apache-2.0 */
/*
 * units.h: the project's one size parser (units.c), shared by the library and the tools.
 */
#ifndef GPUCAP_UNITS_H
#define GPUCAP_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A size as written: either absolute bytes or a share of a device's physical memory. */
struct gpc_size {
    uint64_t bytes;  /* when !is_percent */
    uint32_t ppm;    /* parts per million of physical memory, when is_percent (100% = 1000000) */
    bool is_percent;
};

/* One line naming every accepted form, for error messages and --help. */
extern const char gpc_size_forms[];

/*
 * Parses "1073741824", "512MiB", "2 GiB", "1.5GB", "8Gi", "25%", "12.5%". Leading and trailing
 * blanks are allowed. Returns 0, -EINVAL for text that is not a size, or -ERANGE for a size past
 * 2^64-1 bytes or a percentage above 100. *out is written only on success.
 */
int gpc_parse_size(const char *text, struct gpc_size *out);

/* Bytes that a parsed size stands for on a device with `physical` bytes of memory. */
uint64_t gpc_size_resolve(const struct gpc_size *size, uint64_t physical);

/* Writes "1.50 GiB" (or "512 B") into buf and returns buf; GPC_SIZE_TEXT holds any size. */
#define GPC_SIZE_TEXT 32
char *gpc_format_size(uint64_t bytes, char *buf, size_t len);
/* gpc_format_size rounded up, never down: for a figure that must suffice (a budget a job needs). */
char *gpc_format_size_up(uint64_t bytes, char *buf, size_t len);

/* A device UUID as NVIDIA tools write it: "GPU-" + 8-4-4-4-12 hex digits (40 characters + NUL). */
#define GPC_UUID_TEXT 48
char *gpc_uuid_format(const uint8_t uuid[16], char out[GPC_UUID_TEXT]);

#endif
