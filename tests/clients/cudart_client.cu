/* SPDX-License-Identifier: Apache-2.0 */
// cudart_client.cu: the real CUDA runtime (libcudart, linked statically by nvcc) as a client of
// gpucap, for the real-client checks (tests/clients/checks.sh) on the fake driver and on a GPU
// (tests/gpu/run.sh). Every mode prints its figures as key=value; the modes that can judge
// themselves also print "PASS name: ..." or "FAIL name: ..." (the budget is GPUCAP_MEMORY_LIMIT,
// in bytes). Modes:
//   CHUNK_MIB [hold [N]]  allocate CHUNK_MIB chunks with cudaMalloc until an error (or N chunks):
//                     "info_total= info_free= allocated= err= prop_total=" (prop_total:
//                     totalGlobalMem); with "hold", then print "holding pid=<its pid>" and sleep 60 s
//                     holding it all (N: so that a second process on the ledger has room left)
//   family CHUNK_MIB  every cudaMalloc* member of the runtime to the budget in turn, each freed
//                     before the next: each must stop at the budget with cudaErrorMemoryAllocation
//                     and get as much as cudaMalloc did (no charge left behind); pinned host
//                     memory (cudaMallocHost, cudaHostAlloc, cudaHostRegister) is not charged
//   reset CHUNK_MIB   cudaMalloc to the budget, cudaDeviceReset, again: the same amount
//   ipc CHUNK_MIB     holds a quarter of the budget, exports an IPC handle, runs itself as
//                     "ipc-open" (one process more on the ledger): the importer opens it uncharged
//                     and gets the rest, the two together never past the budget (RESERVE: the bytes
//                     gpucap reserves per context, which each process pays)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static size_t env_bytes(const char *name)
{
    const char *b = getenv(name);
    return b ? strtoull(b, NULL, 10) : 0;
}

static size_t budget(void)
{
    return env_bytes("GPUCAP_MEMORY_LIMIT");
}

static int fails;

static void verdict(bool ok, const char *name, const char *fmt, size_t a, size_t b)
{
    printf("%s %s: ", ok ? "PASS" : "FAIL", name);
    printf(fmt, a, b);
    printf("\n");
    fflush(stdout);
    fails += !ok;
}

/* ---- loop (the GPU suite's original mode) ---- */

static int loop(size_t chunk, bool hold, int max_chunks)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        printf("err=%s\n", cudaGetErrorName(e));
        return 1;
    }
    size_t allocated = 0;
    void *p;
    for (int i = 0; i < max_chunks; i++) {
        e = cudaMalloc(&p, chunk);
        if (e != cudaSuccess)
            break;
        allocated += chunk;
    }
    cudaDeviceProp prop;
    size_t prop_total = cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.totalGlobalMem : 0;
    printf("info_total=%zu info_free=%zu allocated=%zu err=%s prop_total=%zu\n", total_b, free_b, allocated,
           cudaGetErrorName(e), prop_total);
    fflush(stdout);
    if (hold) {
        printf("holding pid=%d\n", (int)getpid());
        fflush(stdout);
        sleep(60);
    }
    return 0;
}

/* ---- family: one allocator at a time, to the budget ---- */

#define MAXP 4096

struct member {
    const char *name;
    cudaError_t (*alloc)(void **p, size_t chunk, void *state);
    void (*release)(void **ptrs, int n, void *state);
};

static cudaMemPool_t own_pool;
static cudaStream_t stream;

static cudaError_t a_malloc(void **p, size_t c, void *s) { return cudaMalloc(p, c); }
static cudaError_t a_pitch(void **p, size_t c, void *s)
{
    size_t pitch;
    return cudaMallocPitch(p, &pitch, 4096, c / 4096);
}
static cudaError_t a_3d(void **p, size_t c, void *s)
{
    cudaPitchedPtr pp;
    cudaError_t e = cudaMalloc3D(&pp, make_cudaExtent(4096, 64, c / (4096 * 64)));
    *p = pp.ptr;
    return e;
}
static cudaError_t a_managed(void **p, size_t c, void *s) { return cudaMallocManaged(p, c, cudaMemAttachGlobal); }
static cudaError_t a_async(void **p, size_t c, void *s) { return cudaMallocAsync(p, c, stream); }
static cudaError_t a_from_pool(void **p, size_t c, void *s) { return cudaMallocFromPoolAsync(p, c, own_pool, stream); }
static cudaError_t a_array(void **p, size_t c, void *s)
{
    cudaChannelFormatDesc d = cudaCreateChannelDesc<float>();
    return cudaMallocArray((cudaArray_t *)p, &d, 1024, c / (1024 * 4));
}
static cudaError_t a_3darray(void **p, size_t c, void *s)
{
    cudaChannelFormatDesc d = cudaCreateChannelDesc<float>();
    return cudaMalloc3DArray((cudaArray_t *)p, &d, make_cudaExtent(256, 256, c / (256 * 256 * 4)), 0);
}
static cudaError_t a_mipmapped(void **p, size_t c, void *s)
{
    cudaChannelFormatDesc d = cudaCreateChannelDesc<float>();
    /* One level: the allocation is exactly the 2D extent. */
    return cudaMallocMipmappedArray((cudaMipmappedArray_t *)p, &d, make_cudaExtent(1024, c / (1024 * 4), 0), 1, 0);
}

