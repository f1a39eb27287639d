/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsym.c: the dlsym and dlvsym interposers, and dlopen's and dlmopen's RTLD_DEEPBIND.
 *
 * `dlsym(handle, name)` on a handle of libcuda.so.1 ignores LD_PRELOAD and returns the driver's own
 * function, so a program (or XLA, or pynvml) that binds this way would never meet our hooks. For a
 * libcuda handle and a name in GPC_HOOKS, or a libnvidia-ml handle and a name in GPC_NVML_HOOKS
 * (hooklist.h), we answer with our hook (if the library has the symbol at all); every other lookup
 * goes to the real dlsym untouched.
 *
 * The libraries are recognised by what they are, not by the name they were loaded under: the
 * object's DT_SONAME (libcuda.so.1, libnvidia-ml.so.1), so a copy of the driver dlopened from
 * another path is hooked too; the path's file name is the fallback for an object without one.
 * Other handles (RTLD_NEXT from a library loaded after gpucap, the handle of a library that
 * depends on libcuda) are judged by the object that defines the answer: a hooked name answered
 * from libcuda or NVML gets our hook whatever handle it was asked of.
 *
 * `dlsym` and `dlvsym` themselves, asked of any handle (RTLD_NEXT, RTLD_DEFAULT, a libc handle),
 * answer with ours: a program that fetched glibc's dlsym with dlvsym(RTLD_NEXT, "dlsym",
 * "GLIBC_2.34") would otherwise bind the driver past the redirect. Not when another dlsym
 * interposer comes after us: it is the "real" dlsym we call, and handing it our own would loop.
 *
 * Why the assembly: glibc resolves RTLD_NEXT relative to the object that called dlsym, which it
 * finds from the return address. If our C function called the real dlsym, RTLD_NEXT lookups made
 * by any other library would be answered relative to gpucap. So on x86-64 the exported symbol is a
 * small trampoline: it asks gpc_dlsym_redirect() for an answer and, when there is none, jumps (not
 * calls) to the real dlsym with the caller's own return address still on the stack. Elsewhere a C
 * fallback is used, in which RTLD_NEXT from other objects is answered relative to gpucap.
 *
 * RTLD_DEEPBIND puts a library's own dependencies ahead of the global scope for its references: a
 * library dlopened so that needs libcuda.so.1 would call the driver directly, past every hook. So
 * dlopen and dlmopen drop that flag (the library then binds as any other, gpucap first) and say so
 * at the info level; the rest of the call is the loader's, from the caller (the same tail jump, so
 * the caller's RUNPATH and $ORIGIN still apply).
 *
 * Nothing here allocates or takes a lock before the real dlsym is known (resolve.c).
 */
#include "common/log.h"
#include "driver/nvml.h"
#include "driver/resolve.h"
#include "hooks/init.h"
#include "hooks/nvml.h"
#include "hooks/procaddr.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

/* Cached handle values known to be libcuda / libnvidia-ml: compared before looking at the name. */
static _Atomic(void *) cuda_handle_seen;
static _Atomic(void *) nvml_handle_seen;

enum handle_kind { H_OTHER, H_CUDA, H_NVML };

/* What the loaded object `lm` is, by its DT_SONAME, else by its path's file name. */
static enum handle_kind object_kind(const struct link_map *lm)
{
    const char *base = gpc_object_soname(lm);
    if (!base) {
        const char *name = lm->l_name;
        if (!name)
            return H_OTHER;
        const char *slash = strrchr(name, '/');
        base = slash ? slash + 1 : name;
    }
    if (strncmp(base, "libcuda.so", 10) == 0)
        return H_CUDA;
    if (strncmp(base, "libnvidia-ml.so", 15) == 0)
        return H_NVML;
    return H_OTHER;
}

static enum handle_kind handle_kind(void *handle)
{
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
        return H_OTHER;
    if (handle == atomic_load_explicit(&cuda_handle_seen, memory_order_relaxed))
        return H_CUDA;
    if (handle == atomic_load_explicit(&nvml_handle_seen, memory_order_relaxed))
        return H_NVML;
    /* A glibc dlopen handle is the object's link_map (as glibc's own dlsym assumes). */
    enum handle_kind kind = object_kind(handle);
    if (kind == H_CUDA)
        atomic_store_explicit(&cuda_handle_seen, handle, memory_order_relaxed);
    else if (kind == H_NVML)
        atomic_store_explicit(&nvml_handle_seen, handle, memory_order_relaxed);
    return kind;
}

