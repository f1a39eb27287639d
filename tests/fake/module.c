/* SPDX-License-Identifier: Apache-2.0 */
/*
 * module.c: modules, libraries, functions and kernels, and kernel launches: accepted and recorded,
 * never run (a kernel's results are wrong, the memory path around it is real). Of an image only
 * the headers are read (image.c: which architectures it holds code for); any name is found in it.
 * A module whose image holds no code the context's device runs is refused at its load
 * (CUDA_ERROR_NO_BINARY_FOR_GPU); a library, which needs no context, loads, and is refused so in
 * each context it is then used in (cuKernelGetFunction, cuLibraryGetModule, a launch).
 *
 * What loading code takes on the card: each load (cuModuleLoad*, the runtime's fat binaries through
 * its private table, and each context a library is used in) takes FAKECUDA_MODULE_BYTES (default
 * 0) on the loading context's device, in this process's figure (the fake NVML's per-process one),
 * given back by cuModuleUnload / cuLibraryUnload or when the context is destroyed or reset, as a
 * driver frees the modules of a context with it. A library (cuLibraryLoad*) is loaded into a
 * context lazily, as the driver does: charged in the current context at the load when there is one,
 * else in the context where one of its kernels or its module is first asked for or launched.
 * A load that does not fit answers CUDA_ERROR_OUT_OF_MEMORY. A module's variables (cuModuleGetGlobal)
 * are address ranges that live until their context goes, also after the module's unload.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

struct fk_mod {
    void *h;              /* its own address: the CUmodule or CUlibrary handle */
    bool library;
    struct fk_ctx *ctx;   /* a module: the context it was loaded in (NULL for a library's module) */
    struct fk_mod *lib;   /* a library's module (cuLibraryGetModule): the library */
    struct fk_image img;  /* the code its image holds (a library's module: see lib) */
    UT_hash_handle hh;
};

struct fk_func {
    void *h;              /* the CUfunction or CUkernel handle */
    bool kernel;          /* a library's CUkernel, launchable as a CUfunction */
    struct fk_mod *mod;   /* the module or library it came from */
    char *name;
    int attrs[CU_FUNC_ATTRIBUTE_MAX];
    UT_hash_handle hh;
};

/* One charge of a load: `mod` loaded in `ctx`. */
struct fk_load {
    struct fk_mod *mod;
    struct fk_ctx *ctx;
    uint64_t bytes;
    struct fk_load *next;
};

static struct fk_mod *mods;
static struct fk_func *funcs;
static struct fk_load *loads;

FK_DEFINE_FIND(mod_find, struct fk_mod, mods)
FK_DEFINE_FIND(func_find, struct fk_func, funcs)

static struct fk_load *load_find(struct fk_mod *m, struct fk_ctx *c)
{
    for (struct fk_load *l = loads; l; l = l->next)
        if (l->mod == m && l->ctx == c)
            return l;
    return NULL;
}

/* The code of `m`'s image that ordinal `dev` runs: its binary and PTX versions, or
 * CUDA_ERROR_NO_BINARY_FOR_GPU. */
static CUresult code_for(const struct fk_mod *m, CUdevice dev, int *binary, int *ptx)
{
    int major = 0, minor = 0;
    fk_device_cc(fk_phys_of(dev), &major, &minor);
    return fk_image_select(m->lib ? &m->lib->img : &m->img, major, minor, binary, ptx);
}

/* Charges a load of `m` in context `c` once. Under fk_mu. */
static CUresult load_in(struct fk_mod *m, struct fk_ctx *c)
{
    if (load_find(m, c))
        return CUDA_SUCCESS;
    int binary, ptx;
    CUresult code = code_for(m, c->ordinal, &binary, &ptx);
    if (code != CUDA_SUCCESS)
        return code;
    struct fk_load *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t bytes = fk_config()->module_bytes;
    CUresult rc = fk_charge(c->phys, bytes);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    *l = (struct fk_load){ m, c, bytes, loads };
    loads = l;
    return CUDA_SUCCESS;
}

