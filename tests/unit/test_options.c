/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_options.c: the settings, without a driver: every size form, percentages, malformed values
 * (one clear error line and the safe state, a budget of 0), the ini file, the environment over the
 * file, per-device limits, unknown keys and variables, and "no limit anywhere".
 */
#include "common/defs.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"

/* stderr is captured while settings load: failures go to stdout. */
#define CHECK_STREAM stdout
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GiB (1ULL << 30)
#define PHYS (16 * GiB)

/* stderr captured into a buffer while settings load. */
static char captured[8192];
static int saved_fd = -1;
static FILE *cap;

static void capture_begin(void)
{
    fflush(stderr);
    cap = tmpfile();
    saved_fd = dup(2);
    dup2(fileno(cap), 2);
}

static void capture_end(void)
{
    dup2(saved_fd, 2);
    close(saved_fd);
    rewind(cap);
    size_t n = fread(captured, 1, sizeof captured - 1, cap);
    captured[n] = '\0';
    fclose(cap);
}

static char ini_path[] = "/tmp/gpucap-test-XXXXXX";

static void write_ini(const char *text)
{
    FILE *f = fopen(ini_path, "w");
    fputs(text, f);
    fclose(f);
}

static struct gpc_settings s, platform;

static void load(const char **env)
{
    capture_begin();
    gpc_settings_load(&s, &platform, (char *const *)env);
    capture_end();
}

