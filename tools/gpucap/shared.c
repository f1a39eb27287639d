/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shared.c: what the subcommands of `gpucap` share: finding libgpucap.so, reading the settings
 * quietly, reading a ledger as a hostile file, naming a card by its UUID (NVML), and the small
 * wording helpers (counts, ages). No subcommand calls into main.c.
 */
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the library ---- */

static bool usable_file(const char *path)
{
    return path && *path && access(path, R_OK) == 0;
}

/*
 * `path` with "//", "/./" and "dir/.." taken out as text (no file system look-up), so that one
 * place reached by two spellings (beside the command, and the install path) is tried once.
 */
static void normalise(const char *path, char *out, size_t len)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    const char *part[PATH_MAX / 2];
    int n = 0;
    bool absolute = buf[0] == '/';
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0)
            continue;
        if (strcmp(t, "..") == 0 && n > 0 && strcmp(part[n - 1], "..") != 0) {
            n--;
            continue;
        }
        if (strcmp(t, "..") == 0 && absolute)
            continue;
        part[n++] = t;
    }
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%s", i || absolute ? "/" : "", part[i]);
    if (n == 0)
        snprintf(out, len, "%s", absolute ? "/" : ".");
}

/* Adds `path` to the list of places looked at; false when it was there already. */
static bool add_tried(char *tried, size_t len, const char *path)
{
    char norm[PATH_MAX];
    normalise(path, norm, sizeof norm);
    size_t k = strlen(norm);
    for (const char *p = tried; (p = strstr(p, norm)); p += k)
        if ((p == tried || p[-1] == ' ') && (p[k] == ',' || p[k] == '\0'))
            return false;
    size_t n = strlen(tried);
    snprintf(tried + n, len - n, "%s%s", n ? ", " : "", norm);
    return true;
}

int cli_find_lib(const char *given, char *buf, size_t len, char *tried, size_t tried_len)
{
    tried[0] = '\0';
    extern char **environ;
    struct gpc_settings s, platform;
    cli_settings_quiet(&s, &platform, environ);
    const char *env = gpc_opt_string(&s, GPC_OPT_LIB);
    const char *first[] = {given, env && *env ? env : NULL};
    for (int i = 0; i < 2; i++) {
        if (!first[i])
            continue;
        /* An explicit choice is final: a typo must not silently pick another library. */
        if (!usable_file(first[i]) || !realpath(first[i], buf)) {
            snprintf(tried, tried_len, "%s", first[i]);
            return -ENOENT;
        }
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char cand[PATH_MAX + 64];
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        /* build tree: build/tools/gpucap/gpucap and build/lib/; installed: PREFIX/bin and
         * PREFIX/lib/<multiarch>/gpucap (GPUCAP_LIB_FROM_BIN), or an image's /usr/local/gpucap/{bin,lib}. */
        const char *rel[] = {"../../lib/libgpucap.so", GPUCAP_LIB_FROM_BIN, "../lib/gpucap/libgpucap.so",
                             "../lib/libgpucap.so"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(cand, sizeof cand, "%s/%s", self, rel[i]);
            if (add_tried(tried, tried_len, cand) && usable_file(cand) && realpath(cand, buf))
                return 0;
        }
    }
    const char *fixed[] = {GPUCAP_LIB_INSTALLED, "/usr/local/lib/gpucap/libgpucap.so", "/usr/lib/gpucap/libgpucap.so"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (add_tried(tried, tried_len, fixed[i]) && usable_file(fixed[i]) && realpath(fixed[i], buf))
            return 0;
    (void)len;
    return -ENOENT;
}

/* ---- settings ---- */

static void discard(enum gpc_log_level level, const char *line, void *arg)
{
    (void)level, (void)line, (void)arg;
}

void cli_settings_quiet(struct gpc_settings *s, struct gpc_settings *platform, char *const *envp)
{
    int threshold = gpc_log_threshold;
    gpc_settings_load_to(s, platform, envp, discard, NULL);
    gpc_log_threshold = threshold;
}

/* ---- ledgers ---- */

struct gpc_ledger *cli_read_ledger(const char *path, char *why, size_t len, uint64_t *age_ns, int *keep_fd)
{
    if (keep_fd)
        *keep_fd = -1;
    /* O_NONBLOCK: a FIFO does not wait for a writer; O_NOCTTY: a terminal does not become ours. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0) {
        /* ENXIO: a socket, or a device node without its device. */
        snprintf(why, len, errno == ELOOP    ? "is a symbolic link: refused"
                           : errno == ENXIO ? "is not a regular file"
                                            : "cannot be opened (%s)",
                 strerror(errno));
        return NULL;
    }
    struct stat st;
    struct gpc_ledger *l = calloc(1, sizeof *l);
    struct gpc_ledger_problem problem;
    if (!l) {
        snprintf(why, len, "cannot be read (out of memory)");
    } else if (gpc_ledger_copy(fd, l, &problem) != GPC_LEDGER_USABLE) {
        snprintf(why, len, "%s", problem.text);
        free(l);
        l = NULL;
    } else if (fstat(fd, &st) != 0) {
        st.st_mtim = (struct timespec){0, 0};
    }
    if (l && age_ns) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t d = (int64_t)(now.tv_sec - st.st_mtim.tv_sec) * 1000000000 + (now.tv_nsec - st.st_mtim.tv_nsec);
        *age_ns = d > 0 ? (uint64_t)d : 0;
    }
    if (l && keep_fd)
        *keep_fd = fd; /* the caller asks through it whose entries are held */
    else
        close(fd);
    return l;
}

