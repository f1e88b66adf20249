/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the client's lifetime rules against a small HTTP/1.1 server on a thread of this
 * process: callbacks run once and never inside the call that started them; a client freed from a
 * callback cancels the rest without calling them; a watch freed from its own callback stops; rate
 * limited requests still queued are dropped; headers (token, User-Agent, Content-Type) go out.
 * Under valgrind these also catch use-after-free and leaks on every cancellation path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube-internal.h"

/* ---- the server: one thread per connection, one request per connection ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char last_auth[256];
static char last_agent[256];
static char last_type[256];
static int listen_fd = -1;
static unsigned short port;

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, int status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, strlen(body));
    send_all(fd, head, (size_t)n);
    send_all(fd, body, strlen(body));
}

static void header_value(const char *req, const char *name, char *out, size_t n)
{
    const char *p = strcasestr(req, name);
    out[0] = '\0';
    if (!p)
        return;
    p += strlen(name);
    size_t len = strcspn(p, "\r\n");
    snprintf(out, n, "%.*s", (int)len, p);
}

/* Waits until the client closes the connection. */
static void hold(int fd)
{
    char buf[256];
    while (recv(fd, buf, sizeof(buf), 0) > 0)
        ;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[8192];
    size_t len = 0;
    while (len < sizeof(req) - 1) {
        ssize_t r = recv(fd, req + len, sizeof(req) - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        req[len] = '\0';
        char *end = strstr(req, "\r\n\r\n");
        if (end) {
            char cl[32];
            header_value(req, "Content-Length: ", cl, sizeof(cl));
            size_t want = (size_t)(end + 4 - req) + (size_t)strtoul(cl, NULL, 10);
            if (len >= want)
                break;
        }
    }
    req[len] = '\0';
    pthread_mutex_lock(&lock);
    header_value(req, "Authorization: ", last_auth, sizeof(last_auth));
    header_value(req, "User-Agent: ", last_agent, sizeof(last_agent));
    header_value(req, "Content-Type: ", last_type, sizeof(last_type));
    pthread_mutex_unlock(&lock);

    if (starts(req, "GET /api/v1/namespaces/default/pods/a "))
        respond(fd, 200, "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}");
    else if (starts(req, "GET /slow "))
        hold(fd);
    else if (starts(req, "GET /api/v1/namespaces/default/pods?") && strstr(req, "watch=1")) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char chunk[256];
        static const char ev[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\","
                                 "\"namespace\":\"default\",\"resourceVersion\":\"6\"}}}\n";
        int n = snprintf(chunk, sizeof(chunk), "%zx\r\n%s\r\n", strlen(ev), ev);
        send_all(fd, head, strlen(head));
        send_all(fd, chunk, (size_t)n);
        hold(fd);
    } else if (starts(req, "GET /api/v1/namespaces/default/pods?"))
        respond(fd, 200,
                "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{"
                "\"metadata\":{\"name\":\"a\",\"namespace\":\"default\",\"resourceVersion\":\"1\"}"
                "}]}");
    else if (starts(req, "POST /echo ")) {
        const char *body = strstr(req, "\r\n\r\n");
        respond(fd, 201, body ? body + 4 : "");
    } else
        respond(fd, 404,
                "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"message\":\"nothing here\"}");
    close(fd);
    return NULL;
}

static void *accept_loop(void *arg)
{
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
}

static int start_server(void **state)
{
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(listen_fd, 64) < 0 || getsockname(listen_fd, (struct sockaddr *)&sa, &sl) < 0)
        return -1;
    port = ntohs(sa.sin_port);
    pthread_t t;
    if (pthread_create(&t, NULL, accept_loop, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

/* ---- the client side ---- */

struct fixture {
    struct ev_loop *loop;
    struct kube_client *client;
    struct kube_watch *watch;
    struct ev_timer *deadline;
    unsigned calls, slow_calls, events;
    int status;
    char reason[64], message[256];
    json_t *body;
};

static void on_deadline(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct fixture *f = userdata;
    ev_loop_stop(f->loop, -ETIMEDOUT);
}

static void make_client(struct fixture *f, const char *server, double qps, unsigned burst)
{
    char url[64];
    if (!server) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
        server = url;
    }
    struct kube_config cfg = {
        .server = (char *)server, .token = "t0k", .namespace_ = "default", .source = "test"};
    struct kube_client_options opts = {
        .qps = qps, .burst = burst, .timeout_ms = 5000, .user_agent = "kube-test/1"};
    assert_int_equal(ev_loop_new(&f->loop), 0);
    assert_int_equal(kube_client_new(f->loop, &cfg, &opts, &f->client), 0);
    assert_int_equal(ev_timer_add(f->loop, 10000, 0, on_deadline, f, &f->deadline), 0);
}

static void finish(struct fixture *f)
{
    kube_watch_free(f->watch);
    kube_client_free(f->client);
    json_decref(f->body);
    ev_loop_free(f->loop);
}

static void record(struct fixture *f, const struct kube_response *res)
{
    f->calls++;
    f->status = res->status;
    snprintf(f->reason, sizeof(f->reason), "%s", res->reason);
    snprintf(f->message, sizeof(f->message), "%s", res->message);
    json_decref(f->body);
    f->body = json_incref(res->body);
}

static void on_done_stop(const struct kube_response *res, void *userdata)
{
    struct fixture *f = userdata;
    record(f, res);
    ev_loop_stop(f->loop, 0);
}

static void test_get_and_headers(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    assert_int_equal(kube_get(f.client, "/api/v1/namespaces/default/pods/a", on_done_stop, &f), 0);
    assert_int_equal(f.calls, 0); /* never inside the call */
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.calls, 1);
    assert_int_equal(f.status, 200);
    assert_string_equal(f.reason, "");
    assert_string_equal(f.message, "");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(f.body, "metadata"), "name")), "a");
    pthread_mutex_lock(&lock);
    assert_string_equal(last_auth, "Bearer t0k");
    assert_string_equal(last_agent, "kube-test/1");
    pthread_mutex_unlock(&lock);

    json_t *obj = json_pack("{s:s}", "hello", "world");
    assert_int_equal(kube_create(f.client, "/echo", obj, on_done_stop, &f), 0);
    json_decref(obj); /* borrowed: copied at the call */
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.status, 201);
    assert_string_equal(json_string_value(json_object_get(f.body, "hello")), "world");
    pthread_mutex_lock(&lock);
    assert_string_equal(last_type, "application/json");
    pthread_mutex_unlock(&lock);

    assert_int_equal(kube_get(f.client, "/nothing", on_done_stop, &f), 0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.status, 404);
    assert_string_equal(f.reason, "NotFound");
    assert_string_equal(f.message, "nothing here");

    assert_int_equal(kube_get(f.client, "relative", on_done_stop, &f), -EINVAL);
    assert_int_equal(kube_create(f.client, "/x", NULL, on_done_stop, &f), -EINVAL);
    finish(&f);
}

