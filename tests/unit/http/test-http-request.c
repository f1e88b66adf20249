/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the request head parser (a table of valid, malformed and oversize heads and their
 * answers), Accept-Encoding, base64 and SipHash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http-internal.h"

static void test_head_table(void **state)
{
    static const struct {
        const char *in;
        int status; /* 0: parsed */
        const char *method, *path, *query;
        bool close, gzip, body;
    } cases[] = {
        {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 0, "GET", "/metrics", "", false, false, false},
        {"HEAD /m?a=1&b HTTP/1.1\r\nHost: x\r\n\r\n", 0, "HEAD", "/m", "a=1&b", false, false,
         false},
        {"GET / HTTP/1.1\nHost: x\n\n", 0, "GET", "/", "", false, false, false},
        {"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, "GET", "/", "", false, false, false},
        {"GET / HTTP/1.0\r\n\r\n", 0, "GET", "/", "", true, false, false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, "GET", "/", "", false, false,
         false},
        {"GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n", 0, "GET", "/", "", true,
         false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", 0, "GET", "/", "", false,
         true, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding:  deflate, GZIP;q=0.5 \r\n\r\n", 0, "GET",
         "/", "", false, true, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 0, "GET", "/", "", false, false,
         false},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", 0, "GET", "/", "", false, false,
         true},
        {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "POST", "/x", "",
         false, false, true},
        {"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n", 0, "BREW", "/pot", "", false, false, false},
        /* malformed */
        {"GET /\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/1.1\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, NULL, NULL, NULL, false, false,
         false},
        {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, NULL, NULL, NULL, false, false,
         false},
        {"GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400, NULL, NULL, NULL, false, false,
         false},
        {"GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400, NULL, NULL, NULL, false,
         false, false},
        {"GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTX/1.1\r\nHost: x\r\n\r\n", 400, NULL, NULL, NULL, false, false, false},
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, NULL, NULL, NULL, false, false, false},
        /* oversize target (max 32 in this table) */
        {"GET /0123456789012345678901234567890123 HTTP/1.1\r\nHost: x\r\n\r\n", 414, NULL, NULL,
         NULL, false, false, false},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", cases[i].in);
        size_t len = strlen(buf);
        size_t end = http_head_end(buf, len);
        if (end != len)
            fail_msg("case %zu: head end %zu of %zu", i, end, len);
        struct http_head h;
        int st = http_head_parse(buf, end, 32, &h);
        if (st != cases[i].status)
            fail_msg("case %zu (%s): status %d, want %d", i, cases[i].in, st, cases[i].status);
        if (st)
            continue;
        assert_string_equal(h.method, cases[i].method);
        assert_string_equal(h.path, cases[i].path);
        assert_string_equal(h.query, cases[i].query);
        assert_int_equal(h.close, cases[i].close);
        assert_int_equal(h.gzip, cases[i].gzip);
        assert_int_equal(h.has_body, cases[i].body);
    }
}

static void test_head_end(void **state)
{
    (void)state;
    assert_int_equal(http_head_end("GET / HTTP/1.1\r\nHost: x\r\n", 25), 0);
    assert_int_equal(http_head_end("GET / HTTP/1.1\r\n\r\nGET", 21), 18);
    assert_int_equal(http_head_end("", 0), 0);
}

static void test_too_many_headers(void **state)
{
    (void)state;
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < HTTP_MAX_HEADERS; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%d: y\r\n", i);
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
    struct http_head h;
    assert_int_equal(http_head_parse(buf, n, 4096, &h), 431);
}

static void test_header_lookup(void **state)
{
    (void)state;
    char buf[] = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization:   Basic abc  \r\nX-A: 1\r\n\r\n";
    struct http_head h;
    assert_int_equal(http_head_parse(buf, strlen(buf), 100, &h), 0);
    assert_string_equal(http_head_get(&h, "authorization"), "Basic abc");
    assert_string_equal(http_head_get(&h, "x-a"), "1");
    assert_null(http_head_get(&h, "X-B"));
}

static void test_accept_encoding(void **state)
{
    (void)state;
    assert_true(http_accepts_gzip("gzip"));
    assert_true(http_accepts_gzip("br, gzip, deflate"));
    assert_true(http_accepts_gzip("*"));
    assert_true(http_accepts_gzip("gzip;q=1.0, identity; q=0.5"));
    assert_false(http_accepts_gzip("gzip;q=0"));
    assert_false(http_accepts_gzip("gzip; q=0.000, *"));
    assert_false(http_accepts_gzip("*;q=0"));
    assert_false(http_accepts_gzip("deflate"));
    assert_false(http_accepts_gzip("gzipx"));
    assert_false(http_accepts_gzip(""));
}

static void test_base64(void **state)
{
    (void)state;
    char out[64];
    size_t n;
    assert_int_equal(http_base64_decode("YWxpY2U6c2VjcmV0", out, sizeof(out), &n), 0);
    assert_string_equal(out, "alice:secret");
    assert_int_equal(http_base64_decode("YQ==", out, sizeof(out), &n), 0);
    assert_string_equal(out, "a");
    assert_int_equal(n, 1);
    assert_int_equal(http_base64_decode("YWI", out, sizeof(out), &n), 0);
    assert_string_equal(out, "ab");
    assert_int_equal(http_base64_decode("Y", out, sizeof(out), &n), -EINVAL);
    assert_int_equal(http_base64_decode("YW*=", out, sizeof(out), &n), -EINVAL);
    assert_int_equal(http_base64_decode("YQ===", out, sizeof(out), &n), -EINVAL);
    assert_int_equal(http_base64_decode("YWxpY2U6c2VjcmV0", out, 4, &n), -ENOBUFS);
}

/* The reference vector of the SipHash paper: key 00..0f, message 00..0e. */
static void test_siphash(void **state)
{
    (void)state;
    uint64_t key[2] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
    unsigned char msg[15];
    for (unsigned i = 0; i < sizeof(msg); i++)
        msg[i] = (unsigned char)i;
    assert_true(http_siphash(key, msg, sizeof(msg)) == 0xa129ca6149be45e5ULL);
    /* the empty message, from the reference implementation's vectors */
    assert_true(http_siphash(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_table),       cmocka_unit_test(test_head_end),
        cmocka_unit_test(test_too_many_headers), cmocka_unit_test(test_header_lookup),
        cmocka_unit_test(test_accept_encoding),  cmocka_unit_test(test_base64),
        cmocka_unit_test(test_siphash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