static void test_sizes(void)
{
    struct {
        const char *text;
        uint64_t bytes;
        uint32_t ppm;
    } ok[] = {
        {"1073741824", GiB, 0}, {"512MiB", 512ULL << 20, 0}, {"2 GiB", 2 * GiB, 0}, {"1.5GiB", 3 * GiB / 2, 0},
        {"2GB", 2000000000ULL, 0}, {"8Gi", 8 * GiB, 0}, {"3K", 3000, 0}, {"3KiB", 3072, 0}, {"1TiB", 1ULL << 40, 0},
        {" 4GiB ", 4 * GiB, 0}, {"0", 0, 0}, {"7B", 7, 0}, {"25%", 0, 250000}, {"12.5%", 0, 125000},
        {"100%", 0, 1000000}, {"0%", 0, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct gpc_size z;
        int rc = gpc_parse_size(ok[i].text, &z);
        CHECK(rc == 0, "'%s' rejected (%d)", ok[i].text, rc);
        if (rc == 0 && ok[i].ppm == 0 && !strchr(ok[i].text, '%'))
            CHECK(!z.is_percent && z.bytes == ok[i].bytes, "'%s' = %llu", ok[i].text, (unsigned long long)z.bytes);
        if (rc == 0 && strchr(ok[i].text, '%'))
            CHECK(z.is_percent && z.ppm == ok[i].ppm, "'%s' = %u ppm", ok[i].text, z.ppm);
    }
    struct gpc_size z = {0};
    gpc_parse_size("25%", &z);
    CHECK(gpc_size_resolve(&z, PHYS) == 4 * GiB, "25%% of 16 GiB");
    const char *bad[] = {"", "abc", "GiB", "-1", "1e9", "10 gib", "1 GiB extra", "16EiB", "1.GiB", ".5GiB", "%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(gpc_parse_size(bad[i], &z) == -EINVAL, "'%s' accepted", bad[i]);
    CHECK(gpc_parse_size("101%", &z) == -ERANGE, "101%% accepted");
    CHECK(gpc_parse_size("99999999999999999999", &z) == -ERANGE, "2^64 accepted");
    CHECK(gpc_parse_size("17179869184TiB", &z) == -ERANGE, "overflowing TiB accepted");
}

/* A figure that must suffice is shown rounded up, never down; others to the nearest. */
static void test_format(void)
{
    struct {
        uint64_t bytes;
        const char *near, *up;
    } t[] = {
        {6 * GiB + GiB / 4, "6.25 GiB", "6.25 GiB"},          /* exact: both */
        {6 * GiB + GiB / 4 + 1, "6.25 GiB", "6.26 GiB"},      /* one byte more needs more */
        {6 * GiB + GiB / 4 - (GiB / 1000), "6.25 GiB", "6.25 GiB"},
        {6 * GiB + 2 * GiB / 10, "6.20 GiB", "6.20 GiB"},
        {1023, "1023 B", "1023 B"},
        {1024 * 1024 - 1, "1024.00 KiB", "1024.00 KiB"},
        {UINT64_MAX, "16.00 EiB", "16.00 EiB"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
        CHECK(strcmp(gpc_format_size(t[i].bytes, a, sizeof a), t[i].near) == 0, "%llu: '%s', want '%s'",
              (unsigned long long)t[i].bytes, a, t[i].near);
        CHECK(strcmp(gpc_format_size_up(t[i].bytes, b, sizeof b), t[i].up) == 0, "%llu rounded up: '%s', want '%s'",
              (unsigned long long)t[i].bytes, b, t[i].up);
    }
    /* Whatever the figure, what is shown up suffices: parsed back, it is at least the figure. */
    for (uint64_t v = 1000; v < 64 * GiB; v = v * 3 + 7) {
        char b[GPC_SIZE_TEXT];
        gpc_format_size_up(v, b, sizeof b);
        char *sp = strchr(b, ' ');
        if (sp)
            memmove(sp, sp + 1, strlen(sp));
        struct gpc_size z;
        CHECK(gpc_parse_size(b, &z) == 0 && z.bytes >= v, "%llu shown up as '%s' = %llu", (unsigned long long)v, b,
              (unsigned long long)z.bytes);
    }
}

static void test_env(void)
{
    const char *e1[] = {"GPUCAP_CONFIG=/nonexistent-but-unused", NULL};
    (void)e1;
    const char *a[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=2GiB", "PATH=/bin", NULL};
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 2 * GiB, "global limit");
    CHECK(gpc_settings_limit(&s, 5, NULL, PHYS, NULL) == 2 * GiB, "global limit on device 5");
    CHECK(captured[0] == '\0', "unexpected output: %s", captured);

    const char *b[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=25%", NULL};
    load(b);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 4 * GiB, "percent limit");

    const char *c[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=2GiB", "GPUCAP_MEMORY_LIMIT_1=1GiB", NULL};
    load(c);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 2 * GiB, "device 0");
    CHECK(gpc_settings_limit(&s, 1, NULL, PHYS, NULL) == GiB, "device 1 override");

    const char *d[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=lots", NULL};
    load(d);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "a bad limit must give 0");
    CHECK(strstr(captured, "GPUCAP_MEMORY_LIMIT") && strstr(captured, "'lots'") && strstr(captured, "GiB") &&
              strstr(captured, "gpucap: error:"),
          "error line does not name the setting, value and forms: %s", captured);
    CHECK(gpc_settings_any_limit(&s), "a bad limit must count as a limit");

    const char *e[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT_1=abc", "GPUCAP_MEMORY_LIMIT=1GiB", NULL};
    load(e);
    CHECK(gpc_settings_limit(&s, 1, NULL, PHYS, NULL) == 0, "bad per-device limit");
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GiB, "good global limit kept");

    const char *f[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMROY_LIMIT=1GiB", NULL};
    load(f);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "an unknown GPUCAP_ variable must give 0");
    CHECK(strstr(captured, "GPUCAP_MEMROY_LIMIT"), "the typo is not named: %s", captured);

    const char *g[] = {"GPUCAP_CONFIG=", "GPUCAP_LOG_LEVEL=loud", "GPUCAP_MEMORY_LIMIT=1GiB", NULL};
    load(g);
    CHECK(strstr(captured, "GPUCAP_LOG_LEVEL") && strstr(captured, "error|warn|info|debug"), "log level: %s",
          captured);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GiB, "a bad log level does not touch the budget");

    const char *h[] = {"GPUCAP_CONFIG=/nonexistent/gpucap.ini", NULL};
    load(h);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "a missing GPUCAP_CONFIG file must give 0");
    CHECK(strstr(captured, "/nonexistent/gpucap.ini"), "missing file not named: %s", captured);

    if (access("/etc/gpucap/gpucap.ini", F_OK) != 0) {
        const char *none[] = {"PATH=/bin", NULL};
        load(none);
        CHECK(!gpc_settings_any_limit(&s), "no setting must mean no limit");
        CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GPC_UNLIMITED, "unlimited");
    }
}

