/* SPDX-License-Identifier: Apache-2.0 */
/*
 * drvlimit.c: the NVIDIA driver's own per-container memory limit (drvlimit.h): the platform's
 * declaration, the rule that says it is in force, the words the tools print, and the node's facts
 * that `gpucap doctor` reads (cgroup v2 and its dmem files, the driver's version). Nothing here is
 * on an allocation path.
 */
#include "common/drvlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* A whole number of MiB as the hook parses it (decimal digits only), in bytes; false if not. */
static bool mib(const char *s, uint64_t *bytes)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX / 10 - 9) >> 20)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *bytes = v << 20;
    return true;
}

uint64_t gpc_drv_declared(char *const *envp, const char **why)
{
    const char *req = env_get(envp, GPC_DRV_ENV_REQUEST), *lim = env_get(envp, GPC_DRV_ENV_LIMIT);
    uint64_t r = 0, l = 0;
    const char *w = NULL;
    if (!req && !lim)
        w = NULL;
    else if (!req || !lim)
        w = "only one of " GPC_DRV_ENV_REQUEST " and " GPC_DRV_ENV_LIMIT " is set: the toolkit's hook applies none";
    else if (!mib(req, &r) || !mib(lim, &l))
        w = "not whole numbers of MiB: the toolkit's hook refuses them";
    else if (r > l)
        w = "the request is above the limit: the toolkit's hook refuses them";
    else if (l == 0)
        w = "a limit of 0";
    if (why)
        *why = w;
    return w || (!req && !lim) ? 0 : l;
}

bool gpc_drv_in_force(uint64_t card, uint64_t reported, uint64_t declared)
{
    /* Only the driver's own report below the card shows its limit. A report that equals what the
     * environment declares is no evidence: the environment is the container's, and a declared
     * NVIDIA_GPU_MEMORY_LIMIT equal to the card's size would be reported as the card's size by a
     * driver that limits nothing. A driver that reported its limit as the card's size too cannot be
     * told from none: gpucap then says it enforces alone (the safe word; the budget is capped at
     * the declaration all the same, device.c). */
    (void)declared;
    return reported && card && reported < card;
}

uint64_t gpc_drv_recorded(uint64_t driver_limit, uint64_t card)
{
    return card && driver_limit >= card ? 0 : driver_limit;
}

const char *gpc_enforced_by(uint64_t driver_limit)
{
    return driver_limit ? "driver + gpucap" : "gpucap";
}

/* Reads root/rel into buf (NUL-terminated); the length, or -1. */
static ssize_t read_text(const char *root, const char *rel, char *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s", strcmp(root, "/") == 0 ? "" : root, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static struct gpc_dmem_region *region(struct gpc_cgroup_facts *f, const char *name, size_t n)
{
    if (n >= sizeof f->region[0].name)
        return NULL;
    for (int i = 0; i < f->nregions; i++)
        if (strlen(f->region[i].name) == n && strncmp(f->region[i].name, name, n) == 0)
            return &f->region[i];
    if (f->nregions == GPC_DMEM_REGIONS)
        return NULL;
    struct gpc_dmem_region *r = &f->region[f->nregions++];
    memcpy(r->name, name, n);
    r->name[n] = '\0';
    r->max = UINT64_MAX;
    return r;
}

/* Parses "REGION VALUE" lines of a dmem file into field `which` (0 max, 1 current, 2 capacity). */
static void dmem_lines(struct gpc_cgroup_facts *f, const char *text, int which)
{
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *sp = memchr(p, ' ', len);
        struct gpc_dmem_region *r = sp ? region(f, p, (size_t)(sp - p)) : NULL;
        if (r) {
            char val[32];
            size_t vl = len - (size_t)(sp + 1 - p);
            snprintf(val, sizeof val, "%.*s", (int)(vl < sizeof val ? vl : sizeof val - 1), sp + 1);
            uint64_t v = strcmp(val, "max") == 0 ? UINT64_MAX : strtoull(val, NULL, 10);
            if (which == 0)
                r->max = v;
            else if (which == 1)
                r->current = v;
            else
                r->capacity = v;
        }
        p += len + (eol ? 1 : 0);
    }
}

int gpc_cgroup_read(const char *root, struct gpc_cgroup_facts *f)
{
    memset(f, 0, sizeof *f);
    if (read_text(root, "/sys/fs/cgroup/cgroup.controllers", f->controllers, sizeof f->controllers) < 0)
        return -ENOENT;
    f->v2 = true;
    f->controllers[strcspn(f->controllers, "\n")] = '\0';
    char words[sizeof f->controllers + 2];
    snprintf(words, sizeof words, " %s ", f->controllers);
    f->dmem = strstr(words, " dmem ") != NULL;
    char text[4096];
    snprintf(f->path, sizeof f->path, "/");
    if (read_text(root, "/proc/self/cgroup", text, sizeof text) > 0) {
        /* cgroup v2: the one line "0::PATH" (a container with its own cgroup namespace sees "/"). */
        char *line = strstr(text, "0::");
        if (line) {
            line += 3;
            line[strcspn(line, "\n")] = '\0';
            snprintf(f->path, sizeof f->path, "%s", line);
        }
    }
    char rel[512];
    const char *sub = strcmp(f->path, "/") == 0 ? "" : f->path;
    snprintf(rel, sizeof rel, "/sys/fs/cgroup%s/dmem.max", sub);
    if (read_text(root, rel, text, sizeof text) > 0)
        dmem_lines(f, text, 0);
    snprintf(rel, sizeof rel, "/sys/fs/cgroup%s/dmem.current", sub);
    if (read_text(root, rel, text, sizeof text) > 0)
        dmem_lines(f, text, 1);
    if (read_text(root, "/sys/fs/cgroup/dmem.capacity", text, sizeof text) > 0)
        dmem_lines(f, text, 2);
    return 0;
}

int gpc_driver_branch(const char *root, char *buf, unsigned len)
{
    char text[1024];
    if (read_text(root, "/proc/driver/nvidia/version", text, sizeof text) <= 0)
        return -1;
    /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue ..." or "... Open Kernel Module
     * for x86_64  615.12  Release Build ...": the first word after "Kernel Module" that is a
     * dotted number. */
    const char *p = strstr(text, "Kernel Module");
    if (!p)
        return -1;
    p += strlen("Kernel Module");
    for (;;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " \n");
        if (!n)
            return -1;
        if (*p >= '0' && *p <= '9' && memchr(p, '.', n)) {
            snprintf(buf, len, "%.*s", (int)n, p);
            break;
        }
        p += n;
    }
    return *p >= '0' && *p <= '9' ? atoi(p) : -1;
}
