/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.h: the checks of every C test program, with a driver or without: CHECK reports a failed
 * condition and goes on, REQUIRE reports it and ends the program (exit 1), test_result() is the
 * exit code (0 pass, 1 fail). Failures go to CHECK_STREAM: stderr, unless the program defines
 * another before it includes this (a program that captures its stderr).
 */
#ifndef GPUCAP_TESTS_CHECK_H
#define GPUCAP_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef CHECK_STREAM
#define CHECK_STREAM stderr
#endif

static int failures;

/* One failure line: place, the condition's text, then the printf-style message. */
#define CHECK_REPORT(text, ...)                                                    \
    do {                                                                           \
        fprintf(CHECK_STREAM, "%s:%d: FAIL %s: ", __FILE__, __LINE__, text);       \
        fprintf(CHECK_STREAM, __VA_ARGS__);                                        \
        fprintf(CHECK_STREAM, "\n");                                               \
    } while (0)
#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            CHECK_REPORT(#cond, __VA_ARGS__);                                      \
            failures++;                                                            \
        }                                                                          \
    } while (0)
#define REQUIRE(cond, ...)                                                         \
    do {                                                                           \
        if (!(cond)) {                                                             \
            CHECK_REPORT(#cond, __VA_ARGS__);                                      \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static inline int test_result(void)
{
    if (failures)
        fprintf(CHECK_STREAM, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}

#endif
