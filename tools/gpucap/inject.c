/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject.c: `gpucap inject`: the init container the webhook adds to a GPU pod (TEAM contract 2).
 * From the gpucap image it copies the library and this CLI into the pod's emptyDir, writes the
 * ld.so.preload that GPU containers mount at /etc/ld.so.preload, one locked gpucap.ini per GPU
 * container (mounted at /etc/gpucap/gpucap.ini) and, with --ledgers, each container's ledger.
 * Everything is checked before the first file is written; files appear by rename, so a container
 * never sees half a library.
 *
 * The ledgers are the platform's: under the lock the library never makes one, and an unusable one
 * denies every allocation. DIR/CONTAINER is this uid's, mode 0755 (no other user can add, remove or
 * rename anything in it), and holds gpucap.ledger, whole, mode 0666 (every uid of the container
 * counts in it). The webhook mounts that file alone at the container's ledger path: a mount point
 * cannot be removed, renamed or replaced from inside the container, even by a process running as
 * this same uid. An existing ledger (the init container run again) is kept.
 *
 * CONTAINER=LIMIT,request=REQUEST (issue 35, burstable GPU memory) adds memory_request = REQUEST to
 * that container's ini: its guaranteed share, at most LIMIT and --max (refused otherwise, before any
 * file is written). Without it the ini has no memory_request: the container is guaranteed at its
 * budget, as before.
 *
 * Each ini opens with its generation line ("; generation = N", which the node agent bumps once a
 * rewrite is complete: the signal every process of the container watches) and its ceiling
 * ("; ceiling = SIZE"): --max, else the container's budget. The node agent never writes a budget
 * above it, whatever the pod's record asks (live budgets).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where GPU containers see the emptyDir; the same constants as the webhook's admission.h. */
#define MOUNT_LIB "/usr/local/gpucap/lib/libgpucap.so"
#define MOUNT_LEDGER_FILE "/run/gpucap/ledger/gpucap.ledger"
#define MAX_CONTAINERS 64

enum { F_TO, F_LEDGERS, F_MAX, F_LIB, F_COUNT };
static const struct tool_flag inject_flags[F_COUNT] = {
    [F_TO] = {"to", 0, "DIR", NULL, NULL, "the pod's gpucap volume to fill (required)"},
    [F_LEDGERS] = {"ledgers", 0, "DIR", NULL, NULL,
                   "make DIR/CONTAINER/gpucap.ledger, each container's ledger (0666, in a directory of\n"
                   "this user, 0755)"},
    [F_MAX] = {"max", 0, "SIZE", NULL, NULL, "memory_limit_max of every container (a larger SIZE is refused)"},
    [F_LIB] = {"lib", 0, "FILE", "GPUCAP_LIB", NULL, "the libgpucap.so to copy (default: found beside gpucap)"},
};

const struct tool_cmd cli_inject_cmd = {
    CLI_COMMAND("inject", inject_flags,
                "--to DIR [--ledgers DIR] [--max SIZE] [--lib FILE] CONTAINER=SIZE[,request=SIZE]...",
                "fill a pod's gpucap volume"),
    .about = "Fills a pod's gpucap volume (run by the init container the webhook injects):\n"
             "  DIR/lib/libgpucap.so, DIR/bin/gpucap   the library and this command\n"
             "  DIR/ld.so.preload                      " MOUNT_LIB "\n"
             "  DIR/CONTAINER/gpucap.ini               lock = true, memory_limit = SIZE,\n"
             "                                         memory_limit_max = --max (when given), ledger;\n"
             "                                         its ceiling line: --max, else SIZE, the most\n"
             "                                         gpucap-agent may ever set there\n"
             "                                         memory_request = the request (burstable), when given\n"
             "CONTAINER is a container name (DNS label); SIZE a size for that container, its limit;\n"
             ",request=SIZE its request (guaranteed share, at most the limit and --max).",
    .tail = "Exit 0 when every file is in place, 1 on a failure, 2 on a usage error.\n",
    .max_operands = TOOL_ANY,
};

struct target {
    const char *name;
    const char *size;
    char limit[64], request[64]; /* the operand's two sizes; request "" when none */
};