/* Gives back the loads that match (`m` NULL: any module; `c` NULL: any context). Under fk_mu. */
static void unload(struct fk_mod *m, struct fk_ctx *c)
{
    for (struct fk_load **pp = &loads; *pp;) {
        struct fk_load *l = *pp;
        if ((!m || l->mod == m) && (!c || l->ctx == c)) {
            fk_uncharge(l->ctx->phys, l->bytes);
            *pp = l->next;
            free(l);
        } else {
            pp = &l->next;
        }
    }
}

static void funcs_drop(struct fk_mod *m)
{
    struct fk_func *f, *tmp;
    HASH_ITER(hh, funcs, f, tmp) {
        if (f->mod == m) {
            HASH_DEL(funcs, f);
            free(f->name);
            free(f);
        }
    }
}

static void mod_drop(struct fk_mod *m)
{
    unload(m, NULL);
    funcs_drop(m);
    HASH_DEL(mods, m);
    free(m);
}

void fk_module_free_ctx(struct fk_ctx *c)
{
    unload(NULL, c);
    struct fk_mod *m, *tmp;
    HASH_ITER(hh, mods, m, tmp)
        if (!m->library && m->ctx == c)
            mod_drop(m);
}

void fk_module_forget(void)
{
    /* After fork(): the child has no context, so nothing is loaded in one; the handles stay. */
    for (struct fk_load *l = loads, *next; l; l = next) {
        next = l->next;
        free(l);
    }
    loads = NULL;
}

/* ---- modules ---- */

CUresult fk_module_load_image(CUmodule *module, const void *image)
{
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_mod, m, 0, c);
    m->h = m;
    m->ctx = c;
    fk_image_read(image, &m->img);
    CUresult rc = load_in(m, c);
    if (rc != CUDA_SUCCESS) {
        fk_entry_abort(m, c, 0);
        return rc;
    }
    HASH_ADD_PTR(mods, h, m);
    *module = (CUmodule)m;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuModuleLoad, (CUmodule *module, const char *fname), fname ? fk_module_load_image(module, fname)
                                                                      : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuModuleLoadData, (CUmodule *module, const void *image), fk_module_load_image(module, image))
FK_FORWARD(cuModuleLoadDataEx, (CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
                                void **optionValues), fk_module_load_image(module, image))
FK_FORWARD(cuModuleLoadFatBinary, (CUmodule *module, const void *fatCubin), fk_module_load_image(module, fatCubin))

static CUresult module_unload(CUmodule h)
{
    fk_lock();
    struct fk_mod *m = mod_find(h);
    CUresult rc = m && !m->library && !m->lib ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        mod_drop(m);
    fk_unlock();
    return rc;
}

FK_FORWARD(cuModuleUnload, (CUmodule hmod), module_unload(hmod))

FK_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    FK_ENTER_INIT(cuModuleGetLoadingMode);
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    const char *e = getenv("CUDA_MODULE_LOADING");
    *mode = e && strcmp(e, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* A function or kernel of `m` named `name`, made on first ask. Under fk_mu. */
static struct fk_func *func_get(struct fk_mod *m, const char *name, bool kernel)
{
    struct fk_func *f, *tmp;
    HASH_ITER(hh, funcs, f, tmp)
        if (f->mod == m && f->kernel == kernel && strcmp(f->name, name) == 0)
            return f;
    f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) {
        free(f);
        return NULL;
    }
    f->h = f;
    f->kernel = kernel;
    f->mod = m;
    f->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
    f->attrs[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32;
    f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
    f->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
    HASH_ADD_PTR(funcs, h, f);
    return f;
}

static CUresult module_get_function(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_mod *m = mod_find(hmod);
    struct fk_func *f = m && !m->library ? func_get(m, name, false) : NULL;
    if (f)
        *hfunc = (CUfunction)f;
    fk_unlock();
    return f ? CUDA_SUCCESS : m ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuModuleGetFunction, (CUfunction *hfunc, CUmodule hmod, const char *name),
           module_get_function(hfunc, hmod, name))

/*
 * A module's or library's __device__ variable: an address range of its own in the loading context,
 * copied to and from like device memory, part of the load (nothing more on the record). The image is
 * not parsed, so the variable's size is unknown: the range is FK_GLOBAL_BYTES, which covers any
 * variable the runtime's bounds checks meet (they ask offset + count <= size).
 */
#define FK_GLOBAL_BYTES ((uint64_t)1 << 20)

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, const void *h, const char *name, bool library)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    FK_ENTRY_BEGIN(struct fk_alloc, a, 0, c);
    struct fk_mod *m = mod_find(h);
    CUresult rc = !m || m->library != library ? CUDA_ERROR_INVALID_HANDLE : library ? load_in(m, c) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS && !(a->ptr = fk_addr_alloc(c->phys, FK_GLOBAL_BYTES, false)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        fk_entry_abort(a, c, 0);
        return rc;
    }
    a->size = FK_GLOBAL_BYTES;
    fk_alloc_insert_in(a, c, FK_GLOBAL);
    if (dptr)
        *dptr = a->ptr;
    if (bytes)
        *bytes = FK_GLOBAL_BYTES;
    fk_unlock();
    return CUDA_SUCCESS;
}

