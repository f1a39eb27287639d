/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h: what gpucap-agent's files share (main.c options, watch.c loop, apply.c files, kube.c API).
 */
#ifndef GPUCAP_AGENT_H
#define GPUCAP_AGENT_H

#include "apply.h"
#include "kube.h"
#include "common/units.h"

#include <stdarg.h>

struct gpc_agent {
    char node[254];          /* this node's name (spec.nodeName of its pods) */
    char root[1024];         /* the kubelet's pod directory */
    struct gpc_kube kube;
    unsigned watch_timeout;  /* seconds a watch may last before the server ends it */
    unsigned max_rounds;     /* tests: lists (each followed by a watch) before returning; 0: forever */
    /* Figures, said at the end of a bounded run. */
    unsigned long lists, watched, applied, changes, events, relists_gone;
};

/* Lists, applies, watches and lists again, forever (or max_rounds times). 0. */
int gpc_agent_run(struct gpc_agent *a);

#endif
