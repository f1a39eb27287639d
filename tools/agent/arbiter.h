/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arbiter.h: the node arbiter of burstable GPU memory (issue 35), in gpucap-agent: per card, from
 * the driver's per-process figures, what may be lent above the containers' requests, the loans
 * given (a grant written into the container's platform settings file) and taken back.
 *
 *   arbiter.c        the rules: a card's figures, a loan's size, a reclaim's victim (no I/O)
 *   arbiter_scan.c   what is on the node: the members (pods' containers or `gpucap run` jobs),
 *                    their settings (R, L, G) and ledgers, NVML's processes mapped to them
 *   arbiter_file.c   the files written: the grant (in place, generation bumped), qos.state, cards.state
 *   arbiter_serve.c  the loop: the loan channel (datagrams), reclaims, the kills, the state files
 */
#ifndef GPUCAP_AGENT_ARBITER_H
#define GPUCAP_AGENT_ARBITER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GPC_ARB_CARDS 16
#define GPC_ARB_MEMBERS 256
#define GPC_ARB_PROCS 512 /* NVML processes followed per card */
#define GPC_ARB_NEEDS 32  /* requests within a request waiting at once, per card */
#define GPC_ARB_SOCK "arbiter.sock"
#define GPC_ARB_QOS_STATE "qos.state"
#define GPC_ARB_CARDS_STATE "cards.state"
#define GPC_ARB_CONF "arbiter.conf" /* --local: its reclaim and reclaim_grace, for `gpucap run` */
/* A loan is never smaller than this (fewer round trips for a caching allocator's small blocks). */
#define GPC_ARB_LOAN_MIN (UINT64_C(2) << 20)

enum gpc_arb_reclaim { GPC_RECLAIM_KILL, GPC_RECLAIM_EVICT, GPC_RECLAIM_DENY };

struct gpc_arb_config {
    bool local;                 /* `gpucap-agent --local`: the `gpucap run` jobs of this user */
    char base[PATH_MAX];        /* local: the runs' directory ($XDG_RUNTIME_DIR/gpucap); else the kubelet's pods */
    char state_dir[PATH_MAX];   /* cards.state */
    enum gpc_arb_reclaim reclaim;
    unsigned grace_ms;          /* reclaim_grace */
    unsigned tick_ms;           /* how often the node is looked at */
    uint64_t reserve;           /* bytes of each card never counted usable */
    double run_for;             /* tests: seconds before the loop returns; 0: until stopped */
};

/* One member's figures on one card (bytes). */
struct gpc_arb_use {
    bool on;                    /* the member uses this card (its ledger names it, or NVML shows it there) */
    bool burstable;             /* its settings file has memory_request */
    bool overcommitted;         /* its request does not fit beside those scheduled before it: best effort */
    uint64_t request, limit, grant; /* R, L (and G as its file says) resolved against the card */
    uint64_t used;              /* NVML: what its processes hold on the card */
    pid_t top_pid;              /* its process holding the most there (0: none) */
    uint64_t top_bytes;
    unsigned long kills, evicts, denies; /* reclaims that named it */
    double granted_at;          /* CLOCK_MONOTONIC seconds of its last loan (not taken back unused sooner) */
};

struct gpc_arb_member {
    bool live;
    /* Its registration is gone (its gpucap ended, its pod's directories were removed) while processes
     * of it still hold memory on a card: kept, as best effort (no request, no grant, no answer), until
     * they hold none. */
    bool departed;
    bool ledger_removed;        /* departed, and its ledger file is gone: its processes map it "(deleted)" */
    unsigned seen;              /* the scan that last found it */
    char dir[PATH_MAX];         /* its settings file's directory (qos.state goes there) */
    char ledger_dir[PATH_MAX];  /* its ledger's directory (its own socket on Kubernetes) */
    char name[200];             /* for people: "ns/pod/container" or "run <dir>" */
    char pod_uid[64], container[64]; /* Kubernetes */
    dev_t ledger_dev;
    ino_t ledger_ino;
    bool have_ledger;
    uint64_t sched_ns;          /* when it was scheduled (the order of "the last-scheduled") */
    pid_t run_pid;              /* local: the `gpucap run` process (its evict: SIGTERM) */
    int sock;                   /* Kubernetes: its own socket in its ledger's directory; -1 */
    int ledger_fd;              /* Kubernetes: that directory, held open while it is a member; -1 */
    bool bind_said;             /* a socket that cannot be bound there is said once */
    bool grace_written;         /* its file was given the arbiter's reclaim_grace */
    bool settings_ok;           /* its file was read */
    struct gpc_arb_use u[GPC_ARB_CARDS];
    unsigned long loans, refusals;
    unsigned said_overcommit;   /* bit per card: its overcommitted state was told */
    char state_text[2048];      /* qos.state as last written */
};

struct gpc_arb_need {
    int member;
    uint64_t bytes;
    double since;               /* CLOCK_MONOTONIC seconds */
    int sock;                   /* where to answer */
    char addr[110];             /* the asker's address (sun_path, abstract with a leading NUL) */
    unsigned addr_len;
};

struct gpc_arb_card {
    char uuid[48];              /* "GPU-...", lower case */
    int nvml;                   /* NVML's index */
    uint64_t size;              /* NVML's total */
    uint64_t usable;            /* size less the reserve */
    uint64_t held;              /* NVML: what every process holds on it */
    uint64_t other;             /* of that, processes of no member */
    uint64_t lendable, loaned, requested;
    bool overcommitted;         /* requests add up past the card */
    bool reclaiming;            /* lending stopped, grants lowered */
    double reclaim_since;
    double kill_at;             /* a victim was signalled then: the next waits for its memory */
    pid_t killed;
    int nneeds;
    struct gpc_arb_need needs[GPC_ARB_NEEDS];
};

struct gpc_arb_proc {
    pid_t pid;
    uint64_t start;             /* /proc/<pid>/stat field 22 */
    int member;                 /* -1: none */
    double checked;             /* a process of no member is looked at again after a while */
};

struct gpc_arbiter {
    struct gpc_arb_config cfg;
    int ncards;
    struct gpc_arb_card card[GPC_ARB_CARDS];
    struct gpc_arb_member m[GPC_ARB_MEMBERS];
    int nmembers;               /* entries used (some not live) */
    unsigned scan;
    struct gpc_arb_proc procs[GPC_ARB_PROCS * 2];
    int nprocs;
    int sock;                   /* local: the one socket; -1 */
    char sock_path[PATH_MAX];
    char cards_text[4096];
    /* Figures said at the end. */
    unsigned long requests, granted, refused, pending, reclaims, kills, evicts, denies, writes, bad;
    /* Kubernetes: what the watch loop posts (Events, evictions), taken under its lock (arbiter_serve.c). */
    void (*notify)(void *arg, const struct gpc_arb_member *m, const char *reason, const char *message, bool warning,
                   bool evict);
    void *notify_arg;
};

/* ---- the rules (arbiter.c) ---- */

/*
 * The card's figures from its members' uses: each member's overcommitted flag (in scheduling
 * order, a request that does not fit beside those before it counts as best effort: R = 0 below),
 * requested (the requests that fit), loaned (sum of G - R above 0), lendable (usable less what is
 * held by processes of no member and, per member, the most of its request, its use and its grant:
 * what nobody requested, uses or was lent already). Sets c->overcommitted.
 */
void gpc_arb_card_figures(struct gpc_arbiter *a, int card);
/* A member's request as the rules count it: 0 when best effort or overcommitted. */
uint64_t gpc_arb_request(const struct gpc_arb_use *u);
/*
 * The grant to write for a loan of `want` bytes beyond member `mi`'s budget in force on `card`:
 * the new grant (above the old), or 0 with `why` set when it cannot be lent (a reclaim under way,
 * not burstable, at its limit, not enough lendable).
 */
uint64_t gpc_arb_loan(const struct gpc_arbiter *a, int card, int mi, uint64_t want, char *why, size_t whylen);
/*
 * The member the rule names for a reclaim on `card` (not `asker`): of those using more than their
 * request, best effort first, then by how far above it they are (the most first); ties go to the
 * last scheduled. -1 when none borrows.
 */
int gpc_arb_victim(const struct gpc_arbiter *a, int card, int asker);
/* The card of UUID text `uuid` (any case), or -1. */
int gpc_arb_card_of(const struct gpc_arbiter *a, const char *uuid);

/* ---- the node (arbiter_scan.c) ---- */

/* NVML loaded and the cards listed (size, UUID). 0, or -errno with why set. */
int gpc_arb_nvml_open(struct gpc_arbiter *a, char *why, size_t whylen);
/* The members found now: local runs under cfg.base/runs, or the pods' containers under the kubelet's
 * directory; each one's settings read (R, L, G per card) and its ledger's cards. New members get
 * m->sock = -1 (the caller binds). */
void gpc_arb_scan_members(struct gpc_arbiter *a);
/* NVML's processes per card, each mapped to the member whose ledger it maps; used, top_pid, held, other. */
void gpc_arb_scan_procs(struct gpc_arbiter *a);
/* The member whose ledger process `pid` maps, or -1. */
int gpc_arb_member_of_pid(struct gpc_arbiter *a, pid_t pid);
/* /proc/<pid>/stat's start time (0: gone). */
uint64_t gpc_arb_start_time(pid_t pid);

/* ---- the files (arbiter_file.c) ---- */

/*
 * Writes grant `bytes` for card `uuid` into the member's platform settings file (dir/gpucap.ini),
 * in place as gpucap-agent rewrites it for live budgets: `memory_grant = N` in [gpucap] when the
 * member uses one card, else in [device.<uuid>]; the text first with the generation it had, then the
 * generation bumped. The file is opened as apply.c opens one (a regular file of one link, owned by
 * its directory's owner, no link followed, nothing blocking). 0, or -errno with why set.
 */
int gpc_arb_write_grant(const struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *uuid, bool only_card, uint64_t bytes, char *why,
                        size_t whylen);
/* `key = value` written into section `section` of the member's settings file the same way (nothing
 * written when the file says it already). 0, or -errno with why set. */
int gpc_arb_write_setting(const struct gpc_arbiter *a, const struct gpc_arb_member *m, const char *section,
                          const char *key, const char *value, char *why, size_t whylen);
/*
 * Sets `key = value` in section `section` ("gpucap" or "device.GPU-...") of ini text `in`, into out
 * (the section added at the end when missing). 0 or -ENOSPC.
 */
int gpc_arb_ini_set(const char *in, const char *section, const char *key, const char *value, char *out,
                    size_t outlen);
/* The value of `key` in section `section` of `in` (the last one), into out; false when absent. */
bool gpc_arb_ini_get(const char *in, const char *section, const char *key, char *out, size_t len);
/* Writes qos.state beside the member's settings file when its text changed (a new file renamed
 * over the old: its readers read it whole). */
void gpc_arb_write_member_state(struct gpc_arbiter *a, struct gpc_arb_member *m);
/* Writes cfg.state_dir/cards.state when its text changed. */
void gpc_arb_write_cards_state(struct gpc_arbiter *a);

/* ---- the loop (arbiter_serve.c) ---- */

/* Ready: NVML, the first scan, the socket(s). 0, or -errno with why set. */
int gpc_arb_init(struct gpc_arbiter *a, char *why, size_t whylen);
/* One pass: the node looked at (every tick_ms), the requests answered, the reclaims moved on; waits
 * for a datagram up to `wait_ms`. */
void gpc_arb_step(struct gpc_arbiter *a, int wait_ms);
/* Runs until stopped(arg) says so (asked at least every 200 ms), or for cfg.run_for seconds. */
void gpc_arb_run(struct gpc_arbiter *a, bool (*stopped)(void *arg), void *arg);
void gpc_arb_close(struct gpc_arbiter *a);

#endif
