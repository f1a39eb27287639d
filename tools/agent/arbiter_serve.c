/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter_serve.c: the arbiter's loop: the loan channel, the reclaims, the state files.
 *
 * The channel is a Unix datagram socket: `gpucap-agent --local` binds one, <base>/arbiter.sock,
 * for all the user's runs (each run's directory links its own arbiter.sock there, so that a
 * library finds it beside its ledger); on Kubernetes the arbiter binds one in each container's
 * ledger directory, which the container sees. A request is one line, `loan <uuid> <bytes> <pid>`
 * (bytes wanted beyond the budget in force) or `need <uuid> <bytes> <pid>` (within the request:
 * the driver refused it); the answer `granted <grant>`, `refused <reason>` or `pending <ms>` (a
 * need in reclaim: `granted` or `refused` follows when it is settled). Nothing in it is trusted:
 * the asker is the process the kernel names (SO_PASSCRED), which must map the ledger of a member
 * (on Kubernetes, of the member the socket belongs to); the text's pid is only said. A forged
 * request makes the arbiter consider a loan from the lendable memory (never beyond L, never from
 * another's request) or a reclaim that takes back loans, which the loans' rules allow anyway.
 *
 * A reclaim on a card (a need the card cannot hold now, or requests that no longer fit beside the
 * loans), in order: lending stops on the card; every grant there is lowered to nothing (in force:
 * the request; a live lowering is exact, and a caching allocator frees its cache on the OOM that
 * follows); after reclaim_grace, if a need is still short: `kill` sends SIGKILL to the process of
 * the member the rule names (arbiter.c: best effort first, then by excess) that holds the most on
 * the card, one at a time, each once its memory came back; `evict` asks the Eviction API for its
 * pod (a local run: SIGTERM to its gpucap, which ends the job); `deny` kills nothing. Each is
 * counted and told (an Event on Kubernetes). With no arbiter nothing is lent, so nothing is killed.
 */
#include "arbiter.h"

#include "apply.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Paths and names are bounded where they are made (tool_name_ok, the checks below): a truncated
 * copy is only ever a name for people. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define IDLE_GRANT_S 1.0 /* a loan not used for this long may be lent to another */
#define EVICT_WAIT 30.0 /* seconds an evicted pod (or a run sent SIGTERM) has to end (the kubelet's default grace) */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpucap-agent: arbiter: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void notify(struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *reason, bool warning, bool evict,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void notify(struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *reason, bool warning, bool evict,
                   const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say("%s: %s", reason, msg);
    if (a->notify)
        a->notify(a->notify_arg, m, reason, msg, warning, evict);
}

/* ---- sockets ---- */

/* A datagram socket bound at `name` in directory fd `dir` (a stale one there replaced), mode `mode`,
 * passing the senders' credentials. The fd, or -errno. */
static int bind_in(int dir, const char *name, mode_t mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    /* Whatever is at the name (a socket left by an arbiter that died, anything a tenant put in its
     * own directory) is removed, never followed. */
    unlinkat(dir, name, 0);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || fchmodat(dir, name, mode, 0) != 0) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}

static void member_sockets(struct gpc_arbiter *a)
{
    for (int i = 0; i < a->nmembers; i++) {
        struct gpc_arb_member *m = &a->m[i];
        if (m->live && m->sock < 0 && m->pod_uid[0] && !a->cfg.local) {
            if (m->ledger_fd < 0) {
                int dir = gpc_agent_volume_dir(a->cfg.base, m->pod_uid, "gpucap-ledger", m->container);
                if (dir < 0)
                    continue; /* not made yet: looked at again at the next tick */
                m->ledger_fd = dir;
            }
            m->sock = bind_in(m->ledger_fd, GPC_ARB_SOCK, 0666);
            if (m->sock < 0 && !m->bind_said)
                say("%s: no socket in its ledger directory: %s", m->name, strerror(-m->sock));
            m->bind_said = m->sock < 0;
        } else if (!m->live && (m->sock >= 0 || m->ledger_fd >= 0 || m->dir[0])) {
            if (m->sock >= 0) {
                unlinkat(m->ledger_fd, GPC_ARB_SOCK, 0);
                close(m->sock);
            }
            if (m->ledger_fd >= 0)
                close(m->ledger_fd);
            m->sock = m->ledger_fd = -1;
            m->dir[0] = '\0'; /* the entry may be reused */
        }
    }
}