static void test_transport_error(void **state)
{
    struct fixture f = {0};
    make_client(&f, "http://127.0.0.1:1", 0, 0);
    assert_int_equal(kube_get(f.client, "/x", on_done_stop, &f), 0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.status, 0);
    assert_string_equal(f.reason, "");
    assert_true(strlen(f.message) > 0);
    assert_null(strstr(f.message, "t0k"));
    finish(&f);
}

static void on_slow(const struct kube_response *res, void *userdata)
{
    struct fixture *f = userdata;
    f->slow_calls++;
}

static void on_event_count(enum kube_event ev, json_t *obj, void *userdata)
{
    struct fixture *f = userdata;
    f->events++;
}

static void on_done_free_client(const struct kube_response *res, void *userdata)
{
    struct fixture *f = userdata;
    record(f, res);
    f->client = kube_client_free(f->client);
    ev_loop_stop(f->loop, 0);
}

static void test_free_client_in_callback(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    /* a request that never gets an answer, and a watch, both outstanding */
    assert_int_equal(kube_get(f.client, "/slow", on_slow, &f), 0);
    assert_int_equal(
        kube_watch_new(f.client, "/api/v1/namespaces/default/pods", on_event_count, &f, &f.watch),
        0);
    assert_int_equal(
        kube_get(f.client, "/api/v1/namespaces/default/pods/a", on_done_free_client, &f), 0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.calls, 1);
    assert_null(f.client);
    /* nothing else runs afterwards, even with the loop going on */
    (void)!ev_timer_set(f.deadline, 300, 0);
    assert_int_equal(ev_loop_run(f.loop), -ETIMEDOUT);
    assert_int_equal(f.slow_calls, 0);
    unsigned events = f.events;
    (void)!ev_timer_set(f.deadline, 300, 0);
    assert_int_equal(ev_loop_run(f.loop), -ETIMEDOUT);
    assert_int_equal(f.events, events);
    finish(&f); /* the watch is freed after its client */
}

