/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter_scan.c: what the arbiter sees of the node, each tick.
 *
 * The cards and what their processes hold come from NVML (libnvidia-ml.so.1, loaded with dlopen:
 * the agent runs with hostPID, so the PIDs are the host's): the truth the tenant cannot write. A
 * PID belongs to the member whose ledger file its process maps: /proc/<pid>/maps lists the file's
 * device and inode, matched against the ledgers the arbiter knows (a tenant cannot map another
 * container's ledger, which its mount namespace does not have). A process of no member counts as
 * `other` (it holds memory nobody may lend).
 *
 * The members:
 *   local (`gpucap-agent --local`): the `gpucap run` jobs registered under <base>/runs/<job>/,
 *     each a directory of this user holding the job's settings file (gpucap.ini), its ledger
 *     (ledger) and `run` ("<pid> <start time>" of the gpucap process: a job whose gpucap is gone
 *     is no member);
 *   Kubernetes: each container's settings file <root>/<uid>/volumes/kubernetes.io~empty-dir/
 *     gpucap-lib/<container>/gpucap.ini and its ledger there under gpucap-ledger/.
 * Each settings file is the platform's: its R (memory_request), L (memory_limit, bounded by
 * memory_limit_max) and G (memory_grant), in [gpucap] or a [device.GPU-...] section that names the
 * card, resolved against the card's size. The ledger, which the tenant writes, only says which
 * cards the member uses (its device entries' UUIDs) and, by its inode, which processes are its.
 */
#include "arbiter.h"

#include "apply.h"
#include "common/ledger.h"
#include "common/units.h"
#include "tool.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define SETTINGS_MAX 16384

/* Paths and names are bounded where they are made (tool_name_ok, the checks below): a truncated
 * copy is only ever a name for people. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- NVML ---- */

typedef int nvret;
typedef struct nvdev *nvdev;
struct nv_memory {
    unsigned long long total, free, used;
};
struct nv_proc_v3 {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};
struct nv_proc_v1 {
    unsigned int pid;
    unsigned long long used;
};
static struct {
    nvret (*init)(void);
    nvret (*count)(unsigned *);
    nvret (*by_index)(unsigned, nvdev *);
    nvret (*uuid)(nvdev, char *, unsigned);
    nvret (*memory)(nvdev, struct nv_memory *);
    nvret (*procs3)(nvdev, unsigned *, struct nv_proc_v3 *);
    nvret (*procs1)(nvdev, unsigned *, struct nv_proc_v1 *);
    nvdev dev[GPC_ARB_CARDS];
} nv;

int gpc_arb_nvml_open(struct gpc_arbiter *a, char *why, size_t whylen)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, whylen, "NVML cannot be loaded: %s", dlerror());
        return -ENOENT;
    }
    nv.init = (nvret(*)(void))dlsym(h, "nvmlInit_v2");
    nv.count = (nvret(*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    nv.by_index = (nvret(*)(unsigned, nvdev *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nv.uuid = (nvret(*)(nvdev, char *, unsigned))dlsym(h, "nvmlDeviceGetUUID");
    nv.memory = (nvret(*)(nvdev, struct nv_memory *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    nv.procs3 = (nvret(*)(nvdev, unsigned *, struct nv_proc_v3 *))dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    nv.procs1 = (nvret(*)(nvdev, unsigned *, struct nv_proc_v1 *))dlsym(h, "nvmlDeviceGetComputeRunningProcesses");
    unsigned n = 0;
    if (!nv.init || !nv.count || !nv.by_index || !nv.uuid || !nv.memory || (!nv.procs3 && !nv.procs1)) {
        snprintf(why, whylen, "NVML lacks an entry point the arbiter needs");
        return -ENOSYS;
    }
    nvret rc = nv.init();
    if (rc != 0 || nv.count(&n) != 0) {
        snprintf(why, whylen, "nvmlInit failed (%d): the driver is not loaded", rc);
        return -EIO;
    }
    a->ncards = 0;
    for (unsigned i = 0; i < n && a->ncards < GPC_ARB_CARDS; i++) {
        struct gpc_arb_card *c = &a->card[a->ncards];
        struct nv_memory mem;
        char uuid[96];
        if (nv.by_index(i, &nv.dev[a->ncards]) != 0 || nv.uuid(nv.dev[a->ncards], uuid, sizeof uuid) != 0 ||
            nv.memory(nv.dev[a->ncards], &mem) != 0 || strncmp(uuid, "GPU-", 4) != 0)
            continue;
        memset(c, 0, sizeof *c);
        snprintf(c->uuid, sizeof c->uuid, "%s", uuid);
        for (char *p = c->uuid + 4; *p; p++) /* "GPU-" and the digits in lower case, as NVML writes them */
            *p = (char)tolower((unsigned char)*p);
        c->nvml = (int)i;
        c->size = mem.total;
        c->usable = mem.total > a->cfg.reserve ? mem.total - a->cfg.reserve : 0;
        a->ncards++;
    }
    if (a->ncards == 0) {
        snprintf(why, whylen, "NVML lists no card");
        return -ENODEV;
    }
    return 0;
}

/* ---- processes ---- */

uint64_t gpc_arb_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    if (!p)
        return 0;
    char state = 0;
    unsigned long long start = 0;
    /* After ") ": state is field 3, start time field 22. */
    if (sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &state,
               &start) != 2 || state == 'Z')
        return 0;
    return start;
}

/*
 * The member whose ledger (device:inode) /proc/<pid>/maps lists, or -1. A file's inode is reused once
 * it is removed: a job gone whose processes remain (departed) maps its ledger as "(deleted)", a job
 * that took the same inode since maps it whole; each line goes to the member in that state first.
 */
static int member_by_maps(const struct gpc_arbiter *a, pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int found = -1, other = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) != 3 || ino == 0)
            continue;
        bool deleted = strstr(line, " (deleted)") != NULL;
        for (int i = 0; i < a->nmembers; i++) {
            const struct gpc_arb_member *m = &a->m[i];
            if (!m->live || !m->have_ledger || (unsigned long long)m->ledger_ino != ino ||
                major(m->ledger_dev) != maj || minor(m->ledger_dev) != min)
                continue;
            if (m->departed ? deleted || !m->ledger_removed : !deleted) {
                found = i;
                break;
            }
            /* A departed job's file is removed: a whole one of its inode is another's, not yet known. */
            if (other < 0 && !m->departed)
                other = i;
        }
    }
    /* A line longer than the buffer continues on the next read: its tail does not parse. */
    fclose(f);
    return found >= 0 ? found : other;
}

