/* SPDX-License-Identifier: Apache-2.0 */
/*
 * defs.h: the limits and compiler helpers every layer of the library and the tools share.
 */
#ifndef GPUCAP_COMMON_DEFS_H
#define GPUCAP_COMMON_DEFS_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define gpc_likely(x) __builtin_expect(!!(x), 1)
#define gpc_unlikely(x) __builtin_expect(!!(x), 0)

/*
 * GPC_ASSERT(cond): an invariant that the code upholds by construction, checked in debug builds
 * (GPC_DEBUG, on in the sanitizer builds: -DGPUCAP_SANITIZE=...), where a failure writes one line
 * naming it and aborts; compiled out everywhere else (never an abort in a user's process).
 */
#ifdef GPC_DEBUG
__attribute__((noreturn)) void gpc_assert_fail(const char *what, const char *file, int line);
#define GPC_ASSERT(cond) (gpc_likely(cond) ? (void)0 : gpc_assert_fail(#cond, __FILE__, __LINE__))
#else
#define GPC_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* Raises *x to v if v is higher (a peak, the largest request): relaxed, by compare-and-swap. */
static inline void gpc_atomic_max(_Atomic uint64_t *x, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(x, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(x, &cur, v, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* Device ordinals a process can have settings and per-ordinal state for (a node has at most 16
 * today). Not GPC_LEDGER_DEVICES (ledger.h): the distinct cards, by UUID, a ledger records and
 * budgets are numbered by; an ordinal whose card finds no free ledger entry is denied (device.c). */
#define GPC_MAX_DEVICES 64
/* Per-UUID memory limits a configuration can hold. */
#define GPC_MAX_UUID_LIMITS 16
/* A limit of GPC_UNLIMITED means "no budget for this device". */
#define GPC_UNLIMITED UINT64_MAX
/* The identity fields of the ledger (ledger.h), which the identity settings must fit (options.c):
 * namespace, container name and pod UID at most 63 characters, a pod name at most 253. */
#define GPC_IDENTITY_NAME 64
#define GPC_IDENTITY_POD 256
/* A uid nobody has: the platform's uid when the platform file's owner is not known. */
#define GPC_NO_UID ((uid_t)-1)

/*
 * The choices of the GPC_T_ENUM settings. One list per setting gives both its enum and its choices
 * string ("a|b|c", index = value), so a choice cannot name another value than its enum's.
 */
#define GPC_ENUM_VALUE(name, text) name,
#define GPC_ENUM_TEXT(name, text) "|" text
#define GPC_CHOICES(list) (list(GPC_ENUM_TEXT) + 1) /* "|a|b" + 1: "a|b" */
#define GPC_LOG_LEVELS(X) X(GPC_LOG_ERROR, "error") X(GPC_LOG_WARN, "warn") X(GPC_LOG_INFO, "info") \
    X(GPC_LOG_DEBUG, "debug")

#endif
