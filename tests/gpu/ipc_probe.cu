/* SPDX-License-Identifier: Apache-2.0 */
// ipc_probe.cu: does NVML's per-process figure count memory a process imported from another
// (cudaIpcOpenMemHandle)? The parent allocates MIB MiB and exports it; a child forked before any
// CUDA call imports it and prints "imported pid=<its pid>", then holds it for 20 s. tests/gpu/run.sh
// reads NVML's figure for the child: about a context when imports are not counted, a context plus
// MIB when they are (gpucap's measured context memory would then charge the importer: it caps
// that at 4 reserves).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        cudaIpcMemHandle_t h;
        if (read(to_child[0], &h, sizeof h) != sizeof h)
            return 1;
        void *p = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
        printf("imported pid=%d err=%s\n", (int)getpid(), cudaGetErrorName(e));
        fflush(stdout);
        char c = 1;
        (void)!write(to_parent[1], &c, 1);
        sleep(20);
        return 0;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, mib << 20);
    cudaIpcMemHandle_t h;
    if (e == cudaSuccess)
        e = cudaIpcGetMemHandle(&h, p);
    printf("exported pid=%d err=%s\n", (int)getpid(), cudaGetErrorName(e));
    fflush(stdout);
    if (e != cudaSuccess)
        return 1;
    (void)!write(to_child[1], &h, sizeof h);
    char c;
    (void)!read(to_parent[0], &c, 1);
    waitpid(pid, NULL, 0);
    return 0;
}
