/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the transport's pure pieces: the HTTP/1.1 response reader (every framing, fed whole and
 * byte by byte, and the malformed responses it must refuse), the request writer, the server URL and
 * proxy rules (NO_PROXY as Go's net/http reads it), and base64.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube-internal.h"

struct parsed {
    int r;
    int status;
    bool done, close;
    char body[256];
    size_t used;
};

/* Feeds in at once (step 0) or step bytes at a time; then EOF when eof is set. */
static struct parsed parse(const char *in, size_t step, bool eof)
{
    struct parsed out = {0};
    struct kube_h1 p;
    struct strbuf body = STRBUF_INIT;
    struct diag d;
    diag_init(&d);
    kube_h1_init(&p, false);
    size_t len = strlen(in), off = 0;
    while (off < len && out.r >= 0 && p.state != H1_DONE) {
        size_t n = step && len - off > step ? step : len - off, used = 0;
        out.r = kube_h1_feed(&p, in + off, n, &body, &d, &used);
        off += used;
        if (used < n)
            break;
    }
    out.used = off;
    if (out.r >= 0 && eof)
        out.r = kube_h1_eof(&p, &d);
    out.status = p.status;
    out.done = p.state == H1_DONE;
    out.close = p.close;
    snprintf(out.body, sizeof(out.body), "%s", strbuf_str(&body));
    strbuf_release(&body);
    kube_h1_release(&p);
    return out;
}

static void test_framings(void **state)
{
    static const struct {
        const char *in;
        bool eof;
        int status;
        const char *body;
        bool close;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, "hello", false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
         "6;ext=1\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n",
         false, 200, "hello world", false},
        {"HTTP/1.1 404 Not Found\r\nconnection: Close\r\ncontent-length: 2\r\n\r\n{}", false, 404,
         "{}", true},
        {"HTTP/1.1 200 OK\r\n\r\nuntil the end", true, 200, "until the end", true},
        {"HTTP/1.1 204 No Content\r\n\r\n", false, 204, "", false},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", false,
         201, "x", false},
        {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, "x", true},
        {"HTTP/1.1 200 OK\nContent-Length: 1\n\nx", false, 200, "x", false}, /* bare LF */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        for (size_t step = 0; step <= 1; step++) {
            struct parsed p = parse(cases[i].in, step, cases[i].eof);
            assert_int_equal(p.r, 0);
            assert_true(p.done);
            assert_int_equal(p.status, cases[i].status);
            assert_string_equal(p.body, cases[i].body);
            assert_int_equal(p.close, cases[i].close);
        }
    }
}