FK_FORWARD(cuModuleGetGlobal_v2, (CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name),
           get_global(dptr, bytes, hmod, name, false))

/* ---- libraries ---- */

static CUresult library_load(CUlibrary *library, const void *code)
{
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_mod *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->h = m;
    m->library = true;
    fk_image_read(code, &m->img);
    fk_lock();
    struct fk_ctx *c = fk_current_ctx();
    CUresult rc = c ? load_in(m, c) : CUDA_SUCCESS;
    if (rc == CUDA_ERROR_NO_BINARY_FOR_GPU)
        rc = CUDA_SUCCESS; /* refused where it is used, not loaded here */
    if (rc == CUDA_SUCCESS) {
        HASH_ADD_PTR(mods, h, m);
        *library = (CUlibrary)m;
    }
    fk_unlock();
    if (rc != CUDA_SUCCESS)
        free(m);
    return rc;
}

FK_FORWARD(cuLibraryLoadData, (CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
                               unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions), library_load(library, code))
FK_FORWARD(cuLibraryLoadFromFile, (CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                   void **libraryOptionValues, unsigned int numLibraryOptions),
           library_load(library, fileName))

static CUresult library_unload(CUlibrary h)
{
    fk_lock();
    struct fk_mod *m = mod_find(h);
    CUresult rc = m && m->library ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS) {
        struct fk_mod *x, *tmp;
        HASH_ITER(hh, mods, x, tmp)
            if (x->lib == m)
                mod_drop(x);
        mod_drop(m);
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuLibraryUnload, (CUlibrary library), library_unload(library))

static CUresult library_get_kernel(CUkernel *pKernel, CUlibrary h, const char *name)
{
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_mod *m = mod_find(h);
    struct fk_func *f = m && m->library ? func_get(m, name, true) : NULL;
    if (f)
        *pKernel = (CUkernel)f;
    fk_unlock();
    return f ? CUDA_SUCCESS : m ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuLibraryGetKernel, (CUkernel *pKernel, CUlibrary library, const char *name),
           library_get_kernel(pKernel, library, name))

