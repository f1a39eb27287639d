/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c: gpucap-webhook's settings and start-up.
 *
 * Every setting is one row of the table below: a flag, the GPUCAP_WEBHOOK_* variable with the same
 * meaning, a default and one line of help. The environment is read first and flags override it, so
 * a Deployment can use either. --help prints the table.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucap_version.h"
#include "http.h"
#include "kubeapi.h"
#include "server.h"
#include "common/units.h"
#include "tool.h"

enum opt_id { OPT_LISTEN, OPT_CERT, OPT_KEY, OPT_DEFAULT_MEMORY, OPT_MAX_MEMORY, OPT_NAMESPACE_POLICY,
              OPT_NAMESPACE_ANNOTATIONS, OPT_KUBE_API, OPT_KUBE_TOKEN, OPT_KUBE_CA, OPT_NAMESPACE_TTL, OPT_IMAGE,
              OPT_PRELOAD, OPT_DRA_CLAIMS, OPT_VISIBLE_DEVICES, OPT_TRUSTED_NAMESPACES, OPT_THREADS,
              OPT_RELOAD_INTERVAL, OPT_MAX_CONNECTIONS, OPT_MAX_CONNECTIONS_PER_IP, OPT_POD_OPT_OUT, OPT_DRIVER_LIMITS,
              OPT_DRIVER_LIMITS_LABEL, OPT_QOS, OPT_COUNT };

enum opt_type { T_STRING, T_PATH, T_SIZE, T_UINT, T_CHOICE };

/* Each setting: its flag, variable, default and help (tools/common's table, which --help, the man
 * page and the parser read), and below, how its value is checked. */
