/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the server's request reading (http-request.c): the bytes any client sends.
 * The head is measured and parsed in place as the server does, then every header goes through the
 * Accept-Encoding reader and the Authorization value through base64. Never a crash; a parsed head
 * points only inside its buffer; an error is one of the statuses the parser promises.
 */
#include <stdlib.h>
#include <string.h>

#include "http-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checked in release builds too (assert is compiled out there). */
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static bool inside(const char *p, const char *buf, size_t len)
{
    return p >= buf && p <= buf + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t end = http_head_end(buf, size);
    CHECK(end <= size);
    if (end) {
        struct http_head h;
        int st = http_head_parse(buf, end, 256, &h);
        CHECK(st == 0 || st == 400 || st == 414 || st == 431 || st == 505);
        if (st == 0) {
            CHECK(inside(h.method, buf, end) && inside(h.path, buf, end));
            CHECK(h.n_headers <= HTTP_MAX_HEADERS);
            for (size_t i = 0; i < h.n_headers; i++) {
                CHECK(inside(h.headers[i].value, buf, end));
                (void)http_accepts_gzip(h.headers[i].value);
                char out[128];
                size_t n;
                if (http_base64_decode(h.headers[i].value, out, sizeof(out), &n) == 0)
                    CHECK(n < sizeof(out));
            }
        }
    }
    free(buf);
    return 0;
}