int gpc_arb_member_of_pid(struct gpc_arbiter *a, pid_t pid)
{
    uint64_t start = gpc_arb_start_time(pid);
    if (!start)
        return -1;
    double t = mono();
    int free_at = -1;
    for (int i = 0; i < a->nprocs; i++) {
        struct gpc_arb_proc *p = &a->procs[i];
        if (p->pid == pid && p->start == start) {
            /* A match is kept while its member is; a process of none is looked at again each second
             * (it may map a ledger later, or a member may appear). */
            if (p->member >= 0 && a->m[p->member].live)
                return p->member;
            if (p->member < 0 && t - p->checked < 1.0)
                return -1;
            p->member = member_by_maps(a, pid);
            p->checked = t;
            return p->member;
        }
        if (p->pid == pid || (free_at < 0 && p->pid == 0))
            free_at = i;
    }
    int m = member_by_maps(a, pid);
    if (free_at < 0 && a->nprocs < (int)(sizeof a->procs / sizeof a->procs[0]))
        free_at = a->nprocs++;
    if (free_at < 0) { /* full: the oldest look goes */
        free_at = 0;
        for (int i = 1; i < a->nprocs; i++)
            if (a->procs[i].checked < a->procs[free_at].checked)
                free_at = i;
    }
    a->procs[free_at] = (struct gpc_arb_proc){pid, start, m, t};
    return m;
}

void gpc_arb_scan_procs(struct gpc_arbiter *a)
{
    static struct nv_proc_v3 p3[GPC_ARB_PROCS];
    static struct nv_proc_v1 p1[GPC_ARB_PROCS];
    for (int c = 0; c < a->ncards; c++) {
        struct gpc_arb_card *k = &a->card[c];
        for (int i = 0; i < a->nmembers; i++) {
            a->m[i].u[c].used = 0;
            a->m[i].u[c].top_pid = 0;
            a->m[i].u[c].top_bytes = 0;
        }
        k->held = k->other = 0;
        unsigned n = GPC_ARB_PROCS;
        nvret rc;
        bool v3 = nv.procs3 != NULL;
        rc = v3 ? nv.procs3(nv.dev[c], &n, p3) : nv.procs1(nv.dev[c], &n, p1);
        if (rc != 0) {
            /* Too many, or a failure: what the card holds is then known only in total (other). */
            struct nv_memory mem;
            if (nv.memory(nv.dev[c], &mem) == 0)
                k->held = k->other = mem.used;
            continue;
        }
        for (unsigned i = 0; i < n && i < GPC_ARB_PROCS; i++) {
            pid_t pid = (pid_t)(v3 ? p3[i].pid : p1[i].pid);
            uint64_t bytes = v3 ? p3[i].used : p1[i].used;
            if (bytes == ~0ull) /* NVML_VALUE_NOT_AVAILABLE */
                bytes = 0;
            k->held += bytes;
            int m = gpc_arb_member_of_pid(a, pid);
            if (m < 0) {
                k->other += bytes;
                continue;
            }
            struct gpc_arb_use *u = &a->m[m].u[c];
            u->used += bytes;
            u->on = true;
            if (bytes > u->top_bytes) {
                u->top_bytes = bytes;
                u->top_pid = pid;
            }
        }
    }
}

