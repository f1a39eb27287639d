/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeapi_get.c URL TOKEN_FILE CA_FILE: one GET through tools/common/kubeapi.c's request set-up, the
 * one the webhook's namespace reader (nsapi.c) uses: prints "HTTP <code>" and exits 0 when an answer
 * came, prints curl's error and exits 1 when none did (a refused certificate among them).
 */
#include "kubeapi.h"

#include <stdio.h>

static size_t sink(char *p, size_t size, size_t n, void *data)
{
    (void)p, (void)data;
    return size * n;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: kubeapi_get URL TOKEN_FILE CA_FILE\n");
        return 2;
    }
    char cerr[CURL_ERROR_SIZE] = "", err[256];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct tool_kube_request r = {argv[1], argv[2], argv[3], false, false, 5000, sink, NULL, cerr, NULL};
    CURL *c;
    struct curl_slist *h;
    if (tool_kube_open(&r, &c, &h, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CURLcode res = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (res != CURLE_OK)
        fprintf(stderr, "kubeapi_get: %s\n", cerr[0] ? cerr : curl_easy_strerror(res));
    else
        printf("HTTP %ld\n", code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return res == CURLE_OK ? 0 : 1;
}
