/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The textual parts of a gRPC status and deadline: code names, the percent-encoding of
 * grpc-message (PROTOCOL-HTTP2: printable ASCII but '%' as-is, everything else %XX; a decoder keeps
 * malformed escapes), grpc-status values, and grpc-timeout values (1-8 digits and a unit).
 */
#include <errno.h>
#include <stdio.h>

#include "rpc-internal.h"

static const char *const code_names[] = {
    [RPC_OK] = "OK",
    [RPC_CANCELLED] = "CANCELLED",
    [RPC_UNKNOWN] = "UNKNOWN",
    [RPC_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [RPC_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
    [RPC_NOT_FOUND] = "NOT_FOUND",
    [RPC_ALREADY_EXISTS] = "ALREADY_EXISTS",
    [RPC_PERMISSION_DENIED] = "PERMISSION_DENIED",
    [RPC_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
    [RPC_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
    [RPC_ABORTED] = "ABORTED",
    [RPC_OUT_OF_RANGE] = "OUT_OF_RANGE",
    [RPC_UNIMPLEMENTED] = "UNIMPLEMENTED",
    [RPC_INTERNAL] = "INTERNAL",
    [RPC_UNAVAILABLE] = "UNAVAILABLE",
    [RPC_DATA_LOSS] = "DATA_LOSS",
    [RPC_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

const char *rpc_code_name(int code)
{
    if (code < 0 || (size_t)code >= ARRAY_SIZE(code_names))
        return "UNKNOWN";
    return code_names[code];
}

int rpc_percent_encode(struct strbuf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int r;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            r = strbuf_addch(out, (char)*p);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 0xf]};
            r = strbuf_add(out, esc, sizeof(esc));
        }
        if (r < 0)
            return r;
    }
    return 0;
}

size_t rpc_percent_decode(const char *in, size_t len, char *out, size_t outsz)
{
    size_t o = 0;

    if (outsz == 0)
        return 0;
    for (size_t i = 0; i < len && o + 1 < outsz; i++) {
        int hi, lo;

        if (in[i] == '%' && i + 2 < len && (hi = hex_digit_value(in[i + 1])) >= 0 &&
            (lo = hex_digit_value(in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = '\0';
    return o;
}

int rpc_status_parse(const char *s, size_t len, int *ret)
{
    long long v = 0;

    if (len == 0 || len > 10)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v > INT32_MAX)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

/* Nanoseconds in one of each grpc-timeout unit. */
static uint64_t unit_ns(char unit)
{
    switch (unit) {
    case 'H':
        return 3600ull * 1000000000ull;
    case 'M':
        return 60ull * 1000000000ull;
    case 'S':
        return 1000000000ull;
    case 'm':
        return 1000000ull;
    case 'u':
        return 1000ull;
    case 'n':
        return 1ull;
    default:
        return 0;
    }
}

int rpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms)
{
    uint64_t v = 0, ns;

    if (len < 2 || len > 9)
        return -EINVAL;
    ns = unit_ns(s[len - 1]);
    if (ns == 0)
        return -EINVAL;
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    /* 8 digits of hours is about 3.6e20 ns: convert per unit so nothing overflows. */
    if (ns >= 1000000ull)
        *ret_ms = v * (ns / 1000000ull);
    else
        *ret_ms = (v * ns + 999999ull) / 1000000ull;
    return 0;
}

void rpc_timeout_format(uint64_t ms, char buf[static RPC_TIMEOUT_STR_MAX])
{
    static const struct {
        char unit;
        uint64_t ms;
    } units[] = {{'m', 1}, {'S', 1000}, {'M', 60000}, {'H', 3600000}};
    uint64_t v = ms;
    char unit = 'H';

    for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
        v = ms / units[i].ms + (ms % units[i].ms != 0);
        unit = units[i].unit;
        if (v <= 99999999)
            break;
    }
    if (v > 99999999)
        v = 99999999;
    if (v == 0)
        v = 1;
    snprintf(buf, RPC_TIMEOUT_STR_MAX, "%llu%c", (unsigned long long)v, unit);
}