/* ---- settings ---- */

/* The value of `key` for card `uuid`: a [device.GPU-...] section naming the card (its UUID or a
 * start of it) over [gpucap]; false when neither has it. */
static bool value_for(const char *text, const char *uuid, const char *key, char *out, size_t len)
{
    bool found = false, in_dev = false;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        const char *next = e ? e + 1 : p + strlen(p);
        while (p < next && (*p == ' ' || *p == '\t'))
            p++;
        if (*p == '[') {
            const char *close = memchr(p, ']', (size_t)(next - p));
            char sec[96] = "";
            if (close && (size_t)(close - p - 1) < sizeof sec)
                snprintf(sec, sizeof sec, "%.*s", (int)(close - p - 1), p + 1);
            in_dev = strncasecmp(sec, "device.GPU-", 11) == 0 && strlen(sec) >= 7 + 8 + 4 &&
                     strncasecmp(uuid, sec + 7, strlen(sec) - 7) == 0;
            if (in_dev)
                found = gpc_arb_ini_get(text, sec, key, out, len) || found;
        }
        p = next;
    }
    return found || gpc_arb_ini_get(text, "gpucap", key, out, len);
}

/* A size of the file resolved against `size` bytes; false when absent or malformed (*bad then). */
static bool size_for(const char *text, const char *uuid, const char *key, uint64_t size, uint64_t *out, bool *bad)
{
    char v[128];
    struct gpc_size s;
    if (!value_for(text, uuid, key, v, sizeof v))
        return false;
    if (gpc_parse_size(v, &s) != 0) {
        *bad = true;
        return false;
    }
    *out = gpc_size_resolve(&s, size);
    return true;
}

/* R, L, G of member m on every card, from its settings file's text. */
static void read_settings(struct gpc_arbiter *a, struct gpc_arb_member *m, const char *text)
{
    for (int c = 0; c < a->ncards; c++) {
        struct gpc_arb_use *u = &m->u[c];
        uint64_t size = a->card[c].size, l = size, max = size, r = 0, g = 0;
        bool bad = false;
        if (!size_for(text, a->card[c].uuid, "memory_limit", size, &l, &bad))
            l = size;
        if (size_for(text, a->card[c].uuid, "memory_limit_max", size, &max, &bad) && max < l)
            l = max;
        if (l > size || l == GPC_UNLIMITED)
            l = size;
        u->limit = l;
        bool bad_r = false;
        u->burstable = size_for(text, a->card[c].uuid, "memory_request", size, &r, &bad_r) || bad_r;
        /* A malformed request, or one above the limit, is best effort (the library's safe state). */
        u->request = bad_r || r > l ? 0 : r;
        bool bad_g = false;
        if (!size_for(text, a->card[c].uuid, "memory_grant", size, &g, &bad_g))
            g = 0; /* absent or malformed: no grant */
        u->grant = g < l ? g : l;
    }
}

/* The member of directory `dir` (its key), found or added. */
static struct gpc_arb_member *member_at(struct gpc_arbiter *a, const char *dir)
{
    int free_at = -1;
    for (int i = 0; i < a->nmembers; i++) {
        if (a->m[i].dir[0] && strcmp(a->m[i].dir, dir) == 0)
            return &a->m[i];
        if (free_at < 0 && !a->m[i].live && a->m[i].sock < 0 && a->m[i].ledger_fd < 0 && !a->m[i].dir[0])
            free_at = i;
    }
    if (free_at < 0) {
        if (a->nmembers >= GPC_ARB_MEMBERS)
            return NULL;
        free_at = a->nmembers++;
    }
    struct gpc_arb_member *m = &a->m[free_at];
    memset(m, 0, sizeof *m);
    m->sock = m->ledger_fd = -1;
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    return m;
}