static bool answering_need; /* the request being answered is a need */

static void answer(int sock, const char *addr, unsigned addr_len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void answer(int sock, const char *addr, unsigned addr_len, const char *fmt, ...)
{
    static double said_at;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = addr_len - sizeof(sa_family_t);
    memcpy(sa.sun_path, addr, n < sizeof sa.sun_path ? n : sizeof sa.sun_path);
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* A refused loan is said once a second at most (a job at its limit asks at each allocation); a
     * refused need, always. */
    if (len > 0 && strncmp(line, "refused", 7) == 0 && (answering_need || mono() - said_at >= 1.0)) {
        said_at = mono();
        say("%s%s", answering_need ? "a need: " : "", line);
    }
    if (len > 0 && addr_len > sizeof(sa_family_t)) /* an unbound sender: nowhere to answer */
        sendto(sock, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1, MSG_DONTWAIT,
               (struct sockaddr *)&sa, addr_len);
}

/* ---- reclaims ---- */

/* Every grant on the card lowered to nothing: in force is then each member's request. */
static void lower_grants(struct gpc_arbiter *a, int card)
{
    for (int i = 0; i < a->nmembers; i++) {
        struct gpc_arb_member *m = &a->m[i];
        struct gpc_arb_use *u = &m->u[card];
        if (!m->live || !u->on || !u->burstable || u->grant == 0)
            continue;
        char why[256];
        int cards = 0;
        for (int c = 0; c < a->ncards; c++)
            cards += m->u[c].on;
        if (gpc_arb_write_grant(a, m, a->card[card].uuid, cards <= 1, 0, why, sizeof why) == 0) {
            say("%s: grant on %s lowered from %llu to 0 (its request %llu in force)", m->name, a->card[card].uuid,
                (unsigned long long)u->grant, (unsigned long long)u->request);
            u->grant = 0;
            a->writes++;
        } else {
            say("%s: its grant cannot be lowered: %s", m->name, why);
        }
    }
}

/*
 * Grants on the card that others hold unused (above both their request and their use, by 2 MiB or
 * more) lowered to what they use: a loan not used is lent again rather than refused (the lowering is
 * exact; a member that needs it asks again). True when one moved.
 */
static bool trim_idle_grants(struct gpc_arbiter *a, int card, int except, bool now)
{
    bool moved = false;
    for (int i = 0; i < a->nmembers; i++) {
        struct gpc_arb_member *m = &a->m[i];
        struct gpc_arb_use *u = &m->u[card];
        if (i == except || !m->live || !u->on || !u->burstable)
            continue;
        uint64_t keep = gpc_arb_request(u) > u->used ? gpc_arb_request(u) : u->used;
        keep = (keep + GPC_ARB_LOAN_MIN - 1) / GPC_ARB_LOAN_MIN * GPC_ARB_LOAN_MIN;
        if (u->grant < keep + GPC_ARB_LOAN_MIN || (!now && mono() - u->granted_at < IDLE_GRANT_S))
            continue;
        uint64_t to = keep > u->request ? keep : 0;
        char why[256];
        int cards = 0;
        for (int c = 0; c < a->ncards; c++)
            cards += m->u[c].on;
        if (gpc_arb_write_grant(a, m, a->card[card].uuid, cards <= 1, to, why, sizeof why) == 0) {
            say("%s: its unused loan on %s taken back: grant %llu -> %llu", m->name, a->card[card].uuid,
                (unsigned long long)u->grant, (unsigned long long)to);
            u->grant = to;
            a->writes++;
            moved = true;
        }
    }
    return moved;
}

static void start_reclaim(struct gpc_arbiter *a, int card, const char *why)
{
    struct gpc_arb_card *c = &a->card[card];
    if (c->reclaiming)
        return;
    c->reclaiming = true;
    c->reclaim_since = mono();
    c->killed = 0;
    a->reclaims++;
    say("%s: reclaim (%s): lending stopped, grants lowered", c->uuid, why);
    lower_grants(a, card);
}

static bool pid_alive(pid_t pid)
{
    return pid > 0 && gpc_arb_start_time(pid) != 0;
}

/* SIGKILL (or `sig`) to pid, only while it is a process of member mi (checked through a pidfd, which
 * a reused pid cannot take over). */
static int signal_member_pid(struct gpc_arbiter *a, pid_t pid, int mi, int sig)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return -errno;
    int rc = gpc_arb_member_of_pid(a, pid) == mi ? 0 : -ESRCH;
    if (rc == 0 && syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) != 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* The grants on the card, used or not, no longer fit beside the requests (a member came, or its
 * request counts again): a loan not used yet would make a request fail. */
static bool promises_short(const struct gpc_arbiter *a, int card)
{
    const struct gpc_arb_card *c = &a->card[card];
    uint64_t sum = c->other;
    for (int i = 0; i < a->nmembers; i++) {
        const struct gpc_arb_use *u = &a->m[i].u[card];
        if (!a->m[i].live || !u->on)
            continue;
        uint64_t r = gpc_arb_request(u), g = u->burstable ? u->grant : 0, m = u->used > r ? u->used : r;
        sum += g > m ? g : m;
    }
    return sum > c->usable;
}

/* The requests on the card no longer fit beside what borrowers hold above theirs. */
static bool requests_short(const struct gpc_arbiter *a, int card)
{
    const struct gpc_arb_card *c = &a->card[card];
    uint64_t sum = c->other;
    bool borrowed = false;
    for (int i = 0; i < a->nmembers; i++) {
        const struct gpc_arb_use *u = &a->m[i].u[card];
        if (!a->m[i].live || !u->on)
            continue;
        uint64_t r = gpc_arb_request(u);
        sum += u->used > r ? u->used : r;
        borrowed |= u->used > r;
    }
    return borrowed && sum > c->usable;
}

static void drop_need(struct gpc_arb_card *c, int k)
{
    c->needs[k] = c->needs[--c->nneeds];
}

/* The reclaim on card `card` moved on: needs that the card can hold now are answered; after the grace
 * the action on the victim the rule names; the reclaim ends once no need waits and the requests fit. */
static void progress_card(struct gpc_arbiter *a, int card);
static void progress(struct gpc_arbiter *a, int card)
{
    bool was = answering_need;
    answering_need = true;
    progress_card(a, card);
    answering_need = was;
}

static void progress_card(struct gpc_arbiter *a, int card)
{
    struct gpc_arb_card *c = &a->card[card];
    double t = mono();
    uint64_t free_b = c->size > c->held ? c->size - c->held : 0;
    for (int k = 0; k < c->nneeds;) {
        struct gpc_arb_need *n = &c->needs[k];
        struct gpc_arb_member *m = &a->m[n->member];
        if (!m->live) {
            drop_need(c, k);
        } else if (free_b >= n->bytes) {
            answer(n->sock, n->addr, n->addr_len, "granted %llu", (unsigned long long)m->u[card].grant);
            say("%s: %llu bytes within its request are free on %s after %.0f ms", m->name,
                (unsigned long long)n->bytes, c->uuid, (t - n->since) * 1000);
            a->granted++;
            drop_need(c, k);
        } else if (t - n->since > a->cfg.grace_ms / 1000.0 + 1.5) {
            answer(n->sock, n->addr, n->addr_len, "refused not freed within the grace period");
            say("%s: %llu bytes within its request not freed on %s within the grace period", m->name,
                (unsigned long long)n->bytes, c->uuid);
            a->refused++;
            drop_need(c, k);
        } else {
            k++;
        }
    }
    if (c->nneeds == 0) {
        if (c->reclaiming && !requests_short(a, card)) {
            c->reclaiming = false;
            say("%s: reclaim over: lending again", c->uuid);
        }
        return;
    }
    if (t - c->reclaim_since < a->cfg.grace_ms / 1000.0)
        return;
    if (c->killed > 0 && pid_alive(c->killed) && t - c->kill_at < 3.0)
        return; /* the last victim's memory comes back first */
    if (c->killed > 0)
        c->killed = 0;
    /* An eviction (or a denial) was asked in this reclaim: the pod (the job) ends in its own time, and
     * another is not named before it had that time; a denial is said once. */
    if (c->killed < 0 && (a->cfg.reclaim == GPC_RECLAIM_DENY || t - c->kill_at < EVICT_WAIT))
        return;
    int asker = c->needs[0].member;
    int v = gpc_arb_victim(a, card, asker);
    if (v < 0) {
        for (int k = 0; k < c->nneeds; k++) {
            answer(c->needs[k].sock, c->needs[k].addr, c->needs[k].addr_len,
                   "refused nothing borrowed on the card to take back");
            say("%s: %llu bytes within its request short on %s, and nothing borrowed there to take back (the "
                "card holds %llu, %llu of it by processes of no container)", a->m[c->needs[k].member].name,
                (unsigned long long)c->needs[k].bytes, c->uuid, (unsigned long long)c->held,
                (unsigned long long)c->other);
        }
        a->refused += (unsigned long)c->nneeds;
        c->nneeds = 0;
        return;
    }
    struct gpc_arb_member *vm = &a->m[v];
    struct gpc_arb_use *u = &vm->u[card];
    uint64_t req = gpc_arb_request(u);
    const char *kind = u->burstable && req ? "burstable" : "best effort";
    switch (a->cfg.reclaim) {
    case GPC_RECLAIM_KILL: {
        int rc = signal_member_pid(a, u->top_pid, v, SIGKILL);
        if (rc != 0) {
            say("%s: process %d cannot be killed: %s", vm->name, (int)u->top_pid, strerror(-rc));
            c->killed = 0;
            c->kill_at = t;
            return;
        }
        u->kills++;
        a->kills++;
        c->killed = u->top_pid;
        c->kill_at = t;
        notify(a, vm, "GpuMemoryReclaimed", true, false,
               "process %d of %s (%s) killed: it held %llu bytes on %s, %llu above its request %llu, and %s needed "
               "its request back (reclaim = kill, after %.1f s)",
               (int)u->top_pid, vm->name, kind, (unsigned long long)u->top_bytes, c->uuid,
               (unsigned long long)(u->used - req), (unsigned long long)req, a->m[asker].name, t - c->reclaim_since);
        break;
    }
    case GPC_RECLAIM_EVICT:
        u->evicts++;
        a->evicts++;
        c->killed = -v - 1;
        c->kill_at = t;
        if (a->cfg.local && vm->run_pid > 0)
            kill(vm->run_pid, SIGTERM); /* a run's gpucap passes it to the job, which ends */
        notify(a, vm, "GpuMemoryReclaimed", true, true,
               "%s (%s) evicted: it holds %llu bytes on %s, %llu above its request %llu, and %s needed its request "
               "back (reclaim = evict)",
               vm->name, kind, (unsigned long long)u->used, c->uuid, (unsigned long long)(u->used - req),
               (unsigned long long)req, a->m[asker].name);
        break;
    case GPC_RECLAIM_DENY:
        c->killed = -v - 1; /* told: the need waits until the grace and a second are over */
        c->kill_at = t;
        u->denies++;
        a->denies++;
        notify(a, vm, "GpuMemoryNotReclaimed", true, false,
               "%s (%s) holds %llu bytes on %s, %llu above its request, and %s needs its request back: nothing is "
               "killed (reclaim = deny); the request waits",
               vm->name, kind, (unsigned long long)u->used, c->uuid, (unsigned long long)(u->used - req),
               a->m[asker].name);
        break;
    }
    gpc_arb_write_member_state(a, vm); /* the count said at once (a victim may leave before the next tick) */
}

/* ---- the node, each tick ---- */

static void figures(struct gpc_arbiter *a)
{
    gpc_arb_scan_procs(a);
    for (int c = 0; c < a->ncards; c++)
        gpc_arb_card_figures(a, c);
}

static void tick(struct gpc_arbiter *a)
{
    gpc_arb_scan_members(a);
    member_sockets(a);
    figures(a);
    for (int c = 0; c < a->ncards; c++) {
        struct gpc_arb_card *k = &a->card[c];
        /* First of a reclaim's steps, before any is short: the loans nobody uses yet go, at once. */
        if (promises_short(a, c) && trim_idle_grants(a, c, -1, true))
            gpc_arb_card_figures(a, c);
        if (!k->reclaiming && requests_short(a, c))
            start_reclaim(a, c, "the requests no longer fit beside the loans");
        if (k->reclaiming)
            progress(a, c);
    }
    for (int i = 0; i < a->nmembers; i++) {
        struct gpc_arb_member *m = &a->m[i];
        if (!m->live || m->departed)
            continue;
        bool burstable = false;
        for (int c = 0; c < a->ncards; c++)
            burstable |= m->u[c].burstable;
        if (burstable && m->settings_ok && !m->grace_written) {
            /* How long its library waits for a request in reclaim: this arbiter's grace (and a second). */
            char v[16], why[256];
            snprintf(v, sizeof v, "%u", (a->cfg.grace_ms + 999) / 1000);
            if (gpc_arb_write_setting(a, m, "gpucap", "reclaim_grace", v, why, sizeof why) != 0)
                say("%s: reclaim_grace not written: %s", m->name, why);
            m->grace_written = true;
        }
        for (int c = 0; c < a->ncards; c++) {
            struct gpc_arb_use *u = &m->u[c];
            /* Said once when it becomes best effort because the requests add up past the card. */
            bool was = (m->said_overcommit >> c) & 1u;
            if (u->on && u->overcommitted && !was)
                notify(a, m, "GpuRequestOvercommitted", true, false,
                       "%s: its request of %llu bytes on %s does not fit beside those scheduled before it (%llu "
                       "requested on a card of %llu usable): it is best effort there",
                       m->name, (unsigned long long)(u->burstable ? u->request : u->limit), a->card[c].uuid,
                       (unsigned long long)a->card[c].requested, (unsigned long long)a->card[c].usable);
            if (u->on && u->overcommitted)
                m->said_overcommit |= 1u << c;
            else
                m->said_overcommit &= ~(1u << c);
        }
        gpc_arb_write_member_state(a, m);
    }
    gpc_arb_write_cards_state(a);
}

/* ---- requests ---- */

static void handle(struct gpc_arbiter *a, int sock, const char *text, pid_t cred_pid, const char *addr,
                   unsigned addr_len)
{
    char verb[8], uuid[64];
    unsigned long long bytes;
    int pid;
    char extra;
    a->requests++;
    answering_need = strncmp(text, "need ", 5) == 0;
    if (sscanf(text, "%7s %63s %llu %d %c", verb, uuid, &bytes, &pid, &extra) != 4 ||
        (strcmp(verb, "loan") != 0 && strcmp(verb, "need") != 0) || bytes == 0 || bytes > (1ull << 50)) {
        a->bad++;
        answer(sock, addr, addr_len, "refused malformed request");
        return;
    }
    int card = gpc_arb_card_of(a, uuid);
    if (card < 0) {
        a->refused++;
        answer(sock, addr, addr_len, "refused no such card here");
        return;
    }
    /* The asker is the process the kernel named, a process of a member (of the socket's own member on
     * Kubernetes), looked at afresh. */
    int mi = cred_pid > 0 ? gpc_arb_member_of_pid(a, cred_pid) : -1;
    if ((mi < 0 || a->m[mi].departed) && cred_pid > 0) {
        /* A job's first ask may come before the tick that sees its ledger: the node looked at again. */
        gpc_arb_scan_members(a);
        member_sockets(a);
        for (int p = 0; p < a->nprocs; p++)
            if (a->procs[p].pid == cred_pid)
                a->procs[p] = (struct gpc_arb_proc){0, 0, -1, 0}; /* looked at afresh */
        mi = gpc_arb_member_of_pid(a, cred_pid);
    }
    if (mi >= 0 && a->m[mi].departed) {
        a->refused++;
        answer(sock, addr, addr_len, "refused its job ended");
        return;
    }
    if (mi < 0 || (!a->cfg.local && a->m[mi].sock != sock)) {
        a->refused++;
        answer(sock, addr, addr_len, "refused not a process of a known container");
        return;
    }
    struct gpc_arb_member *m = &a->m[mi];
    struct gpc_arb_card *c = &a->card[card];
    figures(a); /* what the card holds now, not at the last tick */
    m->u[card].on = true;
    gpc_arb_card_figures(a, card);
    struct gpc_arb_use *u = &m->u[card];
    char why[200];
    if (verb[0] == 'l') {
        uint64_t g = gpc_arb_loan(a, card, mi, bytes, why, sizeof why);
        if (!g && u->burstable && !c->reclaiming && trim_idle_grants(a, card, mi, false)) {
            gpc_arb_card_figures(a, card);
            g = gpc_arb_loan(a, card, mi, bytes, why, sizeof why);
        }
        int cards = 0;
        for (int k = 0; k < a->ncards; k++)
            cards += m->u[k].on;
        if (g && gpc_arb_write_grant(a, m, c->uuid, cards <= 1, g, why, sizeof why) != 0)
            g = 0;
        if (!g) {
            m->refusals++;
            a->refused++;
            answer(sock, addr, addr_len, "refused %s", why);
            return;
        }
        u->grant = g;
        u->granted_at = mono();
        m->loans++;
        a->granted++;
        a->writes++;
        gpc_arb_card_figures(a, card);
        answer(sock, addr, addr_len, "granted %llu", (unsigned long long)g);
        return;
    }
    /* need: within its request. */
    uint64_t req = gpc_arb_request(u);
    if (req == 0 || u->used >= req) {
        a->refused++;
        answer(sock, addr, addr_len, "refused %s", req == 0 ? (u->overcommitted ? "best effort here: its request does "
                                                                  "not fit beside those scheduled before it"
                                                                                 : "best effort: no request")
                                                             : "it holds its request already");
        return;
    }
    /* What it may claim: the rest of its request, never more (a forged figure only asks for what the
     * request gives it anyway). */
    if (bytes > req - u->used)
        bytes = req - u->used;
    if (promises_short(a, card) && trim_idle_grants(a, card, mi, true))
        gpc_arb_card_figures(a, card);
    uint64_t free_b = c->size > c->held ? c->size - c->held : 0;
    if (free_b >= bytes && !c->reclaiming) {
        a->granted++;
        answer(sock, addr, addr_len, "granted %llu", (unsigned long long)u->grant);
        return;
    }
    if (c->nneeds >= GPC_ARB_NEEDS) {
        a->refused++;
        answer(sock, addr, addr_len, "refused too many requests waiting");
        return;
    }
    start_reclaim(a, card, "a request needs its memory back");
    /* One need per member and card: the library asks again (from a new address) while it waits. */
    struct gpc_arb_need *n = NULL;
    for (int k = 0; k < c->nneeds && !n; k++)
        if (c->needs[k].member == mi)
            n = &c->needs[k];
    if (!n) {
        n = &c->needs[c->nneeds++];
        *n = (struct gpc_arb_need){.member = mi, .since = mono()};
    }
    n->bytes = bytes > n->bytes ? bytes : n->bytes;
    n->sock = sock;
    n->addr_len = addr_len;
    memcpy(n->addr, addr, addr_len > sizeof(sa_family_t) ? addr_len - sizeof(sa_family_t) : 0);
    a->pending++;
    progress(a, card);
    /* Still waiting: when to ask again (the grace's end, at most a second away). */
    for (int k = 0; k < c->nneeds; k++)
        if (c->needs[k].member == mi) {
            double left = a->cfg.grace_ms / 1000.0 - (mono() - c->reclaim_since);
            unsigned ms = left > 1.0 ? 1000 : left > 0.05 ? (unsigned)(left * 1000) : 50;
            answer(sock, addr, addr_len, "pending %u", ms);
        }
}

/*
 * On Kubernetes the asker names its reply socket by its own mount namespace's path, which the node
 * does not have: the library binds it beside the arbiter's socket, in the container's ledger
 * directory, so its name there is the member's ledger directory (held open) and the path's last
 * component. An abstract address is left as it is. The address's new length (0: none usable).
 */
static unsigned node_address(const struct gpc_arbiter *a, int sock, struct sockaddr_un *from, unsigned len)
{
    if (len <= sizeof(sa_family_t) || from->sun_path[0] == '\0')
        return len;
    size_t n = len - sizeof(sa_family_t);
    char path[sizeof from->sun_path + 1];
    memcpy(path, from->sun_path, n < sizeof from->sun_path ? n : sizeof from->sun_path);
    path[n < sizeof from->sun_path ? n : sizeof from->sun_path] = '\0';
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (int i = 0; i < a->nmembers; i++) {
        const struct gpc_arb_member *m = &a->m[i];
        if (m->sock != sock || m->ledger_fd < 0)
            continue;
        if (!base[0] || strcmp(base, "..") == 0 || strcmp(base, ".") == 0)
            return 0;
        int w = snprintf(from->sun_path, sizeof from->sun_path, "/proc/self/fd/%d/%s", m->ledger_fd, base);
        if (w < 0 || (size_t)w >= sizeof from->sun_path)
            return 0;
        return (unsigned)(sizeof(sa_family_t) + (size_t)w + 1);
    }
    return 0;
}

static void receive(struct gpc_arbiter *a, int sock)
{
    for (int i = 0; i < 64; i++) {
        char buf[257];
        struct sockaddr_un from;
        char ctl[CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = {buf, sizeof buf - 1};
        struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
                            .msg_control = ctl, .msg_controllen = sizeof ctl};
        ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT);
        if (n < 0)
            return;
        buf[n] = '\0';
        pid_t pid = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS) {
                struct ucred cr;
                memcpy(&cr, CMSG_DATA(cm), sizeof cr);
                pid = cr.pid;
            }
        char *nl = strchr(buf, '\n');
        if (nl)
            *nl = '\0';
        unsigned len = mh.msg_namelen;
        if (!a->cfg.local)
            len = node_address(a, sock, &from, len);
        handle(a, sock, buf, pid, from.sun_path, len);
    }
}