/* The library's module in the current context (loading the library there). */
static CUresult library_get_module(CUmodule *pMod, CUlibrary h)
{
    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_mod *lib = mod_find(h), *m = NULL;
    struct fk_ctx *c = fk_current_ctx();
    CUresult rc = !lib || !lib->library ? CUDA_ERROR_INVALID_HANDLE : !c ? CUDA_ERROR_INVALID_CONTEXT
                                                                        : load_in(lib, c);
    if (rc == CUDA_SUCCESS) {
        struct fk_mod *x, *tmp;
        HASH_ITER(hh, mods, x, tmp)
            if (x->lib == lib)
                m = x;
        if (!m && (m = calloc(1, sizeof *m))) {
            m->h = m;
            m->lib = lib;
            HASH_ADD_PTR(mods, h, m);
        }
        rc = m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        if (m)
            *pMod = (CUmodule)m;
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuLibraryGetModule, (CUmodule *pMod, CUlibrary library), library_get_module(pMod, library))
FK_FORWARD(cuLibraryGetGlobal, (CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name),
           get_global(dptr, bytes, library, name, true))

/* A kernel as a function of the current context (loading its library there). */
static CUresult kernel_get_function(CUfunction *pFunc, CUkernel k)
{
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_func *f = func_find(k);
    struct fk_ctx *c = fk_current_ctx();
    CUresult rc = !f || !f->kernel ? CUDA_ERROR_INVALID_HANDLE : !c ? CUDA_ERROR_INVALID_CONTEXT
                                                                    : load_in(f->mod, c);
    if (rc == CUDA_SUCCESS)
        *pFunc = (CUfunction)f;
    fk_unlock();
    return rc;
}

FK_FORWARD(cuKernelGetFunction, (CUfunction *pFunc, CUkernel kernel), kernel_get_function(pFunc, kernel))

/* ---- attributes of functions and kernels ---- */

/*
 * A function's attribute; set ones are kept. The binary and PTX versions are those of the code the
 * device asked about (`dev`, or the current context's) runs from the function's image (image.c;
 * CUDA_ERROR_NO_BINARY_FOR_GPU where it runs none); cuBLAS refuses a kernel built for another
 * architecture, CUB picks its tuning by the PTX version.
 */
static CUresult func_attr(int *pi, CUfunction_attribute attrib, const void *h, bool kernel, bool set, int value,
                          CUdevice dev)
{
    if ((!set && !pi) || (unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_func *f = func_find(h);
    struct fk_ctx *c = fk_current_ctx();
    if (dev < 0 && c)
        dev = c->ordinal;
    CUresult rc = f && (!kernel || f->kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && set) {
        f->attrs[attrib] = value;
    } else if (rc == CUDA_SUCCESS && (attrib == CU_FUNC_ATTRIBUTE_PTX_VERSION ||
                                      attrib == CU_FUNC_ATTRIBUTE_BINARY_VERSION)) {
        int binary = 0, ptx = 0;
        rc = dev >= 0 ? code_for(f->mod, dev, &binary, &ptx) : CUDA_ERROR_INVALID_CONTEXT;
        if (rc == CUDA_SUCCESS)
            *pi = attrib == CU_FUNC_ATTRIBUTE_BINARY_VERSION ? binary : ptx;
    } else if (rc == CUDA_SUCCESS) {
        *pi = f->attrs[attrib];
    }
    fk_unlock();
    return rc;
}

FK_FORWARD(cuFuncGetAttribute, (int *pi, CUfunction_attribute attrib, CUfunction hfunc),
           func_attr(pi, attrib, hfunc, false, false, 0, -1))
FK_FORWARD(cuFuncSetAttribute, (CUfunction hfunc, CUfunction_attribute attrib, int value),
           func_attr(NULL, attrib, hfunc, false, true, value, -1))
FK_FORWARD(cuKernelGetAttribute, (int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev),
           fk_phys_of(dev) < 0 ? CUDA_ERROR_INVALID_DEVICE : func_attr(pi, attrib, kernel, true, false, 0, dev))
FK_FORWARD(cuKernelSetAttribute, (CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev),
           fk_phys_of(dev) < 0 ? CUDA_ERROR_INVALID_DEVICE : func_attr(NULL, attrib, kernel, true, true, val, dev))

static CUresult func_known(const void *h)
{
    fk_lock();
    bool ok = func_find(h) != NULL;
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuFuncSetCacheConfig, (CUfunction hfunc, CUfunc_cache config), func_known(hfunc))
FK_FORWARD(cuKernelSetCacheConfig, (CUkernel kernel, CUfunc_cache config, CUdevice dev), func_known(kernel))

static CUresult func_name(const char **name, const void *h)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_func *f = func_find(h);
    if (f)
        *name = f->name;
    fk_unlock();
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FK_FORWARD(cuFuncGetName, (const char **name, CUfunction hfunc), func_name(name, hfunc))
FK_FORWARD(cuKernelGetName, (const char **name, CUkernel hfunc), func_name(name, hfunc))

static CUresult func_is_loaded(CUfunctionLoadingState *state, CUfunction h)
{
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = func_known(h);
    if (rc == CUDA_SUCCESS)
        *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return rc;
}

FK_FORWARD(cuFuncIsLoaded, (CUfunctionLoadingState *state, CUfunction function), func_is_loaded(state, function))
FK_FORWARD(cuFuncLoad, (CUfunction function), func_known(function))

/* ---- launches: checked, counted, not run ---- */

static CUresult launch(const void *h, CUstream s)
{
    fk_lock();
    struct fk_func *f = func_find(h);
    struct fk_ctx *c = fk_current_ctx();
    CUresult rc = !f ? CUDA_ERROR_INVALID_HANDLE : !c ? CUDA_ERROR_INVALID_CONTEXT
                  : !fk_stream_ok(s) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS && f->kernel)
        rc = load_in(f->mod, c);
    fk_unlock();
    return rc;
}

#define FK_LAUNCH_PARAMS                                                                                 \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,        \
     void **kernelParams, void **extra)
FK_FORWARD(cuLaunchKernel, FK_LAUNCH_PARAMS, launch(f, hStream))
FK_FORWARD(cuLaunchKernel_ptsz, FK_LAUNCH_PARAMS, launch(f, hStream))
#undef FK_LAUNCH_PARAMS
#define FK_LAUNCH_COOP_PARAMS                                                                            \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
     unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,        \
     void **kernelParams)