/* ---- device names (NVML, loaded once) ---- */

typedef int nvret;
typedef void *nvdev;
#define NAMED_MAX 64
static struct named {
    char uuid[96], name[96];
} named[NAMED_MAX];
static int n_named = -1;

static void load_names(void)
{
    n_named = 0;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define SYM(type, name) __typeof__(type) name = (__typeof__(type))dlsym(h, #name)
    SYM(nvret(*)(void), nvmlInit_v2);
    SYM(nvret(*)(unsigned *), nvmlDeviceGetCount_v2);
    SYM(nvret(*)(unsigned, nvdev *), nvmlDeviceGetHandleByIndex_v2);
    SYM(nvret(*)(nvdev, char *, unsigned), nvmlDeviceGetName);
    SYM(nvret(*)(nvdev, char *, unsigned), nvmlDeviceGetUUID);
#undef SYM
    unsigned n = 0;
    if (!nvmlInit_v2 || nvmlInit_v2() != 0 || !nvmlDeviceGetCount_v2 || nvmlDeviceGetCount_v2(&n) != 0 ||
        !nvmlDeviceGetHandleByIndex_v2 || !nvmlDeviceGetUUID)
        return;
    for (unsigned i = 0; i < n && i < NAMED_MAX; i++) {
        nvdev d;
        struct named *e = &named[i];
        if (nvmlDeviceGetHandleByIndex_v2(i, &d) != 0 || nvmlDeviceGetUUID(d, e->uuid, sizeof e->uuid) != 0)
            e->uuid[0] = '\0';
        if (!nvmlDeviceGetName || nvmlDeviceGetName(d, e->name, sizeof e->name) != 0)
            e->name[0] = '\0';
        n_named = (int)i + 1;
    }
}

int cli_device_name(const char *uuid, int *index, char *name, size_t len)
{
    if (n_named < 0)
        load_names();
    *index = -1;
    name[0] = '\0';
    for (int i = 0; i < n_named; i++) {
        if (named[i].uuid[0] && strcasecmp(named[i].uuid, uuid) == 0) {
            *index = i;
            /* The driver's text, reduced to printable ASCII. */
            size_t k = 0;
            for (const char *p = named[i].name; *p && k + 1 < len; p++)
                name[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
            name[k] = '\0';
            return 0;
        }
    }
    return -ENOENT;
}

int cli_device_uuid(int index, char *uuid, size_t len)
{
    if (n_named < 0)
        load_names();
    if (index < 0 || index >= n_named || !named[index].uuid[0])
        return -ENOENT;
    snprintf(uuid, len, "%s", named[index].uuid);
    return 0;
}

int cli_devices_matching(const char *prefix)
{
    if (n_named < 0)
        load_names();
    int listed = 0, n = 0;
    for (int i = 0; i < n_named; i++) {
        if (!named[i].uuid[0])
            continue;
        listed++;
        if (strncasecmp(named[i].uuid, prefix, strlen(prefix)) == 0)
            n++;
    }
    return listed ? n : -1;
}

/* ---- wording ---- */

const char *cli_count(unsigned long long n, const char *one, const char *many, char *buf, size_t len)
{
    snprintf(buf, len, "%llu %s", n, n == 1 ? one : many);
    return buf;
}

const char *cli_age(uint64_t ns, char *buf, size_t len)
{
    uint64_t s = ns / 1000000000u;
    if (s < 120)
        snprintf(buf, len, "%llu s", (unsigned long long)s);
    else if (s < 7200)
        snprintf(buf, len, "%llu min", (unsigned long long)(s / 60));
    else if (s < 2 * 86400)
        snprintf(buf, len, "%llu h", (unsigned long long)(s / 3600));
    else
        snprintf(buf, len, "%llu d", (unsigned long long)(s / 86400));
    return buf;
}

static int ledger_of_pid(long pid, char *out, size_t len, int depth)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(buf + i) + 1) {
        buf[n] = '\0';
        if (strncmp(buf + i, "GPUCAP_LEDGER=", 14) == 0) {
            snprintf(out, len, "%s", buf + i + 14);
            return 0;
        }
    }
    /* `gpucap run` names the ledger in its command's environment, not in its own. */
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = depth < 2 ? fopen(path, "re") : NULL;
    long child;
    int rc = -ENOENT;
    while (f && rc != 0 && fscanf(f, "%ld", &child) == 1)
        rc = ledger_of_pid(child, out, len, depth + 1);
    if (f)
        fclose(f);
    return rc;
}

int cli_ledger_of_pid(long pid, char *out, size_t len)
{
    return ledger_of_pid(pid, out, len, 0);
}