static void r_free(void **ptrs, int n, void *s)
{
    for (int i = 0; i < n; i++)
        cudaFree(ptrs[i]);
}
static void r_async(void **ptrs, int n, void *s)
{
    for (int i = 0; i < n; i++)
        cudaFreeAsync(ptrs[i], stream);
    cudaStreamSynchronize(stream);
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    cudaMemPoolTrimTo(pool, 0);
    cudaMemPoolTrimTo(own_pool, 0);
}
static void r_array(void **ptrs, int n, void *s)
{
    for (int i = 0; i < n; i++)
        cudaFreeArray((cudaArray_t)ptrs[i]);
}
static void r_mipmapped(void **ptrs, int n, void *s)
{
    for (int i = 0; i < n; i++)
        cudaFreeMipmappedArray((cudaMipmappedArray_t)ptrs[i]);
}

/* Allocates with `m` until it fails: the bytes it got; *err the error that stopped it. */
static size_t fill(const struct member *m, size_t chunk, void **ptrs, int *n, cudaError_t *err)
{
    *n = 0;
    *err = cudaSuccess;
    while (*n < MAXP && (*err = m->alloc(&ptrs[*n], chunk, NULL)) == cudaSuccess)
        (*n)++;
    cudaGetLastError(); /* the runtime keeps the last error; the next member starts clean */
    return (size_t)*n * chunk;
}

static int family(size_t chunk)
{
    size_t b = budget();
    static const struct member members[] = {
        { "cudaMalloc", a_malloc, r_free },
        { "cudaMallocPitch", a_pitch, r_free },
        { "cudaMalloc3D", a_3d, r_free },
        { "cudaMallocManaged", a_managed, r_free },
        { "cudaMallocAsync", a_async, r_async },
        { "cudaMallocFromPoolAsync", a_from_pool, r_async },
        { "cudaMallocArray", a_array, r_array },
        { "cudaMalloc3DArray", a_3darray, r_array },
        { "cudaMallocMipmappedArray", a_mipmapped, r_mipmapped },
    };
    static void *ptrs[MAXP];
    if (cudaStreamCreate(&stream) != cudaSuccess)
        return 1;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    if (cudaMemPoolCreate(&own_pool, &props) != cudaSuccess)
        return 1;
    size_t first = 0;
    for (size_t i = 0; i < sizeof members / sizeof *members; i++) {
        int n;
        cudaError_t err;
        size_t got = fill(&members[i], chunk, ptrs, &n, &err);
        char name[96];
        snprintf(name, sizeof name, "cudart.family.%s", members[i].name);
        if (i == 0)
            first = got;
        printf("%s allocated=%zu err=%s\n", members[i].name, got, cudaGetErrorName(err));
        bool ok = err == cudaErrorMemoryAllocation && got > 0 && got <= b && got + 2 * chunk >= first;
        verdict(ok, name, "stopped at %zu of a budget of %zu bytes with cudaErrorMemoryAllocation, as much as "
                "cudaMalloc got to within two chunks", got, b);
        members[i].release(ptrs, n, NULL);
    }
    /* Pinned host memory is host memory: as much as the budget twice, and the card's budget stays whole. */
    void *h1 = NULL, *h2 = NULL;
    char *h3 = (char *)malloc(b);
    cudaError_t e1 = cudaMallocHost(&h1, b), e2 = cudaHostAlloc(&h2, b, cudaHostAllocPortable);
    cudaError_t e3 = h3 ? cudaHostRegister(h3, b, cudaHostRegisterDefault) : cudaErrorMemoryAllocation;
    int n;
    cudaError_t err;
    size_t got = fill(&members[0], chunk, ptrs, &n, &err);
    verdict(e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess && first > 0 && got + 2 * chunk >= first,
            "cudart.family.pinned", "with 3 x the budget pinned on the host, cudaMalloc still got %zu (alone: %zu)",
            got, first);
    r_free(ptrs, n, NULL);
    cudaFreeHost(h1);
    cudaFreeHost(h2);
    cudaHostUnregister(h3);
    free(h3);
    return fails ? 1 : 0;
}

