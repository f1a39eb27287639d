/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tool.c: the start every gpucap program shares (tools/common/tool.c), without a driver: a
 * setting's value and origin (variable, default, flag), a flag without a value kept as "1", the
 * usage exit (2 unless the command says otherwise), a required operand, too many operands, whole
 * numbers in a range with their messages, and the check of a pod's directory names.
 */
#include "common.h"
#include "tool.h"

enum { F_ALPHA, F_BETA, F_GAMMA, F_COUNT };
static const struct tool_flag flags[F_COUNT] = {
    [F_ALPHA] = {"alpha", 'a', "A", "TT_ALPHA", "d1", "a value with a variable and a default"},
    [F_BETA] = {"beta", 0, "B", "TT_BETA", NULL, "a value with a variable"},
    [F_GAMMA] = {"gamma", 'g', NULL, NULL, NULL, "a flag without a value"},
};
static const struct tool_cmd cmd = {.name = "tt", .synopsis = "tt [OPTION...] OP", TOOL_FLAGS(flags),
                                    .max_operands = 1, .no_operand = "no OP"};

/* What the last call wrote on stderr: stderr is a memory stream meanwhile (glibc lets it be set). */
static char said[1024];
static FILE *real_stderr;
static char *text;
static size_t text_len;

static void listen_begin(void)
{
    FILE *mem = open_memstream(&text, &text_len);
    REQUIRE(mem, "open_memstream");
    fflush(stderr);
    real_stderr = stderr;
    stderr = mem;
}

static void listen_end(void)
{
    fclose(stderr);
    stderr = real_stderr;
    snprintf(said, sizeof said, "%s", text ? text : "");
    free(text);
    text = NULL;
}

/* tool_settings over argv (NULL-terminated), with what it said. */
static int settings(char **argv, const char **values, enum tool_origin *from, int *first)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    listen_begin();
    int rc = tool_settings(&cmd, argc, argv, values, from, first);
    listen_end();
    return rc;
}

static void origins(void)
{
    const char *v[F_COUNT];
    enum tool_origin from[F_COUNT];
    char name[64];
    int first = -1;
    setenv("TT_ALPHA", "e1", 1);
    unsetenv("TT_BETA");
    CHECK(settings((char *[]){"tt", "--beta", "x", "-g", "op", NULL}, v, from, &first) == -1, "%s", said);
    CHECK(first == 4, "first operand %d", first);
    CHECK(v[F_ALPHA] && strcmp(v[F_ALPHA], "e1") == 0 && from[F_ALPHA] == TOOL_FROM_ENV, "alpha from the variable");
    CHECK(v[F_BETA] && strcmp(v[F_BETA], "x") == 0 && from[F_BETA] == TOOL_FROM_FLAG, "beta from the flag");
    CHECK(v[F_GAMMA] && strcmp(v[F_GAMMA], "1") == 0 && from[F_GAMMA] == TOOL_FROM_FLAG, "gamma given: \"1\"");
    CHECK(strcmp(tool_origin_name(&cmd, F_ALPHA, from[F_ALPHA], name, sizeof name), "TT_ALPHA") == 0, "%s", name);
    CHECK(strcmp(tool_origin_name(&cmd, F_BETA, from[F_BETA], name, sizeof name), "--beta") == 0, "%s", name);
    /* An empty variable is no variable: the default, named "default". */
    setenv("TT_ALPHA", "", 1);
    CHECK(settings((char *[]){"tt", "op", NULL}, v, from, &first) == -1, "%s", said);
    CHECK(v[F_ALPHA] && strcmp(v[F_ALPHA], "d1") == 0 && from[F_ALPHA] == TOOL_FROM_DEFAULT, "alpha's default");
    CHECK(!v[F_BETA] && from[F_BETA] == TOOL_FROM_DEFAULT && !v[F_GAMMA], "beta and gamma unset");
    CHECK(strcmp(tool_origin_name(&cmd, F_ALPHA, from[F_ALPHA], name, sizeof name), "default") == 0, "%s", name);
    /* The flag wins over the variable. */
    setenv("TT_ALPHA", "e1", 1);
    CHECK(settings((char *[]){"tt", "-a", "f1", "op", NULL}, v, NULL, &first) == -1, "%s", said);
    CHECK(v[F_ALPHA] && strcmp(v[F_ALPHA], "f1") == 0, "alpha from the flag, not the variable");
}

static void usage_errors(void)
{
    const char *v[F_COUNT];
    int first;
    CHECK(settings((char *[]){"tt", "--nosuch", "op", NULL}, v, NULL, &first) == TOOL_EXIT_USAGE, "%s", said);
    CHECK(strcmp(said, "tt: unknown option '--nosuch' (see 'tt --help')\n") == 0, "%s", said);
    CHECK(settings((char *[]){"tt", NULL}, v, NULL, &first) == TOOL_EXIT_USAGE, "no operand");
    CHECK(strcmp(said, "tt: no OP (see 'tt --help')\n") == 0, "%s", said);
    CHECK(settings((char *[]){"tt", "op", "extra", NULL}, v, NULL, &first) == TOOL_EXIT_USAGE, "two operands");
    CHECK(strcmp(said, "tt: unexpected argument 'extra' (see 'tt --help')\n") == 0, "%s", said);
    /* A command's own usage exit. */
    struct tool_cmd own = cmd;
    own.usage_exit = TOOL_EXIT_OWN;
    listen_begin();
    int rc = tool_begin_values(&own, 1, (char *[]){"tt", NULL}, v, &first);
    listen_end();
    CHECK(rc == TOOL_EXIT_OWN, "usage exit %d, want %d", rc, TOOL_EXIT_OWN);
}

static void numbers(void)
{
    unsigned n = 99;
    listen_begin();
    int ok = tool_number(&cmd, "--n", "3", 1, 5, &n);
    listen_end();
    CHECK(ok == 0 && n == 3 && !said[0], "3 in 1..5: %d %u %s", ok, n, said);
    static const char *const bad[] = {"0", "6", "", "3x", "-1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        n = 99;
        listen_begin();
        ok = tool_number(&cmd, "--n", bad[i], 1, 5, &n);
        listen_end();
        char want[128];
        snprintf(want, sizeof want, "tt: --n '%s': expected a whole number from 1 to 5 (see 'tt --help')\n", bad[i]);
        CHECK(ok == -1 && n == 99 && strcmp(said, want) == 0, "'%s': %d %u %s", bad[i], ok, n, said);
    }
    listen_begin();
    ok = tool_number(&cmd, "--n", "7", 0, 5, &n);
    listen_end();
    CHECK(ok == -1 && strcmp(said, "tt: --n '7': expected a whole number of at most 5 (see 'tt --help')\n") == 0,
          "%s", said);
}

static void names(void)
{
    char long_name[80];
    memset(long_name, 'a', sizeof long_name);
    long_name[63] = '\0';
    CHECK(tool_name_ok("main") && tool_name_ok("a.b_c-1") && tool_name_ok(long_name), "good names refused");
    long_name[63] = 'a';
    long_name[64] = '\0';
    static const char *const bad[] = {"", ".", "..", "a/b", "a b", "a+b", "../x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!tool_name_ok(bad[i]), "'%s' taken", bad[i]);
    CHECK(!tool_name_ok(long_name), "64 characters taken");
}

int main(void)
{
    origins();
    usage_errors();
    numbers();
    names();
    return test_result();
}
