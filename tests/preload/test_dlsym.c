/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dlsym.c: the dlsym/dlvsym interposers redirect exactly the hooked names asked of a libcuda
 * handle and are invisible otherwise: other names and handles get the real answer, and RTLD_NEXT
 * is still answered relative to the library that asked (probe_a/probe_b).
 */
#include "common.h"

#include <unistd.h>

int probe_next(void);
int probe_value(void);

int main(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    REQUIRE(cuda, "dlopen libcuda");
    void *ours = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    CHECK(dlsym(cuda, "cuMemAlloc_v2") == ours, "dlsym(libcuda, cuMemAlloc_v2) is not our hook");
    CHECK(dlvsym(cuda, "cuMemAlloc_v2", "") == ours, "dlvsym(libcuda, cuMemAlloc_v2) is not our hook");
    CHECK(dlsym(cuda, "cuInit") == (void *)cuInit, "an unhooked name is not the driver's");
    CHECK(dlsym(cuda, "cuDefinitelyMissing") == NULL, "a missing name resolved");
    CHECK(dlerror() != NULL, "no dlerror after a failed lookup");

    /* A handle opened by full path is recognised too. */
    void *libc = dlopen("libc.so.6", RTLD_NOW);
    REQUIRE(libc, "dlopen libc");
    CHECK(dlsym(libc, "getpid") == (void *)getpid, "dlsym(libc, getpid)");
    CHECK(dlvsym(libc, "getpid", "GLIBC_2.2.5") == (void *)getpid, "dlvsym(libc, getpid, GLIBC_2.2.5)");
    CHECK(dlsym(RTLD_DEFAULT, "strlen") == (void *)strlen, "dlsym(RTLD_DEFAULT, strlen)");

    /* RTLD_NEXT from the executable: the first library after it (gpucap, for the hooks). */
    CHECK(dlsym(RTLD_NEXT, "cuMemFree_v2") == dlsym(RTLD_DEFAULT, "cuMemFree_v2"), "RTLD_NEXT from the program");
    /* RTLD_NEXT from probe_a must find probe_b's probe_value (2), not probe_a's own (1). */
    CHECK(probe_value() == 1, "probe_a is not first");
    CHECK(probe_next() == 2, "RTLD_NEXT from probe_a answered %d: resolved relative to the wrong object",
          probe_next());

    /* dlsym of dlsym itself does not recurse. */
    void *(*d)(void *, const char *) = (void *(*)(void *, const char *))dlsym(RTLD_DEFAULT, "dlsym");
    CHECK(d && d(cuda, "cuMemFree_v2") == dlsym(RTLD_DEFAULT, "cuMemFree_v2"), "dlsym through dlsym");
    return test_result();
}
