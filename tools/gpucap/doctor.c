/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor.c: `gpucap doctor`: the checks to run on a node or in a pod before trusting a cap. Each is
 * one line, PASS, WARN, FAIL or INFO, with what to do next when it is not a pass. Nothing here
 * links the driver: libcuda.so.1, libnvidia-ml.so.1 and libgpucap.so are opened with dlopen, so
 * the command runs (and says so) where they are missing. The test suite's fake driver is named as
 * such. Exit 0 when nothing failed, 1 otherwise.
 */
#include "cli.h"
#include "common/drvlimit.h"
#include "gpucap_version.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { F_LIB, F_ROOT, F_JSON, F_COUNT };
static const struct tool_flag doctor_flags[F_COUNT] = {
    [F_LIB] = {"lib", 0, "FILE", "GPUCAP_LIB", NULL, "the libgpucap.so to check (default: found beside gpucap)"},
    [F_ROOT] = {"root", 0, "DIR", NULL, "/",
                "read /proc/driver, /proc/self/cgroup, /sys/fs/cgroup and /usr/bin under DIR (a node's\n"
                "tree mounted elsewhere; the tests)"},
    [F_JSON] = {"json", 'j', NULL, NULL, NULL, "the checks as one JSON object on stdout"},
};

const struct tool_cmd cli_doctor_cmd = {
    CLI_COMMAND("doctor", doctor_flags, "[--json] [--lib FILE] [--root DIR]",
                "check a node or pod before trusting a gpucap cap"),
    .about = "Checks this node or pod: NVIDIA device nodes, the driver and NVML and their versions, the\n"
             "cards (memory, MIG), whether libgpucap.so is preloaded here with a limit set, and whether the\n"
             "library exports every hook. Then the driver's own per-container memory limits: whether this\n"
             "node and container can have them (driver r615+, cgroup v2 and its dmem controller, the\n"
             "container toolkit's variables) and whether one is in force.",
    .tail = "Exit 0 when no check failed, 1 otherwise, 2 for a usage error.\n\n" CLI_SETTINGS_NOTE,
};

static int failures, shown;
static bool json;

static void line(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *tag, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (json) {
        printf("%s{\"result\":\"%s\",\"message\":", shown ? "," : "", tag);
        tool_json_string(stdout, text);
        printf("}");
    } else {
        printf("%-4s  %s\n", tag, text);
    }
    shown++;
    if (strcmp(tag, "FAIL") == 0)
        failures++;
}

static void check_nodes(void)
{
    DIR *d = opendir("/dev");
    int cards = 0;
    bool ctl = access("/dev/nvidiactl", F_OK) == 0, uvm = access("/dev/nvidia-uvm", F_OK) == 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "nvidia", 6) == 0 && e->d_name[6] >= '0' && e->d_name[6] <= '9')
            cards++;
    if (d)
        closedir(d);
    if (cards && ctl)
        line("PASS", "device nodes: /dev/nvidiactl and %d /dev/nvidia<N>%s", cards,
             uvm ? ", /dev/nvidia-uvm" : "");
    else
        line("FAIL", "device nodes: no /dev/nvidia%s; run on a GPU node, and in a pod request nvidia.com/gpu "
             "so that the device plugin mounts them", ctl ? "<N>" : "ctl");
    if (cards && ctl && !uvm)
        line("WARN", "device nodes: no /dev/nvidia-uvm; CUDA loads nvidia-uvm on first use (as root), or "
             "run nvidia-modprobe -u -c=0 on the node");
}

/* dlopen(name) with `mode` (and RTLD_LOCAL); NULL after a FAIL line "WHAT: NAME cannot be loaded
 * (why)ADVICE". */
static void *load(const char *what, const char *name, int mode, const char *advice)
{
    void *h = dlopen(name, mode | RTLD_LOCAL);
    if (!h)
        line("FAIL", "%s: %s cannot be loaded (%s)%s", what, name, dlerror(), advice);
    return h;
}

typedef int CUres;
static bool is_fake;
static int cuda_version;        /* cuDriverGetVersion, 0: unknown */
static char nvml_driver[96];    /* nvmlSystemGetDriverVersion, "" unknown */

