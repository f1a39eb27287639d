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
#include "server.h"
#include "common/units.h"

enum opt_id { OPT_LISTEN, OPT_CERT, OPT_KEY, OPT_DEFAULT_MEMORY, OPT_MAX_MEMORY, OPT_NAMESPACE_POLICY,
              OPT_NAMESPACE_ANNOTATIONS, OPT_KUBE_API, OPT_KUBE_TOKEN, OPT_KUBE_CA, OPT_NAMESPACE_TTL, OPT_IMAGE,
              OPT_PRELOAD, OPT_DRA_CLAIMS, OPT_VISIBLE_DEVICES, OPT_TRUSTED_NAMESPACES, OPT_THREADS,
              OPT_RELOAD_INTERVAL, OPT_MAX_CONNECTIONS, OPT_MAX_CONNECTIONS_PER_IP, OPT_COUNT };

enum opt_type { T_STRING, T_PATH, T_SIZE, T_UINT, T_CHOICE };

static const struct row {
    const char *flag;
    const char *env;
    enum opt_type type;
    const char *def; /* NULL: no default */
    unsigned min, max; /* for T_UINT */
    const char *doc;
    const char *choices[4]; /* for T_CHOICE: the value's index becomes the number */
} rows[OPT_COUNT] = {
    [OPT_LISTEN] = {"listen", "GPUCAP_WEBHOOK_LISTEN", T_STRING, ":8443", 0, 0,
                    "address to serve HTTPS on: HOST:PORT, [IPV6]:PORT or :PORT (port 0: any free port)"},
    [OPT_CERT] = {"cert", "GPUCAP_WEBHOOK_CERT", T_PATH, NULL, 0, 0,
                  "PEM certificate (chain) file, e.g. tls.crt of a mounted Secret; reloaded when it changes"},
    [OPT_KEY] = {"key", "GPUCAP_WEBHOOK_KEY", T_PATH, NULL, 0, 0,
                 "PEM private key file, e.g. tls.key of a mounted Secret; reloaded when it changes"},
    [OPT_DEFAULT_MEMORY] = {"default-memory", "GPUCAP_WEBHOOK_DEFAULT_MEMORY", T_SIZE, NULL, 0, 0,
                            "budget for every GPU container of unannotated pods (unset: annotated pods only)"},
    [OPT_MAX_MEMORY] = {"max-memory", "GPUCAP_WEBHOOK_MAX_MEMORY", T_SIZE, NULL, 0, 0,
                        "cluster maximum: no container gets more, whatever it asks (unset: none)"},
    [OPT_NAMESPACE_POLICY] = {"namespace-policy", "GPUCAP_WEBHOOK_NAMESPACE_POLICY", T_PATH, NULL, 0, 0,
                              "ini file (a ConfigMap): [NAMESPACE] max_memory, default_memory, trusted"},
    [OPT_NAMESPACE_ANNOTATIONS] = {"namespace-annotations", "GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS", T_CHOICE, "false",
                                   0, 0, "true: read gpucap.io/max-memory, default-memory, trusted on the Namespace "
                                   "(Kubernetes API; RBAC get namespaces)", {"false", "true"}},
    [OPT_KUBE_API] = {"kube-api", "GPUCAP_WEBHOOK_KUBE_API", T_STRING, NULL, 0, 0,
                      "API server URL (unset: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)"},
    [OPT_KUBE_TOKEN] = {"kube-token", "GPUCAP_WEBHOOK_KUBE_TOKEN", T_PATH,
                        "/var/run/secrets/kubernetes.io/serviceaccount/token", 0, 0,
                        "service account token file, read again on every fetch"},
    [OPT_KUBE_CA] = {"kube-ca", "GPUCAP_WEBHOOK_KUBE_CA", T_PATH, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
                     0, 0, "CA bundle of the API server"},
    [OPT_NAMESPACE_TTL] = {"namespace-ttl", "GPUCAP_WEBHOOK_NAMESPACE_TTL", T_UINT, "30", 0, 3600,
                           "seconds a Namespace's policy is cached"},
    [OPT_IMAGE] = {"image", "GPUCAP_WEBHOOK_IMAGE", T_STRING, NULL, 0, 0,
                   "gpucap image of the injected init container (holds /usr/local/gpucap)"},
    [OPT_PRELOAD] = {"preload", "GPUCAP_WEBHOOK_PRELOAD", T_CHOICE, "file", 0, 0,
                     "file: /etc/ld.so.preload, kept by env -i; env: LD_PRELOAD (a trusted namespace may "
                     "choose with the gpucap.io/preload annotation)", {"file", "env"}},
    [OPT_DRA_CLAIMS] = {"dra-claims", "GPUCAP_WEBHOOK_DRA_CLAIMS", T_CHOICE, "false", 0, 0,
                        "true: containers with resources.claims (DRA) are GPU containers", {"false", "true"}},
    [OPT_VISIBLE_DEVICES] = {"visible-devices", "GPUCAP_WEBHOOK_VISIBLE_DEVICES", T_CHOICE, "cap", 0, 0,
                             "NVIDIA_VISIBLE_DEVICES without a GPU request: cap (a GPU container), deny, ignore",
                             {"cap", "deny", "ignore"}},
    [OPT_TRUSTED_NAMESPACES] = {"trusted-namespaces", "GPUCAP_WEBHOOK_TRUSTED_NAMESPACES", T_STRING, NULL, 0, 0,
                                "comma-separated namespaces whose GPUCAP_* variables and mounts are allowed"},
    [OPT_THREADS] = {"threads", "GPUCAP_WEBHOOK_THREADS", T_UINT, "4", 1, 256, "worker threads"},
    [OPT_RELOAD_INTERVAL] = {"reload-interval", "GPUCAP_WEBHOOK_RELOAD_INTERVAL", T_UINT, "10", 1, 3600,
                             "seconds between checks of the certificate and key files"},
    [OPT_MAX_CONNECTIONS] = {"max-connections", "GPUCAP_WEBHOOK_MAX_CONNECTIONS", T_UINT, "256", 1, 4096,
                             "open connections in all; about 100 KiB of memory each at most"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"max-connections-per-ip", "GPUCAP_WEBHOOK_MAX_CONNECTIONS_PER_IP", T_UINT, "64",
                                    1, 4096, "open connections from one address (an API server counts as one)"},
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpucap-webhook --cert FILE --key FILE [options]\n\n"
               "Mutating admission webhook: POST /mutate, GET /healthz. Each option may also be given\n"
               "in the environment variable shown; a flag overrides the variable. --version prints the version.\n\n");
    for (int i = 0; i < OPT_COUNT; i++) {
        fprintf(f, "  --%-22s %s\n  %-24s %s", rows[i].flag, rows[i].doc, "", rows[i].env);
        if (rows[i].def)
            fprintf(f, ", default %s", rows[i].def);
        fputc('\n', f);
    }
    fprintf(f, "\nSizes: %s.\n", gpc_size_forms);
}

