/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the server on a real socket: a client thread does blocking I/O against a server on
 * 127.0.0.1 while the test's loop runs, then stops the loop. Routing, 404/405/400/431, HEAD,
 * keep-alive and pipelining, Connection: close, the idle timeout, the connection cap, a large body
 * written in pieces to a slow reader, and gzip (decompressed here with zlib).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <zlib.h>

#include <cmocka.h>

#include "base-strbuf.h"
#include "ev.h"
#include "http.h"

struct fixture {
    struct ev_loop *loop;
    struct http_server *srv;
    struct http_body *big;
    unsigned calls;
};

static void on_hello(struct http_request *req, void *userdata)
{
    struct fixture *f = userdata;
    f->calls++;
    char text[128];
    int n = snprintf(text, sizeof(text), "hello %s ?%s\n", http_request_method(req),
                     http_request_query(req));
    assert_int_equal(http_respond(req, 200, "text/plain", text, (size_t)n), 0);
    assert_int_equal(http_respond(req, 200, "text/plain", text, (size_t)n), -EALREADY);
}

static void on_big(struct http_request *req, void *userdata)
{
    struct fixture *f = userdata;
    assert_int_equal(http_respond_body(req, 200, "text/plain", f->big), 0);
}

static void on_silent(struct http_request *req, void *userdata)
{
    (void)req;
    (void)userdata;
}

static struct fixture *setup_server(const struct http_limits *lim)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(ev_loop_new(&f->loop), 0);
    struct diag d;
    diag_init(&d);
    int r = http_server_new(f->loop, "127.0.0.1:0", NULL, lim, &d, &f->srv);
    if (r < 0)
        fail_msg("%s", d.msg);
    assert_int_not_equal(http_server_port(f->srv), 0);
    size_t n = 1 << 20;
    char *big = malloc(n);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + (i * 7 + i / 97) % 26);
    assert_int_equal(http_body_new_take(big, n, &f->big), 0);
    assert_int_equal(http_server_route(f->srv, "/hello", on_hello, f), 0);
    assert_int_equal(http_server_route(f->srv, "/hello", on_hello, f), -EEXIST);
    assert_int_equal(http_server_route(f->srv, "nope", on_hello, f), -EINVAL);
    assert_int_equal(http_server_route(f->srv, "/big", on_big, f), 0);
    assert_int_equal(http_server_route(f->srv, "/silent", on_silent, f), 0);
    return f;
}

static void teardown_server(struct fixture *f)
{
    f->srv = http_server_free(f->srv);
    f->big = http_body_unref(f->big);
    f->loop = ev_loop_free(f->loop);
    free(f);
}

/* ---- the client thread ---- */

struct client {
    uint16_t port;
    struct ev_loop *loop;
    void (*run)(struct client *c);
    int fd;
    /* results */
    struct strbuf got;
    int status[8];
    size_t n;
    bool closed;
    unsigned slow_ms;
    uint64_t elapsed_ms;
};

static void stop_loop(void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);
        assert_true(n > 0);
        off += (size_t)n;
    }
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads until the peer closes (or the receive timeout), slow_ms between reads when set. */
static void read_to_end(struct client *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(c->fd, buf, c->slow_ms ? 4096 : sizeof(buf), 0);
        if (n <= 0) {
            c->closed = n == 0;
            return;
        }
        assert_int_equal(strbuf_add(&c->got, buf, (size_t)n), 0);
        if (c->slow_ms) {
            struct timespec ts = {0, (long)c->slow_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* Reads one response (head and Content-Length body) and returns its status; the bytes go to got.
 */
static int read_response(struct client *c)
{
    size_t start = c->got.len;
    char buf[4096];
    for (;;) {
        const char *s = strbuf_str(&c->got) + start;
        const char *end = strstr(s, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(s, "\r\nContent-Length: ");
            size_t body = cl && cl < end ? strtoul(cl + 18, NULL, 10) : 0;
            if ((size_t)(end + 4 - s) + body <= c->got.len - start)
                return (int)strtol(s + 9, NULL, 10);
        }
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            c->closed = true;
            return -1;
        }
        assert_int_equal(strbuf_add(&c->got, buf, (size_t)n), 0);
    }
}

static void *client_main(void *userdata)
{
    struct client *c = userdata;
    uint64_t t0 = mono_ms();
    c->fd = connect_to(c->port);
    c->run(c);
    close(c->fd);
    c->elapsed_ms = mono_ms() - t0;
    assert_int_equal(ev_post(c->loop, stop_loop, c->loop), 0);
    return NULL;
}

static void run_client(struct fixture *f, struct client *c)
{
    c->port = http_server_port(f->srv);
    c->loop = f->loop;
    strbuf_init(&c->got, 64 << 20);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, client_main, c), 0);
    assert_int_equal(ev_loop_run(f->loop), 0);
    pthread_join(t, NULL);
}

