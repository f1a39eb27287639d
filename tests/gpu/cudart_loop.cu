/* SPDX-License-Identifier: Apache-2.0 */
// cudart_loop.cu: the CUDA runtime path of the GPU suite (tests/gpu/run.sh).
// Prints "info_total=<cudaMemGetInfo total> info_free=<free> allocated=<bytes> err=<name of the
// error that stopped the loop> prop_total=<totalGlobalMem, i.e. cuDeviceTotalMem>" and, with a second argument "hold", sleeps holding the memory
// (for the SIGKILL check) after printing "holding pid=<its pid>"; a third argument caps the number of
// chunks it takes (so that a second process on the same ledger has room left).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t chunk = (argc > 1 ? strtoull(argv[1], NULL, 10) : 64) << 20;
    bool hold = argc > 2 && strcmp(argv[2], "hold") == 0;
    int max_chunks = argc > 3 ? atoi(argv[3]) : 100000;
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
