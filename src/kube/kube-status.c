/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Why a request failed, in the API's own words. The API server answers errors with a Status object
 * ({"kind": "Status", "reason": "NotFound", "message": "resourceclaims.resource.k8s.io \"x\" not
 * found", "code": 404}); proxies and load balancers in front of it answer with whatever they like,
 * so a body that is not a Status still gives a reason named after the HTTP status and the start of
 * the body as the message.
 */
#include <stdio.h>
#include <string.h>

#include "kube-internal.h"

/* How much of a non-Status body makes it into a message. */
#define RAW_EXCERPT 200

static const char *reason_for_status(int status)
{
    switch (status) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 405:
        return "MethodNotAllowed";
    case 406:
        return "NotAcceptable";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "RequestEntityTooLarge";
    case 415:
        return "UnsupportedMediaType";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 500:
        return "InternalError";
    case 503:
        return "ServiceUnavailable";
    case 504:
        return "Timeout";
    default:
        return "";
    }
}

/* Copies the printable start of a body: it goes into messages and log lines. */
static void excerpt(const char *raw, size_t len, char *out, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < len && i < RAW_EXCERPT && j + 1 < n; i++) {
        unsigned char ch = (unsigned char)raw[i];
        out[j++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
    }
    while (j > 0 && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
}

void kube_status_describe(int status, const json_t *body, const char *raw, size_t raw_len,
                          char *reason, size_t reason_n, char *message, size_t message_n)
{
    const char *kind = json_string_value(json_object_get(body, "kind"));
    if (kind && strcmp(kind, "Status") == 0) {
        const char *r = json_string_value(json_object_get(body, "reason"));
        const char *m = json_string_value(json_object_get(body, "message"));
        snprintf(reason, reason_n, "%s", r && *r ? r : reason_for_status(status));
        if (m && *m)
            snprintf(message, message_n, "%s", m);
        else
            snprintf(message, message_n, "HTTP %d", status);
        return;
    }
    snprintf(reason, reason_n, "%s", reason_for_status(status));
    char text[RAW_EXCERPT + 1];
    excerpt(raw ? raw : "", raw ? raw_len : 0, text, sizeof(text));
    if (*text)
        snprintf(message, message_n, "HTTP %d: %s", status, text);
    else
        snprintf(message, message_n, "HTTP %d", status);
}