static const struct tool_flag rows[OPT_COUNT] = {
    [OPT_LISTEN] = {"listen", 0, "ADDR", "GPUCAP_WEBHOOK_LISTEN", ":8443",
                    "address to serve HTTPS on: HOST:PORT, [IPV6]:PORT or :PORT (port 0: any free port)"},
    [OPT_CERT] = {"cert", 0, "FILE", "GPUCAP_WEBHOOK_CERT", NULL,
                  "PEM certificate (chain) file, e.g. tls.crt of a mounted Secret; reloaded when it changes"},
    [OPT_KEY] = {"key", 0, "FILE", "GPUCAP_WEBHOOK_KEY", NULL,
                 "PEM private key file, e.g. tls.key of a mounted Secret; reloaded when it changes"},
    [OPT_DEFAULT_MEMORY] = {"default-memory", 0, "SIZE", "GPUCAP_WEBHOOK_DEFAULT_MEMORY", NULL,
                            "budget for every GPU container of unannotated pods (unset: annotated pods only)"},
    [OPT_MAX_MEMORY] = {"max-memory", 0, "SIZE", "GPUCAP_WEBHOOK_MAX_MEMORY", NULL,
                        "cluster maximum: no container gets more, whatever it asks (unset: none)"},
    [OPT_NAMESPACE_POLICY] = {"namespace-policy", 0, "FILE", "GPUCAP_WEBHOOK_NAMESPACE_POLICY", NULL,
                              "ini file (a ConfigMap): [NAMESPACE] max_memory, default_memory, trusted"},
    [OPT_NAMESPACE_ANNOTATIONS] = {"namespace-annotations", 0, "true|false", "GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS",
                                   "false", "true: read gpucap.io/max-memory, default-memory, trusted on the Namespace "
                                   "(Kubernetes API; RBAC get namespaces)"},
    [OPT_KUBE_API] = {"kube-api", 0, "URL", "GPUCAP_WEBHOOK_KUBE_API", NULL,
                      "API server URL (unset: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)"},
    [OPT_KUBE_TOKEN] = {"kube-token", 0, "FILE", "GPUCAP_WEBHOOK_KUBE_TOKEN", TOOL_KUBE_TOKEN_FILE,
                        "service account token file, read again on every fetch"},
    [OPT_KUBE_CA] = {"kube-ca", 0, "FILE", "GPUCAP_WEBHOOK_KUBE_CA", TOOL_KUBE_CA_FILE, "CA bundle of the API server"},
    [OPT_NAMESPACE_TTL] = {"namespace-ttl", 0, "SECONDS", "GPUCAP_WEBHOOK_NAMESPACE_TTL", "30",
                           "seconds a Namespace's policy is cached"},
    [OPT_IMAGE] = {"image", 0, "IMAGE", "GPUCAP_WEBHOOK_IMAGE", NULL,
                   "gpucap image of the injected init container (holds /usr/local/gpucap)"},
    [OPT_PRELOAD] = {"preload", 0, "file|env", "GPUCAP_WEBHOOK_PRELOAD", "file",
                     "file: /etc/ld.so.preload, kept by env -i; env: LD_PRELOAD (a trusted namespace may "
                     "choose with the gpucap.io/preload annotation)"},
    [OPT_DRA_CLAIMS] = {"dra-claims", 0, "true|false", "GPUCAP_WEBHOOK_DRA_CLAIMS", "false",
                        "true: containers with resources.claims (DRA) are GPU containers"},
    [OPT_VISIBLE_DEVICES] = {"visible-devices", 0, "cap|deny|ignore", "GPUCAP_WEBHOOK_VISIBLE_DEVICES", "cap",
                             "NVIDIA_VISIBLE_DEVICES (in env, or possibly from an envFrom) without a GPU request: cap\n"
                             "(a GPU container), deny, ignore"},
    [OPT_TRUSTED_NAMESPACES] = {"trusted-namespaces", 0, "NS[,NS...]", "GPUCAP_WEBHOOK_TRUSTED_NAMESPACES", NULL,
                                "comma-separated namespaces whose GPUCAP_* variables and mounts are allowed"},
    [OPT_THREADS] = {"threads", 0, "N", "GPUCAP_WEBHOOK_THREADS", "4", "worker threads (1 to 256)"},
    [OPT_RELOAD_INTERVAL] = {"reload-interval", 0, "SECONDS", "GPUCAP_WEBHOOK_RELOAD_INTERVAL", "10",
                             "seconds between checks of the certificate and key files"},
    [OPT_MAX_CONNECTIONS] = {"max-connections", 0, "N", "GPUCAP_WEBHOOK_MAX_CONNECTIONS", "768",
                             "open connections in all; about 40 KiB of memory each"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"max-connections-per-ip", 0, "N", "GPUCAP_WEBHOOK_MAX_CONNECTIONS_PER_IP", "512",
                                    "open connections from one address (0: no limit of its own); an API server\n"
                                    "is one address and opens one connection per review in flight"},
    [OPT_POD_OPT_OUT] = {"pod-opt-out", 0, "true|false", "GPUCAP_WEBHOOK_POD_OPT_OUT", "false",
                         "true: a pod's gpucap.io/inject: \"false\" is honoured in every namespace (false: only\n"
                         "where the namespace policy allows it)"},
    [OPT_DRIVER_LIMITS] = {"driver-limits", 0, "off|on|auto", "GPUCAP_WEBHOOK_DRIVER_LIMITS", "off",
                           "also set the NVIDIA driver's per-container limits (NVIDIA_GPU_MEMORY_LIMIT): off, on\n"
                           "(every GPU node has them), auto (pods that select nodes with --driver-limits-label)"},
    [OPT_DRIVER_LIMITS_LABEL] = {"driver-limits-label", 0, "LABEL", "GPUCAP_WEBHOOK_DRIVER_LIMITS_LABEL",
                                 GPC_DRIVER_LABEL, "node label (value \"true\") that --driver-limits auto looks for in\n"
                                 "a pod's nodeSelector or required node affinity"},
    [OPT_QOS] = {"qos", 0, "guaranteed|burstable", "GPUCAP_WEBHOOK_QOS", "guaranteed",
                 "burstable GPU memory: guaranteed (a request only where a pod asks, gpucap.io/memory-request\n"
                 "or gpu-fraction-limit), burstable (a GPU container without a request gets memory_request = 0,\n"
                 "best effort); a namespace policy's qos overrides it"},
};

static const struct check_row {
    enum opt_type type;
    unsigned min, max;      /* for T_UINT */
    const char *choices[4]; /* for T_CHOICE: the value's index becomes the number */
} checks[OPT_COUNT] = {
    [OPT_LISTEN] = {T_STRING, 0, 0, {0}},
    [OPT_CERT] = {T_PATH, 0, 0, {0}},
    [OPT_KEY] = {T_PATH, 0, 0, {0}},
    [OPT_DEFAULT_MEMORY] = {T_SIZE, 0, 0, {0}},
    [OPT_MAX_MEMORY] = {T_SIZE, 0, 0, {0}},
    [OPT_NAMESPACE_POLICY] = {T_PATH, 0, 0, {0}},
    [OPT_NAMESPACE_ANNOTATIONS] = {T_CHOICE, 0, 0, {"false", "true"}},
    [OPT_KUBE_API] = {T_STRING, 0, 0, {0}},
    [OPT_KUBE_TOKEN] = {T_PATH, 0, 0, {0}},
    [OPT_KUBE_CA] = {T_PATH, 0, 0, {0}},
    [OPT_NAMESPACE_TTL] = {T_UINT, 0, 3600, {0}},
    [OPT_IMAGE] = {T_STRING, 0, 0, {0}},
    [OPT_PRELOAD] = {T_CHOICE, 0, 0, {"file", "env"}},
    [OPT_DRA_CLAIMS] = {T_CHOICE, 0, 0, {"false", "true"}},
    [OPT_VISIBLE_DEVICES] = {T_CHOICE, 0, 0, {"cap", "deny", "ignore"}},
    [OPT_TRUSTED_NAMESPACES] = {T_STRING, 0, 0, {0}},
    [OPT_THREADS] = {T_UINT, 1, 256, {0}},
    [OPT_RELOAD_INTERVAL] = {T_UINT, 1, 3600, {0}},
    [OPT_MAX_CONNECTIONS] = {T_UINT, 1, 4096, {0}},
    [OPT_MAX_CONNECTIONS_PER_IP] = {T_UINT, 0, 4096, {0}},
    [OPT_POD_OPT_OUT] = {T_CHOICE, 0, 0, {"false", "true"}},
    [OPT_DRIVER_LIMITS] = {T_CHOICE, 0, 0, {"off", "on", "auto"}},
    [OPT_DRIVER_LIMITS_LABEL] = {T_STRING, 0, 0, {0}},
    [OPT_QOS] = {T_CHOICE, 0, 0, {"guaranteed", "burstable"}},
};

