/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.h: the webhook's request handler (admission.c), shared by the server, the unit tests
 * and the fuzzer. It does no I/O of its own: bytes of a request body in, an HTTP status and a body
 * out; the namespace policy comes through a lookup the caller supplies (nspolicy.c reads a file).
 */
#ifndef GPUCAP_WEBHOOK_ADMISSION_H
#define GPUCAP_WEBHOOK_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The largest request body the handler (and the server) accepts; larger ones get 413. A pod as the
 * API server sends it, managedFields included, is tens of KiB, but an UPDATE review carries two, and
 * each may be as large as the API server stores (1.5 MiB) with 256 KiB of annotations, which its
 * JSON encoder writes as up to six bytes a character (\u003c for '<'): 6 MiB holds both.
 */
#define GPC_ADMISSION_MAX_BODY (6u << 20)
#define GPC_ADMISSION_MAX_BODY_TEXT "6 MiB"

/*
 * The per-pod injection layout (TEAM contract 2). The init container copies the library, the CLI,
 * ld.so.preload and one locked ini per GPU container into the emptyDir GPC_ADMISSION_VOLUME; each
 * GPU container mounts it read-only at GPC_MOUNT_PREFIX, its ld.so.preload at /etc/ld.so.preload
 * and its ini at /etc/gpucap/gpucap.ini, and its own subdirectory of GPC_ADMISSION_LEDGER_VOLUME at
 * GPC_MOUNT_LEDGER.
 */
#define GPC_ADMISSION_VOLUME "gpucap-lib"
#define GPC_ADMISSION_LEDGER_VOLUME "gpucap-ledger"
#define GPC_ADMISSION_INIT "gpucap-init"
#define GPC_MOUNT_PREFIX "/usr/local/gpucap"
#define GPC_MOUNT_LIB GPC_MOUNT_PREFIX "/lib/libgpucap.so"
#define GPC_MOUNT_CLI GPC_MOUNT_PREFIX "/bin/gpucap"
#define GPC_MOUNT_PRELOAD "/etc/ld.so.preload"
#define GPC_MOUNT_INI_DIR "/etc/gpucap"
#define GPC_MOUNT_INI GPC_MOUNT_INI_DIR "/gpucap.ini"
#define GPC_MOUNT_LEDGER "/run/gpucap/ledger"
#define GPC_MOUNT_LEDGER_FILE GPC_MOUNT_LEDGER "/gpucap.ledger"
/* Where the init container sees the two volumes (writable there, and only there). */
#define GPC_INIT_LIB_DIR "/gpucap-out/lib"
#define GPC_INIT_LEDGER_DIR "/gpucap-out/ledger"

/* How the library reaches the processes of a GPU container. */
enum gpc_preload_mode {
    GPC_PRELOAD_FILE, /* /etc/ld.so.preload mounted read-only: survives env -i and re-exec */
    GPC_PRELOAD_ENV,  /* LD_PRELOAD appended: for images whose /etc/ld.so.preload must stay theirs */
};

/* A container that sets NVIDIA_VISIBLE_DEVICES (all, UUIDs, indices) without requesting a GPU. */
enum gpc_visible_mode {
    GPC_VISIBLE_CAP,    /* treated as a GPU container */
    GPC_VISIBLE_DENY,   /* the pod is denied */
    GPC_VISIBLE_IGNORE, /* left alone (the node set-up ignores the variable) */
};

/* Whether the webhook also sets the NVIDIA driver's own per-container limits (docs/driver-limits.md). */
enum gpc_driver_limits {
    GPC_DRIVER_OFF,  /* gpucap alone: the nodes' drivers or toolkits cannot apply them */
    GPC_DRIVER_ON,   /* every GPU node can: set them for every GPU container */
    GPC_DRIVER_AUTO, /* only for pods that select nodes carrying the driver-limits label */
};

