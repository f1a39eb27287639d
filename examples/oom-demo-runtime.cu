/* SPDX-License-Identifier: Apache-2.0 */
// oom-demo-runtime: the oom-demo on the CUDA runtime API (what most applications use): allocate
// in 256 MiB steps until cudaMalloc says cudaErrorMemoryAllocation, the way a job meets its cap.
//
//   gpucap run --memory 1GiB --report - -- ./oom-demo-runtime
//
// cudaMemGetInfo reports the budget under gpucap. The runtime reaches the driver through
// cuGetProcAddress, which gpucap answers with its hooks, so nothing here knows about gpucap.
#include <cstdio>
#include <cuda_runtime.h>

#define STEP (256ull << 20)
#define MAX_CHUNKS 4096

static void say_info(const char *when)
{
    size_t free_b = 0, total = 0;
    cudaError_t rc = cudaMemGetInfo(&free_b, &total);
    if (rc == cudaSuccess)
        printf("%-22s free %8.1f MiB of %8.1f MiB\n", when, free_b / 1048576.0, total / 1048576.0);
    else
        printf("%-22s cudaMemGetInfo failed: %s\n", when, cudaGetErrorString(rc));
}

int main()
{
    static void *chunks[MAX_CHUNKS];
    int n = 0;
    say_info("before:");
    for (; n < MAX_CHUNKS; n++) {
        cudaError_t rc = cudaMalloc(&chunks[n], STEP);
        if (rc != cudaSuccess) {
            printf("allocation %d (%llu MiB in all) failed: %s\n", n + 1, (n + 1) * (STEP >> 20),
                   cudaGetErrorName(rc));
            cudaGetLastError(); // an out-of-memory error is not sticky: clear it and go on
            break;
        }
        printf("allocated %5llu MiB\n", (n + 1) * (STEP >> 20));
    }
    say_info("at the limit:");
    for (int i = 0; i < n; i++)
        cudaFree(chunks[i]);
    say_info("after freeing:");
    return 0;
}
