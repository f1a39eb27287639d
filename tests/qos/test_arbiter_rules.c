/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_arbiter_rules.c CASE: the arbiter's rules (tools/agent/arbiter.c) on figures, one case each, and the
 * settings text it edits (arbiter_file.c):
 *   lendable    lendable = usable - other - sum max(R, used, G); loaned = sum G - R; requested = sum R
 *   overcommit  in scheduling order, a request that does not fit beside those before it is best effort
 *   loan        a loan's size: the ask rounded up to 2 MiB, never beyond L, from the lendable only
 *   refusals    not burstable, at its limit, a reclaim under way, more than is lendable
 *   others      a loan never takes another member's request (however it is asked)
 *   victim      best effort first, then burstable by excess, ties to the last scheduled; never the
 *               asker, one within its request, or one without a process on the card
 *   ini         memory_grant set in [gpucap] or a [device.GPU-...] section, one copy, padding dropped
 */
#include "arbiter.h"
#include "check.h"

#include <errno.h>
#include <string.h>

#define MiB (UINT64_C(1) << 20)

static struct gpc_arbiter A;

/* A card of `usable` MiB, others holding `other` MiB. */
static void card(uint64_t usable, uint64_t other)
{
    memset(&A, 0, sizeof A);
    A.ncards = 1;
    snprintf(A.card[0].uuid, sizeof A.card[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
    A.card[0].size = A.card[0].usable = usable * MiB;
    A.card[0].other = other * MiB;
}

/* A member on the card: burstable when r >= 0 (R = r MiB), else guaranteed; sched its order. */
static int member(int r, uint64_t l, uint64_t used, uint64_t g, uint64_t sched)
{
    int i = A.nmembers++;
    struct gpc_arb_member *m = &A.m[i];
    m->live = true;
    m->sock = -1;
    m->sched_ns = sched;
    snprintf(m->name, sizeof m->name, "m%d", i);
    struct gpc_arb_use *u = &m->u[0];
    u->on = true;
    u->burstable = r >= 0;
    u->request = r >= 0 ? (uint64_t)r * MiB : 0;
    u->limit = l * MiB;
    u->used = used * MiB;
    u->grant = g * MiB;
    u->top_pid = used ? 1000 + i : 0;
    u->top_bytes = used * MiB;
    return i;
}

static void t_lendable(void)
{
    card(1000, 20);
    member(-1, 300, 0, 0, 1);     /* guaranteed: R = L = 300 */
    member(100, 600, 250, 300, 2); /* burstable: max(100, 250, 300) = 300 */
    member(0, 500, 50, 0, 3);      /* best effort: 50 */
    gpc_arb_card_figures(&A, 0);
    CHECK(A.card[0].lendable == 330 * MiB, "lendable %llu MiB", (unsigned long long)(A.card[0].lendable / MiB));
    CHECK(A.card[0].loaned == 200 * MiB, "loaned %llu MiB", (unsigned long long)(A.card[0].loaned / MiB));
    CHECK(A.card[0].requested == 400 * MiB, "requested %llu", (unsigned long long)(A.card[0].requested / MiB));
    CHECK(!A.card[0].overcommitted, "not overcommitted");
    /* A card held past its size lends nothing (never negative). */
    A.card[0].other = 900 * MiB;
    gpc_arb_card_figures(&A, 0);
    CHECK(A.card[0].lendable == 0, "nothing lendable");
}

static void t_overcommit(void)
{
    card(1000, 0);
    int a = member(600, 800, 0, 0, 2), b = member(600, 800, 0, 0, 5), c = member(-1, 300, 0, 0, 3);
    gpc_arb_card_figures(&A, 0);
    /* In order a (600), c (900), b (1500 > 1000): b is the one that came last. */
    CHECK(!A.m[a].u[0].overcommitted && !A.m[c].u[0].overcommitted, "a and c fit");
    CHECK(A.m[b].u[0].overcommitted, "b, scheduled last, is best effort");
    CHECK(gpc_arb_request(&A.m[b].u[0]) == 0 && gpc_arb_request(&A.m[a].u[0]) == 600 * MiB, "its request counts 0");
    CHECK(A.card[0].overcommitted, "the card says so");
    CHECK(A.card[0].requested == 1500 * MiB, "requested counts them all");
    /* Scheduled the other way round, a is the last. */
    A.m[b].sched_ns = 1;
    A.m[a].sched_ns = 9;
    gpc_arb_card_figures(&A, 0);
    CHECK(A.m[a].u[0].overcommitted && !A.m[b].u[0].overcommitted, "the last scheduled is best effort");
}

static void t_loan(void)
{
    char why[200];
    card(1000, 0);
    int b = member(100, 600, 250, 300, 1);
    gpc_arb_card_figures(&A, 0); /* lendable 700 */
    uint64_t g = gpc_arb_loan(&A, 0, b, 10 * MiB, why, sizeof why);
    CHECK(g == 310 * MiB, "a loan beyond the grant in force: %llu", (unsigned long long)(g / MiB));
    g = gpc_arb_loan(&A, 0, b, 1, why, sizeof why);
    CHECK(g == 302 * MiB, "at least 2 MiB: %llu", (unsigned long long)g);
    g = gpc_arb_loan(&A, 0, b, 3 * MiB + 1, why, sizeof why);
    CHECK(g == 304 * MiB, "rounded up to 2 MiB: %llu", (unsigned long long)g);
    g = gpc_arb_loan(&A, 0, b, 900 * MiB, why, sizeof why);
    CHECK(g == 600 * MiB, "never beyond L: %llu", (unsigned long long)(g / MiB));
    /* A member without a grant: in force is its request. */
    card(1000, 0);
    int c = member(100, 600, 80, 0, 1);
    gpc_arb_card_figures(&A, 0);
    g = gpc_arb_loan(&A, 0, c, 50 * MiB, why, sizeof why);
    CHECK(g == 150 * MiB, "from the request: %llu", (unsigned long long)(g / MiB));
}

static void t_refusals(void)
{
    char why[200];
    card(1000, 0);
    int guaranteed = member(-1, 300, 100, 0, 1), full = member(100, 400, 400, 400, 2), b = member(0, 900, 0, 0, 3);
    gpc_arb_card_figures(&A, 0); /* lendable: 1000 - 300 - 400 - 0 = 300 */
    CHECK(gpc_arb_loan(&A, 0, guaranteed, MiB, why, sizeof why) == 0 && strstr(why, "not burstable"), "%s", why);
    CHECK(gpc_arb_loan(&A, 0, full, MiB, why, sizeof why) == 0 && strstr(why, "at its limit"), "%s", why);
    CHECK(gpc_arb_loan(&A, 0, b, 301 * MiB, why, sizeof why) == 0 && strstr(why, "lendable"), "%s", why);
    CHECK(gpc_arb_loan(&A, 0, b, 300 * MiB, why, sizeof why) == 300 * MiB, "all that is lendable");
    A.card[0].reclaiming = true;
    CHECK(gpc_arb_loan(&A, 0, b, MiB, why, sizeof why) == 0 && strstr(why, "reclaim"), "%s", why);
}

static void t_others(void)
{
    char why[200];
    card(1000, 0);
    member(-1, 900, 0, 0, 1); /* a guaranteed 900 MiB, none of it used yet */
    int be = member(0, 1000, 0, 0, 2);
    gpc_arb_card_figures(&A, 0);
    CHECK(gpc_arb_loan(&A, 0, be, 500 * MiB, why, sizeof why) == 0, "another's request is not lent");
    uint64_t g = gpc_arb_loan(&A, 0, be, 50 * MiB, why, sizeof why);
    CHECK(g == 50 * MiB, "what nobody requested is: %llu", (unsigned long long)(g / MiB));
    /* The grant given is a promise: asked again at once (a forged repeat), nothing more is lent twice. */
    A.m[be].u[0].grant = 100 * MiB;
    gpc_arb_card_figures(&A, 0);
    CHECK(A.card[0].lendable == 0, "the grant counts: %llu", (unsigned long long)A.card[0].lendable);
    CHECK(gpc_arb_loan(&A, 0, be, 2 * MiB, why, sizeof why) == 0, "nothing more");
    /* A burstable member's own unused request is not lent to another. */
    card(1000, 0);
    member(800, 800, 10, 0, 1);
    int other = member(0, 1000, 0, 0, 2);
    gpc_arb_card_figures(&A, 0);
    CHECK(gpc_arb_loan(&A, 0, other, 201 * MiB, why, sizeof why) == 0, "a request is kept even unused");
}

static void t_victim(void)
{
    card(1000, 0);
    int asker = member(-1, 300, 100, 0, 1);
    int burst = member(100, 800, 600, 0, 2);  /* 500 above its request */
    int be = member(0, 800, 100, 0, 3);       /* best effort: 100 above nothing */
    int within = member(200, 800, 150, 0, 4); /* within its request */
    gpc_arb_card_figures(&A, 0);
    CHECK(gpc_arb_victim(&A, 0, asker) == be, "best effort first: %d", gpc_arb_victim(&A, 0, asker));
    A.m[be].u[0].used = 0;
    A.m[be].u[0].top_pid = 0;
    CHECK(gpc_arb_victim(&A, 0, asker) == burst, "then burstable by excess: %d", gpc_arb_victim(&A, 0, asker));
    int burst2 = member(50, 800, 700, 0, 5); /* 650 above */
    CHECK(gpc_arb_victim(&A, 0, asker) == burst2, "the most above its request: %d", gpc_arb_victim(&A, 0, asker));
    A.m[burst2].u[0].used = 550 * MiB; /* 500 above: a tie with burst, scheduled later */
    CHECK(gpc_arb_victim(&A, 0, asker) == burst2, "a tie: the last scheduled");
    CHECK(gpc_arb_victim(&A, 0, burst2) == burst, "never the asker");
    (void)within;
    /* Nobody above its request: none. */
    card(1000, 0);
    int x = member(-1, 300, 100, 0, 1);
    member(500, 800, 400, 0, 2);
    gpc_arb_card_figures(&A, 0);
    CHECK(gpc_arb_victim(&A, 0, x) == -1, "no borrower");
    /* An overcommitted member counts as best effort. */
    card(1000, 0);
    int g = member(-1, 700, 100, 0, 1), late = member(600, 800, 300, 0, 9), b2 = member(0, 800, 50, 0, 5);
    gpc_arb_card_figures(&A, 0);
    CHECK(A.m[late].u[0].overcommitted, "late is overcommitted");
    CHECK(gpc_arb_victim(&A, 0, g) == late, "best effort by overcommit, the most above: %d", gpc_arb_victim(&A, 0, g));
    (void)b2;
}

static void t_ini(void)
{
    char out[4096], v[64];
    const char *in = "; generation = 00000000000000003\n[gpucap]\nmemory_limit = 1GiB\nmemory_grant = 5\n"
                     "memory_request = 100MiB\n;      \n[device.GPU-abcd1234]\nmemory_limit = 2GiB\n";
    CHECK(gpc_arb_ini_set(in, "gpucap", "memory_grant", "123", out, sizeof out) == 0, "set");
    CHECK(strstr(out, "memory_grant = 123\n") && !strstr(out, "memory_grant = 5"), "replaced: %s", out);
    CHECK(!strstr(out, ";      \n"), "padding dropped: %s", out);
    CHECK(gpc_arb_ini_get(out, "gpucap", "memory_grant", v, sizeof v) && strcmp(v, "123") == 0, "got %s", v);
    CHECK(strncmp(out, "; generation = 00000000000000003\n", 33) == 0, "generation line kept first");
    CHECK(gpc_arb_ini_set(in, "device.GPU-abcd1234", "memory_grant", "7", out, sizeof out) == 0, "set");
    CHECK(gpc_arb_ini_get(out, "device.GPU-abcd1234", "memory_grant", v, sizeof v) && strcmp(v, "7") == 0, "dev %s", v);
    CHECK(gpc_arb_ini_get(out, "gpucap", "memory_grant", v, sizeof v) && strcmp(v, "5") == 0, "[gpucap] kept: %s", v);
    CHECK(gpc_arb_ini_set(in, "device.GPU-ffff0000", "memory_grant", "9", out, sizeof out) == 0, "new section");
    CHECK(strstr(out, "[device.GPU-ffff0000]\nmemory_grant = 9\n"), "added at the end: %s", out);
    const char *twice = "[gpucap]\nmemory_grant = 1\n[other]\nx = 1\n[gpucap]\nmemory_grant = 2\n";
    CHECK(gpc_arb_ini_set(twice, "gpucap", "memory_grant", "3", out, sizeof out) == 0, "set");
    CHECK(strstr(out, "memory_grant = 3") && !strstr(out, "memory_grant = 1") && !strstr(out, "memory_grant = 2"),
          "one copy: %s", out);
    CHECK(gpc_arb_ini_set(in, "gpucap", "memory_grant", "1", out, 16) == -ENOSPC, "short buffer");
    CHECK(!gpc_arb_ini_get("[gpucap]\n; memory_grant = 4\n", "gpucap", "memory_grant", v, sizeof v), "a comment");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"lendable", t_lendable}, {"overcommit", t_overcommit}, {"loan", t_loan}, {"refusals", t_refusals},
                 {"others", t_others},     {"victim", t_victim},         {"ini", t_ini}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (argc > 1 && strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return failures ? 1 : 0;
        }
    fprintf(stderr, "usage: test_arbiter_rules CASE\n");
    return 2;
}
