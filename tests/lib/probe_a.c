/* SPDX-License-Identifier: Apache-2.0 */
/* probe_a.c: a library that looks up the next definition of a symbol it defines itself. */
#include <dlfcn.h>

int probe_value(void)
{
    return 1;
}

/* What RTLD_NEXT finds from this library: must be probe_b's definition, not ours. */
int probe_next(void)
{
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "probe_value");
    return next ? next() : -1;
}