/*
 * The kind of the object that defines `addr`, and a dlopen handle of it in *object (NULL if it has
 * none in our namespace: the caller then resolves the default libcuda). A link_map that dladdr1
 * returns is no handle for an object loaded as a dependency (glibc's dlsym would crash on it).
 */
static enum handle_kind defined_in(const void *addr, void **object)
{
    Dl_info info;
    struct link_map *lm = NULL;
    *object = NULL;
    if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return H_OTHER;
    enum handle_kind kind = object_kind(lm);
    if (kind == H_OTHER)
        return kind;
    /* One handle of ours per library (each dlopen counts a reference): the first one found. */
    _Atomic(void *) *seen = kind == H_CUDA ? &cuda_handle_seen : &nvml_handle_seen;
    *object = atomic_load_explicit(seen, memory_order_relaxed);
    if (!*object && info.dli_fname) {
        void *(*open_fn)(const char *, int) = gpc_real_dlopen_fn();
        *object = open_fn ? open_fn(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) : NULL;
        void *none = NULL;
        if (*object && !atomic_compare_exchange_strong(seen, &none, *object)) {
            dlclose(*object);
            *object = none;
        }
    }
    return kind;
}

/*
 * For RTLD_NEXT asked by another library: the first loaded object of `want`'s kind that defines
 * `name`, as a dlopen handle in *object. Asked from gpucap, RTLD_NEXT misses a driver that is only
 * in the caller's local scope (a library dlopened RTLD_LOCAL with libnvidia-ml as its dependency),
 * yet the caller's own lookup reaches it there.
 */
static enum handle_kind loaded_definer(enum handle_kind want, const char *name, void **object)
{
    *object = NULL;
    void *(*open_fn)(const char *, int) = gpc_real_dlopen_fn();
    for (const struct link_map *lm = _r_debug.r_map; open_fn && lm; lm = lm->l_next) {
        if (object_kind(lm) != want || !lm->l_name || !lm->l_name[0])
            continue;
        void *h = open_fn(lm->l_name, RTLD_NOW | RTLD_NOLOAD);
        if (!h)
            continue;
        if (gpc_real_dlsym_fn()(h, name)) {
            *object = h;
            return want;
        }
        dlclose(h);
    }
    return H_OTHER;
}

/* Our own dlsym and dlvsym (hidden aliases: the exported names could bind elsewhere). */
__attribute__((visibility("hidden"))) void *gpc_own_dlsym(void *, const char *);
__attribute__((visibility("hidden"))) void *gpc_own_dlvsym(void *, const char *, const char *);

/*
 * The answer of our dlsym/dlvsym for (handle, name), or NULL meaning "ask the real one". Also used
 * by the trampolines, hence not static. NVML names are answered only for a libnvidia-ml handle
 * and driver names only for a libcuda one.
 */
