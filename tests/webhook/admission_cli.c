/*
 * admission_cli.c: the webhook's request handler as a filter, for the Python patch test.
 *
 * usage: admission_cli [--default-memory SIZE] [--lib-dir DIR] [--ledger-dir DIR] < request.json
 * Prints the HTTP status on the first line and the response body after it. Exit 0, or 1 when the
 * configuration is refused or memory runs out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"

int main(int argc, char **argv)
{
    struct gpc_admission_config cfg = {"/var/lib/gpucap", "/tmp", NULL};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--default-memory") == 0)
            cfg.default_memory = argv[i + 1];
        else if (strcmp(argv[i], "--lib-dir") == 0)
            cfg.lib_dir = argv[i + 1];
        else if (strcmp(argv[i], "--ledger-dir") == 0)
            cfg.ledger_dir = argv[i + 1];
    }
    char err[512];
    if (gpc_admission_check_config(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, stdin)) > 0) {
        len += n;
        if (len == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    if (!buf)
        return 1;
    struct gpc_admission_result res;
    int rc = gpc_admission_handle(&cfg, buf, len, &res);
    printf("%d\n%s", res.status, res.body ? res.body : "");
    fprintf(stderr, "%s\n", res.log);
    gpc_admission_result_free(&res);
    free(buf);
    return rc == 0 ? 0 : 1;
}