/* The cards member m's ledger names (its device entries in use), and the ledger's identity. */
static void read_ledger(struct gpc_arbiter *a, struct gpc_arb_member *m, int dirfd, const char *name)
{
    static struct gpc_ledger *l;
    char why[160];
    struct stat st;
    m->have_ledger = false;
    if (!l && !(l = calloc(1, sizeof *l)))
        return;
    int fd = gpc_agent_open_typed(dirfd, name, O_RDONLY, (off_t)sizeof *l, &st, why, sizeof why);
    if (fd < 0)
        return;
    m->ledger_dev = st.st_dev;
    m->ledger_ino = st.st_ino;
    m->have_ledger = true;
    enum gpc_ledger_fault f = gpc_ledger_copy_used(fd, l, NULL);
    close(fd);
    if (f != GPC_LEDGER_USABLE && f != GPC_LEDGER_TORN)
        return;
    for (int d = 0; d < GPC_LEDGER_DEVICES; d++) {
        if (atomic_load(&l->dev[d].state) != 1)
            continue;
        char uuid[GPC_UUID_TEXT];
        gpc_uuid_format(l->dev[d].uuid, uuid);
        int c = gpc_arb_card_of(a, uuid);
        if (c >= 0)
            m->u[c].on = true;
    }
}

/* Reads the settings file `name` of directory fd `dirfd` into m (R, L, G); false when refused. */
static bool load_settings(struct gpc_arbiter *a, struct gpc_arb_member *m, int dirfd, const char *name)
{
    static char text[SETTINGS_MAX + 1];
    char why[160];
    struct stat st;
    int fd = gpc_agent_open_typed(dirfd, name, O_RDONLY, SETTINGS_MAX, &st, why, sizeof why);
    if (fd < 0) {
        if (fd != -ENOENT && m->settings_ok)
            fprintf(stderr, "gpucap-agent: arbiter: %s: its settings file is refused: %s\n", m->name, why);
        return false;
    }
    ssize_t n = pread(fd, text, SETTINGS_MAX, 0);
    close(fd);
    if (n < 0 || memchr(text, '\0', (size_t)n))
        return false;
    text[n] = '\0';
    read_settings(a, m, text);
    return true;
}

static bool run_alive(int dirfd, pid_t *pid, uint64_t *sched)
{
    char why[64], buf[64];
    struct stat st;
    int fd = gpc_agent_open_typed(dirfd, "run", O_RDONLY, 64, &st, why, sizeof why);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    int p = 0;
    unsigned long long start = 0;
    if (sscanf(buf, "%d %llu", &p, &start) != 2 || p <= 0)
        return false;
    *pid = (pid_t)p;
    *sched = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    return gpc_arb_start_time(*pid) == start;
}

static void begin_member(struct gpc_arbiter *a, struct gpc_arb_member *m)
{
    bool was = m->live && !m->departed;
    m->live = true;
    m->departed = false;
    m->seen = a->scan;
    for (int c = 0; c < a->ncards; c++)
        m->u[c].on = false;
    if (!was)
        fprintf(stderr, "gpucap-agent: arbiter: %s joined\n", m->name);
}

static void scan_local(struct gpc_arbiter *a)
{
    char runs[PATH_MAX + 8];
    snprintf(runs, sizeof runs, "%s/runs", a->cfg.base);
    DIR *d = opendir(runs);
    if (!d)
        return;
    uid_t me = geteuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !tool_name_ok(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            continue;
        pid_t pid = 0;
        uint64_t sched = 0;
        char dir[PATH_MAX];
        if ((size_t)snprintf(dir, sizeof dir, "%s/%s", runs, e->d_name) >= sizeof dir || fstat(fd, &st) != 0 || st.st_uid != me || !run_alive(fd, &pid, &sched)) {
            close(fd);
            continue;
        }
        struct gpc_arb_member *m = member_at(a, dir);
        if (m) {
            snprintf(m->name, sizeof m->name, "run %s (gpucap pid %d)", e->d_name, (int)pid);
            snprintf(m->ledger_dir, sizeof m->ledger_dir, "%s", dir);
            m->run_pid = pid;
            m->sched_ns = sched;
            begin_member(a, m);
            m->settings_ok = load_settings(a, m, fd, "gpucap.ini");
            read_ledger(a, m, fd, "ledger");
        }
        close(fd);
    }
    closedir(d);
}

static bool pod_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
            return false;
    return true;
}