__attribute__((visibility("hidden"))) void *gpc_dlsym_redirect(void *handle, const char *name);
void *gpc_dlsym_redirect(void *handle, const char *name)
{
    if (!gpc_real_dlsym_fn() || !name)
        return NULL;
    if (name[0] == 'd' && name[1] == 'l' && !gpc_dlsym_chained()) {
        if (strcmp(name, "dlsym") == 0)
            return (void *)gpc_own_dlsym;
        if (strcmp(name, "dlvsym") == 0)
            return (void *)gpc_own_dlvsym;
    }
    enum handle_kind kind = handle_kind(handle);
    void *object = handle;
    if (kind == H_OTHER) {
        /*
         * Not a handle of libcuda or NVML, yet a hooked name can still reach the driver through it:
         * RTLD_NEXT asked by a library that comes after gpucap, the handle of a library that
         * depends on libcuda (dlsym searches its dependencies). Where the answer lies decides.
         * From here RTLD_NEXT means "after gpucap", which is where the driver is.
         */
        /* Only driver and NVML names go on: sanitizer runtimes look names up here before their
         * shadow memory exists, and the table lookups below are instrumented code. */
        if (!((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nvml", 4) == 0))
            return NULL;
        void *cuda_hook = gpc_hook_for_export(name);
        void *nvml_hook = cuda_hook ? NULL : gpc_nvml_hook_for_export(name);
        if (!cuda_hook && !nvml_hook)
            return NULL;
        kind = defined_in(gpc_real_dlsym_fn()(handle, name), &object);
        if (kind == H_OTHER && handle == RTLD_NEXT)
            kind = loaded_definer(cuda_hook ? H_CUDA : H_NVML, name, &object);
        if (kind == H_CUDA && cuda_hook)
            gpc_resolve_cuda(object);
        else if (kind == H_NVML && nvml_hook && object)
            gpc_nvml_set_handle(object);
        else
            return NULL;
        return cuda_hook ? cuda_hook : nvml_hook;
    }
    void *hook = kind == H_CUDA ? gpc_hook_for_export(name) : gpc_nvml_hook_for_export(name);
    if (!hook)
        return NULL;
    /* The library must have the symbol: our hook is no use without the real function behind it. */
    if (!gpc_real_dlsym_fn()(handle, name))
        return NULL;
    if (kind == H_CUDA)
        gpc_resolve_cuda(handle);
    else
        gpc_nvml_set_handle(handle);
    return hook;
}

/*
 * The real dlsym, dlvsym, dlopen and dlmopen (driver/resolve.c: the loader's, or the next
 * interposer's), for the trampolines: each tail-jumps to what its step returns (dlsym's and
 * dlvsym's after gpc_dlsym_redirect returned NULL).
 */
__attribute__((visibility("hidden"))) void *gpc_real_dlsym_ptr(void);
__attribute__((visibility("hidden"))) void *gpc_real_dlvsym_ptr(void);
__attribute__((visibility("hidden"))) void *gpc_real_dlopen_ptr(void);
__attribute__((visibility("hidden"))) void *gpc_real_dlmopen_ptr(void);
void *gpc_real_dlsym_ptr(void) { return (void *)gpc_real_dlsym_fn(); }
void *gpc_real_dlvsym_ptr(void) { return (void *)gpc_real_dlvsym_fn(); }
void *gpc_real_dlopen_ptr(void) { return (void *)gpc_real_dlopen_fn(); }
void *gpc_real_dlmopen_ptr(void) { return (void *)gpc_real_dlmopen_fn(); }

/* The flags dlopen/dlmopen pass on: without RTLD_DEEPBIND (see the top). Used by the trampolines. */
__attribute__((visibility("hidden"))) int gpc_dlopen_flags(const char *file, int flags);
int gpc_dlopen_flags(const char *file, int flags)
{
    if (!(flags & RTLD_DEEPBIND))
        return flags;
    gpc_log(GPC_LOG_INFO, "dlopen(%s): RTLD_DEEPBIND ignored (it would let the library call the driver "
                 "past gpucap)", file ? file : "NULL");
    return flags & ~RTLD_DEEPBIND;
}

typedef void *(*dlopen_fn)(const char *, int);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);

#if defined(__x86_64__)
/*
 * The pieces of the x86-64 trampolines. Each saves the three argument registers (rdi, rsi, rdx;
 * three pushes leave the stack 16-byte aligned for its calls), calls C, puts them back and
 * tail-jumps to the real function that C returned in %rax (to `none` when that is NULL), so that
 * the real function sees the caller's own return address.
 */
#define ASM_BEGIN(name) ".globl " name "\n.type " name ",@function\n" name ":\n.cfi_startproc\n"
#define ASM_SAVE_ARGS                         \
    "  pushq %rdi\n.cfi_adjust_cfa_offset 8\n" \
    "  pushq %rsi\n.cfi_adjust_cfa_offset 8\n" \
    "  pushq %rdx\n.cfi_adjust_cfa_offset 8\n"
#define ASM_RESTORE_ARGS_AND_JUMP(none)        \
    "  popq %rdx\n.cfi_adjust_cfa_offset -8\n" \
    "  popq %rsi\n.cfi_adjust_cfa_offset -8\n" \
    "  popq %rdi\n.cfi_adjust_cfa_offset -8\n" \
    "  testq %rax, %rax\n"                     \
    "  jz " none "\n"                          \
    "  jmp *%rax\n"
#define ASM_END(name) ".cfi_endproc\n.size " name ", .-" name "\n"

/*
 * dlopen(rdi=file, esi=flags) and dlmopen(rdi=lmid, rsi=file, edx=flags): `to_args` puts file and
 * flags where gpc_dlopen_flags takes them (rdi, esi), and the flags it returns replace the saved
 * flags register, `slot` on the stack; then the tail jump to `real`'s answer.
 */
#define DLOPEN_TRAMPOLINE(name, to_args, slot, real)                                       \
    ASM_BEGIN(name) ASM_SAVE_ARGS to_args                                                 \
    "  call gpc_dlopen_flags\n"                                                           \
    "  movl %eax, " slot "\n"                                                             \
    "  call " real "\n" ASM_RESTORE_ARGS_AND_JUMP("1f")                                   \
    "1:\n"                                                                                \
    "  ret\n" ASM_END(name)


/*
 * dlsym(rdi=handle, rsi=name) and dlvsym(rdi, rsi, rdx=version): gpc_dlsym_redirect's answer if it
 * has one; else the tail jump to `real`'s answer with the original arguments. Each is also our own
 * hidden gpc_own_<name>.
 */
#define DLSYM_TRAMPOLINE(name, real)                                                       \
    ASM_BEGIN(name) ASM_SAVE_ARGS                                                         \
    "  call gpc_dlsym_redirect\n"                                                         \
    "  testq %rax, %rax\n"                                                                \
    "  jnz 1f\n"                                                                          \
    "  call " real "\n" ASM_RESTORE_ARGS_AND_JUMP("2f")                                   \
    "1:\n"                                                                                \
    ".cfi_adjust_cfa_offset 24\n"                                                         \
    "  addq $24, %rsp\n"                                                                  \
    ".cfi_adjust_cfa_offset -24\n"                                                        \
    "2:\n"                                                                                \
    "  ret\n" ASM_END(name)                                                               \
    ".globl gpc_own_" name "\n.hidden gpc_own_" name "\n.set gpc_own_" name ", " name "\n"

__asm__(".text\n"
        DLOPEN_TRAMPOLINE("dlopen", "", "8(%rsp)", "gpc_real_dlopen_ptr")
        DLOPEN_TRAMPOLINE("dlmopen", "  movq %rsi, %rdi\n  movl %edx, %esi\n", "(%rsp)", "gpc_real_dlmopen_ptr")
        DLSYM_TRAMPOLINE("dlsym", "gpc_real_dlsym_ptr")
        DLSYM_TRAMPOLINE("dlvsym", "gpc_real_dlvsym_ptr"));
#else
GPC_EXPORT void *dlopen(const char *file, int flags)
{
    dlopen_fn real = (dlopen_fn)gpc_real_dlopen_ptr();
    return real ? real(file, gpc_dlopen_flags(file, flags)) : NULL;
}

GPC_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int flags)
{
    dlmopen_fn real = (dlmopen_fn)gpc_real_dlmopen_ptr();
    return real ? real(lmid, file, gpc_dlopen_flags(file, flags)) : NULL;
}

GPC_EXPORT void *dlsym(void *handle, const char *name)
{
    void *hook = gpc_dlsym_redirect(handle, name);
    if (hook)
        return hook;
    void *(*real)(void *, const char *) = gpc_real_dlsym_fn();
    return real ? real(handle, name) : NULL;
}

GPC_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
    void *hook = gpc_dlsym_redirect(handle, name);
    if (hook)
        return hook;
    void *(*real)(void *, const char *, const char *) = gpc_real_dlvsym_fn();
    return real ? real(handle, name, version) : NULL;
}

void *gpc_own_dlsym(void *handle, const char *name)
{
    return dlsym(handle, name);
}

void *gpc_own_dlvsym(void *handle, const char *name, const char *version)
{
    return dlvsym(handle, name, version);
}
#endif
