/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_escapes.c CASE: the ways around the library that a program can take without leaving the
 * dynamic loader (issue 23); each must meet the budget (64 MiB here, a 1 GiB fake card).
 *   array_v1     the legacy cuArrayCreate (v1 descriptor, unsigned int sizes) is charged
 *   array3d_v1   the legacy cuArray3DCreate likewise
 *   procaddr_v1  cuGetProcAddress("cuArrayCreate", 2000), both resolvers: our v1 hook
 *   procaddr_old a driver answering a hooked name below every variant gpucap wraps
 *                (FAKECUDA_PROC_OLDEST=1): no function, "version not sufficient"
 *   dlvsym       the real dlsym fetched with dlvsym(RTLD_NEXT/RTLD_DEFAULT, "dlsym", "GLIBC_2.x") or
 *                from a libc handle still answers our hooks for a libcuda handle
 *   copy         a copy of libcuda.so.1 (and of libnvidia-ml.so.1) under another name, dlopened:
 *                recognised by its SONAME
 *   destructor   libgpucap's destructors called by hand through its DT_FINI_ARRAY: still capped,
 *                what was held still counts
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static void *ours(const char *export)
{
    void *p = dlsym(RTLD_DEFAULT, export);
    REQUIRE(p != NULL, "%s not found", export);
    return p;
}