static void scan_pods(struct gpc_arbiter *a)
{
    DIR *d = opendir(a->cfg.base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!pod_name_ok(e->d_name))
            continue;
        char lib[PATH_MAX];
        if ((size_t)snprintf(lib, sizeof lib, "%s/%s/volumes/kubernetes.io~empty-dir/gpucap-lib", a->cfg.base,
                             e->d_name) >= sizeof lib - 80)
            continue;
        DIR *cd = opendir(lib);
        if (!cd)
            continue;
        struct dirent *ce;
        while ((ce = readdir(cd))) {
            if (ce->d_name[0] == '.' || !tool_name_ok(ce->d_name))
                continue;
            int sfd = gpc_agent_volume_dir(a->cfg.base, e->d_name, "gpucap-lib", ce->d_name);
            if (sfd < 0)
                continue;
            struct stat st;
            if (fstatat(sfd, "gpucap.ini", &st, AT_SYMLINK_NOFOLLOW) != 0) {
                close(sfd);
                continue;
            }
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s/%s", lib, ce->d_name);
            struct gpc_arb_member *m = member_at(a, dir);
            if (!m) {
                close(sfd);
                continue;
            }
            if (!m->live) {
                snprintf(m->pod_uid, sizeof m->pod_uid, "%s", e->d_name);
                snprintf(m->container, sizeof m->container, "%s", ce->d_name);
                snprintf(m->name, sizeof m->name, "pod %s container %s", e->d_name, ce->d_name);
                snprintf(m->ledger_dir, sizeof m->ledger_dir, "%s/%s/volumes/kubernetes.io~empty-dir/gpucap-ledger/%s",
                         a->cfg.base, e->d_name, ce->d_name);
                /* Scheduled when its settings file was made (gpucap inject, in the init container). */
                struct statx sx;
                if (statx(sfd, "gpucap.ini", AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME))
                    m->sched_ns = (uint64_t)sx.stx_btime.tv_sec * 1000000000u + sx.stx_btime.tv_nsec;
                else
                    m->sched_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
            }
            begin_member(a, m);
            m->settings_ok = load_settings(a, m, sfd, "gpucap.ini");
            close(sfd);
            int lfd = gpc_agent_volume_dir(a->cfg.base, e->d_name, "gpucap-ledger", ce->d_name);
            if (lfd >= 0) {
                read_ledger(a, m, lfd, "gpucap.ledger");
                close(lfd);
            } else {
                m->have_ledger = false;
            }
        }
        closedir(cd);
    }
    closedir(d);
}

void gpc_arb_scan_members(struct gpc_arbiter *a)
{
    a->scan++;
    if (a->cfg.local)
        scan_local(a);
    else
        scan_pods(a);
    for (int i = 0; i < a->nmembers; i++) {
        struct gpc_arb_member *m = &a->m[i];
        if (!m->live || m->seen == a->scan)
            continue;
        bool holds = false;
        for (int c = 0; c < a->ncards; c++)
            holds |= m->u[c].used > 0;
        if (holds && m->have_ledger) {
            /* Gone, but its processes (an orphan of the job, a process still exiting) hold memory that
             * is nobody's request: theirs as best effort, the first a reclaim takes. */
            if (!m->departed)
                fprintf(stderr, "gpucap-agent: arbiter: %s ended; its processes still hold memory: best effort "
                        "until they end\n", m->name);
            m->departed = true;
            /* Its ledger still there (a registration gone, its files not), or removed. */
            char lp[PATH_MAX + 32];
            struct stat st;
            snprintf(lp, sizeof lp, "%s/%s", m->ledger_dir, m->pod_uid[0] ? "gpucap.ledger" : "ledger");
            m->ledger_removed = stat(lp, &st) != 0 || st.st_ino != m->ledger_ino || st.st_dev != m->ledger_dev;
            for (int c = 0; c < a->ncards; c++) {
                struct gpc_arb_use *u = &m->u[c];
                u->on = false; /* NVML's figures say again where they are */
                u->burstable = true;
                u->request = u->grant = 0;
                u->limit = a->card[c].size;
            }
            continue;
        }
        fprintf(stderr, "gpucap-agent: arbiter: %s %s\n", m->name, m->departed ? "is gone" : "left");
        m->departed = false;
        m->live = false;
        m->have_ledger = false;
        for (int p = 0; p < a->nprocs; p++)
            if (a->procs[p].member == i)
                a->procs[p] = (struct gpc_arb_proc){0, 0, -1, 0};
    }
}
