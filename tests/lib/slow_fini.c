/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slow_fini.c: a library whose destructor runs after gpucap's (preloaded after it) and takes 1.5 s,
 * as a framework's teardown may: the process, and its memory on the card, are still there. It says
 * when it starts by writing a byte to descriptor TEST_SLOW_FINI_FD (tests/preload/test_exact.c, exitlate).
 */
#include <stdlib.h>
#include <unistd.h>

__attribute__((destructor)) static void slow_fini(void)
{
    const char *fd = getenv("TEST_SLOW_FINI_FD");
    if (!fd)
        return;
    char c = 's';
    if (write(atoi(fd), &c, 1) == 1)
        usleep(1500 * 1000);
}