/* gpucap-webhook(1), generated from the same rows as --help (`--help-man`, run by the build). */
static void usage_man(FILE *f)
{
    fprintf(f, ".TH GPUCAP-WEBHOOK 1 \"\" \"gpucap %s\" \"User Commands\"\n", GPUCAP_VERSION_STRING);
    fputs(".SH NAME\ngpucap\\-webhook \\- Kubernetes admission webhook that injects gpucap into GPU pods\n"
          ".SH SYNOPSIS\n.B gpucap\\-webhook\n\\-\\-cert \\fIFILE\\fR \\-\\-key \\fIFILE\\fR [\\fIoptions\\fR]\n"
          ".SH DESCRIPTION\nMutating admission webhook: POST /mutate, GET /healthz. Each option may also be "
          "given in the environment variable shown; a flag overrides the variable.\n.SH OPTIONS\n", f);
    for (int i = 0; i < OPT_COUNT; i++) {
        fputs(".TP\n.B \\-\\-", f);
        for (const char *p = rows[i].flag; *p; p++)
            fputs(*p == '-' ? "\\-" : (char[]){*p, 0}, f);
        fprintf(f, "\n%s (%s%s%s)\n", rows[i].doc, rows[i].env, rows[i].def ? ", default " : "",
                rows[i].def ? rows[i].def : "");
    }
    fprintf(f, ".SH SIZES\n%s.\n.SH SEE ALSO\n.BR gpucap (1)\n", gpc_size_forms);
}

