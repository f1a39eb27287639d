/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_arbiter.c SOCKET SETTINGS MODE REQUEST LIMIT [LINES]: a small node arbiter for the loan
 * channel's tests (tests/preload/test_qos.c) and benchmark (bench/bench_loan.c). It binds the Unix
 * datagram socket SOCKET and answers each `loan <uuid> <bytes> <pid>` / `need <uuid> <bytes> <pid>`
 * by MODE, rewriting the settings file SETTINGS in place as gpucap-agent does (the text first,
 * then the `; generation = N` line bumped): `[gpucap]`, the extra LINES (one argument, `\n`
 * separated), `memory_request = REQUEST`, `memory_limit = LIMIT` (bytes) and `memory_grant = G`.
 *   grant   a loan: G = max(REQUEST, G) + bytes, at most LIMIT; written, then `granted G`
 *   forge   a loan: `granted <1 TiB>`, the file untouched (a forged answer)
 *   slow    as grant, after TEST_ARB_DELAY_MS (default 2000) first: the answer comes late
 *   silent  reads and never answers nor writes
 *   need    a need: SIGKILL to the process TEST_ARB_VICTIM (a pid) after TEST_ARB_DELAY_MS (default
 *           300), then `granted G` (a reclaim that frees the card)
 *   hold    a need: `pending 200`, and nothing freed (a reclaim that never comes)
 * A datagram `reset` (the benchmark's) puts G back to 0 and writes the file. Every datagram is
 * appended to TEST_ARB_LOG (if set), one line each. Exits at SIGTERM, removing SOCKET. Writes its
 * settings file once before it serves, then prints "ready" on stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *settings, *lines = "";
static unsigned long long request, limit, grant, generation = 1;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop)
        ;
}

/* The file rewritten in place (padded, never shorter), then the generation bumped. */
static void write_settings(void)
{
    char text[4096], gen[64];
    snprintf(gen, sizeof gen, "; generation = %017llx\n", generation);
    int n = snprintf(text, sizeof text, "%s[gpucap]\ncontext_reserve = 0\n%s%smemory_request = %llu\nmemory_limit = %llu\n"
                     "memory_grant = %llu\n", gen, lines, lines[0] ? "\n" : "", request, limit, grant);
    int fd = open(settings, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) {
        perror(settings);
        exit(2);
    }
    struct stat st;
    fstat(fd, &st);
    if (n < st.st_size && st.st_size < (off_t)sizeof text) {
        size_t pad = (size_t)st.st_size - (size_t)n;
        text[n] = ';';
        memset(text + n + 1, ' ', pad - 1);
        text[n + pad - 1] = '\n';
        n += (int)pad;
    }
    if (pwrite(fd, text, (size_t)n, 0) != n)
        exit(3);
    snprintf(gen, sizeof gen, "; generation = %017llx\n", ++generation);
    if (pwrite(fd, gen, strlen(gen), 0) != (ssize_t)strlen(gen))
        exit(3);
    close(fd);
}

static long env_ms(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: test_arbiter SOCKET SETTINGS MODE REQUEST LIMIT [LINES]\n");
        return 2;
    }
    const char *path = argv[1], *mode = argv[3];
    settings = argv[2];
    request = strtoull(argv[4], NULL, 10);
    limit = strtoull(argv[5], NULL, 10);
    if (argc > 6)
        lines = argv[6];
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un me = {.sun_family = AF_UNIX};
    snprintf(me.sun_path, sizeof me.sun_path, "%s", path);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) != 0) {
        perror("bind");
        return 2;
    }
    write_settings();
    printf("ready\n");
    fflush(stdout);
    const char *logpath = getenv("TEST_ARB_LOG");
    long delay = env_ms("TEST_ARB_DELAY_MS", strcmp(mode, "need") == 0 ? 300 : 2000);
    while (!stop) {
        char buf[512];
        struct sockaddr_un from;
        socklen_t flen = sizeof from;
        ssize_t got = recvfrom(fd, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &flen);
        if (got < 0)
            continue;
        buf[got] = '\0';
        if (logpath) {
            FILE *f = fopen(logpath, "a");
            if (f) {
                fprintf(f, "%s\n", buf);
                fclose(f);
            }
        }
        char verb[16], uuid[128];
        unsigned long long bytes = 0;
        int pid = 0;
        if (strcmp(buf, "reset") == 0) {
            grant = 0;
            write_settings();
            continue;
        }
        if (sscanf(buf, "%15s %127s %llu %d", verb, uuid, &bytes, &pid) != 4)
            continue;
        char answer[128] = "";
        int loan = strcmp(verb, "loan") == 0;
        if (strcmp(mode, "silent") == 0) {
            continue;
        } else if (strcmp(mode, "forge") == 0 && loan) {
            snprintf(answer, sizeof answer, "granted %llu", 1ULL << 40);
        } else if ((strcmp(mode, "grant") == 0 || strcmp(mode, "slow") == 0) && loan) {
            if (strcmp(mode, "slow") == 0)
                sleep_ms(delay);
            unsigned long long base = grant > request ? grant : request;
            grant = base + bytes > limit ? limit : base + bytes;
            write_settings();
            snprintf(answer, sizeof answer, "granted %llu", grant);
        } else if (strcmp(mode, "need") == 0 && !loan) {
            const char *victim = getenv("TEST_ARB_VICTIM");
            sleep_ms(delay);
            if (victim && atoi(victim) > 0)
                kill(atoi(victim), SIGKILL);
            snprintf(answer, sizeof answer, "granted %llu", grant);
        } else if (strcmp(mode, "hold") == 0 && !loan) {
            snprintf(answer, sizeof answer, "pending 200");
        } else {
            snprintf(answer, sizeof answer, "refused not lendable");
        }
        if (flen > sizeof(sa_family_t))
            sendto(fd, answer, strlen(answer), 0, (struct sockaddr *)&from, flen);
    }
    close(fd);
    unlink(path);
    return 0;
}