/* ---- the loop ---- */

int gpc_arb_init(struct gpc_arbiter *a, char *why, size_t whylen)
{
    a->sock = -1;
    for (int i = 0; i < GPC_ARB_MEMBERS; i++)
        a->m[i].sock = a->m[i].ledger_fd = -1;
    int rc = gpc_arb_nvml_open(a, why, whylen);
    if (rc != 0)
        return rc;
    if (a->cfg.local) {
        struct stat st;
        mkdir(a->cfg.base, 0700);
        int dir = open(a->cfg.base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0 || fstat(dir, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 0022)) {
            snprintf(why, whylen, "%s: not a directory of this user that only it may write", a->cfg.base);
            if (dir >= 0)
                close(dir);
            return -EPERM;
        }
        char runs[PATH_MAX + 8];
        snprintf(runs, sizeof runs, "%s/runs", a->cfg.base);
        mkdir(runs, 0700);
        /* One arbiter per user: a socket that answers is another one's. */
        snprintf(a->sock_path, sizeof a->sock_path, "%s/%s", a->cfg.base, GPC_ARB_SOCK);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(a->sock_path) >= sizeof sa.sun_path) {
            close(dir);
            snprintf(why, whylen, "%s: longer than a socket's name may be", a->sock_path);
            return -ENAMETOOLONG;
        }
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", a->sock_path);
        int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && strlen(a->sock_path) < sizeof sa.sun_path &&
            connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
            close(probe);
            close(dir);
            snprintf(why, whylen, "another arbiter serves %s", a->sock_path);
            return -EADDRINUSE;
        }
        if (probe >= 0)
            close(probe);
        a->sock = bind_in(dir, GPC_ARB_SOCK, 0600);
        /* What a run's library must know of this arbiter: how long a need may wait (gpucap run copies
         * it into the job's settings file, as reclaim_grace, whole seconds rounded up). */
        char conf[128];
        snprintf(conf, sizeof conf, "reclaim = %s\nreclaim_grace = %u\n",
                 a->cfg.reclaim == GPC_RECLAIM_KILL ? "kill" : a->cfg.reclaim == GPC_RECLAIM_EVICT ? "evict" : "deny",
                 (a->cfg.grace_ms + 999) / 1000);
        int cf = openat(dir, GPC_ARB_CONF ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (cf >= 0) {
            bool ok = write(cf, conf, strlen(conf)) == (ssize_t)strlen(conf);
            close(cf);
            if (!ok || renameat(dir, GPC_ARB_CONF ".tmp", dir, GPC_ARB_CONF) != 0)
                unlinkat(dir, GPC_ARB_CONF ".tmp", 0);
        }
        close(dir);
        if (a->sock < 0) {
            snprintf(why, whylen, "%s: %s", a->sock_path, strerror(-a->sock));
            return a->sock;
        }
    }
    tick(a);
    return 0;
}