static void check_driver(void)
{
    void *h = load("driver", "libcuda.so.1", RTLD_NOW, "; install the NVIDIA driver, or in a container use the "
                   "NVIDIA container toolkit so that it is mounted");
    if (!h)
        return;
    is_fake = dlsym(h, "fakecuda_outstanding") != NULL;
    CUres (*init)(unsigned) = (CUres(*)(unsigned))dlsym(h, "cuInit");
    CUres (*version)(int *) = (CUres(*)(int *))dlsym(h, "cuDriverGetVersion");
    CUres (*count)(int *) = (CUres(*)(int *))dlsym(h, "cuDeviceGetCount");
    int v = 0, n = 0;
    CUres rc = init ? init(0) : -1;
    if (version)
        version(&v);
    cuda_version = v;
    if (rc != 0) {
        line("FAIL", "driver: libcuda.so.1 (CUDA %d.%d) loaded, but cuInit failed with error %d; check "
             "`nvidia-smi`, the device nodes and the driver's kernel module", v / 1000, v % 1000 / 10, rc);
        return;
    }
    if (count)
        count(&n);
    line("PASS", "driver: libcuda.so.1 loaded, CUDA %d.%d, %d device%s%s", v / 1000, v % 1000 / 10, n,
         n == 1 ? "" : "s", "");
    if (is_fake)
        line("INFO", "driver: this libcuda.so.1 is gpucap's FAKE driver (the test suite's), not a GPU");
}

typedef int nvret;
typedef void *nvdev;
/* The nvmlReturn_t codes told apart here (nvml.h is not needed to build gpucap). */
enum { NV_ERROR_NOT_SUPPORTED = 3, NV_ERROR_FUNCTION_NOT_FOUND = 13 };

/*
 * The card's size where NVML's figure is gpucap's (this command runs under the preloaded library,
 * which answers NVML's memory queries with the budget): what this container's ledger recorded of
 * the card by its UUID, or 0 when it has none.
 */
static uint64_t ledger_physical(const char *uuid)
{
    extern char **environ;
    struct gpc_settings s, platform;
    char path[512], why[256];
    cli_settings_quiet(&s, &platform, environ);
    gpc_ledger_path(&s, path, sizeof path);
    if (strcmp(path, "off") == 0)
        return 0;
    struct gpc_ledger *l = cli_read_ledger(path, why, sizeof why, NULL, NULL);
    uint64_t physical = 0;
    for (int i = 0; l && i < GPC_LEDGER_DEVICES && !physical; i++) {
        char u[GPC_UUID_TEXT];
        if (atomic_load(&l->dev[i].slot.limit) || l->dev[i].physical)
            if (strcmp(gpc_uuid_format(l->dev[i].uuid, u), uuid) == 0)
                physical = l->dev[i].physical;
    }
    free(l);
    return physical;
}

