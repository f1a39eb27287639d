/* SPDX-License-Identifier: Apache-2.0 */
/* token.c: the service account's bearer token, read for each call to the Kubernetes API. */
#include "token.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int tool_read_token(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "token %s: %s", path, strerror(e));
        return -e;
    }
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    if (!n || n == len - 1 || strpbrk(buf, "\r\n")) {
        snprintf(err, errlen, "token %s: empty, too long or not one line", path);
        return -EINVAL;
    }
    return 0;
}