static void test_uuid(void)
{
    const char *one = "GPU-fa4ec0da-0000-4000-8000-000000000001", *two = "GPU-fa4ec0da-0000-4000-8000-000000000002";
    const char *a[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=2GiB",
                       "GPUCAP_MEMORY_LIMIT_GPU-fa4ec0da-0000-4000-8000-000000000001=1GiB", NULL};
    load(a);
    CHECK(gpc_settings_limit(&s, 0, one, PHYS, NULL) == GiB, "per-UUID limit");
    CHECK(gpc_settings_limit(&s, 0, two, PHYS, NULL) == 2 * GiB, "another card keeps the global limit");
    CHECK(gpc_settings_limit(&s, 3, NULL, PHYS, NULL) == 2 * GiB, "no UUID known: global limit");
    const struct gpc_value *from;
    char where[600];
    gpc_settings_limit(&s, 0, one, PHYS, &from);
    gpc_value_origin(&s, from, GPC_OPT_MEMORY_LIMIT, 0, where, sizeof where);
    CHECK(strcmp(where, "GPUCAP_MEMORY_LIMIT_GPU-fa4ec0da-0000-4000-8000-000000000001") == 0, "origin %s", where);

    /* A prefix, like CUDA_VISIBLE_DEVICES takes; UUID over ordinal, both from the environment. */
    const char *b[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT_0=3GiB", "GPUCAP_MEMORY_LIMIT_GPU-FA4EC0DA=512MiB", NULL};
    load(b);
    CHECK(gpc_settings_limit(&s, 0, two, PHYS, NULL) == 512ULL << 20, "prefix, any case, over the ordinal");

    const char *c[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT_GPU-fa4e=1GiB", NULL};
    load(c);
    CHECK(gpc_settings_limit(&s, 0, one, PHYS, NULL) == 0, "a too short UUID is an unknown variable: 0");

    char env_config[64];
    snprintf(env_config, sizeof env_config, "GPUCAP_CONFIG=%s", ini_path);
    write_ini("[gpucap]\nmemory_limit = 4GiB\n[device.0]\nmemory_limit = 3GiB\n"
              "[device.GPU-fa4ec0da-0000-4000-8000-000000000002]\nmemory_limit = 1GiB\n");
    const char *d[] = {env_config, NULL};
    load(d);
    CHECK(gpc_settings_limit(&s, 0, two, PHYS, NULL) == GiB, "ini per-UUID over per-ordinal");
    CHECK(gpc_settings_limit(&s, 0, one, PHYS, NULL) == 3 * GiB, "ini per-ordinal");
    const char *e[] = {env_config, "GPUCAP_MEMORY_LIMIT=8GiB", NULL};
    load(e);
    CHECK(gpc_settings_limit(&s, 0, two, PHYS, NULL) == 8 * GiB, "the environment over the file's UUID");
    write_ini("[device.GPU-zz]\nmemory_limit = 1GiB\n");
    load(d);
    CHECK(gpc_settings_limit(&s, 0, one, PHYS, NULL) == 0, "a malformed device section: 0");
}

static void test_ini(void)
{
    char env_config[64];
    snprintf(env_config, sizeof env_config, "GPUCAP_CONFIG=%s", ini_path);
    write_ini("; gpucap test\n[gpucap]\nmemory_limit = 3GiB\nlog_level = info\n\n[device.1]\nmemory_limit=1GiB\n");
    const char *a[] = {env_config, NULL};
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 3 * GiB, "file limit");
    CHECK(gpc_settings_limit(&s, 1, NULL, PHYS, NULL) == GiB, "file per-device limit");
    const struct gpc_value *from;
    gpc_settings_limit(&s, 1, NULL, PHYS, &from);
    char where[600];
    gpc_value_origin(&s, from, GPC_OPT_MEMORY_LIMIT, 1, where, sizeof where);
    CHECK(strstr(where, ini_path) && strstr(where, ":7"), "origin of device 1: %s", where);
    gpc_log_threshold = GPC_LOG_WARN;

    const char *b[] = {env_config, "GPUCAP_MEMORY_LIMIT=2GiB", NULL};
    load(b);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 2 * GiB, "env over file");
    CHECK(gpc_settings_limit(&s, 1, NULL, PHYS, NULL) == 2 * GiB, "env over file, per device too");
    const char *b2[] = {env_config, "GPUCAP_MEMORY_LIMIT_1=512MiB", NULL};
    load(b2);
    CHECK(gpc_settings_limit(&s, 1, NULL, PHYS, NULL) == 512ULL << 20, "env per device over file");
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 3 * GiB, "file global kept");
    gpc_log_threshold = GPC_LOG_WARN;

    write_ini("[gpucap]\n\nmemory_limit = 3 apples\n");
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "bad file value must give 0");
    CHECK(strstr(captured, ":3:") && strstr(captured, "3 apples"), "line number missing: %s", captured);

    write_ini("[gpucap]\nmemory_limt = 3GiB\n");
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "unknown key must give 0");
    CHECK(strstr(captured, "memory_limt") && strstr(captured, ":2"), "unknown key not named: %s", captured);
    const char *c[] = {env_config, "GPUCAP_MEMORY_LIMIT=1GiB", NULL};
    load(c);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GiB, "env still applies over a bad file");

    write_ini("[gpucap]\nthis is not ini\nmemory_limit=1GiB\n");
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "syntax error must give 0");
    CHECK(strstr(captured, ":2"), "syntax error line: %s", captured);

    write_ini("[gpu]\nmemory_limit=1GiB\n");
    load(a);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == 0, "unknown section must give 0");
}

