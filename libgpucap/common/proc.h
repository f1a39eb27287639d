/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proc.h: what the kernel says about a process and a path (proc.c): small /proc/<pid>/ files, and
 * whether a path is a mount of its own. The bottom of the common layer: the settings (options.c)
 * and the ledger's read side (ledger_read.c) both use it, it uses neither.
 */
#ifndef GPUCAP_COMMON_PROC_H
#define GPUCAP_COMMON_PROC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Reads /proc/<pid>/<file> (one read: the start of a longer file) into `buf` of `len` (> 0) bytes,
 * NUL-terminated: the bytes read, or -errno (buf then "").
 */
int gpc_proc_read(int32_t pid, const char *file, char *buf, size_t len);
/*
 * Fields 3 (state), 20 (threads) and 22 (start time in clock ticks since boot) of
 * /proc/<pid>/stat: 0, or -1 when it cannot be read.
 */
int gpc_proc_stat(int32_t pid, char *state, long *threads, uint64_t *start);
/* Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 if unreadable. */
uint64_t gpc_proc_start_time(int32_t pid);
/* Whether descriptor `fd` of process `pid` still names the file (dev, ino): 0 no, 1 yes, -1 unknown. */
int gpc_proc_fd_names(int32_t pid, int32_t fd, uint64_t dev, uint64_t ino);
/*
 * Whether `path` is a file mounted on its own (a bind mount, as the webhook mounts the platform file
 * and the ledger): 1 yes, 0 no, -1 cannot tell (a kernel without statx's mount id, or no such path).
 * With `fd`, the file found at `path` must also be the one `fd` holds (0 otherwise). The file is
 * looked up in its directory, opened first: a directory renamed meanwhile changes nothing.
 */
int gpc_path_own_mount(const char *path, int fd);

#endif
