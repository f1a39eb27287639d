/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proc.c: what the kernel says about a process and a path: /proc/<pid>/stat and other small files
 * of /proc, the descriptors a process holds, and whether a path is a mount of its own (statx).
 */
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int gpc_proc_read(int32_t pid, const char *file, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    return (int)n;
}

int gpc_proc_stat(int32_t pid, char *state, long *threads, uint64_t *start)
{
    char buf[1024];
    if (gpc_proc_read(pid, "stat", buf, sizeof buf) <= 0)
        return -1;
    /* The command name may hold spaces and parentheses: count fields after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    *state = p[2];
    for (int field = 2; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 19)
            *threads = strtol(p + 1, NULL, 10);
    }
    if (!p)
        return -1;
    *start = strtoull(p + 1, NULL, 10);
    return 0;
}

uint64_t gpc_proc_start_time(int32_t pid)
{
    char state;
    long threads;
    uint64_t start;
    return gpc_proc_stat(pid, &state, &threads, &start) == 0 ? start : 0;
}

int gpc_proc_fd_names(int32_t pid, int32_t fd, uint64_t dev, uint64_t ino)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    return (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
}

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_INO
#define STATX_INO 0x00000100U
#endif

int gpc_path_own_mount(const char *path, int fd)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash || slash[1] == '\0' || (size_t)(slash - path) >= sizeof dir)
        return -1;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    /* The system call: glibc's statx wrapper is newer than the library's glibc floor. */
    struct statx d, f;
    unsigned want = STATX_MNT_ID | STATX_INO;
    int rc = -1;
    if (syscall(SYS_statx, dfd, "", AT_EMPTY_PATH, want, &d) == 0 &&
        syscall(SYS_statx, dfd, slash + 1, AT_SYMLINK_NOFOLLOW, want, &f) == 0) {
        struct stat held;
        if (fd >= 0 && (fstat(fd, &held) != 0 || held.st_ino != f.stx_ino ||
                        held.st_dev != (dev_t)makedev(f.stx_dev_major, f.stx_dev_minor)))
            rc = 0;
        else if (d.stx_mask & f.stx_mask & STATX_MNT_ID)
            rc = d.stx_mnt_id != f.stx_mnt_id;
    }
    close(dfd);
    return rc;
}
