/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The watch wire format: a chunked 200 response carrying one JSON object a line,
 * {"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR", "object": {...}}. Lines arrive
 * cut anywhere by the transport, so bytes collect in a capped buffer until a newline completes one.
 */
#include <errno.h>
#include <string.h>

#include "kube-internal.h"

int kube_lines_next(struct strbuf *buf, char **ret_line, size_t *ret_len)
{
    const char *s = strbuf_str(buf);
    const char *nl = memchr(s, '\n', buf->len);
    if (!nl) {
        if (buf->len > KUBE_LINE_MAX)
            return -EMSGSIZE;
        *ret_line = NULL;
        *ret_len = 0;
        return 0;
    }
    size_t n = (size_t)(nl - s);
    if (n > KUBE_LINE_MAX)
        return -EMSGSIZE;
    char *line = malloc(n + 1);
    if (!line)
        return -ENOMEM;
    memcpy(line, s, n);
    line[n] = '\0';
    memmove(buf->buf, nl + 1, buf->len - n - 1);
    buf->len -= n + 1;
    buf->buf[buf->len] = '\0';
    *ret_line = line;
    *ret_len = n;
    return 0;
}

static const char *const wire_names[] = {
    [KUBE_WIRE_ADDED] = "ADDED",     [KUBE_WIRE_MODIFIED] = "MODIFIED",
    [KUBE_WIRE_DELETED] = "DELETED", [KUBE_WIRE_BOOKMARK] = "BOOKMARK",
    [KUBE_WIRE_ERROR] = "ERROR",
};

int kube_watch_decode(const char *line, size_t len, enum kube_wire_event *ret_type,
                      json_t **ret_obj, struct diag *d)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    size_t start = 0;
    while (start < len && (line[start] == ' ' || line[start] == '\t'))
        start++;
    if (start == len)
        return -ENODATA;

    json_error_t jerr;
    _cleanup_json_ json_t *ev =
        json_loadb(line + start, len - start, JSON_REJECT_DUPLICATES, &jerr);
    if (!ev)
        return diag_fail(d, -EINVAL, "watch event: column %d: %s", jerr.column, jerr.text);
    if (!json_is_object(ev))
        return diag_fail(d, -EINVAL, "watch event: not an object");
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        return diag_fail(d, -EINVAL, "watch event: no \"type\"");
    json_t *obj = json_object_get(ev, "object");
    if (!json_is_object(obj))
        return diag_fail(d, -EINVAL, "watch event %s: \"object\" is not an object", type);
    for (size_t i = 0; i < ARRAY_SIZE(wire_names); i++) {
        if (strcmp(type, wire_names[i]) == 0) {
            *ret_type = (enum kube_wire_event)i;
            *ret_obj = json_incref(obj);
            return 0;
        }
    }
    return diag_fail(d, -EINVAL, "watch event: unknown type \"%.64s\"", type);
}
