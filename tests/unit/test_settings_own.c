/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_settings_own.c: a load of the settings keeps nothing of its own: what it read stays in the
 * caller's storage. Built over the common layer's test copy, whose platform file lies in the build
 * tree (argv[1]). A locked load keeps the platform file's settings where its caller said, so a
 * later load of a rewritten platform file changes nothing in an earlier one's settings (they
 * shared one static copy before); and two loads at once, each with its own sink, each hear their
 * own lines only (they shared one static sink before).
 */
#include "common/defs.h"
#include "common/options.h"

#include "check.h"

#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define GiB (1ULL << 30)
#define PHYS (16 * GiB)

static const char *platform_path;

static void write_platform(const char *limit)
{
    FILE *f = fopen(platform_path, "w");
    REQUIRE(f, "cannot write the platform file %s", platform_path);
    fprintf(f, "[gpucap]\nlock = true\nmemory_limit = %s\nledger = off\n", limit);
    fclose(f);
}

static void quiet(enum gpc_log_level level, const char *line, void *arg)
{
    (void)level, (void)line, (void)arg;
}

/* Two locked loads, the platform file rewritten in between: each keeps its own platform's limit. */
static void test_platform_copies(void)
{
    static struct gpc_settings a, a_platform, b, b_platform;
    char *env[] = {NULL};
    write_platform("1GiB");
    gpc_settings_load_to(&a, &a_platform, env, quiet, NULL);
    write_platform("2GiB");
    gpc_settings_load_to(&b, &b_platform, env, quiet, NULL);
    CHECK(a.locked && b.locked, "both loads are locked (%d, %d)", a.locked, b.locked);
    CHECK(a.platform == &a_platform && b.platform == &b_platform, "each platform copy is its caller's");
    uint64_t la = gpc_settings_limit(&a, 0, NULL, PHYS, NULL), lb = gpc_settings_limit(&b, 0, NULL, PHYS, NULL);
    CHECK(la == 1 * GiB, "the first load's limit is still its platform file's 1 GiB: %llu", (unsigned long long)la);
    CHECK(lb == 2 * GiB, "the second load's limit is the rewritten file's 2 GiB: %llu", (unsigned long long)lb);
}

/* Loads at once, each with a sink of its own: every line a load says reaches its own sink. */
#define LOADS 300
struct loader {
    char *env[3];
    int lines;   /* lines this loader's sink heard */
    int foreign; /* lines it heard that another load said */
    const char *mine;
};

static void count(enum gpc_log_level level, const char *line, void *arg)
{
    struct loader *l = arg;
    (void)level;
    l->lines++;
    l->foreign += strstr(line, l->mine) == NULL;
}

static void *loads(void *arg)
{
    struct loader *l = arg;
    static __thread struct gpc_settings s, platform;
    for (int i = 0; i < LOADS; i++)
        gpc_settings_load_to(&s, &platform, l->env, count, l);
    return NULL;
}

static void test_sinks_apart(void)
{
    write_platform("1GiB");
    struct loader x = {.env = {"GPUCAP_NO_SUCH_SETTING_X=1", NULL}, .mine = "_X"};
    struct loader y = {.env = {"GPUCAP_NO_SUCH_SETTING_Y=1", NULL}, .mine = "_Y"};
    pthread_t tx, ty;
    REQUIRE(pthread_create(&tx, NULL, loads, &x) == 0 && pthread_create(&ty, NULL, loads, &y) == 0, "threads");
    pthread_join(tx, NULL);
    pthread_join(ty, NULL);
    CHECK(x.foreign == 0 && y.foreign == 0, "a sink heard another load's lines (%d, %d)", x.foreign, y.foreign);
    CHECK(x.lines == LOADS && y.lines == LOADS, "each load said its one error line: %d and %d of %d", x.lines,
          y.lines, LOADS);
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2, "usage: test_settings_own PLATFORM_FILE");
    platform_path = argv[1];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", platform_path);
    mkdir(dirname(dir), 0755);
    test_platform_copies();
    test_sinks_apart();
    remove(platform_path);
    return test_result();
}
