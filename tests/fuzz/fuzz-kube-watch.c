/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what a watch reads off the wire: bytes arrive in chunks of any size (the
 * first byte picks the chunk size), the line splitter takes complete lines off the capped buffer
 * and each line goes through the event decoder; the same bytes also go through the Status
 * describer as a failed response's body. Never a crash, a leak, or a line that was not complete.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct strbuf buf = STRBUF_INIT;
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (strbuf_add(&buf, text + off, n) < 0)
            break;
        for (;;) {
            char *line = NULL;
            size_t line_len = 0;
            if (kube_lines_next(&buf, &line, &line_len) < 0 || !line)
                break;
            if (memchr(line, '\n', line_len))
                __builtin_trap();
            enum kube_wire_event type;
            json_t *obj = NULL;
            struct diag d;
            diag_init(&d);
            if (kube_watch_decode(line, line_len, &type, &obj, &d) == 0 && !json_is_object(obj))
                __builtin_trap();
            json_decref(obj);
            free(line);
        }
    }
    strbuf_release(&buf);

    char reason[128], message[1024];
    json_t *body = json_loadb(text, len, 0, NULL);
    kube_status_describe(400 + data[0] % 200, body, text, len, reason, sizeof(reason), message,
                         sizeof(message));
    json_decref(body);
    return 0;
}