/* Identity settings: recorded names, validated and bounded, never a limit either way. */
static void test_identity(void)
{
    const char *a[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=1GiB", "GPUCAP_POD_NAMESPACE=team-a",
                       "GPUCAP_POD_NAME=train-0.x", "GPUCAP_POD_UID=0c5e2d4a-1111-4222-8333-444455556666",
                       "GPUCAP_CONTAINER_NAME=main", NULL};
    load(a);
    CHECK(captured[0] == '\0', "valid identity printed: %s", captured);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GiB, "identity changed the limit");
    CHECK(!s.opt[GPC_OPT_POD_NAME].bad && strcmp(s.opt[GPC_OPT_POD_NAME].text, "train-0.x") == 0, "pod name");

    static char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    memcpy(long_name, "GPUCAP_POD_NAME=", 16);
    const char *b[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=1GiB", "GPUCAP_POD_NAMESPACE=Team_A",
                       "GPUCAP_CONTAINER_NAME=", long_name, NULL};
    load(b);
    CHECK(s.opt[GPC_OPT_POD_NAMESPACE].bad && s.opt[GPC_OPT_CONTAINER_NAME].bad && s.opt[GPC_OPT_POD_NAME].bad,
          "bad identity values accepted");
    CHECK(strstr(captured, "GPUCAP_POD_NAMESPACE") && strstr(captured, "'Team_A'") &&
              strstr(captured, "not recorded"),
          "identity error line: %s", captured);
    CHECK(gpc_settings_limit(&s, 0, NULL, PHYS, NULL) == GiB, "a bad identity changed the limit");

    const char *c[] = {"GPUCAP_CONFIG=", "GPUCAP_POD_NAME=x", NULL};
    load(c);
    CHECK(!gpc_settings_any_limit(&s), "an identity alone made a limit");
}

