/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backtrace.c: the call stack of a denied allocation (GPUCAP_BACKTRACE=1).
 *
 * libunwind is not linked: a preloaded library must not load it into every process. It is opened
 * with the loader's dlopen (driver/resolve.c) at the first denial of a process that asked for
 * backtraces, and never otherwise. We call libunwind's exported names (the unw_* names of libunwind.h are macros over them) and give it
 * buffers at least as large as its unw_context_t (a ucontext_t on x86-64) and unw_cursor_t (127
 * words), as its header lays them out; no header is needed at build time.
 */
#include "charge/backtrace.h"

#include "common/log.h"
#include "common/options.h"
#include "core/state.h"
#include "driver/resolve.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#if defined(__x86_64__)
#define UNW_PREFIX_L "_ULx86_64_"
#define UNW_PREFIX_G "_Ux86_64_"
#define UNW_REG_IP 16 /* UNW_X86_64_RIP */
#elif defined(__aarch64__)
#define UNW_PREFIX_L "_ULaarch64_"
#define UNW_PREFIX_G "_Uaarch64_"
#define UNW_REG_IP 32 /* UNW_AARCH64_PC */
#endif

#define MAX_FRAMES 32

typedef uint64_t unw_word;
static struct {
    int (*getcontext)(void *ctx);
    int (*init_local)(void *cursor, void *ctx);
    int (*step)(void *cursor);
    int (*get_reg)(void *cursor, int reg, unw_word *val);
    int (*get_proc_name)(void *cursor, char *buf, size_t len, unw_word *off);
} unw;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool usable;

static void load(void)
{
#ifdef UNW_REG_IP
    /* The loader's own dlopen and dlsym (driver/resolve.c), not this library's hooks. */
    void *(*open_fn)(const char *, int) = gpc_real_dlopen_fn();
    void *h = open_fn ? open_fn("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h && open_fn)
        h = open_fn("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    void *(*sym)(void *, const char *) = gpc_real_dlsym_fn();
    if (h && sym) {
        unw.getcontext = (int (*)(void *))sym(h, UNW_PREFIX_G "getcontext");
        unw.init_local = (int (*)(void *, void *))sym(h, UNW_PREFIX_L "init_local");
        unw.step = (int (*)(void *))sym(h, UNW_PREFIX_L "step");
        unw.get_reg = (int (*)(void *, int, unw_word *))sym(h, UNW_PREFIX_L "get_reg");
        unw.get_proc_name = (int (*)(void *, char *, size_t, unw_word *))sym(h, UNW_PREFIX_L "get_proc_name");
        usable = unw.getcontext && unw.init_local && unw.step && unw.get_reg && unw.get_proc_name;
    }
#endif
    if (!usable)
        gpc_log_line(GPC_LOG_WARN, "GPUCAP_BACKTRACE: libunwind (libunwind.so.8) cannot be loaded; install it "
                     "(apt-get install libunwind8) for call stacks of denials");
}

__attribute__((noinline)) void gpc_backtrace_log(void)
{
    if (!gpc_opt_bool(&gpc_config, GPC_OPT_BACKTRACE))
        return;
    pthread_once(&once, load);
    if (!usable)
        return;
    union {
        ucontext_t uc;
        char pad[2048];
    } ctx;
    unw_word cursor[256];
    if (unw.getcontext(&ctx) != 0 || unw.init_local(cursor, &ctx) != 0)
        return;
    gpc_log_line(GPC_LOG_INFO, "call stack of the denied allocation:");
    /* Frame #0 is the hook's caller side inside gpucap; the user's code follows. */
    for (int n = 0; n < MAX_FRAMES && unw.step(cursor) > 0; n++) {
        unw_word ip = 0, off = 0;
        char name[256];
        unw.get_reg(cursor, UNW_REG_IP, &ip);
        if (unw.get_proc_name(cursor, name, sizeof name, &off) == 0) {
            gpc_log_line(GPC_LOG_INFO, "  #%d %s+0x%llx", n, name, (unsigned long long)off);
        } else {
            Dl_info info;
            if (dladdr((void *)(uintptr_t)ip, &info) && info.dli_fname)
                gpc_log_line(GPC_LOG_INFO, "  #%d 0x%llx in %s", n, (unsigned long long)ip, info.dli_fname);
            else
                gpc_log_line(GPC_LOG_INFO, "  #%d 0x%llx", n, (unsigned long long)ip);
        }
    }
}