static void check_nvml(void)
{
    void *h = load("NVML", "libnvidia-ml.so.1", RTLD_NOW, "; it comes with the driver: install or mount it with "
                   "libcuda.so.1");
    if (!h)
        return;
#define SYM(type, name) __typeof__(type) name = (__typeof__(type))dlsym(h, #name)
    SYM(nvret(*)(void), nvmlInit_v2);
    SYM(nvret(*)(char *, unsigned), nvmlSystemGetDriverVersion);
    SYM(nvret(*)(char *, unsigned), nvmlSystemGetNVMLVersion);
    SYM(nvret(*)(unsigned *), nvmlDeviceGetCount_v2);
    SYM(nvret(*)(unsigned, nvdev *), nvmlDeviceGetHandleByIndex_v2);
    SYM(nvret(*)(nvdev, char *, unsigned), nvmlDeviceGetName);
    SYM(nvret(*)(nvdev, char *, unsigned), nvmlDeviceGetUUID);
    SYM(nvret(*)(nvdev, unsigned long long *), nvmlDeviceGetMemoryInfo);
    SYM(nvret(*)(nvdev, unsigned *, unsigned *), nvmlDeviceGetMigMode);
    SYM(const char *(*)(nvret), nvmlErrorString);
#undef SYM
    nvret rc = nvmlInit_v2 ? nvmlInit_v2() : NV_ERROR_FUNCTION_NOT_FOUND;
    if (rc != 0) {
        line("FAIL", "NVML: nvmlInit failed (%s); the driver is not loaded or does not match NVML",
             nvmlErrorString ? nvmlErrorString(rc) : "missing entry point");
        return;
    }
    char drv[96] = "?", nv[96] = "?";
    if (nvmlSystemGetDriverVersion && nvmlSystemGetDriverVersion(drv, sizeof drv) == 0)
        snprintf(nvml_driver, sizeof nvml_driver, "%s", drv);
    if (nvmlSystemGetNVMLVersion)
        nvmlSystemGetNVMLVersion(nv, sizeof nv);
    unsigned n = 0;
    if (nvmlDeviceGetCount_v2)
        nvmlDeviceGetCount_v2(&n);
    line("PASS", "NVML: driver %s, NVML %s, %u device%s", drv, nv, n, n == 1 ? "" : "s");
    if (strstr(drv, "fake") || dlsym(h, "fakecuda_outstanding"))
        line("INFO", "NVML: this libnvidia-ml.so.1 is gpucap's FAKE NVML (the test suite's), not a GPU");
    for (unsigned i = 0; i < n && nvmlDeviceGetHandleByIndex_v2; i++) {
        nvdev d;
        if (nvmlDeviceGetHandleByIndex_v2(i, &d) != 0)
            continue;
        char name[96] = "?", uuid[96] = "?", a[GPC_SIZE_TEXT];
        unsigned long long mem[3] = {0, 0, 0}; /* nvmlMemory_t: total, free, used */
        if (nvmlDeviceGetName)
            nvmlDeviceGetName(d, name, sizeof name);
        if (nvmlDeviceGetUUID)
            nvmlDeviceGetUUID(d, uuid, sizeof uuid);
        if (nvmlDeviceGetMemoryInfo)
            nvmlDeviceGetMemoryInfo(d, mem);
        unsigned cur = 0, pending = 0;
        nvret mig = nvmlDeviceGetMigMode ? nvmlDeviceGetMigMode(d, &cur, &pending) : NV_ERROR_NOT_SUPPORTED;
        const char *migs = mig == NV_ERROR_NOT_SUPPORTED ? "MIG not supported" : mig != 0 ? "MIG mode unknown"
                           : cur ? "MIG enabled: gpucap caps the MIG instance the process sees"
                           : pending ? "MIG enabled after the next GPU reset" : "MIG supported, disabled";
        /* Under the library NVML's total is gpucap's budget, not the card's size. */
        if (dlsym(RTLD_DEFAULT, "gpucap_version")) {
            char b[GPC_SIZE_TEXT];
            uint64_t physical = ledger_physical(uuid);
            if (physical)
                line("INFO", "card %u: %s %s, %s memory (the ledger's figure; gpucap answers this process its "
                     "budget, %s), %s", i, name, uuid, gpc_format_size(physical, a, sizeof a),
                     gpc_format_size(mem[0], b, sizeof b), migs);
            else
                line("INFO", "card %u: %s %s, %s memory as gpucap answers this process (its budget: the card's size "
                     "is not visible under the library until a CUDA process wrote the ledger), %s", i, name, uuid,
                     gpc_format_size(mem[0], a, sizeof a), migs);
            continue;
        }
        line("INFO", "card %u: %s %s, %s memory, %s", i, name, uuid, gpc_format_size(mem[0], a, sizeof a), migs);
    }
}

static void check_preload(void)
{
    const char *pre = getenv("LD_PRELOAD");
    bool preloaded = pre && strstr(pre, "libgpucap");
    if (!preloaded) {
        FILE *f = fopen("/etc/ld.so.preload", "re");
        char buf[1024];
        while (f && fgets(buf, sizeof buf, f))
            if (strstr(buf, "libgpucap"))
                preloaded = true;
        if (f)
            fclose(f);
    }
    if (preloaded)
        line("PASS", "preload: libgpucap is preloaded in this environment");
    else
        line("FAIL", "preload: libgpucap is not in LD_PRELOAD nor in /etc/ld.so.preload; set "
             "LD_PRELOAD=/path/to/libgpucap.so (or use `gpucap run`), or install the admission webhook");

    extern char **environ;
    struct gpc_settings s, platform;
    cli_settings_quiet(&s, &platform, environ);
    if (s.errors)
        line("FAIL", "settings: %d error%s; run `gpucap check` to see them", s.errors, s.errors == 1 ? "" : "s");
    else if (!gpc_settings_any_limit(&s) && gpc_drv_declared(environ, NULL))
        line("PASS", "limit: no limit of gpucap's own; the one declared for the driver (%s) is gpucap's budget",
             GPC_DRV_ENV_LIMIT);
    else if (!gpc_settings_any_limit(&s))
        line("FAIL", "limit: no memory limit is set; set GPUCAP_MEMORY_LIMIT or memory_limit in %s", s.config_path);
    else
        line("PASS", "limit: a memory limit is set (`gpucap check` shows it per device)");
}

/* The driver's total in a context on each device against the card's: whether the driver's own
 * limit is in force there (drvlimit.h). Retains and releases each primary context. Returns how
 * many devices have it in force, -1 when the driver cannot be asked. */
