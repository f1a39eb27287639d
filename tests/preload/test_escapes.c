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
 *   dependent    the handle of a library that depends on libcuda and NVML (dlsym searches its
 *                dependencies), and RTLD_NEXT / RTLD_DEFAULT asked from that library: our hooks
 *   deepbind     a library depending on libcuda, dlopened (or dlmopened into the base namespace)
 *                with RTLD_DEEPBIND: its own driver calls still meet the hooks
 *   ctx_limit    cuCtxSetLimit of the malloc heap or the printf FIFO (memory the driver takes at the
 *                call, of any size): what it asks beyond the defaults is charged, a smaller setting
 *                or the context's end gives it back; also through cuGetProcAddress
 *   exit_thread  exit() on one thread, held in a destructor that runs after gpucap's (a library
 *                preloaded after it, ESCAPE_BLOCKER): another thread allocating then is denied
 *   sweep        every hooked name of hooklist.h, asked of both resolvers at every version from 1000
 *                to 13100 with every flags value, and of dlsym on libcuda, on a library that depends
 *                on it and by RTLD_NEXT from that library: never a function of the driver itself
 *   destructor   libgpucap's destructors called by hand through its DT_FINI_ARRAY: still capped,
 *                what was held still counts
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"
#include "common/hooklist.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
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

