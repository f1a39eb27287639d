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

struct gpc_agent_change {
    char from[64], to[64];       /* memory_limit before and after, as written */
    char max_from[64], max_to[64]; /* memory_limit_max likewise ("" when none) */
    uint64_t in_use;             /* the container's use now (its ledger), the highest of its devices */
    uint64_t budget;             /* the new budget on that device, resolved (0: no ledger yet) */
    bool above;                  /* some device's use is above the new budget */
};

/*
 * Applies budget `value` (and maximum `max`, NULL to leave it) of container `container` of pod
 * `pod_uid` under the kubelet's pod directory `root`: <root>/<uid>/volumes/kubernetes.io~empty-dir/
 * gpucap-lib/<container>/gpucap.ini, opened without following links, rewritten in place when the
 * figures differ (the same size written otherwise is no change). Returns 1 changed (*c filled), 0
 * nothing to change, -ENOENT when the file is not there (not injected on this node, or not yet),
 * -EINVAL for a value that is not a budget, other -errno with err set.
 */
int gpc_agent_apply(const char *root, const char *pod_uid, const char *container, const char *value, const char *max,
                    struct gpc_agent_change *c, char *err, size_t errlen);

#endif
