/* SPDX-License-Identifier: Apache-2.0 */
/*
 * escape_dep.c: a library that depends on libcuda.so.1 and libnvidia-ml.so.1 (as libcudart, a
 * framework's plugin or a tenant's own library does), dlopened by test_escapes: dlsym on its handle
 * searches its dependencies, and RTLD_NEXT asked from it means "after this library"; dlopened with
 * RTLD_DEEPBIND, its own calls would bind to its dependencies first.
 */
#include <cuda.h>
#include <dlfcn.h>

/* Referenced so that the link keeps the dependency. */
extern int nvmlInit_v2(void);

/* cuMemAlloc_v2 called by this library, bound as its references are. */
int escape_dep_alloc(size_t bytes)
{
    CUdeviceptr p;
    return (int)cuMemAlloc_v2(&p, bytes);
}

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
