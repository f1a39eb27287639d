/*
 * admission.h: the webhook's request handler (admission.c), shared by the server, the unit tests
 * and the fuzzer. It does no I/O: bytes of a request body in, an HTTP status and a body out.
 */
#ifndef GPUCAP_WEBHOOK_ADMISSION_H
#define GPUCAP_WEBHOOK_ADMISSION_H

#include <stddef.h>

/*
 * The largest request body the handler (and the server) accepts; larger ones get 413. A pod as the
 * API server sends it, managedFields included, is tens of KiB; 512 KiB leaves room for large ones.
 */
#define GPC_ADMISSION_MAX_BODY (512u << 10)
#define GPC_ADMISSION_MAX_BODY_TEXT "512 KiB"

/* Name of the pod volume that carries the library's host directory. */
#define GPC_ADMISSION_VOLUME "gpucap-lib"

/* What the webhook injects; every string must outlive the calls that use it. */
struct gpc_admission_config {
    const char *lib_dir;        /* host directory of libgpucap.so, mounted at the same path */
    const char *ledger_dir;     /* directory inside each container for its GPUCAP_LEDGER file */
    const char *default_memory; /* budget for unannotated GPU containers; NULL: annotated pods only */
};

/* What to send back. body is NUL-terminated (body_len excludes the NUL) and owned by the result. */
struct gpc_admission_result {
    int status;               /* HTTP status: 200, 400 or 413 */
    const char *content_type; /* "application/json" or "text/plain" */
    char *body;
    size_t body_len;
    char log[2048];           /* one line, no newline: uid, pod, decision, containers touched */
};

/*
 * Checks a configuration before it is used: lib_dir and ledger_dir absolute and free of characters
 * that would break LD_PRELOAD or Kubernetes' $(VAR) expansion, default_memory a size. Returns 0, or
 * -EINVAL with a message naming the setting written to err.
 */
int gpc_admission_check_config(const struct gpc_admission_config *cfg, char *err, size_t errlen);

/*
 * Answers one POST /mutate body. A well-formed admission.k8s.io/v1 AdmissionReview gets 200 and a
 * response review (allowed with a base64 JSONPatch, allowed without one, or denied with a message);
 * anything else gets 400 (413 past GPC_ADMISSION_MAX_BODY) with a text message. Never fails for any
 * input: returns 0, or -ENOMEM when memory ran out, in which case out holds status 500 and no body.
 * Release out with gpc_admission_result_free().
 */
int gpc_admission_handle(const struct gpc_admission_config *cfg, const char *body, size_t len,
                         struct gpc_admission_result *out);

/* Frees what gpc_admission_handle() put in the result; safe on a zeroed or already freed result. */
void gpc_admission_result_free(struct gpc_admission_result *res);

#endif
