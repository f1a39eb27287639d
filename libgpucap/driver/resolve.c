/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.c: finding the real entry points, once (resolve.h is the contract).
 *
 * Three kinds: the dynamic loader's dlsym/dlvsym/dlopen/dlmopen, which we interpose and so cannot
 * simply call by name; the driver's functions in libcuda.so.1 (gpc_real); libc's exec family,
 * which we interpose too. NVML's are driver/nvml.c's.
 *
 * Why not `dlvsym(RTLD_NEXT, "dlsym", ...)`: this library exports dlvsym too, and a preloaded
 * unversioned definition matches every versioned reference, our own included, so that call would
 * come back to us. Instead glibc's dlsym is looked up in libc.so.6's own dynamic symbol table (GNU
 * hash), found by walking the loader's public list of objects (_r_debug): no dlsym call, no
 * allocation, no lock and no function a sanitizer runtime intercepts, because the first dlsym calls
 * come from such runtimes while they start. That dlsym is then asked, from this library, for
 * RTLD_NEXT "dlsym"/"dlvsym", so an interposer loaded after us stays in the chain. This file and
 * dlsym.c are built without sanitizer instrumentation for the same reason.
 */
#include "driver/resolve.h"

#include "common/defs.h"
#include "common/log.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct gpc_real gpc_real;

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static _Atomic(dlsym_fn) real_dlsym;
static _Atomic(dlvsym_fn) real_dlvsym;


static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* Dynamic-section pointers are relocated in place by ld.so on most targets, not on all. */
static const void *dyn_ptr(ElfW(Addr) base, ElfW(Addr) p)
{
    return (const void *)(p < base ? base + p : p);
}

static bool same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static bool is_libc(const char *path)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/')
            base = p + 1;
    const char *want = "libc.so.";
    for (; *want; want++, base++)
        if (*base != *want)
            return false;
    return true;
}

/* The default-version definition of `name` in object `m`, or NULL. */
static void *find_in(const struct link_map *m, const char *name)
{
    const ElfW(Dyn) *dyn = m->l_ld;
    ElfW(Addr) base_addr = m->l_addr;
    if (!dyn)
        return NULL;

    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *hash = NULL;
    const ElfW(Half) *versym = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = dyn_ptr(base_addr, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = dyn_ptr(base_addr, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: hash = dyn_ptr(base_addr, dyn->d_un.d_ptr); break;
        case DT_VERSYM: versym = dyn_ptr(base_addr, dyn->d_un.d_ptr); break;
        }
    }
    if (!symtab || !strtab || !hash)
        return NULL;

    uint32_t nbuckets = hash[0], symoffset = hash[1], bloom_words = hash[2];
    const uint32_t *buckets = hash + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name);
    uint32_t idx = buckets[h % nbuckets];
    if (idx < symoffset)
        return NULL;
    for (;; idx++) {
        uint32_t ch = chain[idx - symoffset];
        const ElfW(Sym) *sym = &symtab[idx];
        /* The default version (no hidden bit), a defined function. */
        if ((ch | 1) == (h | 1) && sym->st_shndx != SHN_UNDEF && same(strtab + sym->st_name, name) &&
            !(versym && (versym[idx] & 0x8000)))
            return (void *)(base_addr + sym->st_value);
        if (ch & 1)
            return NULL;
    }
}

const char *gpc_object_soname(const struct link_map *m)
{
    const ElfW(Dyn) *dyn = m ? m->l_ld : NULL;
    if (!dyn)
        return NULL;
    const char *strtab = NULL;
    ElfW(Addr) soname = 0;
    bool have = false;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_STRTAB)
            strtab = dyn_ptr(m->l_addr, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_SONAME)
            soname = dyn->d_un.d_val, have = true;
    }
    return strtab && have ? strtab + soname : NULL;
}

/* True when another dlsym interposer comes after this library. */
static atomic_bool dlsym_chained;

bool gpc_dlsym_chained(void)
{
    return atomic_load_explicit(&dlsym_chained, memory_order_relaxed);
}

