/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loan.c: the loan channel of burstable memory (issue 35), the library's side: asking the node
 * arbiter for memory, on the denial path only.
 *
 * Two asks, one datagram each, to the arbiter's Unix datagram socket (the arbiter_socket setting,
 * else <ledger directory>/arbiter.sock, else the local arbiter's $XDG_RUNTIME_DIR/gpucap/arbiter.sock
 * or /tmp/gpucap-<uid>/arbiter.sock): `loan <uuid> <bytes> <pid>` when an admission of a burstable
 * container was denied while its budget in force is below its limit (it could borrow), and `need
 * <uuid> <bytes> <pid>` when the driver refused an allocation within the request (loans fill the
 * card: the arbiter takes them back). The answer (`granted N`, `refused WHY`, `pending MS`) is waited
 * for, bounded (50 ms for a loan; a need is asked again until reclaim_grace + 1 s have passed), and
 * then only says when to look: nothing in it is trusted. The grant is read from the platform
 * settings file alone (charge/live.c re-reads it at once and applies a moved grant through the one
 * live-change mechanism), and the caller retries its admission or its driver call.
 *
 * Invisible until needed: no thread, no socket, no file until an ask. The reply address is a
 * socket bound beside the arbiter's (the arbiter may sit in another network namespace, where an
 * abstract address does not reach), else an abstract one; it is removed after the answer. No socket
 * at any of the paths: no arbiter, and the denial stands at once.
 */
#include "charge/loan.h"

#include "charge/device.h"
#include "charge/live.h"
#include "common/defs.h"
#include "common/ledger.h"
#include "common/log.h"
#include "common/options.h"
#include "common/units.h"
#include "core/budget.h"
#include "core/ledger_map.h"
#include "core/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LOAN_WAIT_MS 50
#define NEED_ASK_EVERY_MS 500
#define NEED_STEP_MS 20
#define LINE_MAX_BYTES 256

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool is_socket(const char *path)
{
    struct stat st;
    return path[0] && strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path) && stat(path, &st) == 0 &&
           S_ISSOCK(st.st_mode);
}

int gpc_loan_socket_path(const struct gpc_settings *s, char *buf, size_t len)
{
    const char *set = gpc_opt_string(s, GPC_OPT_ARBITER_SOCKET);
    if (set) {
        snprintf(buf, len, "%s", set);
        return is_socket(buf) ? 0 : -ENOENT;
    }
    /* A ledger the platform placed (its own directory, which the arbiter sees on the node). */
    char ledger[512];
    if (s->opt[GPC_OPT_LEDGER].set && gpc_ledger_path(s, ledger, sizeof ledger) == 0) {
        char *slash = strrchr(ledger, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, len, "%s/arbiter.sock", ledger[0] ? ledger : "");
            if (is_socket(buf))
                return 0;
        }
    }
    /* The machine's local arbiter (`gpucap-agent --local`) for `gpucap run` jobs. */
    const char *xdg = gpc_secure_execution() ? NULL : getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/') {
        snprintf(buf, len, "%s/gpucap/arbiter.sock", xdg);
        if (is_socket(buf))
            return 0;
    }
    snprintf(buf, len, "/tmp/gpucap-%u/arbiter.sock", (unsigned)geteuid());
    return is_socket(buf) ? 0 : -ENOENT;
}

/* The reply address: a socket beside the arbiter's (removed by the caller: *bound names it), else an
 * abstract one the kernel picks. The socket fd, or -1. */