/* Checks one value against its row; returns 0 or -EINVAL after a message naming the setting. */
static int check(int id, const char *value, const char *from, unsigned *num)
{
    const struct row *r = &rows[id];
    struct gpc_size size;
    char *end;
    switch (r->type) {
    case T_SIZE:
        if (gpc_parse_size(value, &size) == 0)
            return 0;
        fprintf(stderr, "gpucap-webhook: %s \"%s\": not a size; accepted forms: %s\n", from, value, gpc_size_forms);
        return -EINVAL;
    case T_UINT:
        errno = 0;
        unsigned long v = strtoul(value, &end, 10);
        if (!errno && end != value && !*end && v >= r->min && v <= r->max) {
            *num = (unsigned)v;
            return 0;
        }
        fprintf(stderr, "gpucap-webhook: %s \"%s\": expected a whole number from %u to %u\n", from, value, r->min,
                r->max);
        return -EINVAL;
    case T_CHOICE:
        for (unsigned i = 0; i < 4 && r->choices[i]; i++)
            if (strcmp(value, r->choices[i]) == 0) {
                *num = i;
                return 0;
            }
        fprintf(stderr, "gpucap-webhook: %s \"%s\": expected one of %s%s%s%s%s\n", from, value, r->choices[0],
                r->choices[1] ? ", " : "", r->choices[1] ? r->choices[1] : "", r->choices[2] ? ", " : "",
                r->choices[2] ? r->choices[2] : "");
        return -EINVAL;
    case T_PATH:
    case T_STRING:
        if (*value)
            return 0;
        fprintf(stderr, "gpucap-webhook: %s: empty\n", from);
        return -EINVAL;
    }
    return -EINVAL;
}

int main(int argc, char **argv)
{
    const char *value[OPT_COUNT];
    const char *from[OPT_COUNT];
    char names[OPT_COUNT][48];
    for (int i = 0; i < OPT_COUNT; i++) {
        const char *env = getenv(rows[i].env);
        value[i] = env && *env ? env : rows[i].def;
        from[i] = env && *env ? rows[i].env : "default";
    }

    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--help-man") == 0) {
            usage_man(stdout);
            return 0;
        }
        if (strcmp(arg, "--version") == 0) {
            printf("gpucap-webhook %s\n", GPUCAP_VERSION_STRING);
            return 0;
        }
        int id = -1;
        const char *eq = strchr(arg, '=');
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        for (int i = 0; i < OPT_COUNT && arg[0] == '-' && arg[1] == '-'; i++)
            if (strlen(rows[i].flag) == n - 2 && memcmp(arg + 2, rows[i].flag, n - 2) == 0)
                id = i;
        if (id < 0) {
            fprintf(stderr, "gpucap-webhook: unknown argument \"%s\" (see --help)\n", arg);
            return 2;
        }
        if (!eq && a + 1 >= argc) {
            fprintf(stderr, "gpucap-webhook: --%s needs a value\n", rows[id].flag);
            return 2;
        }
        value[id] = eq ? eq + 1 : argv[++a];
        snprintf(names[id], sizeof names[id], "--%s", rows[id].flag);
        from[id] = names[id];
    }

    unsigned num[OPT_COUNT] = {0};
    for (int i = 0; i < OPT_COUNT; i++) {
        if (!value[i]) {
            if (i == OPT_CERT || i == OPT_KEY || i == OPT_IMAGE) {
                fprintf(stderr, "gpucap-webhook: --%s (or %s) is required\n", rows[i].flag, rows[i].env);
                return 2;
            }
            continue;
        }
        if (check(i, value[i], from[i], &num[i]) != 0)
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
                      .trusted_namespaces = value[OPT_TRUSTED_NAMESPACES]},
    };
    char err[512];
    if (gpc_admission_check_config(&opt.admission, err, sizeof err) != 0) {
        fprintf(stderr, "gpucap-webhook: %s\n", err);
        return 2;
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

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0); /* before any thread, so the hash seed is chosen once */
    setvbuf(stderr, NULL, _IOLBF, 0);

    int rc = gpc_server_run(&opt, &stop) == 0 ? 0 : 1;
    gpc_nspolicy_close(policy);
    gpc_nsapi_close(api);
    return rc;
}