/* The typed reads: a choice by its enum name, and the default for an unset or malformed value. */
static void test_typed(void)
{
    const char *a[] = {"GPUCAP_CONFIG=", "GPUCAP_MODE=audit", "GPUCAP_REPORT_FORMAT=json", "GPUCAP_LOG_LEVEL=debug",
                       "GPUCAP_BACKTRACE=yes", "GPUCAP_FAIL_AFTER=7", "GPUCAP_REPORT=-", NULL};
    load(a);
    CHECK(gpc_opt_enum(&s, GPC_OPT_MODE) == GPC_MODE_AUDIT, "mode audit");
    CHECK(gpc_opt_enum(&s, GPC_OPT_REPORT_FORMAT) == GPC_REPORT_JSON, "report format json");
    CHECK(gpc_opt_enum(&s, GPC_OPT_LOG_LEVEL) == GPC_LOG_DEBUG && gpc_log_threshold == GPC_LOG_DEBUG, "debug");
    CHECK(gpc_opt_bool(&s, GPC_OPT_BACKTRACE), "backtrace yes");
    CHECK(gpc_opt_int(&s, GPC_OPT_FAIL_AFTER, -1) == 7, "fail_after 7");
    CHECK(strcmp(gpc_opt_string(&s, GPC_OPT_REPORT), "-") == 0, "report -");

    const char *b[] = {"GPUCAP_CONFIG=", "GPUCAP_MODE=loose", "GPUCAP_REPORT_FORMAT=xml", "GPUCAP_LOG_LEVEL=loud",
                       "GPUCAP_BACKTRACE=maybe", "GPUCAP_FAIL_AFTER=-3", "GPUCAP_FAIL_SEED=x", NULL};
    load(b);
    CHECK(gpc_opt_enum(&s, GPC_OPT_MODE) == GPC_MODE_ENFORCE, "a bad mode is not enforce");
    CHECK(gpc_opt_enum(&s, GPC_OPT_REPORT_FORMAT) == GPC_REPORT_TEXT, "a bad format is not text");
    CHECK(gpc_opt_enum(&s, GPC_OPT_LOG_LEVEL) == GPC_LOG_WARN && gpc_log_threshold == GPC_LOG_WARN,
          "a bad log level is not warn");
    CHECK(!gpc_opt_bool(&s, GPC_OPT_BACKTRACE), "a bad bool is not its default");
    CHECK(gpc_opt_int(&s, GPC_OPT_FAIL_AFTER, -1) == -1, "a bad int without a default is not the fallback");
    CHECK(gpc_opt_int(&s, GPC_OPT_FAIL_SEED, 5) == 0, "a bad int is not its default");
    CHECK(gpc_opt_string(&s, GPC_OPT_REPORT) == NULL, "an unset string without a default is not NULL");

    /* Each choices string lists its enum's names in the enum's order. */
    CHECK(strcmp(gpc_option_defs[GPC_OPT_MODE].choices, "enforce|audit") == 0, "mode choices %s",
          gpc_option_defs[GPC_OPT_MODE].choices);
    CHECK(strcmp(gpc_option_defs[GPC_OPT_LOG_LEVEL].choices, "error|warn|info|debug") == 0, "log choices");
    CHECK(strcmp(gpc_option_defs[GPC_OPT_REPORT_FORMAT].choices, "text|json") == 0, "format choices");
}

static int sunk_errors;
static char sunk_last[1024];
static void count_lines(enum gpc_log_level level, const char *line, void *arg)
{
    sunk_errors += level == GPC_LOG_ERROR && arg == &sunk_errors;
    snprintf(sunk_last, sizeof sunk_last, "%s", line);
}

/* The loader's message sink: each line goes to it, none to stderr; without one, stderr again. */
static void test_sink(void)
{
    const char *a[] = {"GPUCAP_CONFIG=", "GPUCAP_MEMORY_LIMIT=lots", "GPUCAP_MODE=loose", NULL};
    capture_begin();
    gpc_settings_load_to(&s, &platform, (char *const *)a, count_lines, &sunk_errors);
    capture_end();
    CHECK(captured[0] == '\0', "the loader printed with a sink: %s", captured);
    CHECK(sunk_errors == 2 && s.errors == 2, "sink counted %d, loader %d", sunk_errors, s.errors);
    CHECK(strstr(sunk_last, "GPUCAP_MODE") && !strstr(sunk_last, "gpucap: "), "sink line: %s", sunk_last);
    load(a);
    CHECK(strstr(captured, "gpucap: error: ") && sunk_errors == 2, "without a sink: %s", captured);
}