static void test_stops_at_the_end_of_the_response(void **state)
{
    struct parsed p = parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabHTTP/1.1", 0, false);
    assert_int_equal(p.r, 0);
    assert_true(p.done);
    assert_string_equal(p.body, "ab");
    assert_int_equal(p.used, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nab"));
}

static void test_malformed(void **state)
{
    static const struct {
        const char *in;
        bool eof;
        int r;
    } cases[] = {
        {"HTTP/2 200\r\n\r\n", false, -EPROTO},
        {"HTTP/1.1 2000 OK\r\n\r\n", false, -EPROTO},
        {"SSH-2.0-OpenSSH\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false,
         -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", false,
         -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", false, -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true, -EPIPE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", true, -EPIPE},
        {"", true, -EPIPE},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct parsed p = parse(cases[i].in, 0, cases[i].eof);
        assert_int_equal(p.r, cases[i].r);
    }
}

static void test_caps(void **state)
{
    struct kube_h1 p;
    struct strbuf body;
    struct diag d;
    size_t used;
    diag_init(&d);
    /* A head line that never ends. */
    char *big = malloc(70000);
    assert_non_null(big);
    memset(big, 'a', 70000);
    strbuf_init(&body, 0);
    kube_h1_init(&p, false);
    assert_int_equal(kube_h1_feed(&p, "HTTP/1.1 200 OK\r\nX: ", 20, &body, &d, &used), 0);
    assert_int_equal(kube_h1_feed(&p, big, 70000, &body, &d, &used), -EMSGSIZE);
    kube_h1_release(&p);
    /* A body past the buffer's cap. */
    strbuf_init(&body, 16);
    kube_h1_init(&p, false);
    const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
    assert_int_equal(kube_h1_feed(&p, head, strlen(head), &body, &d, &used), 0);
    assert_int_equal(kube_h1_feed(&p, big, 100, &body, &d, &used), -EMSGSIZE);
    assert_non_null(strstr(d.msg, "larger than 16 bytes"));
    kube_h1_release(&p);
    strbuf_release(&body);
    free(big);
}

static void test_request(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    const char *headers[] = {"Accept: application/json", NULL, "Content-Type: x"};
    assert_int_equal(kube_h1_request(&sb, "PUT", "h:6443", "/api/v1/x", headers, 3, "{}", 2), 0);
    assert_string_equal(strbuf_str(&sb), "PUT /api/v1/x HTTP/1.1\r\nHost: h:6443\r\n"
                                         "Accept: application/json\r\nContent-Type: x\r\n"
                                         "Content-Length: 2\r\n\r\n{}");
    strbuf_reset(&sb);
    assert_int_equal(kube_h1_request(&sb, "GET", "h", "/", NULL, 0, NULL, 0), 0);
    assert_string_equal(strbuf_str(&sb), "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    strbuf_reset(&sb);
    assert_int_equal(kube_h1_request(&sb, "DELETE", "h", "/", NULL, 0, NULL, 0), 0);
    assert_string_equal(strbuf_str(&sb),
                        "DELETE / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    strbuf_release(&sb);
}

static void test_target(void **state)
{
    static const struct {
        const char *url, *host, *port, *authority, *base;
        bool https;
    } cases[] = {
        {"https://10.0.0.1:6443", "10.0.0.1", "6443", "10.0.0.1:6443", "", true},
        {"https://api.example.com", "api.example.com", "443", "api.example.com:443", "", true},
        {"http://localhost:8001/", "localhost", "8001", "localhost:8001", "", false},
        {"https://[fd00::1]:6443/k8s/clusters/c-1/", "fd00::1", "6443", "[fd00::1]:6443",
         "/k8s/clusters/c-1", true},
    };
    unsetenv("HTTPS_PROXY");
    unsetenv("https_proxy");
    unsetenv("HTTP_PROXY");
    unsetenv("http_proxy");
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct kube_target t;
        struct diag d;
        diag_init(&d);
        assert_int_equal(kube_target_parse(cases[i].url, &t, &d), 0);
        assert_string_equal(t.host, cases[i].host);
        assert_string_equal(t.port, cases[i].port);
        assert_string_equal(t.authority, cases[i].authority);
        assert_string_equal(t.base_path, cases[i].base);
        assert_int_equal(t.https, cases[i].https);
        assert_false(t.proxied);
        kube_target_release(&t);
    }
    static const char *const bad[] = {"ftp://x",         "https://",     "https://h:0",
                                      "https://h:99999", "https://[::1", "https://h:12a"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct kube_target t;
        struct diag d;
        diag_init(&d);
        assert_int_equal(kube_target_parse(bad[i], &t, &d), -EINVAL);
    }
}

static void test_proxy(void **state)
{
    struct kube_target t;
    struct diag d;
    diag_init(&d);
    setenv("HTTPS_PROXY", "http://user:pass@proxy.corp:3128", 1);
    setenv("NO_PROXY", "", 1);
    assert_int_equal(kube_target_parse("https://api.example.com:6443", &t, &d), 0);
    assert_true(t.proxied);
    assert_string_equal(t.proxy_host, "proxy.corp");
    assert_string_equal(t.proxy_port, "3128");
    assert_string_equal(t.proxy_auth, "Proxy-Authorization: Basic dXNlcjpwYXNz");
    kube_target_release(&t);
    /* Loopback never goes through a proxy; NO_PROXY exempts. */
    assert_int_equal(kube_target_parse("https://127.0.0.1:6443", &t, &d), 0);
    assert_false(t.proxied);
    kube_target_release(&t);
    setenv("NO_PROXY", "example.com", 1);
    assert_int_equal(kube_target_parse("https://api.example.com:6443", &t, &d), 0);
    assert_false(t.proxied);
    kube_target_release(&t);
    setenv("HTTPS_PROXY", "socks5://x:1", 1);
    assert_int_equal(kube_target_parse("https://api.example.com:6443", &t, &d), 0);
    kube_target_release(&t);
    setenv("NO_PROXY", "", 1);
    assert_int_equal(kube_target_parse("https://api.example.com:6443", &t, &d), -EINVAL);
    unsetenv("HTTPS_PROXY");
    unsetenv("NO_PROXY");
}

static void test_no_proxy_rules(void **state)
{
    static const struct {
        const char *host, *list;
        bool exempt;
    } cases[] = {
        {"localhost", "", true},
        {"127.0.0.2", NULL, true},
        {"::1", "", true},
        {"api.example.com", "*", true},
        {"api.example.com", "example.com", true},
        {"example.com", "example.com", true},
        {"badexample.com", "example.com", false},
        {"api.example.com", ".example.com", true},
        {"example.com", ".example.com", false},
        {"api.example.com", "other.org, example.com:6443", true},
        {"10.1.2.3", "10.0.0.0/8", true},
        {"11.1.2.3", "10.0.0.0/8", false},
        {"fd00::5", "fd00::/16", true},
        {"10.1.2.3", "10.1.2.3", true},
        {"api.example.com", "", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        assert_int_equal(kube_no_proxy(cases[i].host, cases[i].list), cases[i].exempt);
}

static void test_base64(void **state)
{
    static const char *const cases[][2] = {
        {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct strbuf sb = STRBUF_INIT;
        assert_int_equal(kube_base64_encode(cases[i][0], strlen(cases[i][0]), &sb), 0);
        assert_string_equal(strbuf_str(&sb), cases[i][1]);
        strbuf_release(&sb);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framings),  cmocka_unit_test(test_stops_at_the_end_of_the_response),
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_caps),
        cmocka_unit_test(test_request),   cmocka_unit_test(test_target),
        cmocka_unit_test(test_proxy),     cmocka_unit_test(test_no_proxy_rules),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
