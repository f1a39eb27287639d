/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ledger_shrink.c: a ledger file shrunk by another process while this one has it mapped (any
 * access past the file's end would raise SIGBUS). The process survives, says so in one error line,
 * and goes on under a private budget that still caps it and is charged with what it holds; a
 * SIGBUS outside the ledger still takes its default action.
 * Run with a 64 MiB budget and its own GPUCAP_LEDGER; stderr is checked by the program itself.
 */
#include "common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void shrink_from_another_process(const char *path)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0)
        _exit(truncate(path, 0) == 0 ? 0 : 1);
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "truncate %s", path);
}

/* A fault outside the ledger is none of gpucap's business: it kills as it would without gpucap. */
static void foreign_fault_still_kills(const char *dir_of)
{
    char path[600];
    snprintf(path, sizeof path, "%s.other", dir_of);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, 4096) != 0)
            _exit(2);
        volatile char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED || ftruncate(fd, 0) != 0)
            _exit(2);
        m[0] = 1;
        _exit(0);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* The sanitizer's own SIGBUS handler (the one gpucap chains to) reports it and exits. */
    bool killed = (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                                                                  WEXITSTATUS(st) != 2);
#else
    bool killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
#endif
    CHECK(killed, "a fault outside the ledger: status %#x, want death by SIGBUS", st);
    unlink(path);
}

int main(void)
{
    const char *ledger = getenv("GPUCAP_LEDGER");
    REQUIRE(ledger, "GPUCAP_LEDGER must be set");
    unlink(ledger);
    char log[600];
    snprintf(log, sizeof log, "%s.stderr", ledger);
    int fd = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO, "stderr to %s", log);

    make_context(0);
    CUdeviceptr a, b, c;
    CHECK_RC(cuMemAlloc_v2(&a, 16 * MiB), CUDA_SUCCESS);
    shrink_from_another_process(ledger);
    /* Each of these touches the mapping past the new end of the file. */
    CHECK_RC(cuMemAlloc_v2(&b, 40 * MiB), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&c, 16 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* 16 + 40 + 16 > 64 */
    CHECK_RC(cuMemFree_v2(b), CUDA_SUCCESS);
    CHECK_RC(cuMemAlloc_v2(&c, 48 * MiB), CUDA_SUCCESS);              /* 16 + 48 = 64 */
    CHECK_RC(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    struct gpucap_usage u = usage(0);
    CHECK(u.limit == 64 * MiB && u.used == 64 * MiB, "usage: limit %llu used %llu", (unsigned long long)u.limit,
          (unsigned long long)u.used);
    CHECK(fakecuda_outstanding(0) == 64 * MiB, "the card holds %llu", (unsigned long long)fakecuda_outstanding(0));
    CHECK_RC(cuMemFree_v2(a), CUDA_SUCCESS);
    CHECK_RC(cuMemFree_v2(c), CUDA_SUCCESS);
    CHECK(usage(0).used == 0, "used %llu at the end", (unsigned long long)usage(0).used);
    foreign_fault_still_kills(ledger);

    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "was shrunk under this process")); p++)
        lines++;
    CHECK(lines == 1, "want one line saying the ledger was shrunk, got %d:\n%s", lines, text);
    CHECK(strstr(text, "private budget from here on, charged with the 16777216 bytes it holds") != NULL,
          "the line does not say what the process holds:\n%s", text);
    dup2(STDOUT_FILENO, STDERR_FILENO);
    if (failures)
        fprintf(stderr, "%s", text);
    return test_result();
}
