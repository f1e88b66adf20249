/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the HTTP/1.1 response reader (kube-h1.c): the bytes a server (or anything
 * posing as one) sends, in chunks of any size (the first byte picks the size, and whether the
 * connection then ends). Never a crash or a leak; never more body than the buffer's cap; a finished
 * response consumes nothing after its end.
 */
#include <stddef.h>
#include <stdint.h>

#include "kube-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    bool eof = data[0] & 0x80;
    const char *text = (const char *)data + 1;
    size_t len = size - 1, off = 0;
    struct kube_h1 p;
    struct strbuf body;
    struct diag d;
    diag_init(&d);
    strbuf_init(&body, 4096);
    kube_h1_init(&p, false);
    int r = 0;
    while (off < len && r >= 0 && p.state != H1_DONE) {
        size_t n = len - off < chunk ? len - off : chunk, used = 0;
        r = kube_h1_feed(&p, text + off, n, &body, &d, &used);
        if (r >= 0 && used > n)
            __builtin_trap();
        off += used;
        if (r >= 0 && used < n && p.state != H1_DONE)
            __builtin_trap();
    }
    if (r >= 0 && eof)
        (void)!kube_h1_eof(&p, &d);
    if (body.len > body.cap)
        __builtin_trap();
    strbuf_release(&body);
    kube_h1_release(&p);
    return 0;
}