/* What the platform set for one namespace; empty strings: not set. */
struct gpc_ns_policy {
    char max_memory[64];     /* no container of the namespace gets more */
    char default_memory[64]; /* budget of containers that ask for none */
    char driver_limits[8];   /* "off", "on", "auto"; "": the cluster's --driver-limits */
    bool trusted;            /* tenant GPUCAP_* variables and mounts over gpucap's paths allowed */
    bool allow_opt_out;      /* a pod's gpucap.io/inject: "false" is honoured in this namespace */
    char qos[16];            /* "burstable", "guaranteed"; "": the cluster's --qos */
};

/*
 * Fills *out for namespace `ns` (all empty when the platform set nothing for it). Returns 0, or a
 * negative errno with a message in err when the policy cannot be known: the pod is then denied,
 * with a 5xx-class status that says to retry unless the error is -EINVAL (the platform's policy is
 * malformed: retrying does not help).
 */
typedef int (*gpc_ns_lookup_fn)(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen);

/*
 * Burstable GPU memory (issue 35): whether a container that asks for no request gets one. A
 * container is burstable when its settings carry memory_request (the webhook writes it for pods
 * that use the request annotations, or for every GPU container where the platform turns QoS on).
 */
enum gpc_qos {
    GPC_QOS_GUARANTEED, /* only pods that ask for a request get one; the others as before (request = limit) */
    GPC_QOS_BURSTABLE,  /* a GPU container that asks for no request gets memory_request = 0 (best effort) */
};

/* What the webhook injects; every string must outlive the calls that use it. */
struct gpc_admission_config {
    const char *image;              /* gpucap image of the init container */
    const char *default_memory;     /* cluster default budget; NULL: only pods that ask are capped */
    const char *max_memory;         /* cluster maximum; NULL: none */
    enum gpc_preload_mode preload;  /* default delivery; a trusted namespace may ask for the other */
    bool dra_claims;                /* containers with resources.claims are GPU containers */
    enum gpc_visible_mode visible;  /* NVIDIA_VISIBLE_DEVICES without a GPU request */
    const char *trusted_namespaces; /* comma-separated; NULL: none */
    bool pod_opt_out;               /* gpucap.io/inject: "false" honoured in every namespace (else only
                                       where the namespace policy allows it) */
    enum gpc_driver_limits driver;  /* the NVIDIA driver's limits too (a namespace policy may override) */
    const char *driver_label;       /* node label of driver-limit nodes, for `auto`; NULL: GPC_DRIVER_LABEL */
    enum gpc_qos qos;               /* --qos: the requests of containers that ask for none (a namespace policy
                                       may override) */
    gpc_ns_lookup_fn ns_lookup;     /* NULL: no per-namespace policy */
    void *ns_ctx;
};

/* The node label `--driver-limits=auto` looks for in a pod's node selection (value "true"). */
#define GPC_DRIVER_LABEL "gpucap.io/driver-limits"

/*
 * The annotation where the webhook records the resolved budget of every injected container, at
 * CREATE and at every UPDATE that changes a budget (any other UPDATE, of the pod or of a
 * subresource, keeps the old record exactly, or none); the node agent applies exactly that
 * (examples/kubernetes/README.md gives the format). Only the webhook writes it: a tenant's value is
 * put back.
 */
#define GPC_ANN_BUDGETS "gpucap.io/budgets"

/* What to send back. body is NUL-terminated (body_len excludes the NUL) and owned by the result. */
struct gpc_admission_result {
    int status;               /* HTTP status: 200, 400 or 413 (a review's own status.code may be 503) */
    const char *content_type; /* "application/json" or "text/plain" */
    char *body;
    size_t body_len;
    char log[2048];           /* one line, no newline: uid, pod, decision, containers touched */
};

/*
 * Checks a configuration before it is used: image a plain image reference, the sizes sizes, the
 * maximum not below the default when both are comparable. Returns 0, or -EINVAL with a message
 * naming the setting written to err.
 */
int gpc_admission_check_config(const struct gpc_admission_config *cfg, char *err, size_t errlen);

/*
 * One line (no newline) for the start-up log: the cluster maximum and default, and what bounds a
 * tenant's request when no maximum is set (the default is then the maximum), who may opt out, the
 * driver's limits. Never fails; truncated to len.
 */
void gpc_admission_describe(const struct gpc_admission_config *cfg, char *out, size_t len);

