/* SPDX-License-Identifier: Apache-2.0 */
/*
 * apply.h: gpucap-agent's work on the node: a container's budget record applied to its settings
 * file in the pod's gpucap-lib volume, rewritten in place, and what its ledger says is in use.
 */
#ifndef GPUCAP_AGENT_APPLY_H
#define GPUCAP_AGENT_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Whether the line [p, e) is padding a rewrite in place left behind: ';' then blanks only. */
bool gpc_agent_padding_line(const char *p, const char *e);

/*
 * Replaces (or adds) the key `key` of the [gpucap] section of the ini text `in` by `key = value`:
 * the new text in `out` (NUL-terminated), the old value in `old` ("" when the key was not there).
 * Padding lines a rewrite left (';' and blanks only) are dropped. 0, or -ENOSPC when out is short.
 */
int gpc_agent_ini_set(const char *in, const char *key, const char *value, char *out, size_t outlen, char *old,
                      size_t oldlen);

/*
 * Writes `text` over the file open on `fd` in place: the same inode (a subPath mount of it sees the
 * new content; a file renamed over it would not be seen), never shorter than it was (a shorter text
 * is padded with a comment line, so that a reader never sees the old tail after a new head). 0 or
 * -errno.
 */
int gpc_agent_write_in_place(int fd, const char *text);

/*
 * The generation line (common to gpucap inject and the agent: "; generation = " and 17 hex
 * digits): `text`, a new settings text of `len` bytes of room, gets the line of `in` (the file as
 * it was; 0 when it had none) as its first line, any other copy of it removed. 0, or -ENOSPC.
 */
int gpc_agent_signal_generation(char *text, size_t len, const char *in);
/* After `text` (starting with its generation line) was written over the file open on `fd`: the
 * line alone, at offset 0, with the next generation: the rewrite is complete. 0 or -errno. */
int gpc_agent_signal(int fd, const char *text);

/* The directory <root>/<uid>/volumes/kubernetes.io~empty-dir/<volume>/<container>, each component
 * opened without following links: its fd, or -errno. */
int gpc_agent_volume_dir(const char *root, const char *uid, const char *volume, const char *container);

struct stat;
/*
 * Opens `name` in directory `dir` with `flags` only when it is a regular file with one link, owned
 * by the directory's owner, of at most `max` bytes, without following a link or blocking: the fd
 * (and *st), or -errno with `why` set (-EPERM for a file of the wrong kind, links or owner).
 */
int gpc_agent_open_typed(int dir, const char *name, int flags, off_t max, struct stat *st, char *why, size_t whylen);

struct gpc_agent_change {
    char from[64], to[64];       /* memory_limit before and after, as written */
    char max_from[64], max_to[64]; /* memory_limit_max likewise ("" when none) */
    char asked[64];              /* the budget the record asked for, when it was above the ceiling */
    char ceiling[64];            /* the most this container may get: fixed when the pod was created */
    bool clamped;                /* the record asked for more than the ceiling: the ceiling was written */
    uint64_t in_use;             /* gpc_agent_use: the container's use now, the highest of its devices */
    uint64_t budget;             /* the new budget on that device, resolved (0: no ledger yet) */
    bool above;                  /* some device's use is above the new budget */
};

/*
 * Applies budget `value` (and maximum `max`, NULL when the record has none) of container `container`
 * of pod `pod_uid` under the kubelet's pod directory `root`: <root>/<uid>/volumes/kubernetes.io~
 * empty-dir/gpucap-lib/<container>/gpucap.ini, rewritten in place when the figures differ (the same
 * size written otherwise is no change).
 *
 * Never above the ceiling: the maximum `gpucap inject` wrote in that file when the pod was created
 * (its "; ceiling = SIZE" line; in a file of an older gpucap, the memory_limit_max it wrote, else its
 * memory_limit). The file is the platform's (no tenant container can write it) and the ceiling line
 * is kept by every rewrite, so a record (the pod's annotation, which a tenant may write where the
 * webhook does not look) can lower the budget and raise it back, never past what the platform fixed.
 * A value above the ceiling is written as the ceiling (c->clamped); a maximum above it, or in
 * another unit, leaves memory_limit_max at the ceiling, so that the library bounds the budget by it.
 *
 * Every path component is opened without following links, the file itself without blocking and only
 * as a regular file with one link, owned by the owner of its directory (gpucap inject's user): a FIFO,
 * a device, a symbolic or hard link there is refused (-EPERM). Returns 1 changed (*c filled), 0
 * nothing to change, -ENOENT when the file is not there (not injected on this node, or not yet),
 * -EINVAL for a value that is not a budget or a file that is not a gpucap settings file, other -errno;
 * err set for each error.
 */
int gpc_agent_apply(const char *root, const char *pod_uid, const char *container, const char *value, const char *max,
                    struct gpc_agent_change *c, char *err, size_t errlen);

/*
 * The container's use per its ledger (gpucap-ledger/<container>/gpucap.ledger, opened like the
 * settings file, read into memory with the library's checks) against budget `value`, into c->in_use,
 * c->budget and c->above; nothing when there is no usable ledger (it only colours the Event).
 */
void gpc_agent_use(const char *root, const char *pod_uid, const char *container, const char *value,
                   struct gpc_agent_change *c);

#endif
