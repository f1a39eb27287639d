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

#include "server.h"
#include "units.h"

enum opt_id { OPT_LISTEN, OPT_CERT, OPT_KEY, OPT_DEFAULT_MEMORY, OPT_LIB_DIR, OPT_LEDGER_DIR, OPT_THREADS,
              OPT_RELOAD_INTERVAL, OPT_MAX_CONNECTIONS, OPT_MAX_CONNECTIONS_PER_IP, OPT_COUNT };

enum opt_type { T_STRING, T_PATH, T_SIZE, T_UINT };

static const struct row {
    const char *flag;
    const char *env;
    enum opt_type type;
    const char *def; /* NULL: no default */
    unsigned min, max; /* for T_UINT */
    const char *doc;
} rows[OPT_COUNT] = {
    [OPT_LISTEN] = {"listen", "GPUCAP_WEBHOOK_LISTEN", T_STRING, ":8443", 0, 0,
                    "address to serve HTTPS on: HOST:PORT, [IPV6]:PORT or :PORT (port 0: any free port)"},
    [OPT_CERT] = {"cert", "GPUCAP_WEBHOOK_CERT", T_PATH, NULL, 0, 0,
                  "PEM certificate (chain) file, e.g. tls.crt of a mounted Secret; reloaded when it changes"},
    [OPT_KEY] = {"key", "GPUCAP_WEBHOOK_KEY", T_PATH, NULL, 0, 0,
                 "PEM private key file, e.g. tls.key of a mounted Secret; reloaded when it changes"},
    [OPT_DEFAULT_MEMORY] = {"default-memory", "GPUCAP_WEBHOOK_DEFAULT_MEMORY", T_SIZE, NULL, 0, 0,
                            "budget for every GPU container of unannotated pods (unset: annotated pods only)"},
    [OPT_LIB_DIR] = {"lib-dir", "GPUCAP_WEBHOOK_LIB_DIR", T_PATH, "/var/lib/gpucap", 0, 0,
                     "host directory holding libgpucap.so, mounted read-only at the same path"},
    [OPT_LEDGER_DIR] = {"ledger-dir", "GPUCAP_WEBHOOK_LEDGER_DIR", T_PATH, "/tmp", 0, 0,
                        "directory inside each container for its ledger, gpucap-<container>.ledger"},
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
               "in the environment variable shown; a flag overrides the variable.\n\n");
    for (int i = 0; i < OPT_COUNT; i++) {
        fprintf(f, "  --%-22s %s\n  %-24s %s", rows[i].flag, rows[i].doc, "", rows[i].env);
        if (rows[i].def)
            fprintf(f, ", default %s", rows[i].def);
        fputc('\n', f);
    }
    fprintf(f, "\nSizes: %s.\n", gpc_size_forms);
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
            if (i == OPT_CERT || i == OPT_KEY) {
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
        .admission = {value[OPT_LIB_DIR], value[OPT_LEDGER_DIR], value[OPT_DEFAULT_MEMORY]},
    };
    char err[512];
    if (gpc_admission_check_config(&opt.admission, err, sizeof err) != 0) {
        fprintf(stderr, "gpucap-webhook: %s\n", err);
        return 2;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0); /* before any thread, so the hash seed is chosen once */
    setvbuf(stderr, NULL, _IOLBF, 0);

    return gpc_server_run(&opt, &stop) == 0 ? 0 : 1;
}