static const struct tool_cmd webhook_cmd = {
    TOOL_COMMAND("gpucap-webhook", rows, "--cert FILE --key FILE --image IMAGE [OPTION...]",
                 "Kubernetes admission webhook that injects gpucap into GPU pods"),
    .about = "Mutating admission webhook: POST /mutate, GET /livez, /readyz, /healthz, /metrics. Each option\n"
             "may also be given in the environment variable shown; a flag overrides the variable.",
    .tail = "Sizes: see `gpucap --help`. Exit 0 when stopped, 1 when it cannot serve, 2 for a usage or\n"
            "setting error.\n",
    .man_description = "Mutating admission webhook over HTTPS: POST /mutate answers the API server's admission "
                       "reviews of pods; GET /livez (the process serves), GET /readyz and /healthz (a valid "
                       "certificate is loaded) and GET /metrics (Prometheus text: admissions by result, their "
                       "latency, the certificate's expiry). Each option may also be given in the environment "
                       "variable shown; a flag overrides the variable.",
    .man_notes_title = "SIZES",
    .man_notes = gpc_size_forms,
    .man_exit = "0 after SIGTERM or SIGINT; 1 when it cannot start (the address taken, the certificate, the key); "
                "2 for a bad option, value (a malformed address too) or policy file.",
    .man_files = "The certificate and key (--cert, --key; checked again every --reload-interval seconds), the "
                 "namespace policy (--namespace-policy), the service account's token and CA "
                 "(/var/run/secrets/kubernetes.io/serviceaccount/, with --namespace-annotations true).",
    .man_see_also = ".BR gpucap (1),\n.BR gpucap\\-exporter (1),\n.BR gpucap\\-agent (1),\n.BR gpucap.ini (5)",
};

/* Checks one value against its row; returns 0 or -EINVAL after a message naming the setting. */
static int check(int id, const char *value, const char *from, unsigned *num)
{
    const struct check_row *r = &checks[id];
    struct gpc_size size;
    char *end;
    switch (r->type) {
    case T_SIZE:
        if (gpc_parse_size(value, &size) == 0)
            return 0;
        tool_usage_error(&webhook_cmd, "%s '%s': not a size; accepted forms: %s", from, value, gpc_size_forms);
        return -EINVAL;
    case T_UINT:
        errno = 0;
        unsigned long v = strtoul(value, &end, 10);
        if (!errno && end != value && !*end && v >= r->min && v <= r->max) {
            *num = (unsigned)v;
            return 0;
        }
        tool_usage_error(&webhook_cmd, "%s '%s': expected a whole number from %u to %u", from, value, r->min, r->max);
        return -EINVAL;
    case T_CHOICE:
        for (unsigned i = 0; i < 4 && r->choices[i]; i++)
            if (strcmp(value, r->choices[i]) == 0) {
                *num = i;
                return 0;
            }
        tool_usage_error(&webhook_cmd, "%s '%s': expected one of %s%s%s%s%s", from, value, r->choices[0],
                         r->choices[1] ? ", " : "", r->choices[1] ? r->choices[1] : "", r->choices[2] ? ", " : "",
                         r->choices[2] ? r->choices[2] : "");
        return -EINVAL;
    case T_PATH:
    case T_STRING:
        if (*value)
            return 0;
        tool_usage_error(&webhook_cmd, "%s: empty", from);
        return -EINVAL;
    }
    return -EINVAL;
}

static volatile sig_atomic_t stop;