FK_FORWARD(cuLaunchCooperativeKernel, FK_LAUNCH_COOP_PARAMS, launch(f, hStream))
FK_FORWARD(cuLaunchCooperativeKernel_ptsz, FK_LAUNCH_COOP_PARAMS, launch(f, hStream))
#undef FK_LAUNCH_COOP_PARAMS
FK_FORWARD(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
           config ? launch(f, config->hStream) : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
           config ? launch(f, config->hStream) : CUDA_ERROR_INVALID_VALUE)

/* ---- occupancy: what a card of the profile would allow a 1024-thread, 32-register kernel ---- */

static CUresult occupancy_blocks(int *numBlocks, const void *h, int blockSize)
{
    if (!numBlocks || blockSize <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = func_known(h);
    if (rc == CUDA_SUCCESS)
        *numBlocks = blockSize > 1024 ? 0 : 2048 / blockSize > 32 ? 32 : 2048 / blockSize;
    return rc;
}

FK_FORWARD(cuOccupancyMaxActiveBlocksPerMultiprocessor,
           (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize),
           occupancy_blocks(numBlocks, func, blockSize))
FK_FORWARD(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
           (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags),
           occupancy_blocks(numBlocks, func, blockSize))

static CUresult occupancy_block_size(int *minGridSize, int *blockSize, const void *h)
{
    if (!minGridSize || !blockSize)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = func_known(h);
    if (rc == CUDA_SUCCESS) {
        *blockSize = 1024;
        *minGridSize = 2 * 132;
    }
    return rc;
}

FK_FORWARD(cuOccupancyMaxPotentialBlockSize,
           (int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
            size_t dynamicSMemSize, int blockSizeLimit), occupancy_block_size(minGridSize, blockSize, func))
FK_FORWARD(cuOccupancyMaxPotentialBlockSizeWithFlags,
           (int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
            size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags),
           occupancy_block_size(minGridSize, blockSize, func))

FK_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
                                                           int blockSize)
{
    FK_ENTER_INIT(cuOccupancyAvailableDynamicSMemPerBlock);
    if (!dynamicSmemSize)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = func_known(func);
    if (rc == CUDA_SUCCESS)
        *dynamicSmemSize = 49152;
    return rc;
}

/* Thread-block clusters (compute capability 9.0 and up): as many clusters as SMs allow, 8 blocks a
 * cluster at most (16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED). */
static unsigned cluster_blocks(const CUlaunchConfig *config)
{
    for (unsigned i = 0; config && i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            unsigned n = a->value.clusterDim.x * a->value.clusterDim.y * a->value.clusterDim.z;
            return n ? n : 1;
        }
    }
    return 1;
}

static CUresult occupancy_clusters(int *out, const void *h, const CUlaunchConfig *config, bool size)
{
    if (!out || !config)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_func *f = func_find(h);
    struct fk_ctx *c = fk_current_ctx();
    int sms = 0;
    if (f && c)
        cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->ordinal);
    bool wide = f && f->attrs[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
    fk_unlock();
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = size ? (wide ? 16 : 8) : sms / (int)cluster_blocks(config);
    return CUDA_SUCCESS;
}