static int driver_view(uint64_t declared)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
#define SYM(type, name) __typeof__(type) name = (__typeof__(type))dlsym(h, #name)
    SYM(CUres(*)(int *), cuDeviceGetCount);
    SYM(CUres(*)(void **, int), cuDevicePrimaryCtxRetain);
    SYM(CUres(*)(int), cuDevicePrimaryCtxRelease_v2);
    SYM(CUres(*)(void *), cuCtxSetCurrent);
    SYM(CUres(*)(size_t *, size_t *), cuMemGetInfo_v2);
    SYM(CUres(*)(size_t *, int), cuDeviceTotalMem_v2);
#undef SYM
    int n = 0, in_force = 0;
    if (!cuDeviceGetCount || !cuDevicePrimaryCtxRetain || !cuDevicePrimaryCtxRelease_v2 || !cuCtxSetCurrent ||
        !cuMemGetInfo_v2 || !cuDeviceTotalMem_v2 || cuDeviceGetCount(&n) != 0)
        return -1;
    for (int dev = 0; dev < n; dev++) {
        void *ctx = NULL;
        size_t card = 0, f = 0, total = 0;
        if (cuDeviceTotalMem_v2(&card, dev) != 0 || cuDevicePrimaryCtxRetain(&ctx, dev) != 0)
            continue;
        CUres rc = cuCtxSetCurrent(ctx) == 0 ? cuMemGetInfo_v2(&f, &total) : -1;
        cuCtxSetCurrent(NULL);
        cuDevicePrimaryCtxRelease_v2(dev);
        if (rc != 0)
            continue;
        char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
        if (gpc_drv_in_force(card, total, declared)) {
            in_force++;
            line("PASS", "driver limit: in force on device %d: the driver reports %s of the card's %s; gpucap's "
                 "budget there is at most that (enforced by: driver + gpucap)", dev,
                 gpc_format_size(total, a, sizeof a), gpc_format_size(card, b, sizeof b));
        }
    }
    return in_force;
}

static void check_driver_limits(const char *root)
{
    /* The driver: r615 (CUDA 13.4) and newer have per-container memory limits. */
    char ver[96] = "";
    int branch = gpc_driver_branch(root, ver, sizeof ver);
    if (branch < 0 && nvml_driver[0]) {
        snprintf(ver, sizeof ver, "%s", nvml_driver);
        branch = nvml_driver[0] >= '0' && nvml_driver[0] <= '9' ? atoi(nvml_driver) : -1;
    }
    if (branch < 0)
        line("INFO", "driver limits: the driver's version is unknown (no /proc/driver/nvidia/version, no NVML)");
    else if (branch >= 615)
        line("PASS", "driver limits: driver %s (r%d) can enforce per-container memory limits (r615 and newer, "
             "CUDA 13.4, not MIG)", ver, branch);
    else
        line("INFO", "driver limits: driver %s is older than r615: the driver has no per-container memory limit; "
             "gpucap alone enforces", ver);
    if (cuda_version && cuda_version < 13040)
        line("INFO", "driver limits: the driver's CUDA is %d.%d; its per-container limits come with CUDA 13.4",
             cuda_version / 1000, cuda_version % 1000 / 10);

    /* cgroup v2 and its controllers; dmem (kernel 6.14+) makes the hard limit the cgroup's dmem.max. */
    struct gpc_cgroup_facts cg;
    if (gpc_cgroup_read(root, &cg) != 0) {
        line("INFO", "driver limits: no cgroup v2 here (no /sys/fs/cgroup/cgroup.controllers): the driver's "
             "limits need cgroup v2; gpucap alone enforces");
    } else {
        line("PASS", "cgroup: v2, controllers: %s", cg.controllers[0] ? cg.controllers : "(none)");
        if (cg.dmem)
            line("PASS", "cgroup: the dmem controller is enabled: the kernel holds the driver's hard limit as "
                 "dmem.max of the container's cgroup");
        else
            line("INFO", "cgroup: no dmem controller here (kernel before 6.14, or not enabled for this cgroup): "
                 "the driver falls back to a backend of its own");
    }

    /* The container toolkit's hook reads these two variables (whole MiB) and applies them. */
    extern char **environ;
    const char *why = NULL;
    uint64_t declared = gpc_drv_declared(environ, &why);
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT];
    if (declared)
        line("INFO", "toolkit: %s=%s and %s=%s declared for the container toolkit's apply-cuda-memory-limits "
             "hook (%s)", GPC_DRV_ENV_LIMIT, getenv(GPC_DRV_ENV_LIMIT), GPC_DRV_ENV_REQUEST,
             getenv(GPC_DRV_ENV_REQUEST), gpc_format_size(declared, a, sizeof a));
    else if (why)
        line("WARN", "toolkit: %s", why);
    else
        line("INFO", "toolkit: %s and %s are not set here: no driver limit was asked for this container",
             GPC_DRV_ENV_LIMIT, GPC_DRV_ENV_REQUEST);
    char hook[1024];
    snprintf(hook, sizeof hook, "%s/usr/bin/nvidia-cdi-hook", strcmp(root, "/") == 0 ? "" : root);
    if (access(hook, X_OK) == 0)
        line("INFO", "toolkit: %s is present (the node's view): limits need a toolkit whose CDI hook has "
             "apply-cuda-memory-limits, with CDI injection", hook);
    else
        line("INFO", "toolkit: no nvidia-cdi-hook visible (inside a container the toolkit's hook runs on the node "
             "and is not visible)");

    /* In force: the kernel's figure (dmem.max of this cgroup), then the driver's own answer. */
    int kernel = 0;
    for (int i = 0; i < cg.nregions; i++) {
        const struct gpc_dmem_region *r = &cg.region[i];
        if (strncmp(r->name, "nvidia", 6) != 0 || r->max == UINT64_MAX)
            continue;
        kernel++;
        line("PASS", "driver limit: in force in this cgroup (%s): dmem.max %s = %s, in use %s", cg.path, r->name,
             gpc_format_size(r->max, a, sizeof a), gpc_format_size(r->current, b, sizeof b));
    }
    int seen = driver_view(declared);
    if (kernel || seen > 0)
        return;
    if (declared)
        line("WARN", "driver limit: declared (%s) but not in force: the driver reports the whole card; the toolkit's "
             "hook did not apply it (an older toolkit, no CDI, cgroup v1) or the driver is older than r615. "
             "gpucap caps at it alone (enforced by: gpucap)", gpc_format_size(declared, a, sizeof a));
    else
        line("INFO", "driver limit: none in force here; gpucap alone enforces");
}

