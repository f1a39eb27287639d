/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cards.c: which GPUs this node really has, for gpucap-exporter's card series.
 *
 * The ledgers are the tenants' files: a ledger can name any UUID with any size and budget. The card
 * series (gpucap_gpu_*) and the per-container series are shown only for cards found here, from a
 * source the tenant cannot write: NVML (libnvidia-ml.so.1, loaded with dlopen; the NVIDIA container
 * runtime mounts it into the exporter), the driver's /proc/driver/nvidia/gpus/<bus>/information
 * files, or a list the platform configures. NVML also gives the card's index, model and memory,
 * which then replace what the ledgers say. The list is read once, at start: cards do not come and
 * go under a running driver.
 */
#include "cards.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The few NVML entry points used, with their ABI (nvml.h is not needed to build). */
typedef int nvml_return;
typedef struct nvml_device *nvml_device;
struct nvml_memory {
    unsigned long long total, free, used;
};

/* Keeps a name's characters (a model name is a label value): anything else becomes '_'. */
static void clean(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
              *s == '.' || *s == ' ' || *s == '_'))
            *s = '_';
}

/* "GPU-" and 36 characters of hexadecimal digits and dashes, as NVML and gpucap write a UUID. */
static bool uuid_ok(const char *u)
{
    if (strncmp(u, "GPU-", 4) != 0 || strlen(u) != 40)
        return false;
    for (const char *p = u + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F') || *p == '-'))
            return false;
    return true;
}

static void add(struct gpc_cards *c, const char *uuid, int index, const char *model, uint64_t memory)
{
    if (c->n >= GPC_CARDS_MAX || !uuid_ok(uuid) || gpc_cards_find(c, uuid))
        return;
    struct gpc_card *k = &c->card[c->n++];
    snprintf(k->uuid, sizeof k->uuid, "%s", uuid);
    for (char *p = k->uuid; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p - 'A' + 'a');
    k->index = index;
    snprintf(k->model, sizeof k->model, "%s", model ? model : "");
    clean(k->model);
    k->memory = memory;
}

static int from_nvml(struct gpc_cards *c, char *why, size_t whylen)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, whylen, "NVML: %s", dlerror());
        return -ENOENT;
    }
    nvml_return (*init)(void) = (nvml_return(*)(void))dlsym(h, "nvmlInit_v2");
    nvml_return (*shutdown)(void) = (nvml_return(*)(void))dlsym(h, "nvmlShutdown");
    nvml_return (*count)(unsigned *) = (nvml_return(*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_return (*by_index)(unsigned, nvml_device *) =
        (nvml_return(*)(unsigned, nvml_device *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_return (*get_uuid)(nvml_device, char *, unsigned) =
        (nvml_return(*)(nvml_device, char *, unsigned))dlsym(h, "nvmlDeviceGetUUID");
    nvml_return (*get_name)(nvml_device, char *, unsigned) =
        (nvml_return(*)(nvml_device, char *, unsigned))dlsym(h, "nvmlDeviceGetName");
    nvml_return (*get_index)(nvml_device, unsigned *) =
        (nvml_return(*)(nvml_device, unsigned *))dlsym(h, "nvmlDeviceGetIndex");
    nvml_return (*get_memory)(nvml_device, struct nvml_memory *) =
        (nvml_return(*)(nvml_device, struct nvml_memory *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    unsigned n = 0;
    int rc = -ENOENT;
    if (!init || !shutdown || !count || !by_index || !get_uuid) {
        snprintf(why, whylen, "NVML: an entry point is missing");
    } else if (init() != 0) {
        snprintf(why, whylen, "NVML: nvmlInit_v2 failed");
    } else {
        if (count(&n) == 0) {
            rc = 0;
            for (unsigned i = 0; i < n && i < GPC_CARDS_MAX; i++) {
                nvml_device d;
                char uuid[96] = "", name[96] = "";
                unsigned index = i;
                struct nvml_memory mem = {0};
                if (by_index(i, &d) != 0 || get_uuid(d, uuid, sizeof uuid) != 0)
                    continue;
                if (get_name)
                    get_name(d, name, sizeof name);
                if (get_index)
                    get_index(d, &index);
                if (get_memory)
                    get_memory(d, &mem);
                add(c, uuid, (int)index, name, mem.total);
            }
        } else {
            snprintf(why, whylen, "NVML: nvmlDeviceGetCount_v2 failed");
        }
        shutdown();
    }
    dlclose(h);
    return rc;
}

/* The driver's files: <dir>/<bus id>/information, lines "Model: ...", "GPU UUID: GPU-...",
 * "Device Minor: N" (the minor number stands in for the index; NVML's index may differ). */
static int from_proc(struct gpc_cards *c, const char *dir, char *why, size_t whylen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "%s: %s", dir, strerror(errno));
        return -errno;
    }
    struct dirent *e;
    unsigned seen = 0;
    while ((e = readdir(d)) && seen++ < 4 * GPC_CARDS_MAX) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/information", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char line[256], model[96] = "", uuid[96] = "";
        int minor = -1;
        for (int lines = 0; lines < 64 && fgets(line, sizeof line, f); lines++) {
            line[strcspn(line, "\n")] = '\0';
            char *v = strchr(line, ':');
            if (!v)
                continue;
            *v++ = '\0';
            v += strspn(v, " \t");
            if (strcmp(line, "Model") == 0)
                snprintf(model, sizeof model, "%s", v);
            else if (strcmp(line, "GPU UUID") == 0)
                snprintf(uuid, sizeof uuid, "%s", v);
            else if (strcmp(line, "Device Minor") == 0)
                minor = atoi(v);
        }
        fclose(f);
        add(c, uuid, minor, model, 0);
    }
    closedir(d);
    return 0;
}

int gpc_cards_load(const char *source, struct gpc_cards *c, char *why, size_t whylen)
{
    memset(c, 0, sizeof *c);
    why[0] = '\0';
    if (strcmp(source, "none") == 0) {
        c->known = false;
        snprintf(c->source, sizeof c->source, "none");
        return 0;
    }
    if (strcmp(source, "nvml") == 0 || strcmp(source, "auto") == 0) {
        if (from_nvml(c, why, whylen) == 0) {
            c->known = true;
            snprintf(c->source, sizeof c->source, "nvml");
            return 0;
        }
        if (strcmp(source, "nvml") == 0)
            return -ENOENT;
        char first[256];
        snprintf(first, sizeof first, "%s", why);
        if (from_proc(c, GPC_CARDS_PROC_DIR, why, whylen) == 0) {
            c->known = true;
            snprintf(c->source, sizeof c->source, "proc");
            return 0;
        }
        /* auto and nothing found: no card can be vouched for, so no card is shown. */
        snprintf(why + strlen(why), whylen - strlen(why), "; %s", first);
        c->known = true;
        snprintf(c->source, sizeof c->source, "none found");
        return 0;
    }
    if (strncmp(source, "proc:", 5) == 0 || strcmp(source, "proc") == 0) {
        const char *dir = source[4] == ':' ? source + 5 : GPC_CARDS_PROC_DIR;
        if (from_proc(c, dir, why, whylen) != 0)
            return -ENOENT;
        c->known = true;
        snprintf(c->source, sizeof c->source, "proc");
        return 0;
    }
    if (strncmp(source, "list:", 5) == 0) {
        char buf[GPC_CARDS_MAX * 48];
        snprintf(buf, sizeof buf, "%s", source + 5);
        char *save = NULL;
        for (char *u = strtok_r(buf, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
            if (!uuid_ok(u)) {
                snprintf(why, whylen, "\"%s\" is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", u);
                return -EINVAL;
            }
            add(c, u, -1, NULL, 0);
        }
        c->known = true;
        snprintf(c->source, sizeof c->source, "list");
        return 0;
    }
    snprintf(why, whylen, "\"%s\": expected auto, nvml, proc[:DIR], list:UUID[,UUID...] or none", source);
    return -EINVAL;
}

const struct gpc_card *gpc_cards_find(const struct gpc_cards *c, const char *uuid)
{
    for (unsigned i = 0; i < c->n; i++)
        if (strcasecmp(c->card[i].uuid, uuid) == 0)
            return &c->card[i];
    return NULL;
}