/* ---- reset: cudaDeviceReset gives everything back ---- */

static int reset(size_t chunk)
{
    static void *ptrs[MAXP];
    static const struct member m = { "cudaMalloc", a_malloc, r_free };
    int n;
    cudaError_t err;
    size_t before = fill(&m, chunk, ptrs, &n, &err);
    size_t free_b, total_b;
    cudaMemGetInfo(&free_b, &total_b);
    verdict(total_b == budget() && before > 0 && before <= budget(), "cudart.meminfo",
            "cudaMemGetInfo total %zu (budget %zu)", total_b, budget());
    cudaError_t r = cudaDeviceReset();
    size_t after = fill(&m, chunk, ptrs, &n, &err);
    printf("before=%zu after=%zu reset=%s\n", before, after, cudaGetErrorName(r));
    verdict(r == cudaSuccess && before > 0 && after + chunk >= before && after <= budget(), "cudart.reset",
            "after cudaDeviceReset %zu bytes allocatable again (before %zu)", after, before);
    return fails ? 1 : 0;
}

/* ---- ipc: the exporter pays, the importer is not charged, together within the budget ---- */

static int ipc(size_t chunk, const char *self)
{
    size_t b = budget(), half = b / 4 / chunk * chunk;
    void *p;
    if (cudaMalloc(&p, half) != cudaSuccess) {
        verdict(false, "cudart.ipc", "cannot allocate %zu of %zu", half, b);
        return 1;
    }
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) {
        verdict(false, "cudart.ipc", "cudaIpcGetMemHandle failed (%zu, %zu)", (size_t)e, 0);
        return 1;
    }
    char hex[2 * sizeof h + 1];
    for (size_t i = 0; i < sizeof h; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)h.reserved[i]);
    char chunk_s[32];
    snprintf(chunk_s, sizeof chunk_s, "%zu", chunk / MiB);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "ipc-open", chunk_s, hex, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    verdict(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cudart.ipc.exporter", "the importer exited %zu (holding %zu here)",
            WIFEXITED(st) ? (size_t)WEXITSTATUS(st) : 999, half);
    return fails ? 1 : 0;
}

static int ipc_open(size_t chunk, const char *hex)
{
    size_t b = budget(), half = b / 4 / chunk * chunk, reserve = env_bytes("RESERVE");
    cudaIpcMemHandle_t h;
    for (size_t i = 0; i < sizeof h; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    void *q = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&q, h, cudaIpcMemLazyEnablePeerAccess);
    static void *ptrs[MAXP];
    static const struct member m = { "cudaMalloc", a_malloc, r_free };
    int n;
    cudaError_t err;
    size_t got = fill(&m, chunk, ptrs, &n, &err);
    printf("opened=%s allocated=%zu\n", cudaGetErrorName(e), got);
    /* Opening charges nothing here: what is left is the budget less the exporter's part and the two
     * context reserves (had the opened memory been charged again, a quarter less). */
    size_t left = b - half - 2 * reserve;
    verdict(e == cudaSuccess && got <= left && got + 2 * chunk >= left, "cudart.ipc",
            "the importer allocated %zu beside the exporter's %zu", got, half);
    cudaIpcCloseMemHandle(q);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] >= '0' && argv[1][0] <= '9')
        return loop(strtoull(argv[1], NULL, 10) * MiB, argc > 2 && strcmp(argv[2], "hold") == 0,
                    argc > 3 ? atoi(argv[3]) : 100000);
    size_t chunk = (argc > 2 ? strtoull(argv[2], NULL, 10) : 64) * MiB;
    if (argc > 1 && strcmp(argv[1], "family") == 0)
        return family(chunk);
    if (argc > 1 && strcmp(argv[1], "reset") == 0)
        return reset(chunk);
    if (argc > 1 && strcmp(argv[1], "ipc") == 0)
        return ipc(chunk, argv[0]);
    if (argc > 3 && strcmp(argv[1], "ipc-open") == 0)
        return ipc_open(chunk, argv[3]);
    if (argc == 1)
        return loop(64 * MiB, false, 100000);
    fprintf(stderr, "usage: %s CHUNK_MIB [hold] | family|reset|ipc CHUNK_MIB\n", argv[0]);
    return 2;
}