static void on_event_free_watch(enum kube_event ev, json_t *obj, void *userdata)
{
    struct fixture *f = userdata;
    f->events++;
    if (ev == KUBE_ADDED &&
        strcmp(json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "b") ==
            0) {
        f->watch = kube_watch_free(f->watch);
        ev_loop_stop(f->loop, 0);
    }
}

static void test_watch_freed_in_callback(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    assert_int_equal(kube_watch_new(f.client, "/api/v1/namespaces/default/pods",
                                    on_event_free_watch, &f, &f.watch),
                     0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    /* ADDED a, SYNCED (from the list), ADDED b (from the watch) */
    assert_int_equal(f.events, 3);
    assert_null(f.watch);
    finish(&f);
}

static void on_event_free_client(enum kube_event ev, json_t *obj, void *userdata)
{
    struct fixture *f = userdata;
    f->events++;
    if (ev == KUBE_SYNCED) {
        f->client = kube_client_free(f->client);
        ev_loop_stop(f->loop, 0);
    }
}

static void test_free_client_in_watch_callback(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    assert_int_equal(kube_watch_new(f.client, "/api/v1/namespaces/default/pods",
                                    on_event_free_client, &f, &f.watch),
                     0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.events, 2); /* ADDED a, SYNCED: nothing after the client went */
    (void)!ev_timer_set(f.deadline, 300, 0);
    assert_int_equal(ev_loop_run(f.loop), -ETIMEDOUT);
    assert_int_equal(f.events, 2);
    finish(&f); /* the stopped watch is released now */
}

static void on_done_count_then_free(const struct kube_response *res, void *userdata)
{
    struct fixture *f = userdata;
    record(f, res);
    if (f->calls == 1) {
        f->client = kube_client_free(f->client);
        ev_loop_stop(f->loop, 0);
    }
}

static void test_queued_requests_dropped(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 1, 1); /* one request a second */
    for (int i = 0; i < 4; i++)
        assert_int_equal(
            kube_get(f.client, "/api/v1/namespaces/default/pods/a", on_done_count_then_free, &f),
            0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.calls, 1);
    (void)!ev_timer_set(f.deadline, 1500, 0);
    assert_int_equal(ev_loop_run(f.loop), -ETIMEDOUT);
    assert_int_equal(f.calls, 1);
    finish(&f);
}

static int mutate_fail(json_t *obj, void *userdata)
{
    return -EPERM;
}

static void test_modify_mutate_fails(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    assert_int_equal(
        kube_modify(f.client, "/api/v1/namespaces/default/pods/a", mutate_fail, on_done_stop, &f),
        0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_int_equal(f.status, 0);
    assert_string_equal(f.message, "mutate: Operation not permitted");
    finish(&f);
}

static int mutate_free_client(json_t *obj, void *userdata)
{
    struct fixture *f = userdata;
    f->client = kube_client_free(f->client);
    ev_loop_stop(f->loop, 0);
    return 1; /* "nothing to write": still no callback, the client is gone */
}

static void test_free_client_in_mutate(void **state)
{
    struct fixture f = {0};
    make_client(&f, NULL, 0, 0);
    assert_int_equal(kube_modify(f.client, "/api/v1/namespaces/default/pods/a", mutate_free_client,
                                 on_done_stop, &f),
                     0);
    assert_int_equal(ev_loop_run(f.loop), 0);
    assert_null(f.client);
    assert_int_equal(f.calls, 0);
    finish(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_and_headers),
        cmocka_unit_test(test_transport_error),
        cmocka_unit_test(test_free_client_in_callback),
        cmocka_unit_test(test_watch_freed_in_callback),
        cmocka_unit_test(test_free_client_in_watch_callback),
        cmocka_unit_test(test_queued_requests_dropped),
        cmocka_unit_test(test_modify_mutate_fails),
        cmocka_unit_test(test_free_client_in_mutate),
    };
    return cmocka_run_group_tests(tests, start_server, NULL);
}
