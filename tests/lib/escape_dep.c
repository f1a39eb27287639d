/* SPDX-License-Identifier: Apache-2.0 */
/*
 * escape_dep.c: a library that depends on libcuda.so.1 and libnvidia-ml.so.1 (as libcudart, a
 * framework's plugin or a tenant's own library does), dlopened by test_escapes: dlsym on its handle
 * searches its dependencies, and RTLD_NEXT asked from it means "after this library".
 */
#include <dlfcn.h>

/* Referenced so that the link keeps the dependencies. */
extern int cuDriverGetVersion(int *);
extern int nvmlInit_v2(void);

void *escape_dep_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

void *escape_dep_default(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

int escape_dep_touch(void)
{
    int v = 0;
    return cuDriverGetVersion(&v) + nvmlInit_v2();
}