FK_FORWARD(cuOccupancyMaxActiveClusters, (int *numClusters, CUfunction func, const CUlaunchConfig *config),
           occupancy_clusters(numClusters, func, config, false))
FK_FORWARD(cuOccupancyMaxPotentialClusterSize, (int *clusterSize, CUfunction func, const CUlaunchConfig *config),
           occupancy_clusters(clusterSize, func, config, true))

/* The kernel's library. */
FK_EXPORT CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    FK_ENTER_INIT(cuKernelGetLibrary);
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    fk_lock();
    struct fk_func *f = func_find(kernel);
    bool ok = f && f->kernel;
    if (ok)
        *pLib = (CUlibrary)f->mod;
    fk_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- JIT linking: inputs accepted, the output image an opaque token (loads like any image) ---- */

struct fk_link {
    unsigned inputs;
    unsigned char image[64];
};

static CUresult link_create(unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut)
{
    if (!stateOut || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    struct fk_link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

static CUresult link_add(CUlinkState state, const void *input)
{
    if (!state || !input)
        return CUDA_ERROR_INVALID_VALUE;
    ((struct fk_link *)state)->inputs++;
    return CUDA_SUCCESS;
}

/* The first ABI of the three (5050) takes the same arguments as _v2 (6050). */
FK_FORWARD(cuLinkCreate, (unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut),
           link_create(numOptions, options, optionValues, stateOut))
FK_FORWARD(cuLinkCreate_v2, (unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut),
           link_create(numOptions, options, optionValues, stateOut))
FK_FORWARD(cuLinkAddData, (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                           unsigned int numOptions, CUjit_option *options, void **optionValues),
           size ? link_add(state, data) : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuLinkAddFile, (CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                           CUjit_option *options, void **optionValues), link_add(state, path))
FK_FORWARD(cuLinkAddData_v2, (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                              unsigned int numOptions, CUjit_option *options, void **optionValues),
           size ? link_add(state, data) : CUDA_ERROR_INVALID_VALUE)
FK_FORWARD(cuLinkAddFile_v2, (CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                              CUjit_option *options, void **optionValues), link_add(state, path))

FK_EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    FK_ENTER_INIT(cuLinkComplete);
    struct fk_link *l = (struct fk_link *)state;
    if (!l || !cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (!l->inputs)
        return CUDA_ERROR_INVALID_IMAGE;
    memcpy(l->image, "fakecuda linked image", 22);
    *cubinOut = l->image;
    *sizeOut = sizeof l->image;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuLinkDestroy, (CUlinkState state), state ? (free(state), CUDA_SUCCESS) : CUDA_ERROR_INVALID_VALUE)

/* ---- tensor maps (TMA descriptors): encoded as an opaque 128 bytes naming the address ---- */

static CUresult tensor_map(CUtensorMap *map, cuuint32_t rank, void *address)
{
    if (!map || rank == 0 || rank > 5 || ((uintptr_t)address & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    memcpy(map->opaque, &address, sizeof address);
    map->opaque[1] = rank;
    return CUDA_SUCCESS;
}

FK_FORWARD(cuTensorMapEncodeTiled,
           (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,
            const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
            const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
            CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill),
           tensor_map(tensorMap, tensorRank, globalAddress))
FK_FORWARD(cuTensorMapEncodeIm2col,
           (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,
            const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
            const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
            const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
            CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill),
           tensor_map(tensorMap, tensorRank, globalAddress))
FK_FORWARD(cuTensorMapEncodeIm2colWide,
           (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,
            const cuuint64_t *globalDim, const cuuint64_t *globalStrides, int pixelBoxLowerCornerWidth,
            int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
            const cuuint32_t *elementStrides, CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
            CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill),
           tensor_map(tensorMap, tensorRank, globalAddress))

FK_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
    FK_ENTER_INIT(cuTensorMapReplaceAddress);
    if (!tensorMap || ((uintptr_t)globalAddress & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(tensorMap->opaque, &globalAddress, sizeof globalAddress);
    return CUDA_SUCCESS;
}