static void dependent(void)
{
    make_context(0);
    const char *path = getenv("ESCAPE_DEP");
    REQUIRE(path, "ESCAPE_DEP is not set");
    void *dep = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(dep, "dlopen %s: %s", path, dlerror());
    void *(*next)(const char *) = (void *(*)(const char *))dlsym(dep, "escape_dep_next");
    void *(*dflt)(const char *) = (void *(*)(const char *))dlsym(dep, "escape_dep_default");
    REQUIRE(next && dflt, "escape_dep's functions");
    const char *names[] = {"cuMemAlloc_v2", "cuMemCreate", "cuArrayCreate", "cuGetProcAddress_v2",
                           "nvmlDeviceGetMemoryInfo"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *want = ours(names[i]);
        void *by_handle = dlsym(dep, names[i]), *by_next = next(names[i]), *by_default = dflt(names[i]);
        CHECK(by_handle == want, "dlsym(dependent library, %s) is %p, not our hook", names[i], by_handle);
        CHECK(by_next == want, "dlsym(RTLD_NEXT, %s) from the library is %p, not our hook", names[i], by_next);
        CHECK(by_default == want, "dlsym(RTLD_DEFAULT, %s) from the library is %p", names[i], by_default);
    }
    /* A name gpucap does not hook keeps the driver's answer. */
    void *plain = dlsym(dep, "cuCtxGetDevice");
    CHECK(plain && plain == dlsym(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "cuCtxGetDevice"),
          "cuCtxGetDevice through the library: %p", plain);
    alloc_fn f = (alloc_fn)dlsym(dep, "cuMemAlloc_v2");
    CUdeviceptr p;
    if (f)
        CHECK_RC(f(&p, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_outstanding(0) == 0, "the card holds %llu bytes", (unsigned long long)fakecuda_outstanding(0));
}

static void deepbind(void)
{
    if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init")) {
        printf("sanitized build: its runtime refuses RTLD_DEEPBIND before gpucap sees it; skipping\n");
        exit(77);
    }
    make_context(0);
    const char *path = getenv("ESCAPE_DEP");
    REQUIRE(path, "ESCAPE_DEP is not set");
    void *dep = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    REQUIRE(dep, "dlopen %s: %s", path, dlerror());
    int (*alloc)(size_t) = (int (*)(size_t))dlsym(dep, "escape_dep_alloc");
    REQUIRE(alloc, "escape_dep_alloc");
    CHECK(alloc(100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the RTLD_DEEPBIND library's cuMemAlloc_v2 is not capped");
    CHECK(alloc(8 * MiB) == CUDA_SUCCESS, "8 MiB through the library");
    void *again = dlmopen(LM_ID_BASE, path, RTLD_NOW | RTLD_DEEPBIND);
    REQUIRE(again, "dlmopen %s: %s", path, dlerror());
    alloc = (int (*)(size_t))dlsym(again, "escape_dep_alloc");
    CHECK(alloc && alloc(100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "dlmopen(LM_ID_BASE, RTLD_DEEPBIND): not capped");
    CHECK(fakecuda_outstanding(0) == 8 * MiB, "the card holds %llu bytes", (unsigned long long)fakecuda_outstanding(0));
}

static void ctx_limit(void)
{
    CUcontext primary = make_context(0);
    uint64_t before = fakecuda_outstanding(0);
    CUdeviceptr p;
    /* A heap of 512 MiB: above the 64 MiB budget, nothing taken on the card. */
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 512 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 512 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(fakecuda_outstanding(0) == before, "the card holds %llu bytes more after the denials",
          (unsigned long long)(fakecuda_outstanding(0) - before));
    /* 40 MiB beyond the default heap is charged: 40 MiB more does not fit, and the same heap set
     * again charges nothing more. */
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 48 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 48 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuMemAlloc_v2(&p, 20 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    /* Back to the default: given back. */
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(p), CUDA_SUCCESS);
    /* Through cuGetProcAddress, as cudaDeviceSetLimit reaches it. */
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK_RC(cuGetProcAddress_v2("cuCtxSetLimit", &fn, 3010, 0, &st), CUDA_SUCCESS);
    CHECK(fn == ours("cuCtxSetLimit"), "cuGetProcAddress(cuCtxSetLimit) is %p, not our hook", fn);
    if (fn == ours("cuCtxSetLimit"))
        CHECK_RC(((PFN_cuCtxSetLimit_v3010)fn)(CU_LIMIT_PRINTF_FIFO_SIZE, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    /* A context of its own: its heap goes with it. */
    CUcontext ctx;
    CHECK_RC(cuCtxCreate_v2(&ctx, 0, 0), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 51 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_RC(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
    CHECK_RC(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&p, 40 * MiB), CUDA_SUCCESS);
    CHECK(fakecuda_outstanding(0) == before + 40 * MiB, "the card holds %llu bytes, want %llu",
          (unsigned long long)fakecuda_outstanding(0), (unsigned long long)(before + 40 * MiB));
    /* The stack size is not a heap gpucap charges: passed to the driver. */
    CHECK_RC(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096), CUDA_SUCCESS);
}

static atomic_int *blocker_state;

/* Waits for the blocker's destructor (gpucap's has run), then allocates past the budget. */
static void *late_alloc(void *arg)
{
    if (cuCtxSetCurrent((CUcontext)arg) != CUDA_SUCCESS) {
        fprintf(stderr, "FAIL exit_thread: cuCtxSetCurrent\n");
        _exit(1);
    }
    for (int i = 0; i < 500 && atomic_load(blocker_state) != 1; i++)
        usleep(10000);
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, 100 * MiB);
    if (rc == CUDA_SUCCESS) {
        fprintf(stderr, "FAIL exit_thread: 100 MiB admitted under a 64 MiB budget while exit() ran\n");
        _exit(1);
    }
    if (rc != CUDA_ERROR_OUT_OF_MEMORY || atomic_load(blocker_state) != 1) {
        fprintf(stderr, "FAIL exit_thread: %d, not a denial during exit (blocker state %d)\n", (int)rc,
                atomic_load(blocker_state));
        _exit(1);
    }
    fprintf(stderr, "exit_thread: the allocation during exit was denied\n");
    atomic_store(blocker_state, 2);
    return NULL;
}

static void exit_thread(void)
{
    const char *blocker = getenv("ESCAPE_BLOCKER"), *pre = getenv("LD_PRELOAD");
    REQUIRE(blocker && pre, "ESCAPE_BLOCKER and LD_PRELOAD");
    if (!getenv("ESCAPE_INNER")) {
        /* Again, with the blocker after libgpucap: the last preload is initialised first, so its
         * destructor runs after gpucap's (a tenant can name both in LD_PRELOAD, whatever
         * /etc/ld.so.preload holds). */
        static char list[8192];
        snprintf(list, sizeof list, "%s:%s", pre, blocker);
        setenv("LD_PRELOAD", list, 1);
        setenv("ESCAPE_INNER", "1", 1);
        execl("/proc/self/exe", "test_escapes", "exit_thread", (char *)NULL);
        REQUIRE(0, "exec: %s", strerror(errno));
    }
    blocker_state = dlsym(RTLD_DEFAULT, "fini_blocker_state");
    REQUIRE(blocker_state, "the blocker is not loaded");
    CUcontext ctx = make_context(0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, late_alloc, ctx) == 0, "pthread_create");
    pthread_detach(t); /* it runs on through exit() on purpose: no join (and no leak for TSan) */
    exit(0);
}

/* True when `fn` lies in libcuda (the fake), by the object that defines it. */
static bool in_driver(void *fn)
{
    Dl_info info;
    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libcuda") != NULL;
}

static void sweep(void)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS, "cuInit");
#define NAME_OF(exp, base, ver, pt, pfn) #base, #exp,
    static const char *const names[] = {GPC_HOOKS(NAME_OF)};
#undef NAME_OF
    typedef CUresult (*legacy_fn)(const char *, void **, int, cuuint64_t);
    legacy_fn legacy = (legacy_fn)ours("cuGetProcAddress");
    static const cuuint64_t flags[] = {0, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                                       3, 4, ~(cuuint64_t)0};
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    const char *path = getenv("ESCAPE_DEP");
    REQUIRE(cuda && path, "libcuda handle, ESCAPE_DEP");
    void *dep = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(dep, "dlopen %s: %s", path, dlerror());
    void *(*next)(const char *) = (void *(*)(const char *))dlsym(dep, "escape_dep_next");
    REQUIRE(next, "escape_dep_next");
    unsigned long raw = 0, asked = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *by[3] = {dlsym(cuda, names[i]), dlsym(dep, names[i]), next(names[i])};
        for (int k = 0; k < 3; k++)
            if (in_driver(by[k]) && raw++ < 10)
                printf("FAIL sweep: %s by dlsym route %d is the driver's %p\n", names[i], k, by[k]);
        for (int v = 1000; v <= 13100; v += 10)
            for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
                void *p = NULL, *q = NULL;
                CUdriverProcAddressQueryResult st;
                cuGetProcAddress_v2(names[i], &p, v, flags[f], &st);
                legacy(names[i], &q, v, flags[f]);
                asked += 2;
                if ((in_driver(p) || in_driver(q)) && raw++ < 10)
                    printf("FAIL sweep: cuGetProcAddress(%s, %d, flags %llx) is the driver's function\n", names[i], v,
                           (unsigned long long)flags[f]);
            }
    }
    CHECK(raw == 0, "%lu of %lu lookups answered a function of the driver", raw, asked);
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
        {"dependent", dependent},     {"ctx_limit", ctx_limit},
        {"deepbind", deepbind},       {"exit_thread", exit_thread},
        {"sweep", sweep},   {"destructor", destructor},
    };
    REQUIRE(argc == 2, "usage: test_escapes CASE");
    RUN_CASE(cases, argv[1]);
    return test_result();
}