/* ---- tests ---- */

static void run_simple(struct client *c)
{
    send_all(c->fd, "GET /hello?x=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    send_all(c->fd, "GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    send_all(c->fd, "DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    send_all(c->fd, "GET /silent HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    send_all(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    c->status[c->n++] = read_response(c);
    read_to_end(c);
}

static void test_routes_and_keep_alive(void **state)
{
    (void)state;
    struct fixture *f = setup_server(NULL);
    struct client c = {.run = run_simple};
    run_client(f, &c);
    const char *got = strbuf_str(&c.got);
    assert_int_equal(c.n, 5);
    assert_int_equal(c.status[0], 200);
    assert_int_equal(c.status[1], 404);
    assert_int_equal(c.status[2], 405);
    assert_int_equal(c.status[3], 500);
    assert_int_equal(c.status[4], 200);
    assert_true(c.closed);
    assert_non_null(strstr(got, "hello GET ?x=1\n"));
    assert_non_null(strstr(got, "Allow: GET, HEAD\r\n"));
    assert_non_null(strstr(got, "Connection: close\r\n"));
    assert_int_equal(f->calls, 2);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_pipelined(struct client *c)
{
    send_all(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
                    "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n"
                    "\r\n"
                    "GET /hello?3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    read_to_end(c);
}

static void test_pipelining_and_head(void **state)
{
    (void)state;
    struct fixture *f = setup_server(NULL);
    struct client c = {.run = run_pipelined};
    run_client(f, &c);
    const char *got = strbuf_str(&c.got);
    /* three responses in order; HEAD's has a length and no body */
    const char *r1 = strstr(got, "hello GET ?\n");
    const char *r2 = r1 ? strstr(r1, "HTTP/1.1 200 OK\r\n") : NULL;
    const char *r3 = r2 ? strstr(r2, "hello GET ?3\n") : NULL;
    assert_non_null(r3);
    assert_null(strstr(got, "hello HEAD"));
    assert_non_null(strstr(r2, "Content-Length: 13\r\n"));
    assert_true(c.closed);
    assert_int_equal(f->calls, 3);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_bad(struct client *c)
{
    send_all(c->fd, "GET / HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n");
    read_to_end(c);
}

static void test_bad_request_closes(void **state)
{
    (void)state;
    struct fixture *f = setup_server(NULL);
    struct client c = {.run = run_bad};
    run_client(f, &c);
    assert_non_null(strstr(strbuf_str(&c.got), "HTTP/1.1 400 Bad Request\r\n"));
    assert_true(c.closed);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_huge_head(struct client *c)
{
    char line[1100];
    memset(line, 'a', sizeof(line) - 3);
    memcpy(line, "X: ", 3);
    line[sizeof(line) - 3] = '\r';
    line[sizeof(line) - 2] = '\n';
    line[sizeof(line) - 1] = '\0';
    send_all(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 3; i++)
        send_all(c->fd, line);
    read_to_end(c);
}

static void test_head_too_large(void **state)
{
    (void)state;
    struct http_limits lim = {.max_head = 2048};
    struct fixture *f = setup_server(&lim);
    struct client c = {.run = run_huge_head};
    run_client(f, &c);
    assert_non_null(strstr(strbuf_str(&c.got), "HTTP/1.1 431 "));
    assert_true(c.closed);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_idle(struct client *c)
{
    send_all(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    read_to_end(c); /* the server closes the idle connection */
}

static void test_idle_timeout(void **state)
{
    (void)state;
    struct http_limits lim = {.idle_timeout_ms = 200};
    struct fixture *f = setup_server(&lim);
    struct client c = {.run = run_idle};
    run_client(f, &c);
    assert_int_equal(c.status[0], 200);
    assert_true(c.closed);
    assert_true(c.elapsed_ms >= 150);
    assert_true(c.elapsed_ms < 5000);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_slowloris(struct client *c)
{
    send_all(c->fd, "GET /hello HTTP/1.1\r\n");
    for (int i = 0; i < 50 && !c->closed; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        if (send(c->fd, "X: y\r\n", 6, MSG_NOSIGNAL) < 0)
            break;
    }
    read_to_end(c);
}

static void test_head_timeout(void **state)
{
    (void)state;
    struct http_limits lim = {.head_timeout_ms = 300};
    struct fixture *f = setup_server(&lim);
    struct client c = {.run = run_slowloris};
    run_client(f, &c);
    assert_null(strstr(strbuf_str(&c.got), "hello"));
    assert_true(c.elapsed_ms < 2400); /* cut well before the 50 lines were sent */
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_big_slow(struct client *c)
{
    send_all(c->fd, "GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    c->slow_ms = 1;
    read_to_end(c);
}

static void test_large_body_slow_reader(void **state)
{
    (void)state;
    struct fixture *f = setup_server(NULL);
    struct client c = {.run = run_big_slow};
    run_client(f, &c);
    const char *got = strbuf_str(&c.got);
    const char *body = strstr(got, "\r\n\r\n");
    assert_non_null(body);
    body += 4;
    size_t len;
    const char *want = http_body_data(f->big, &len);
    assert_int_equal(c.got.len - (size_t)(body - got), len);
    assert_memory_equal(body, want, len);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void run_gzip(struct client *c)
{
    send_all(c->fd, "GET /big HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n");
    c->status[c->n++] = read_response(c);
    send_all(c->fd, "GET /big HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n"
                    "Connection: close\r\n\r\n");
    read_to_end(c);
}

static void test_gzip_round_trip(void **state)
{
    (void)state;
    struct fixture *f = setup_server(NULL);
    size_t gz_len;
    assert_null(http_body_gzip_data(f->big, &gz_len));
    struct client c = {.run = run_gzip};
    run_client(f, &c);
    assert_int_equal(c.status[0], 200);
    const char *got = strbuf_str(&c.got);
    assert_non_null(strstr(got, "Content-Encoding: gzip\r\n"));
    assert_non_null(strstr(got, "Vary: Accept-Encoding\r\n"));
    const void *gz = http_body_gzip_data(f->big, &gz_len);
    assert_non_null(gz); /* kept with the body: the second response used it */
    /* the last response's body, decompressed, is the body */
    const char *last = got, *p;
    while ((p = memmem(last + 1, c.got.len - (size_t)(last + 1 - got), "HTTP/1.1 200", 12)))
        last = p; /* the gzip bytes hold NULs: memmem, not strstr */
    const char *body = strstr(last, "\r\n\r\n") + 4;
    size_t blen = c.got.len - (size_t)(body - got);
    assert_int_equal(blen, gz_len);
    size_t len;
    const char *want = http_body_data(f->big, &len);
    char *out = malloc(len + 16);
    assert_non_null(out);
    z_stream z = {0};
    assert_int_equal(inflateInit2(&z, 31), Z_OK);
    z.next_in = (Bytef *)body;
    z.avail_in = (uInt)blen;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)(len + 16);
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    assert_int_equal(z.total_out, len);
    inflateEnd(&z);
    assert_memory_equal(out, want, len);
    assert_true(gz_len < len / 2);
    free(out);
    strbuf_release(&c.got);
    teardown_server(f);
}

/* max_conns 1: a second client waits in the backlog until the first is gone. */
static void run_cap(struct client *c)
{
    int second = connect_to(c->port); /* the kernel completes it; the server does not accept */
    send_all(second, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    send_all(c->fd, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    c->status[c->n++] = read_response(c);
    /* the first connection is idle and open: nothing for the second yet */
    struct timeval tv = {.tv_usec = 200000};
    setsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[512];
    ssize_t n = recv(second, buf, sizeof(buf), 0);
    c->status[c->n++] = n < 0 ? 0 : 1; /* 0: nothing, as expected */
    close(c->fd);
    tv.tv_sec = 10;
    tv.tv_usec = 0;
    setsockopt(second, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    n = recv(second, buf, sizeof(buf) - 1, 0);
    c->status[c->n++] = n > 12 && memcmp(buf, "HTTP/1.1 200", 12) == 0 ? 200 : -1;
    close(second);
    c->fd = connect_to(c->port); /* closed by client_main */
}

static void test_connection_cap(void **state)
{
    (void)state;
    struct http_limits lim = {.max_conns = 1};
    struct fixture *f = setup_server(&lim);
    struct client c = {.run = run_cap};
    run_client(f, &c);
    assert_int_equal(c.status[0], 200);
    assert_int_equal(c.status[1], 0);
    assert_int_equal(c.status[2], 200);
    strbuf_release(&c.got);
    teardown_server(f);
}

static void test_addresses(void **state)
{
    (void)state;
    struct ev_loop *loop = NULL;
    assert_int_equal(ev_loop_new(&loop), 0);
    static const char *const good[] = {":0", "127.0.0.1:0", "localhost:0", "[::1]:0"};
    static const char *const bad[] = {"9400",      "::1:9400", "127.0.0.1:", "127.0.0.1:70000",
                                      "[::1]9400", "host:x1"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        struct http_server *srv = NULL;
        struct diag d;
        diag_init(&d);
        int r = http_server_new(loop, good[i], NULL, NULL, &d, &srv);
        if (r == -EADDRNOTAVAIL && strchr(good[i], '['))
            continue; /* no IPv6 loopback here */
        if (r < 0)
            fail_msg("%s: %s", good[i], d.msg);
        assert_int_not_equal(http_server_port(srv), 0);
        srv = http_server_free(srv);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct http_server *srv = NULL;
        struct diag d;
        diag_init(&d);
        if (http_server_new(loop, bad[i], NULL, NULL, &d, &srv) >= 0)
            fail_msg("%s accepted", bad[i]);
        assert_non_null(strstr(d.msg, bad[i]));
    }
    loop = ev_loop_free(loop);
}

static void test_body_refs(void **state)
{
    (void)state;
    struct http_body *b = NULL;
    assert_int_equal(http_body_new("abc", 3, &b), 0);
    assert_ptr_equal(http_body_ref(b), b);
    size_t len;
    assert_memory_equal(http_body_data(b, &len), "abc", 3);
    assert_int_equal(len, 3);
    assert_int_equal(http_body_gzip(b, NULL), 0);
    const void *gz1 = http_body_gzip_data(b, &len);
    assert_int_equal(http_body_gzip(b, NULL), 0); /* made once */
    assert_ptr_equal(http_body_gzip_data(b, &len), gz1);
    assert_null(http_body_unref(b));
    assert_null(http_body_unref(b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_and_keep_alive),
        cmocka_unit_test(test_pipelining_and_head),
        cmocka_unit_test(test_bad_request_closes),
        cmocka_unit_test(test_head_too_large),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_head_timeout),
        cmocka_unit_test(test_large_body_slow_reader),
        cmocka_unit_test(test_gzip_round_trip),
        cmocka_unit_test(test_connection_cap),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_body_refs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