static void check_exports(const char *lib_opt)
{
    char lib[PATH_MAX], tried[2048];
    if (cli_find_lib(lib_opt, lib, sizeof lib, tried, sizeof tried) != 0) {
        line("FAIL", "library: libgpucap.so not found (looked at %s); pass --lib PATH or set GPUCAP_LIB", tried);
        return;
    }
    /* Loading it does nothing by itself: the library starts at the first CUDA call. */
    void *h = load("library", lib, RTLD_LAZY, "");
    if (!h)
        return;
    static const char *const hooks[] = {
#define NAME(exp, base, ver, pt, pfn) #exp,
        GPC_HOOKS(NAME)
#undef NAME
    };
    int missing = 0;
    char names[1024] = "";
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        void *p = dlsym(h, hooks[i]);
        Dl_info info;
        char real[PATH_MAX];
        /* Found, and in the library itself (not in something it loaded). */
        if (p && dladdr(p, &info) && info.dli_fname && realpath(info.dli_fname, real) && strcmp(real, lib) == 0)
            continue;
        missing++;
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", hooks[i]);
    }
    if (missing)
        line("FAIL", "library: %s does not export %d hook%s: %s; rebuild or reinstall gpucap", lib, missing,
             missing == 1 ? "" : "s", names);
    else
        line("PASS", "library: %s exports all %zu hooks", lib, sizeof hooks / sizeof hooks[0]);
    /* A library and a command from different releases (an image's CLI beside a node's library). */
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "gpucap_version");
    if (!version)
        line("FAIL", "version: %s has no gpucap_version(): not a gpucap library", lib);
    else if (strcmp(version(), GPUCAP_VERSION_STRING) != 0)
        line("FAIL", "version: %s is gpucap %s, this command is gpucap %s; use the library and the command of "
             "one release", lib, version(), GPUCAP_VERSION_STRING);
    else
        line("PASS", "version: the library and this command are gpucap %s", GPUCAP_VERSION_STRING);
}

int cmd_doctor(int argc, char **argv)
{
    const char *given[F_COUNT] = {[F_ROOT] = "/"};
    int first, rc = tool_begin_values(&cli_doctor_cmd, argc, argv, given, &first);
    if (rc >= 0)
        return rc;
    json = given[F_JSON] != NULL;
    if (json)
        printf("{\"checks\":[");
    check_nodes();
    check_driver();
    check_nvml();
    check_preload();
    check_exports(given[F_LIB]);
    check_driver_limits(given[F_ROOT]);
    if (json)
        printf("],\"failures\":%d,\"ok\":%s}\n", failures, failures ? "false" : "true");
    else if (failures)
        printf("%d check%s failed\n", failures, failures == 1 ? "" : "s");
    else
        printf("all checks passed\n");
    return failures ? 1 : 0;
}
