/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctor.c: hooks called from another library's constructor (before anything in gpucap has run)
 * enforce the budget; hooks called from an atexit handler after gpucap's destructor do not crash.
 */
#include "common.h"

extern int ctor_result[3];

int main(void)
{
    CHECK(ctor_result[0] == CUDA_SUCCESS, "32 MiB in a constructor: %d", ctor_result[0]);
    CHECK(ctor_result[1] == CUDA_ERROR_OUT_OF_MEMORY, "128 MiB in a constructor: %d", ctor_result[1]);
    CHECK(ctor_result[2] == 64, "cuMemGetInfo total in a constructor: %d MiB", ctor_result[2]);
    return test_result();
}