void gpc_arb_step(struct gpc_arbiter *a, int wait_ms)
{
    static double next_tick;
    struct pollfd p[GPC_ARB_MEMBERS + 1];
    int n = 0;
    if (a->sock >= 0)
        p[n++] = (struct pollfd){.fd = a->sock, .events = POLLIN};
    for (int i = 0; i < a->nmembers; i++)
        if (a->m[i].sock >= 0)
            p[n++] = (struct pollfd){.fd = a->m[i].sock, .events = POLLIN};
    double t = mono();
    int until_tick = next_tick > t ? (int)((next_tick - t) * 1000) + 1 : 0;
    if (until_tick < wait_ms)
        wait_ms = until_tick;
    if (poll(p, (nfds_t)n, wait_ms) > 0)
        for (int i = 0; i < n; i++)
            if (p[i].revents & POLLIN)
                receive(a, p[i].fd);
    if (mono() >= next_tick) {
        tick(a);
        next_tick = mono() + a->cfg.tick_ms / 1000.0;
    }
}

void gpc_arb_run(struct gpc_arbiter *a, bool (*stopped)(void *arg), void *arg)
{
    double end = a->cfg.run_for > 0 ? mono() + a->cfg.run_for : 0;
    while (!(stopped && stopped(arg)) && (!end || mono() < end))
        gpc_arb_step(a, 200);
}

void gpc_arb_close(struct gpc_arbiter *a)
{
    if (a->sock >= 0) {
        close(a->sock);
        unlink(a->sock_path);
        a->sock = -1;
    }
    for (int i = 0; i < a->nmembers; i++)
        if (a->m[i].sock >= 0) {
            close(a->m[i].sock);
            a->m[i].sock = -1;
            if (a->m[i].ledger_fd >= 0)
                unlinkat(a->m[i].ledger_fd, GPC_ARB_SOCK, 0);
        }
    say("requests=%lu granted=%lu refused=%lu pending=%lu reclaims=%lu kills=%lu evicts=%lu denies=%lu writes=%lu "
        "bad=%lu", a->requests, a->granted, a->refused, a->pending, a->reclaims, a->kills, a->evicts, a->denies,
        a->writes, a->bad);
}