static bool dns_label(const char *s, size_t n)
{
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* Writes `len` bytes to path through a temporary file and a rename; 0 or -errno. */
static int write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    const char *p = data;
    int rc = 0;
    while (len && rc == 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = n < 0 ? -errno : -EIO;
        else
            p += n, len -= (size_t)n;
    }
    if (rc == 0 && fchmod(fd, mode) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Reads a whole file into a fresh buffer; 0 or -errno. */
static int read_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? tool_read_full(fd, buf, (size_t)st.st_size) : 0;
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        free(buf);
        return buf ? -EIO : -ENOMEM;
    }
    *out = buf;
    *len = got;
    return 0;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(from, &buf, &len);
    if (rc == 0) {
        rc = write_file(to, buf, len, mode);
        free(buf);
    }
    return rc;
}

static int make_dir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        return -errno;
    /* chmod: the umask must not narrow a directory that other users' processes write. */
    return chmod(path, mode) == 0 ? 0 : -errno;
}

/* A fresh ledger at path, or the one there if it is ours (a regular file of this uid, 0666). */
static int make_ledger(const char *path)
{
    int rc = gpc_ledger_create(path, 0666);
    if (rc != -EEXIST)
        return rc;
    struct stat st;
    if (lstat(path, &st) != 0)
        return -errno;
    bool ours = S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0666 &&
                st.st_size == (off_t)sizeof(struct gpc_ledger) && st.st_nlink == 1;
    return ours ? 0 : -EEXIST;
}

static int fail(const char *what, const char *path, int rc)
{
    fprintf(stderr, "gpucap inject: %s %s: %s\n", what, path, strerror(-rc));
    return 1;
}

