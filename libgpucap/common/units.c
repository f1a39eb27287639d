/* SPDX-License-Identifier: Apache-2.0 */
/*
 * units.c: sizes and device identities as people write them.
 *
 * The one size parser of the project, and the one formatter of device UUIDs ("GPU-xxxxxxxx-..."). The library's settings, the ini file, the `gpucap` CLI and the
 * admission webhook all read memory sizes through gpc_parse_size(), so "2GiB" means the same thing
 * everywhere. It is built into a small static library (gpucap_units) that the tools link too; it
 * allocates nothing and touches no global state, so it is safe inside a preloaded library.
 */
#include "common/units.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char gpc_size_forms[] =
    "bytes (1073741824), 1024-based KiB MiB GiB TiB (or Ki Mi Gi Ti), "
    "1000-based KB MB GB TB (or k/K M G T), or a percentage of the device's memory (25%)";

struct unit {
    const char *suffix;
    uint64_t factor;
};

/* Longest suffixes first is not needed: matching is on the whole remaining text. */
static const struct unit units[] = {
    {"", 1},
    {"B", 1},
    {"KiB", 1ULL << 10},         {"MiB", 1ULL << 20},         {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},         {"Ki", 1ULL << 10},          {"Mi", 1ULL << 20},
    {"Gi", 1ULL << 30},          {"Ti", 1ULL << 40},          {"KB", 1000ULL},
    {"kB", 1000ULL},             {"MB", 1000000ULL},          {"GB", 1000000000ULL},
    {"TB", 1000000000000ULL},    {"k", 1000ULL},              {"K", 1000ULL},
    {"M", 1000000ULL},           {"G", 1000000000ULL},        {"T", 1000000000000ULL},
};

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

int gpc_parse_size(const char *text, struct gpc_size *out)
{
    if (!text || !out)
        return -EINVAL;
    const char *p = text;
    while (is_space(*p))
        p++;
    if (*p < '0' || *p > '9')
        return -EINVAL;

    /* Integer part and up to 6 fraction digits, kept exactly as integer * 10^6. */
    unsigned __int128 whole = 0;
    while (*p >= '0' && *p <= '9') {
        whole = whole * 10 + (unsigned)(*p - '0');
        if (whole > UINT64_MAX)
            return -ERANGE;
        p++;
    }
    uint64_t frac = 0; /* millionths */
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        uint64_t scale = 100000;
        while (*p >= '0' && *p <= '9') {
            frac += (uint64_t)(*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    while (is_space(*p))
        p++;

    /* The suffix is what is left, minus trailing blanks. */
    size_t len = strlen(p);
    while (len && is_space(p[len - 1]))
        len--;

    if (len == 1 && p[0] == '%') {
        unsigned __int128 ppm = whole * 10000 + frac / 100;
        if (ppm > 1000000)
            return -ERANGE;
        out->bytes = 0;
        out->ppm = (uint32_t)ppm;
        out->is_percent = true;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].suffix) != len || memcmp(units[i].suffix, p, len) != 0)
            continue;
        unsigned __int128 bytes = whole * units[i].factor + (unsigned __int128)frac * units[i].factor / 1000000;
        if (bytes > UINT64_MAX)
            return -ERANGE;
        out->bytes = (uint64_t)bytes;
        out->ppm = 0;
        out->is_percent = false;
        return 0;
    }
    return -EINVAL;
}

uint64_t gpc_size_resolve(const struct gpc_size *size, uint64_t physical)
{
    if (!size->is_percent)
        return size->bytes;
    return (uint64_t)((unsigned __int128)physical * size->ppm / 1000000);
}

char *gpc_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    unsigned i = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && i + 1 < sizeof names / sizeof names[0]) {
        v /= 1024.0;
        i++;
    }
    snprintf(buf, len, "%.2f %s", v, names[i]);
    return buf;
}

char *gpc_format_size_up(uint64_t bytes, char *buf, size_t len)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    unsigned i = 0;
    unsigned __int128 unit = 1;
    while ((unsigned __int128)bytes >= unit * 1024 && i + 1 < sizeof names / sizeof names[0]) {
        unit *= 1024;
        i++;
    }
    /* Hundredths of the unit, rounded up: what is shown is never less than `bytes`. */
    unsigned long long h = (unsigned long long)(((unsigned __int128)bytes * 100 + unit - 1) / unit);
    snprintf(buf, len, "%llu.%02llu %s", h / 100, h % 100, names[i]);
    return buf;
}

char *gpc_uuid_format(const uint8_t u[16], char out[GPC_UUID_TEXT])
{
    snprintf(out, GPC_UUID_TEXT, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return out;
}
