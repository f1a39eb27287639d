/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_nsapi.c: the Namespace-annotation policy (nsapi.c) against fake_apiserver.py over TLS.
 *
 * usage: test_nsapi URL TOKEN_FILE CA_FILE OTHER_CA_FILE BAD_TOKEN_FILE SERVER_PID
 * Annotations read (max, default, trusted; none), the cache (one fetch within the TTL, one per
 * lookup with TTL 0), a refused token and an unknown CA fail (the pod would be denied), bad
 * annotation values and names fail without a fetch, and once the server is gone an expired entry
 * is used rather than nothing. Exit 0 pass, 1 fail.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admission.h"
#include "check.h"

static struct gpc_nsapi *open_api(const char *url, const char *token, const char *ca, unsigned ttl)
{
    /* A generous timeout: the machine running the tests may be loaded (sanitizers, parallel tests). */
    struct gpc_nsapi_options o = {url, token, ca, ttl, 20000};
    struct gpc_nsapi *p = NULL;
    char err[512];
    if (gpc_nsapi_open(&o, &p, err, sizeof err) != 0) {
        fprintf(stderr, "FAIL open: %s\n", err);
        exit(1);
    }
    return p;
}

static int lookup(struct gpc_nsapi *p, const char *ns, struct gpc_ns_policy *out, char *err, size_t n)
{
    err[0] = '\0';
    return gpc_nsapi_lookup(p, ns, out, err, n);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s URL TOKEN CA OTHER_CA BAD_TOKEN SERVER_PID\n", argv[0]);
        return 1;
    }
    const char *url = argv[1], *token = argv[2], *ca = argv[3], *other_ca = argv[4], *bad_token = argv[5];
    struct gpc_ns_policy pol;
    char err[512];

    struct gpc_nsapi *p = open_api(url, token, ca, 3600);
    CHECK(lookup(p, "ml", &pol, err, sizeof err) == 0, "ml: %s", err);
    CHECK(strcmp(pol.max_memory, "4GiB") == 0 && strcmp(pol.default_memory, "2GiB") == 0 && !pol.trusted,
          "ml: max %s default %s trusted %d", pol.max_memory, pol.default_memory, pol.trusted);
    for (int i = 0; i < 5; i++)
        CHECK(lookup(p, "ml", &pol, err, sizeof err) == 0 && strcmp(pol.max_memory, "4GiB") == 0, "ml again");
    CHECK(gpc_nsapi_fetches(p) == 1, "within the TTL one fetch, got %lu", gpc_nsapi_fetches(p));
    CHECK(lookup(p, "research", &pol, err, sizeof err) == 0 && pol.trusted && !pol.max_memory[0], "research");
    CHECK(lookup(p, "open", &pol, err, sizeof err) == 0 && !pol.trusted && !pol.max_memory[0] &&
              !pol.default_memory[0], "open: no policy");
    /* The value is checked by the handler (a size); here only passed on. */
    CHECK(lookup(p, "typo", &pol, err, sizeof err) == 0 && strcmp(pol.max_memory, "lots") == 0, "typo passed on");
    CHECK(lookup(p, "badtrust", &pol, err, sizeof err) < 0 && strstr(err, "gpucap.io/trusted"), "badtrust: %s", err);
    CHECK(lookup(p, "driver", &pol, err, sizeof err) == 0 && strcmp(pol.driver_limits, "auto") == 0 && pol.allow_opt_out,
          "driver-limits and allow-opt-out annotations: %s %d", pol.driver_limits, pol.allow_opt_out);
    CHECK(lookup(p, "optout", &pol, err, sizeof err) == 0 && pol.allow_opt_out, "allow-opt-out as a label");
    CHECK(lookup(p, "open", &pol, err, sizeof err) == 0 && !pol.allow_opt_out && !pol.driver_limits[0], "open: neither");
    CHECK(lookup(p, "baddriver", &pol, err, sizeof err) == -EINVAL && strstr(err, "gpucap.io/driver-limits"),
          "baddriver: %s", err);
    CHECK(lookup(p, "burst", &pol, err, sizeof err) == 0 && strcmp(pol.qos, "burstable") == 0, "gpucap.io/qos: %s",
          pol.qos);
    CHECK(lookup(p, "open", &pol, err, sizeof err) == 0 && !pol.qos[0], "open: no qos");
    CHECK(lookup(p, "badqos", &pol, err, sizeof err) == -EINVAL && strstr(err, "gpucap.io/qos"), "badqos: %s", err);
    CHECK(lookup(p, "gone", &pol, err, sizeof err) < 0 && strstr(err, "404"), "unknown namespace: %s", err);
    /* An API server answering 5xx: -EAGAIN, which the handler turns into a 503 that says retry. */
    CHECK(lookup(p, "flaky", &pol, err, sizeof err) == -EAGAIN && strstr(err, "503"), "API 503: %s", err);
    unsigned long before = gpc_nsapi_fetches(p);
    CHECK(lookup(p, "../../api", &pol, err, sizeof err) < 0 && gpc_nsapi_fetches(p) == before,
          "a name that is not a DNS label is refused without a fetch");
    gpc_nsapi_close(p);

    p = open_api(url, token, ca, 0);
    for (int i = 0; i < 3; i++)
        CHECK(lookup(p, "ml", &pol, err, sizeof err) == 0, "ttl 0: %s", err);
    CHECK(gpc_nsapi_fetches(p) == 3, "TTL 0: a fetch per lookup, got %lu", gpc_nsapi_fetches(p));

    struct gpc_nsapi *q = open_api(url, bad_token, ca, 30);
    CHECK(lookup(q, "ml", &pol, err, sizeof err) < 0 && strstr(err, "401"), "a refused token fails: %s", err);
    gpc_nsapi_close(q);
    q = open_api(url, token, other_ca, 30);
    CHECK(lookup(q, "ml", &pol, err, sizeof err) < 0, "a server the CA did not sign fails");
    gpc_nsapi_close(q);
    q = open_api(url, "/nonexistent/token", ca, 30);
    CHECK(lookup(q, "ml", &pol, err, sizeof err) < 0 && strstr(err, "token"), "no token file: %s", err);
    gpc_nsapi_close(q);

    /* The API server goes away: the entry fetched before (expired, TTL 0) is still the platform's. */
    pid_t server = (pid_t)atoi(argv[6]);
    kill(server, SIGTERM);
    for (int i = 0; i < 100 && kill(server, 0) == 0; i++)
        usleep(20000);
    CHECK(lookup(p, "ml", &pol, err, sizeof err) == 0 && strcmp(pol.max_memory, "4GiB") == 0,
          "API unreachable: the last policy is used");
    CHECK(lookup(p, "research", &pol, err, sizeof err) < 0, "API unreachable and nothing cached: fails");
    gpc_nsapi_close(p);

    if (!failures)
        printf("ok: namespace annotations through the API: cache, TLS, token, failures\n");
    return test_result();
}