static int open_reply(const char *server, struct sockaddr_un *mine)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(mine, 0, sizeof *mine);
    mine->sun_family = AF_UNIX;
    const char *slash = strrchr(server, '/');
    int dir = slash ? (int)(slash - server) : 0;
    int n = snprintf(mine->sun_path, sizeof mine->sun_path, "%.*s/.gpucap-loan-%d-%ld", dir, server, (int)getpid(),
                     (long)syscall(SYS_gettid));
    if (slash && n > 0 && (size_t)n < sizeof mine->sun_path) {
        unlink(mine->sun_path);
        if (bind(fd, (struct sockaddr *)mine, sizeof *mine) == 0)
            return fd;
    }
    mine->sun_path[0] = '\0';
    /* Autobind: an abstract address of the kernel's choosing. */
    if (bind(fd, (struct sockaddr *)mine, sizeof(sa_family_t)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* What an answer says, for the caller's wait and the log only (its figures are not used). */
enum answer { ANSWER_NONE, ANSWER_GRANTED, ANSWER_REFUSED, ANSWER_PENDING, ANSWER_OTHER };

static enum answer parse_answer(const char *text, uint64_t *ms)
{
    char word[16];
    unsigned long long n = 0;
    if (sscanf(text, "%15s %llu", word, &n) >= 1) {
        if (strcmp(word, "granted") == 0)
            return ANSWER_GRANTED;
        if (strcmp(word, "refused") == 0)
            return ANSWER_REFUSED;
        if (strcmp(word, "pending") == 0) {
            *ms = n > 60000 ? 60000 : n;
            return ANSWER_PENDING;
        }
    }
    return ANSWER_OTHER;
}

static void count_ask(int id)
{
    if (id >= 0 && id < GPC_LEDGER_DEVICES && gpc_ledger)
        atomic_fetch_add_explicit(&gpc_ledger->dev[id].loan_asks, 1, memory_order_relaxed);
}

/*
 * One ask: `line` sent to the arbiter at `server`, and the answer waited for up to `wait_ms`. The
 * answer, ANSWER_NONE when none came (no arbiter there: *gone, or it was silent); *pending_ms for a
 * `pending` answer.
 */
static enum answer ask(int id, const char *server, const char *line, uint64_t wait_ms, bool *gone, uint64_t *pending_ms)
{
    struct sockaddr_un to = {.sun_family = AF_UNIX}, mine;
    snprintf(to.sun_path, sizeof to.sun_path, "%s", server);
    *gone = false;
    int fd = open_reply(server, &mine);
    if (fd < 0)
        return ANSWER_NONE;
    enum answer a = ANSWER_NONE;
    if (sendto(fd, line, strlen(line), MSG_NOSIGNAL, (struct sockaddr *)&to, sizeof to) < 0) {
        *gone = errno == ENOENT || errno == ECONNREFUSED || errno == ENOTSOCK;
    } else {
        count_ask(id);
        uint64_t end = mono_ms() + wait_ms;
        for (;;) {
            uint64_t now = mono_ms();
            if (now >= end)
                break;
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int r = poll(&p, 1, (int)(end - now));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            char text[LINE_MAX_BYTES + 1];
            ssize_t got = recv(fd, text, LINE_MAX_BYTES, MSG_DONTWAIT);
            if (got < 0)
                continue;
            text[got] = '\0';
            a = parse_answer(text, pending_ms);
            break;
        }
    }
    close(fd);
    if (mine.sun_path[0])
        unlink(mine.sun_path);
    return a;
}


/* What is admitted on entry `id` now, an admission the driver has not carried out included; read
 * without moving the peak (which follows the driver: core/budget.c). */
static uint64_t in_use(int id)
{
    return gpc_ledger ? gpc_ledger_in_use(gpc_ledger, id) : 0;
}

/* The device's burstable figures as last applied (read under the set-up lock, which this path does
 * not hold: a live change writes them under it). True when burstable. */
static bool qos_now(int device, struct gpc_qos *q)
{
    gpc_device_hold(true);
    bool b = gpc_device_qos(device, q, NULL);
    gpc_device_hold(false);
    return b;
}

static const char *answer_name(enum answer a)
{
    switch (a) {
    case ANSWER_GRANTED: return "granted";
    case ANSWER_REFUSED: return "refused";
    case ANSWER_PENDING: return "pending";
    case ANSWER_OTHER: return "not understood";
    case ANSWER_NONE: break;
    }
    return "no answer";
}

bool gpc_loan_ask(int device, int id, uint64_t bytes)
{
    struct gpc_qos q;
    if (id < 0 || !qos_now(device, &q))
        return false;
    uint64_t in_force = gpc_budget_limit(id);
    if (in_force >= q.limit)
        return false; /* at its limit: nothing to borrow */
    char server[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (gpc_loan_socket_path(&gpc_config, server, sizeof server) != 0)
        return false; /* no arbiter: best effort borrows nothing */
    const char *uuid = gpc_device_uuid(device);
    uint64_t want = in_use(id) + bytes;
    if (want > q.limit)
        want = q.limit;
    uint64_t beyond = want > in_force ? want - in_force : bytes;
    char line[LINE_MAX_BYTES];
    snprintf(line, sizeof line, "loan %s %" PRIu64 " %d", uuid ? uuid : "-", beyond, (int)getpid());
    bool gone;
    uint64_t pending = 0;
    enum answer a = ask(id, server, line, LOAN_WAIT_MS, &gone, &pending);
    /* Whatever the answer said: the platform's file says what is granted. */
    bool moved = gpc_live_check(true) || gpc_budget_limit(id) != in_force;
    char b[GPC_SIZE_TEXT];
    gpc_log(GPC_LOG_INFO, "device %d: asked the arbiter (%s) for a loan of %s: %s%s", device, server,
            gpc_format_size(beyond, b, sizeof b), gone ? "no arbiter" : answer_name(a),
            moved ? "; the budget in force moved" : "");
    return moved;
}

bool gpc_loan_need(int device, int id, uint64_t bytes, struct gpc_loan_need *n)
{
    if (id < 0 || n->done)
        return false;
    uint64_t now = mono_ms();
    if (!n->started) {
        n->started = true;
        /* Within the request only: R for a burstable container, the whole budget for a guaranteed one. */
        struct gpc_qos q;
        uint64_t request = qos_now(device, &q) ? q.request : gpc_budget_limit(id);
        if (in_use(id) > request ||
            gpc_loan_socket_path(&gpc_config, n->server, sizeof n->server) != 0) {
            n->done = true;
            return false;
        }
        long long grace = gpc_opt_int(&gpc_config, GPC_OPT_RECLAIM_GRACE, 10);
        n->deadline_ms = now + (uint64_t)(grace < 0 ? 0 : grace > 3600 ? 3600 : grace) * 1000u + 1000u;
        n->next_ask_ms = now;
    }
    if (now >= n->deadline_ms || n->refused) {
        n->done = true;
        char b[GPC_SIZE_TEXT];
        gpc_log(GPC_LOG_WARN, "device %d: the driver refused %s within the request, and the arbiter %s -> "
                "CUDA_ERROR_OUT_OF_MEMORY", device, gpc_format_size(bytes, b, sizeof b),
                n->refused ? "has nothing on loan to take back" : "did not get it back within reclaim_grace + 1 s");
        return false;
    }
    if (now >= n->next_ask_ms) {
        const char *uuid = gpc_device_uuid(device);
        char line[LINE_MAX_BYTES];
        snprintf(line, sizeof line, "need %s %" PRIu64 " %d", uuid ? uuid : "-", bytes, (int)getpid());
        bool gone;
        uint64_t pending = 0, left = n->deadline_ms - now;
        enum answer a = ask(id, n->server, line, left < NEED_ASK_EVERY_MS ? left : NEED_ASK_EVERY_MS, &gone, &pending);
        if (gone) {
            n->done = true; /* the arbiter went away: the refusal stands */
            return false;
        }
        if (!n->asked) {
            char b[GPC_SIZE_TEXT];
            gpc_log(GPC_LOG_INFO, "device %d: the driver refused %s within the request; asked the arbiter (%s): %s",
                    device, gpc_format_size(bytes, b, sizeof b), n->server, answer_name(a));
        }
        n->asked = true;
        /* Nothing on loan on the card (the arbiter says): the driver is asked once more, then the
         * refusal stands. Trusting it can only shorten this process's own wait. */
        n->refused = a == ANSWER_REFUSED;
        n->next_ask_ms = mono_ms() + (a == ANSWER_PENDING && pending > NEED_ASK_EVERY_MS ? pending : NEED_ASK_EVERY_MS);
    } else {
        sleep_ms(NEED_STEP_MS);
    }
    gpc_live_check(true);
    return true;
}