int main(int argc, char **argv)
{
    const char *value[OPT_COUNT];
    enum tool_origin from[OPT_COUNT];
    int first, rc = tool_settings(&webhook_cmd, argc, argv, value, from, &first);
    if (rc >= 0)
        return rc;

    unsigned num[OPT_COUNT] = {0};
    for (int i = 0; i < OPT_COUNT; i++) {
        if (!value[i]) {
            if (i == OPT_CERT || i == OPT_KEY || i == OPT_IMAGE) {
                tool_usage_error(&webhook_cmd, "--%s %s (or %s) is required", rows[i].name, rows[i].arg, rows[i].env);
                return TOOL_EXIT_USAGE;
            }
            continue;
        }
        char name[64];
        if (check(i, value[i], tool_origin_name(&webhook_cmd, i, from[i], name, sizeof name), &num[i]) != 0)
            return 2;
    }

    struct gpc_server_options opt = {
        .listen = value[OPT_LISTEN],
        .cert = value[OPT_CERT],
        .key = value[OPT_KEY],
        .threads = num[OPT_THREADS],
        .reload_interval = num[OPT_RELOAD_INTERVAL],
        .max_connections = num[OPT_MAX_CONNECTIONS],
        .max_connections_per_ip = num[OPT_MAX_CONNECTIONS_PER_IP],
        .admission = {.image = value[OPT_IMAGE],
                      .default_memory = value[OPT_DEFAULT_MEMORY],
                      .max_memory = value[OPT_MAX_MEMORY],
                      .preload = num[OPT_PRELOAD] ? GPC_PRELOAD_ENV : GPC_PRELOAD_FILE,
                      .dra_claims = num[OPT_DRA_CLAIMS] == 1,
                      .visible = (enum gpc_visible_mode)num[OPT_VISIBLE_DEVICES],
                      .trusted_namespaces = value[OPT_TRUSTED_NAMESPACES],
                      .pod_opt_out = num[OPT_POD_OPT_OUT] == 1,
                      .driver = (enum gpc_driver_limits)num[OPT_DRIVER_LIMITS],
                      .driver_label = value[OPT_DRIVER_LIMITS_LABEL],
                      .qos = num[OPT_QOS] == 1 ? GPC_QOS_BURSTABLE : GPC_QOS_GUARANTEED},
    };
    char err[512];
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (gpc_parse_listen(value[OPT_LISTEN], &addr, &addrlen) != 0) {
        tool_usage_error(&webhook_cmd, "--listen '%s': expected HOST:PORT, [IPV6]:PORT or :PORT with a numeric host "
                         "and port", value[OPT_LISTEN]);
        return TOOL_EXIT_USAGE;
    }
    if (gpc_admission_check_config(&opt.admission, err, sizeof err) != 0) {
        tool_usage_error(&webhook_cmd, "%s", err);
        return TOOL_EXIT_USAGE;
    }
    struct gpc_nspolicy *policy = NULL;
    struct gpc_nsapi *api = NULL;
    if (value[OPT_NAMESPACE_POLICY]) {
        if (gpc_nspolicy_open(value[OPT_NAMESPACE_POLICY], &policy, err, sizeof err) != 0) {
            fprintf(stderr, "gpucap-webhook: %s\n", err);
            return 2;
        }
        opt.admission.ns_lookup = gpc_nspolicy_lookup;
        opt.admission.ns_ctx = policy;
    }
    if (num[OPT_NAMESPACE_ANNOTATIONS]) {
        struct gpc_nsapi_options o = {value[OPT_KUBE_API], value[OPT_KUBE_TOKEN], value[OPT_KUBE_CA],
                                      num[OPT_NAMESPACE_TTL], 0};
        if (gpc_nsapi_open(&o, &api, err, sizeof err) != 0) {
            fprintf(stderr, "gpucap-webhook: %s\n", err);
            gpc_nspolicy_close(policy);
            return 2;
        }
        opt.admission.ns_lookup = gpc_nsapi_lookup;
        opt.admission.ns_ctx = api;
    }
    struct gpc_ns_chain chain = {gpc_nsapi_lookup, api, gpc_nspolicy_lookup, policy};
    if (api && policy) {
        opt.admission.ns_lookup = gpc_ns_chain_lookup;
        opt.admission.ns_ctx = &chain;
    }

    tool_stop_on_signals(&stop);
    json_object_seed(0); /* before any thread, so the hash seed is chosen once */
    setvbuf(stderr, NULL, _IOLBF, 0);

    rc = gpc_server_run(&opt, &stop) == 0 ? 0 : 1;
    gpc_nspolicy_close(policy);
    gpc_nsapi_close(api);
    return rc;
}
