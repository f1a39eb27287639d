/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runqos.c: a `gpucap run --memory-request` job's registration with the user's arbiter
 * (`gpucap-agent --local`, tools/agent/arbiter*.c).
 *
 * The job gets a directory of its own under the user's QoS directory ($XDG_RUNTIME_DIR/gpucap, else
 * /tmp/gpucap-<uid>: tool_qos_dir), in runs/, which is its registration:
 *   gpucap.ini    the job's settings file, which its library reads as its settings file (GPUCAP_CONFIG):
 *                 the generation line first (a rewrite is signalled, as on Kubernetes), then the user's
 *                 own GPUCAP_CONFIG text if any, then [gpucap] with memory_limit and memory_request, last
 *                 so that they win; the arbiter writes memory_grant there
 *   ledger        the job's ledger (GPUCAP_LEDGER): its processes map it, so the arbiter knows them
 *   run           "<pid> <start time>" of this gpucap: a directory whose gpucap is gone is no job
 *   arbiter.sock  a link to the arbiter's socket, so that the library finds it beside its ledger
 * and, when the arbiter runs, its reclaim_grace (from its arbiter.conf) in the settings file: the
 * library waits for a request within it that long and a second.
 * The QoS directory and runs/ are made 0700 and must be this user's alone. Nothing is made without
 * --memory-request: a run as before knows nothing of the arbiter (its use counts as others' use).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* `path` is a directory of this user that no one else may write (made 0700 when absent). */
static int own_dir(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot make %s: %s", path, strerror(errno));
        return -1;
    }
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022)) {
        snprintf(err, errlen, "%s is not a directory of this user that only it may write", path);
        return -1;
    }
    return 0;
}

static uint64_t self_start_time(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long start = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &start) != 1)
        return 0;
    return start;
}

static int write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -EIO;
    close(fd);
    return rc;
}

int cli_qos_register(const char *request, const char *limit, char *dir, size_t dirlen, char *err, size_t errlen)
{
    char base[PATH_MAX], runs[PATH_MAX + 8];
    tool_qos_dir(base, sizeof base);
    snprintf(runs, sizeof runs, "%s/runs", base);
    if (own_dir(base, err, errlen) != 0 || own_dir(runs, err, errlen) != 0)
        return -1;
    snprintf(dir, dirlen, "%s/run.XXXXXX", runs);
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "cannot make a directory in %s: %s", runs, strerror(errno));
        return -1;
    }
    /* The user's own settings file, if one is named, comes first: the QoS keys after it win. */
    static char text[16384];
    size_t n = (size_t)snprintf(text, sizeof text, "; generation = %017x\n", 0u);
    const char *own = getenv("GPUCAP_CONFIG");
    if (own && *own) {
        int fd = open(own, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        ssize_t got = fd >= 0 ? read(fd, text + n, sizeof text - n - 512) : 0;
        if (fd >= 0)
            close(fd);
        if (got > 0 && !memchr(text + n, '\0', (size_t)got)) {
            n += (size_t)got;
            if (text[n - 1] != '\n')
                text[n++] = '\n';
        }
        text[n] = '\0';
    }
    /* How long the library waits for a need: the arbiter's grace (its arbiter.conf), + 1 s. */
    char grace[32] = "";
    char conf_path[PATH_MAX + 16], conf[256];
    snprintf(conf_path, sizeof conf_path, "%s/arbiter.conf", base);
    int cf = open(conf_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t cn = cf >= 0 ? read(cf, conf, sizeof conf - 1) : -1;
    if (cf >= 0)
        close(cf);
    unsigned g;
    const char *gl = cn > 0 ? (conf[cn] = '\0', strstr(conf, "reclaim_grace = ")) : NULL;
    if (gl && sscanf(gl, "reclaim_grace = %u", &g) == 1 && g <= 3600)
        snprintf(grace, sizeof grace, "reclaim_grace = %u\n", g);
    snprintf(text + n, sizeof text - n,
             "[gpucap]\n; gpucap run --memory-request: the arbiter (gpucap-agent --local) writes memory_grant here\n"
             "memory_limit = %s\nmemory_request = %s\n%s", limit, request, grace);
    char run[64];
    snprintf(run, sizeof run, "%d %llu\n", (int)getpid(), (unsigned long long)self_start_time());
    char link_to[PATH_MAX + 32];
    snprintf(link_to, sizeof link_to, "%s/arbiter.sock", base);
    char sock[PATH_MAX + 16];
    snprintf(sock, sizeof sock, "%s/arbiter.sock", dir);
    int rc = write_file(dir, "gpucap.ini", text, 0644);
    if (rc == 0)
        rc = write_file(dir, "run", run, 0644);
    if (rc == 0 && symlink(link_to, sock) != 0)
        rc = -errno;
    if (rc != 0) {
        snprintf(err, errlen, "cannot register the run in %s: %s", dir, strerror(-rc));
        cli_qos_unregister(dir);
        return -1;
    }
    char ini[PATH_MAX + 16];
    snprintf(ini, sizeof ini, "%s/gpucap.ini", dir);
    setenv(gpc_option_defs[GPC_OPT_CONFIG].env, ini, 1);
    return 0;
}

void cli_qos_unregister(const char *dir)
{
    /* A reply socket the library left (a process killed while it asked the arbiter). */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, ".gpucap-loan-", 13) == 0) {
            char p[PATH_MAX + 256];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    static const char *const files[] = {"run", "arbiter.sock", "gpucap.ini", "qos.state", "ledger"};
    char path[PATH_MAX + 32];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}