/* Races are harmless: every thread finds the same answer. */
static void resolve_loader(void)
{
    dlsym_fn libc_dlsym = NULL;
    for (const struct link_map *m = _r_debug.r_map; m && !libc_dlsym; m = m->l_next)
        if (m->l_name && is_libc(m->l_name))
            libc_dlsym = (dlsym_fn)find_in(m, "dlsym");
    if (!libc_dlsym) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            gpc_log_line(GPC_LOG_ERROR, "cannot find dlsym in libc.so.6; dlsym and dlvsym are not redirected");
        return;
    }
    /* Called from this library, RTLD_NEXT means "the next definition after gpucap". */
    dlsym_fn next = (dlsym_fn)libc_dlsym(RTLD_NEXT, "dlsym");
    dlvsym_fn nextv = (dlvsym_fn)libc_dlsym(RTLD_NEXT, "dlvsym");
    atomic_store(&real_dlvsym, nextv);
    atomic_store(&dlsym_chained, next && next != libc_dlsym);
    atomic_store(&real_dlsym, next ? next : libc_dlsym);
}

dlsym_fn gpc_real_dlsym_fn(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    if (gpc_likely(f != NULL))
        return f;
    resolve_loader();
    return atomic_load(&real_dlsym);
}

dlvsym_fn gpc_real_dlvsym_fn(void)
{
    gpc_real_dlsym_fn();
    return atomic_load(&real_dlvsym);
}

/*
 * The definition of `name` after this library, looked up once into *cache (races are harmless:
 * every thread finds the same answer). Asked from this library, RTLD_NEXT is the loader's (or the
 * next interposer's), never our hook, which a plain call by name from here would reach.
 */
static void *next_after_gpucap(_Atomic(void *) *cache, const char *name)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (gpc_likely(f != NULL))
        return f;
    dlsym_fn look = gpc_real_dlsym_fn();
    f = look ? look(RTLD_NEXT, name) : NULL;
    atomic_store_explicit(cache, f, memory_order_release);
    return f;
}

typedef void *(*dlopen_fn)(const char *, int);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);
static _Atomic(void *) real_dlopen, real_dlmopen;

dlopen_fn gpc_real_dlopen_fn(void)
{
    return (dlopen_fn)next_after_gpucap(&real_dlopen, "dlopen");
}

dlmopen_fn gpc_real_dlmopen_fn(void)
{
    return (dlmopen_fn)next_after_gpucap(&real_dlmopen, "dlmopen");
}

/* ---- libc's exec family ---- */

static struct gpc_real_exec real_exec;
static pthread_once_t exec_once = PTHREAD_ONCE_INIT;

static void resolve_exec(void)
{
    dlsym_fn look = gpc_real_dlsym_fn();
    if (!look)
        return;
#define EXEC_RESOLVE(name) real_exec.name = (__typeof__(real_exec.name))look(RTLD_NEXT, #name);
    EXEC_RESOLVE(execve) EXEC_RESOLVE(execv) EXEC_RESOLVE(execvp) EXEC_RESOLVE(execvpe) EXEC_RESOLVE(fexecve)
    EXEC_RESOLVE(execveat)
#undef EXEC_RESOLVE
}

const struct gpc_real_exec *gpc_real_exec(void)
{
    /* glibc's pthread_once starts over in a child forked while another thread was inside it. */
    pthread_once(&exec_once, resolve_exec);
    return &real_exec;
}

/* ---- libcuda ---- */

static void *cuda_handle;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void resolve_cuda(void)
{
    void *h = cuda_handle;
    dlopen_fn open_fn = gpc_real_dlopen_fn();
    if (!h && open_fn)
        h = open_fn("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h && open_fn)
        h = open_fn("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        gpc_log(GPC_LOG_INFO, "libcuda.so.1 is not loadable: %s", dlerror());
        return;
    }
    dlsym_fn look = gpc_real_dlsym_fn();
    if (!look)
        return;
#define GPC_RESOLVE(exp, base, ver, pt, pfn) gpc_real.exp = (pfn)look(h, #exp);
    GPC_HOOKS(GPC_RESOLVE)
#undef GPC_RESOLVE
#define GPC_RESOLVE2(exp, pfn) gpc_real.exp = (pfn)look(h, #exp);
    GPC_REAL_ONLY(GPC_RESOLVE2)
#undef GPC_RESOLVE2
}

void gpc_resolve_cuda(void *handle)
{
    if (handle && !cuda_handle)
        cuda_handle = handle;
    pthread_once(&cuda_once, resolve_cuda);
}