/* A float array of w x h, one channel: w * h * 4 bytes on the fake card. */
static CUDA_ARRAY_DESCRIPTOR_v1 desc_v1(unsigned w, unsigned h)
{
    return (CUDA_ARRAY_DESCRIPTOR_v1){.Width = w, .Height = h, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
}

/* cuArrayCreate (v1) through `create`: 256 MiB denied with nothing taken on the card, 32 MiB
 * admitted and charged (then 40 MiB more of cuMemAlloc_v2 does not fit). */
static void legacy_2d(PFN_cuArrayCreate_v2000 create)
{
    make_context(0);
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR_v1 big = desc_v1(8192, 8192), small = desc_v1(4096, 2048);
    CHECK_RC(create(&a, &big), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_outstanding(0) == 0, "the card holds %llu bytes after a denial",
          (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(create(&a, &small), CUDA_SUCCESS);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
}

static void array_v1(void)
{
    legacy_2d(cuArrayCreate);
}

static void array3d_v1(void)
{
    make_context(0);
    CUarray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR_v1 big = {.Width = 1024, .Height = 1024, .Depth = 64, .Format = CU_AD_FORMAT_FLOAT,
                                      .NumChannels = 1};
    CHECK_RC(cuArray3DCreate(&a, &big), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_outstanding(0) == 0, "the card holds %llu bytes", (unsigned long long)fakecuda_outstanding(0));
    CUDA_ARRAY3D_DESCRIPTOR_v1 small = big;
    small.Depth = 8; /* 32 MiB */
    CHECK_RC(cuArray3DCreate(&a, &small), CUDA_SUCCESS);
    CUdeviceptr p;
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}

static void procaddr_v1(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CHECK_RC(cuGetProcAddress_v2("cuArrayCreate", &p, 2000, 0, &st), CUDA_SUCCESS);
    CHECK(p == ours("cuArrayCreate") && st == CU_GET_PROC_ADDRESS_SUCCESS, "v2 resolver at 2000: %p (ours %p), "
          "status %d", p, ours("cuArrayCreate"), (int)st);
    void *q = NULL;
    CHECK_RC(cuGetProcAddress("cuArrayCreate", &q, 2000, 0), CUDA_SUCCESS);
    CHECK(q == ours("cuArrayCreate"), "legacy resolver at 2000: %p", q);
    CHECK_RC(cuGetProcAddress_v2("cuArray3DCreate", &q, 3010, 0, &st), CUDA_SUCCESS);
    CHECK(q == ours("cuArray3DCreate"), "cuArray3DCreate at 3010: %p", q);
    if (p)
        legacy_2d((PFN_cuArrayCreate_v2000)p);
}

static void procaddr_old(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
    /* The fake answers this name below 6000 with its only variant: gpucap must not pass it on. */
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK_RC(cuGetProcAddress_v2("cuMemAllocManaged", &p, 5000, 0, &st), CUDA_SUCCESS);
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "cuMemAllocManaged at 5000: %p, status %d",
          p, (int)st);
    p = (void *)1;
    CHECK_RC(cuGetProcAddress("cuMemCreate", &p, 10000, 0), CUDA_SUCCESS);
    CHECK(p == NULL, "legacy resolver, cuMemCreate at 10000: %p", p);
    /* A name gpucap does not wrap keeps the driver's answer. */
    CHECK_RC(cuGetProcAddress_v2("cuCtxGetDevice", &p, 2000, 0, &st), CUDA_SUCCESS);
    CHECK(p != NULL && st == CU_GET_PROC_ADDRESS_SUCCESS, "cuCtxGetDevice: %p", p);
}

/* `look(libcuda handle, "cuMemAlloc_v2")` must be our hook, and allocate within the budget. */
static void through(dlsym_fn look, const char *how)
{
    REQUIRE(look != NULL, "%s: no dlsym", how);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    REQUIRE(h, "dlopen libcuda.so.1");
    alloc_fn f = (alloc_fn)look(h, "cuMemAlloc_v2");
    CHECK(f == (alloc_fn)ours("cuMemAlloc_v2"), "%s: cuMemAlloc_v2 is %p, not our hook", how, (void *)f);
    CUdeviceptr p;
    if (f)
        CHECK_RC(f(&p, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}

static void dlvsym_case(void)
{
    make_context(0);
    const char *vers[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    int tried = 0;
    for (size_t i = 0; i < sizeof vers / sizeof vers[0]; i++) {
        dlsym_fn next = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", vers[i]);
        dlsym_fn dflt = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", vers[i]);
        if (!next && !dflt)
            continue;
        tried++;
        if (next)
            through(next, vers[i]);
        if (dflt)
            through(dflt, vers[i]);
        /* dlvsym fetched with dlvsym, then used for dlsym */
        dlvsym_fn v = (dlvsym_fn)dlvsym(RTLD_NEXT, "dlvsym", vers[i]);
        if (v)
            through((dlsym_fn)v(RTLD_NEXT, "dlsym", vers[i]), "dlvsym of dlvsym");
    }
    REQUIRE(tried, "no version of dlsym found");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(libc, "libc.so.6 handle");
    through((dlsym_fn)dlsym(libc, "dlsym"), "dlsym(libc, \"dlsym\")");
}

/* dlopens a copy of the file `from` under a name of no meaning; the handle. */
static void *open_copy(const char *from)
{
    char path[] = "/tmp/gpucap-copy-XXXXXX";
    int out = mkstemp(path);
    int in = open(from, O_RDONLY);
    REQUIRE(out >= 0 && in >= 0, "copy %s", from);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        REQUIRE(write(out, buf, (size_t)n) == n, "write");
    close(in);
    close(out);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    unlink(path);
    REQUIRE(h, "dlopen the copy of %s: %s", from, dlerror());
    return h;
}

static void copy_case(void)
{
    make_context(0);
    Dl_info info;
    REQUIRE(dladdr((void *)fakecuda_outstanding, &info) && info.dli_fname, "where libcuda.so.1 is");
    void *h = open_copy(info.dli_fname);
    /* NVML likewise: the fake's libnvidia-ml.so.1 lies next to its libcuda.so.1. */
    char nvml[4096];
    snprintf(nvml, sizeof nvml, "%.*s/libnvidia-ml.so.1", (int)(strrchr(info.dli_fname, '/') - info.dli_fname),
             info.dli_fname);
    void *hn = open_copy(nvml);
    void *q = dlsym(hn, "nvmlDeviceGetMemoryInfo");
    CHECK(q == ours("nvmlDeviceGetMemoryInfo"), "the NVML copy's nvmlDeviceGetMemoryInfo is %p, not our hook", q);
    alloc_fn f = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    CHECK(f == (alloc_fn)ours("cuMemAlloc_v2"), "the copy's cuMemAlloc_v2 is %p, not our hook", (void *)f);
    CUdeviceptr p;
    if (f == (alloc_fn)ours("cuMemAlloc_v2"))
        CHECK_RC(f(&p, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
}

/* Finds libgpucap's DT_FINI_ARRAY, as a program set on escaping would. */
struct fini {
    uintptr_t base;
    void (**fns)(void);
    size_t n;
};

static int find_fini(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct fini *f = arg;
    if (info->dlpi_addr != f->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; d->d_tag != DT_NULL; d++) {
            uintptr_t v = d->d_un.d_ptr;
            if (d->d_tag == DT_FINI_ARRAY)
                f->fns = (void (**)(void))(v < f->base ? f->base + v : v);
            if (d->d_tag == DT_FINI_ARRAYSZ)
                f->n = d->d_un.d_val / sizeof(void *);
        }
    }
    return 1;
}

static void destructor(void)
{
    if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init")) {
        printf("sanitized build: its own module destructors would run too; skipping\n");
        exit(77);
    }
    make_context(0);
    CUdeviceptr held, p;
    CHECK_RC(cuMemAlloc_v2(&held, 40 * MiB), CUDA_SUCCESS);
    Dl_info info;
    REQUIRE(dladdr(ours("cuMemAlloc_v2"), &info), "dladdr");
    struct fini f = {(uintptr_t)info.dli_fbase, NULL, 0};
    dl_iterate_phdr(find_fini, &f);
    REQUIRE(f.fns && f.n, "libgpucap has no DT_FINI_ARRAY");
    for (size_t i = 0; i < f.n; i++)
        f.fns[i]();
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemAlloc_v2(&p, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_outstanding(0) == 40 * MiB, "the card holds %llu bytes", (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(cuMemFree_v2(held), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"array_v1", array_v1},       {"array3d_v1", array3d_v1}, {"procaddr_v1", procaddr_v1},
        {"procaddr_old", procaddr_old}, {"dlvsym", dlvsym_case},  {"copy", copy_case},
        {"destructor", destructor},
    };
    REQUIRE(argc == 2, "usage: test_escapes CASE");
    RUN_CASE(cases, argv[1]);
    return test_result();
}