/* Burstable memory (issue 35): the request and the grant by device, and the one formula. */
static void test_qos(void)
{
    const uint64_t M = 1ULL << 20;
    const char *one = "GPU-fa4ec0da-0000-4000-8000-000000000001";
    char env_config[64];
    snprintf(env_config, sizeof env_config, "GPUCAP_CONFIG=%s", ini_path);
    uint64_t r = 1;
    const struct gpc_value *from;
    write_ini("[gpucap]\nmemory_limit = 4GiB\n");
    const char *a[] = {env_config, NULL};
    load(a);
    CHECK(!gpc_settings_request(&s, 0, one, PHYS, &r, &from) && r == 0, "no request: not burstable");
    write_ini("[gpucap]\nmemory_limit = 4GiB\nmemory_request = 1GiB\nmemory_grant = 2GiB\n[device.1]\nmemory_request = 0\n"
              "memory_grant = 10%\n[device.GPU-fa4ec0da]\nmemory_request = 512MiB\n");
    load(a);
    CHECK(gpc_settings_request(&s, 0, NULL, PHYS, &r, &from) && r == GiB, "request for all: %llu", (unsigned long long)r);
    CHECK(gpc_settings_request(&s, 1, NULL, PHYS, &r, &from) && r == 0, "per-ordinal request 0 (best effort)");
    CHECK(gpc_settings_request(&s, 2, one, PHYS, &r, &from) && r == 512 * M, "per-UUID request: %llu", (unsigned long long)r);
    CHECK(gpc_settings_grant(&s, 0, NULL, PHYS) == 2 * GiB, "grant for all");
    CHECK(gpc_settings_grant(&s, 1, NULL, PHYS) == PHYS / 10 + (PHYS % 10 >= 5), "per-ordinal grant, a percentage: %llu",
          (unsigned long long)gpc_settings_grant(&s, 1, NULL, PHYS));
    CHECK(s.errors == 0, "errors %d: %s", s.errors, captured);
    /* The environment sets a request, never a grant; each of those is one error line, the file's stays. */
    const char *b[] = {env_config, "GPUCAP_MEMORY_REQUEST_0=256MiB", "GPUCAP_MEMORY_GRANT=3GiB", "GPUCAP_MEMORY_GRANT_0=3GiB",
                       NULL};
    load(b);
    CHECK(gpc_settings_request(&s, 0, NULL, PHYS, &r, &from) && r == 256 * M && from->src == GPC_SRC_ENV,
          "the environment's request per ordinal");
    CHECK(gpc_settings_grant(&s, 0, NULL, PHYS) == 2 * GiB, "a grant from the environment applied");
    CHECK(s.errors == 2 && s.env_errors == 2 && strstr(captured, "GPUCAP_MEMORY_GRANT: memory_grant is read only"),
          "errors %d (%d of the environment): %s", s.errors, s.env_errors, captured);
    const char *c[] = {env_config, "GPUCAP_MEMORY_REQUEST=lots", NULL};
    load(c);
    CHECK(gpc_settings_request(&s, 0, NULL, PHYS, &r, &from) && r == 0 && from->bad && strstr(captured, "best effort"),
          "a malformed request: best effort, said: %s", captured);
    /* The formula: min(L, max(R, G)), the grant clamped, a request above the limit refused. */
    bool refused;
    CHECK(gpc_qos_in_force(512 * M, 128 * M, 0, &refused) == 128 * M && !refused, "R alone");
    CHECK(gpc_qos_in_force(512 * M, 128 * M, 300 * M, &refused) == 300 * M, "G above R");
    CHECK(gpc_qos_in_force(512 * M, 256 * M, 64 * M, &refused) == 256 * M, "G below R");
    CHECK(gpc_qos_in_force(512 * M, 128 * M, 2 * GiB, &refused) == 512 * M, "G above L: clamped");
    CHECK(gpc_qos_in_force(512 * M, 600 * M, 100 * M, &refused) == 100 * M && refused, "R above L: refused, best effort");
    CHECK(gpc_qos_in_force(512 * M, 512 * M, 0, &refused) == 512 * M && !refused, "R = L: guaranteed");
}

int main(void)
{
    int fd = mkstemp(ini_path);
    close(fd);
    test_sizes();
    test_format();
    test_env();
    test_ini();
    test_uuid();
    test_identity();
    test_typed();
    test_sink();
    test_qos();
    unlink(ini_path);
    return test_result();
}
