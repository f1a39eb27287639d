/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter.c: the rules of burstable GPU memory, on figures only (no file, no socket, no signal):
 * what a card may lend, how large a loan is, who a reclaim names.
 *
 * Per card, each member (a container, or a `gpucap run` job) has a request R (guaranteed), a limit
 * L and a grant G that the arbiter wrote; its library admits against min(L, max(R, G)). A member
 * without memory_request is guaranteed (R = L). `used` is NVML's figure for the member's processes,
 * never the ledger (the tenant writes it). The requests are taken in scheduling order: one that does
 * not fit beside those before it makes its member best effort here (R counts 0: it borrows what it
 * uses beyond nothing, and a reclaim may name it), which the state files and an Event say.
 *
 * What may be lent is what nobody requested, uses, or holds a grant for already:
 *     lendable = usable - other - sum over members of max(R, used, G)
 * (other: what processes of no member hold). The design's formula is sum max(R, used); counting
 * the grants too means two loans are never promised the same bytes (a grant not used yet is still
 * a promise). A loan comes only from it, never beyond L: a forged request can make the arbiter lend
 * only what it would lend to anyone, never memory another member requested.
 */
#include "arbiter.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

uint64_t gpc_arb_request(const struct gpc_arb_use *u)
{
    if (u->overcommitted)
        return 0;
    return u->burstable ? u->request : u->limit;
}

/* The grant as the library applies it: only for a burstable member, never above L. */
static uint64_t grant_of(const struct gpc_arb_use *u)
{
    if (!u->burstable)
        return 0;
    return u->grant < u->limit ? u->grant : u->limit;
}

int gpc_arb_card_of(const struct gpc_arbiter *a, const char *uuid)
{
    for (int i = 0; i < a->ncards; i++)
        if (strcasecmp(a->card[i].uuid, uuid) == 0)
            return i;
    return -1;
}

void gpc_arb_card_figures(struct gpc_arbiter *a, int card)
{
    struct gpc_arb_card *c = &a->card[card];
    /* The members on the card in scheduling order (insertion sort: a node has few). */
    int order[GPC_ARB_MEMBERS], n = 0;
    for (int i = 0; i < a->nmembers; i++) {
        if (!a->m[i].live || !a->m[i].u[card].on)
            continue;
        int j = n++;
        while (j > 0 && (a->m[order[j - 1]].sched_ns > a->m[i].sched_ns ||
                         (a->m[order[j - 1]].sched_ns == a->m[i].sched_ns && order[j - 1] > i))) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    uint64_t fit = 0, requested = 0, loaned = 0, taken = c->other;
    c->overcommitted = false;
    for (int k = 0; k < n; k++) {
        struct gpc_arb_use *u = &a->m[order[k]].u[card];
        uint64_t r = u->burstable ? u->request : u->limit;
        requested += r;
        u->overcommitted = fit + r > c->usable;
        if (u->overcommitted)
            c->overcommitted = true;
        else
            fit += r;
        uint64_t req = gpc_arb_request(u), g = grant_of(u);
        if (g > req)
            loaned += g - req;
        taken += max3(req, u->used, g);
    }
    c->requested = requested;
    c->loaned = loaned;
    c->lendable = taken < c->usable ? c->usable - taken : 0;
}

uint64_t gpc_arb_loan(const struct gpc_arbiter *a, int card, int mi, uint64_t want, char *why, size_t whylen)
{
    const struct gpc_arb_card *c = &a->card[card];
    const struct gpc_arb_use *u = &a->m[mi].u[card];
    if (!u->burstable) {
        snprintf(why, whylen, "not burstable (no memory_request: its budget is its limit)");
        return 0;
    }
    if (c->reclaiming) {
        snprintf(why, whylen, "reclaiming on this card: nothing is lent");
        return 0;
    }
    uint64_t r = u->request < u->limit ? u->request : u->limit, g = grant_of(u);
    uint64_t in_force = r > g ? r : g;
    if (in_force >= u->limit) {
        snprintf(why, whylen, "at its limit");
        return 0;
    }
    uint64_t ask = want < GPC_ARB_LOAN_MIN ? GPC_ARB_LOAN_MIN : (want + GPC_ARB_LOAN_MIN - 1) / GPC_ARB_LOAN_MIN * GPC_ARB_LOAN_MIN;
    uint64_t room = u->limit - in_force;
    uint64_t grant = in_force + (ask < room ? ask : room);
    /* What the member's term of the sum becomes, against what it is: the lendable pays the rise. */
    uint64_t term = max3(gpc_arb_request(u), u->used, g);
    uint64_t cap = term + c->lendable;
    if (grant > cap)
        grant = cap;
    /* Enough for the allocation that asked (or all that is left below L)? */
    uint64_t enough = want < room ? in_force + want : u->limit;
    if (grant < enough || grant <= g) {
        snprintf(why, whylen, "not enough lendable memory on this card (%llu bytes)", (unsigned long long)c->lendable);
        return 0;
    }
    return grant;
}

int gpc_arb_victim(const struct gpc_arbiter *a, int card, int asker)
{
    int best = -1;
    uint64_t best_excess = 0;
    bool best_effort = false;
    for (int i = 0; i < a->nmembers; i++) {
        const struct gpc_arb_member *m = &a->m[i];
        const struct gpc_arb_use *u = &m->u[card];
        if (i == asker || !m->live || !u->on || !u->top_pid)
            continue;
        uint64_t req = gpc_arb_request(u);
        if (u->used <= req)
            continue;
        uint64_t excess = u->used - req;
        bool be = req == 0;
        bool take = best < 0 || (be && !best_effort) ||
                    (be == best_effort && (excess > best_excess ||
                                           (excess == best_excess && m->sched_ns > a->m[best].sched_ns)));
        if (take) {
            best = i;
            best_excess = excess;
            best_effort = be;
        }
    }
    return best;
}
