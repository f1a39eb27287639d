/* SPDX-License-Identifier: Apache-2.0 */
/*
 * holders.c: who holds a process's device file, as the kernel keeps one.
 *
 * A real driver frees a process's device memory when the last descriptor of its device files
 * closes, not when the process that opened them ends: a fork child (or a raw clone child) copies
 * the descriptor table, so it holds its parent's device files, and with them the parent's memory,
 * until it exits or execs (the driver's descriptors are close-on-exec). The fake's "device file" is
 * a pipe each process opens (record.c); here is how the record finds a process still holding one:
 * the owner itself, else the holder it found last (a hint kept in the slot), else any process in
 * /proc with that pipe at the same descriptor number (fork and clone keep the number). So a test
 * sees what the card really holds: a DataLoader worker's parent that died keeps its memory on the
 * card as long as the worker lives.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_internal.h"

/* Whether process `pid` runs (not a zombie without threads), its start time in *start. */
static bool runs(int32_t pid, uint64_t *start)
{
    char state;
    long threads = 1;
    if (pid <= 0 || fk_proc_stat(pid, &state, &threads, start) != 0)
        return false;
    return !((state == 'Z' || state == 'X') && threads <= 1);
}

/* Whether process `pid` has the pipe `ino` at descriptor `fd`. */
static bool has_fd(int32_t pid, int32_t fd, uint64_t ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
    return stat(path, &st) == 0 && (uint64_t)st.st_ino == ino;
}

bool fk_device_file_held(int32_t owner, int32_t fd, uint64_t ino, int32_t *hint, uint64_t *hint_start)
{
    uint64_t start;
    if (fd < 0)
        return false;
    if (*hint > 0 && *hint != owner && runs(*hint, &start) && start == *hint_start && has_fd(*hint, fd, ino))
        return true;
    DIR *dir = opendir("/proc");
    if (!dir)
        return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(dir));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == owner || !has_fd((int32_t)pid, fd, ino) || !runs((int32_t)pid, &start))
            continue;
        *hint = (int32_t)pid;
        *hint_start = start;
        found = true;
    }
    closedir(dir);
    return found;
}