/*
 * Answers one POST /mutate body (a pod's CREATE, an UPDATE of a pod or of a subresource of it, a
 * Binding of pods/binding). A well-formed admission.k8s.io/v1 AdmissionReview gets 200 and a
 * response review (allowed with a base64 JSONPatch, allowed without one, or denied with a message;
 * `warnings`, on an admitted pod only, for what a scheduler's request asks that gpucap does not enforce,
 * such as HAMi's gpucores, and for every budget the maximum lowers, at admission or on the node);
 * anything else gets 400 (413 past GPC_ADMISSION_MAX_BODY) with a text message. Never fails for any
 * input: returns 0, or -ENOMEM when memory ran out, in which case out holds status 500 and no body.
 * Release out with gpc_admission_result_free().
 */
int gpc_admission_handle(const struct gpc_admission_config *cfg, const char *body, size_t len,
                         struct gpc_admission_result *out);

/* Frees what gpc_admission_handle() put in the result; safe on a zeroed or already freed result. */
void gpc_admission_result_free(struct gpc_admission_result *res);

/* ---- requests.c: the schedulers' GPU-share requests (KAI annotations, HAMi resources) ---- */
#include "requests.h"

/* ---- nspolicy.c: the per-namespace policy from a platform-owned file (a mounted ConfigMap) ---- */

struct gpc_nspolicy;
/*
 * Reads the policy file at `path` (ini: one [NAMESPACE] section per namespace with max_memory,
 * default_memory, trusted). Returns 0 with *out set, or -EINVAL/-errno with a message naming the
 * file and line in err.
 */
int gpc_nspolicy_open(const char *path, struct gpc_nspolicy **out, char *err, size_t errlen);
/*
 * A gpc_ns_lookup_fn over an open policy (ctx). The file is read again when it changed (a
 * ConfigMap update); a file broken by an update keeps the last good table and says so once.
 */
int gpc_nspolicy_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen);
void gpc_nspolicy_close(struct gpc_nspolicy *p);

/* ---- nsapi.c: the per-namespace policy from annotations on the Namespace objects (Kubernetes API) ---- */

struct gpc_nsapi;
struct gpc_nsapi_options {
    const char *url;        /* API server, "https://HOST:PORT"; NULL: KUBERNETES_SERVICE_HOST/PORT */
    const char *token_file; /* the service account's bearer token, read again on every fetch */
    const char *ca_file;    /* the cluster's CA bundle, the only one trusted for the API server */
    unsigned ttl;           /* seconds a fetched policy is used; 0: fetch on every lookup */
    unsigned timeout_ms;    /* for one fetch, TLS handshake included; 0: 3000 (the API server gives us 5 s) */
};
/*
 * Prepares lookups of gpucap.io/max-memory, gpucap.io/default-memory and gpucap.io/trusted on the
 * Namespace objects. Call before any thread starts (libcurl's global init). Returns 0 with *out
 * set, or a negative errno with a message in err. Nothing is fetched yet.
 */
int gpc_nsapi_open(const struct gpc_nsapi_options *o, struct gpc_nsapi **out, char *err, size_t errlen);
/*
 * A gpc_ns_lookup_fn over an open gpc_nsapi (ctx): from the cache within the TTL, else fetched;
 * when a fetch fails, the expired entry if there is one (logged), else a negative errno with the
 * reason in err (the pod is denied).
 */
int gpc_nsapi_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen);
/* How many fetches were tried (for tests). */
unsigned long gpc_nsapi_fetches(struct gpc_nsapi *p);
void gpc_nsapi_close(struct gpc_nsapi *p);

/* Both sources: the Namespace's annotations, then the policy file where it sets a field. */
struct gpc_ns_chain {
    gpc_ns_lookup_fn annotations;
    void *annotations_ctx;
    gpc_ns_lookup_fn file;
    void *file_ctx;
};
/* A gpc_ns_lookup_fn over a struct gpc_ns_chain (ctx); fails when either source fails. */
int gpc_ns_chain_lookup(void *ctx, const char *ns, struct gpc_ns_policy *out, char *err, size_t errlen);

#endif
