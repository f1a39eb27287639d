/* SPDX-License-Identifier: Apache-2.0 */
/*
 * selftest.h: what the fake driver's self-test files share: the check macros, the case table's
 * row and the helpers both groups of cases use (selftest.c: the record, contexts, memory kinds;
 * selftest_rt.c: what the CUDA runtime and frameworks need).
 */
#ifndef FAKECUDA_SELFTEST_H
#define FAKECUDA_SELFTEST_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: %s: failed: %s\n", __FILE__, __LINE__, __func__, #cond); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define IS(call, want)                                                                       \
    do {                                                                                     \
        long got_ = (long)(call);                                                            \
        if (got_ != (long)(want)) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s gave %ld, want %ld\n", __FILE__, __LINE__,         \
                    __func__, #call, got_, (long)(want));                                    \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define OK(call) IS(call, CUDA_SUCCESS)
#define EQ(a, b) IS(a, b)

struct tcase {
    const char *name;
    void (*fn)(void);
    const char *env[6]; /* NAME=VALUE; "@" in a value stands for a fresh record file */
};

/* selftest_rt.c's and selftest_calls.c's cases, run after selftest.c's. */
extern const struct tcase selftest_rt_cases[], selftest_calls_cases[];
extern const size_t selftest_rt_ncases, selftest_calls_ncases;

/* Case "rows" (not in the run of all cases): every exported cu* name read from stdin is an entry row. */
void selftest_rows(void);

/* cuInit, then device `dev`'s primary context retained and current. */
void init_primary(CUdevice dev);
/* The properties of a pinned VMM allocation on device `dev` (nothing else set). */
CUmemAllocationProp pinned_prop(int dev);
/* waitpid, retried on EINTR: the child's status. */
int wait_child(pid_t pid);

#endif
