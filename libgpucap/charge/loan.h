/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loan.h: the loan channel to the node arbiter (loan.c), on the denial path only (issue 35).
 */
#ifndef GPUCAP_CHARGE_LOAN_H
#define GPUCAP_CHARGE_LOAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpc_settings;

/*
 * The arbiter's socket by settings `s` into buf: arbiter_socket when set (no arbiter when it is
 * not a socket), else the first that is a socket of <ledger directory>/arbiter.sock (an explicit ledger),
 * $XDG_RUNTIME_DIR/gpucap/arbiter.sock, /tmp/gpucap-<euid>/arbiter.sock. 0, or -ENOENT (no arbiter).
 */
int gpc_loan_socket_path(const struct gpc_settings *s, char *buf, size_t len);
/*
 * An admission of `bytes` on budget `id` (device ordinal `device`) was denied: when the device is
 * burstable and its budget in force is below its limit, asks the arbiter for a loan (one datagram,
 * the answer waited for 50 ms at most), then re-reads the platform settings file. True when the
 * budget in force moved (the caller retries its admission once). Never on the fast path.
 */
bool gpc_loan_ask(int device, int id, uint64_t bytes);
/* The state of one allocation's wait for memory within its request (zero it before the first call). */
struct gpc_loan_need {
    bool started, done, asked, refused;
    uint64_t deadline_ms, next_ask_ms;
    char server[108];
};
/*
 * The driver refused an allocation of `bytes` on budget `id` that is within the request (a
 * guaranteed container's budget is all request): asks the arbiter to take loans back (`need`), at
 * most every 500 ms, and waits a step. True while the caller should call the driver again; false
 * at once when it is not within the request or no arbiter is there, after one more try when the
 * arbiter answers `refused` (nothing on loan), and once reclaim_grace + 1 s have passed since the
 * first call (said in one line).
 */
bool gpc_loan_need(int device, int id, uint64_t bytes, struct gpc_loan_need *n);

#endif