int cmd_inject(int argc, char **argv)
{
    const char *v[F_COUNT] = {0};
    struct target t[MAX_CONTAINERS];
    size_t nt = 0;
    int first, rc = tool_begin_values(&cli_inject_cmd, argc, argv, v, &first);
    if (rc >= 0)
        return rc;
    const char *to = v[F_TO], *ledgers = v[F_LEDGERS], *max = v[F_MAX], *lib = v[F_LIB];
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (!eq || !dns_label(a, (size_t)(eq - a)) || nt == MAX_CONTAINERS) {
            tool_usage_error(&cli_inject_cmd, "'%s' is not CONTAINER=SIZE with a container name (DNS label)%s", a,
                             nt == MAX_CONTAINERS ? ", or too many containers" : "");
            return CLI_USAGE;
        }
        t[nt] = (struct target){a, eq + 1, "", ""};
        const char *comma = strchr(eq + 1, ',');
        size_t llen = comma ? (size_t)(comma - eq - 1) : strlen(eq + 1);
        bool req = comma && strncmp(comma, ",request=", 9) == 0 && comma[9] && strlen(comma + 9) < sizeof t[nt].request;
        if (llen >= sizeof t[nt].limit || (comma && !req)) {
            tool_usage_error(&cli_inject_cmd, "'%s' is not CONTAINER=SIZE[,request=SIZE]", a);
            return CLI_USAGE;
        }
        snprintf(t[nt].limit, sizeof t[nt].limit, "%.*s", (int)llen, eq + 1);
        if (req)
            snprintf(t[nt].request, sizeof t[nt].request, "%s", comma + 9);
        t[nt].size = t[nt].limit;
        nt++;
    }
    if (!to || !nt) {
        tool_usage_error(&cli_inject_cmd, "--to DIR and at least one CONTAINER=SIZE are required");
        return CLI_USAGE;
    }

    /* Every size first: a bad one must not leave a half-filled volume. */
    struct gpc_size smax, s;
    if (max && gpc_parse_size(max, &smax) != 0) {
        tool_usage_error(&cli_inject_cmd, "--max '%s' is not a size; accepted forms: %s", max, gpc_size_forms);
        return CLI_USAGE;
    }
    for (size_t i = 0; i < nt; i++) {
        if (gpc_parse_size(t[i].size, &s) != 0) {
            tool_usage_error(&cli_inject_cmd, "%s: '%s' is not a size; accepted forms: %s", t[i].name, t[i].size,
                             gpc_size_forms);
            return CLI_USAGE;
        }
        bool over = max && s.is_percent == smax.is_percent && (s.is_percent ? s.ppm > smax.ppm : s.bytes > smax.bytes);
        if (over) {
            fprintf(stderr, "gpucap inject: %s: above --max %s\n", t[i].name, max);
            return CLI_USAGE;
        }
        struct gpc_size q = {0};
        if (t[i].request[0] && gpc_parse_size(t[i].request, &q) != 0) {
            tool_usage_error(&cli_inject_cmd, "%s: request '%s' is not a size; accepted forms: %s", t[i].name,
                             t[i].request, gpc_size_forms);
            return CLI_USAGE;
        }
        bool q_over_l = q.is_percent == s.is_percent && (q.is_percent ? q.ppm > s.ppm : q.bytes > s.bytes);
        bool q_over_m = max && q.is_percent == smax.is_percent && (q.is_percent ? q.ppm > smax.ppm : q.bytes > smax.bytes);
        if (t[i].request[0] && (q_over_l || q_over_m)) {
            fprintf(stderr, "gpucap inject: %s: request %s above %s %s\n", t[i].name, t[i].request,
                    q_over_l ? "the limit" : "--max", q_over_l ? t[i].size : max);
            return CLI_USAGE;
        }
    }
    char libpath[PATH_MAX], tried[2048], self[PATH_MAX];
    if (cli_find_lib(lib, libpath, sizeof libpath, tried, sizeof tried) != 0) {
        fprintf(stderr, "gpucap inject: libgpucap.so not found (tried %s)\n", tried);
        return 1;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return fail("cannot find", "/proc/self/exe", -errno);
    self[n] = '\0';

    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lib", to);
    if ((rc = make_dir(path, 0755)) != 0)
        return fail("cannot create", path, rc);
    snprintf(path, sizeof path, "%s/bin", to);
    if ((rc = make_dir(path, 0755)) != 0)
        return fail("cannot create", path, rc);
    snprintf(path, sizeof path, "%s/lib/libgpucap.so", to);
    if ((rc = copy_file(libpath, path, 0755)) != 0)
        return fail("cannot copy the library to", path, rc);
    snprintf(path, sizeof path, "%s/bin/gpucap", to);
    if ((rc = copy_file(self, path, 0755)) != 0)
        return fail("cannot copy the CLI to", path, rc);
    snprintf(path, sizeof path, "%s/ld.so.preload", to);
    if ((rc = write_file(path, MOUNT_LIB "\n", sizeof MOUNT_LIB, 0644)) != 0)
        return fail("cannot write", path, rc);

    for (size_t i = 0; i < nt; i++) {
        int name_len = (int)(strchr(t[i].name, '=') - t[i].name);
        char ini[640];
        /* The ceiling line: the most the node agent may ever write here (--max, else this budget),
         * fixed now; the agent keeps the line as it rewrites the budget (tools/agent/apply.c). */
        /* The generation line first: gpucap-agent bumps it once a rewrite is complete, and every
         * process of the container watches it before each admission (libgpucap/charge/live.c). */
        int len = snprintf(ini, sizeof ini,
                           "; generation = 00000000000000000\n"
                           "; written by gpucap inject for container %.*s: the platform's settings, locked\n"
                           "; ceiling = %s: the most gpucap-agent may set, fixed at creation\n"
                           "[gpucap]\n"
                           "lock = true\n"
                           "memory_limit = %s\n"
                           "%s%s%s"
                           "%s%s%s"
                           "ledger = " MOUNT_LEDGER_FILE "\n",
                           name_len, t[i].name, max ? max : t[i].size, t[i].size, max ? "memory_limit_max = " : "",
                           max ? max : "", max ? "\n" : "", t[i].request[0] ? "memory_request = " : "", t[i].request,
                           t[i].request[0] ? "\n" : "");
        snprintf(path, sizeof path, "%s/%.*s", to, name_len, t[i].name);
        if ((rc = make_dir(path, 0755)) != 0)
            return fail("cannot create", path, rc);
        snprintf(path, sizeof path, "%s/%.*s/gpucap.ini", to, name_len, t[i].name);
        if ((rc = write_file(path, ini, (size_t)len, 0644)) != 0)
            return fail("cannot write", path, rc);
        if (ledgers) {
            snprintf(path, sizeof path, "%s/%.*s", ledgers, name_len, t[i].name);
            if ((rc = make_dir(path, 0755)) != 0)
                return fail("cannot create", path, rc);
            snprintf(path, sizeof path, "%s/%.*s/gpucap.ledger", ledgers, name_len, t[i].name);
            if ((rc = make_ledger(path)) != 0)
                return fail("cannot make the ledger", path, rc);
        }
        printf("gpucap inject: %.*s: memory_limit %s%s%s%s%s, locked\n", name_len, t[i].name, t[i].size,
               t[i].request[0] ? ", memory_request " : "", t[i].request, max ? ", at most " : "", max ? max : "");
    }
    return 0;
}
