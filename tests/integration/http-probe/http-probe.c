/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http-probe: src/http serving fixed bodies, so the integration tests can drive the server with
 * real clients (Python's http.client and ssl, curl).
 *
 *   http-probe [--listen ADDR] [--web-config FILE] [--body-size N] [--max-conns N]
 *              [--idle-ms MS] [--head-ms MS] [--write-ms MS] [--max-requests N]
 *
 *   /metrics   a body of N bytes (default 64 KiB) of Prometheus-like lines, one refcounted buffer
 *              shared by every response, its gzip form made once
 *   /hello     "hello\n"
 *   /whoami    the basic-auth user, or "-"
 *
 * Prints "port P" on stdout once listening, then serves until SIGTERM or SIGINT. Exit status 0
 * after a signal, 2 on usage or configuration errors.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ev.h"
#include "http.h"

static void on_metrics(struct http_request *req, void *userdata)
{
    struct http_body *body = userdata;
    if (http_respond_body(req, 200, "text/plain; version=0.0.4; charset=utf-8", body) < 0)
        return; /* the server answers 500 */
}

static void on_hello(struct http_request *req, void *userdata)
{
    (void)userdata;
    if (http_respond(req, 200, "text/plain", "hello\n", 6) < 0)
        return;
}

static void on_whoami(struct http_request *req, void *userdata)
{
    (void)userdata;
    const char *u = http_request_user(req);
    char text[300];
    int n = snprintf(text, sizeof(text), "%s\n", u ? u : "-");
    if (http_respond(req, 200, "text/plain", text, (size_t)n) < 0)
        return;
}

static int make_body(size_t size, struct http_body **ret)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    size_t off = 0;
    for (unsigned i = 0; off < size; i++) {
        char line[128];
        int n =
            snprintf(line, sizeof(line), "DCGM_FI_DEV_GPU_TEMP{gpu=\"%u\",UUID=\"GPU-%08u\"} %u\n",
                     i % 8, i, 30 + i % 50);
        size_t take = size - off < (size_t)n ? size - off : (size_t)n;
        memcpy(buf + off, line, take);
        off += take;
    }
    return http_body_new_take(buf, size, ret);
}

static int parse_u64(const char *s, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -EINVAL;
    *ret = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"web-config", required_argument, NULL, 'w'},
        {"body-size", required_argument, NULL, 'b'},
        {"max-conns", required_argument, NULL, 'c'},
        {"idle-ms", required_argument, NULL, 'i'},
        {"head-ms", required_argument, NULL, 'h'},
        {"write-ms", required_argument, NULL, 'W'},
        {"max-requests", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = "127.0.0.1:0", *web_path = NULL;
    uint64_t body_size = 65536, v;
    struct http_limits lim = {0};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'l') {
            listen = optarg;
            continue;
        }
        if (o == 'w') {
            web_path = optarg;
            continue;
        }
        if (o == '?' || parse_u64(optarg, &v) < 0) {
            fprintf(stderr, "http-probe: bad usage\n");
            return 2;
        }
        if (o == 'b')
            body_size = v;
        else if (o == 'c')
            lim.max_conns = (unsigned)v;
        else if (o == 'i')
            lim.idle_timeout_ms = v;
        else if (o == 'h')
            lim.head_timeout_ms = v;
        else if (o == 'W')
            lim.write_timeout_ms = v;
        else if (o == 'r')
            lim.max_requests = (unsigned)v;
    }
    struct diag d;
    diag_init(&d);
    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    _cleanup_(http_web_config_freep) struct http_web_config *web = NULL;
    _cleanup_(http_body_unrefp) struct http_body *body = NULL;
    if (ev_loop_new(&loop) < 0 || ev_loop_handle_stop_signals(loop) < 0 ||
        make_body(body_size, &body) < 0) {
        fprintf(stderr, "http-probe: out of resources\n");
        return 2;
    }
    if (web_path && http_web_config_load(web_path, &d, &web) < 0) {
        fprintf(stderr, "http-probe: %s\n", d.msg);
        return 2;
    }
    _cleanup_(http_server_freep) struct http_server *srv = NULL;
    if (http_server_new(loop, listen, web, &lim, &d, &srv) < 0) {
        fprintf(stderr, "http-probe: %s\n", d.msg);
        return 2;
    }
    if (http_server_route(srv, "/metrics", on_metrics, body) < 0 ||
        http_server_route(srv, "/hello", on_hello, NULL) < 0 ||
        http_server_route(srv, "/whoami", on_whoami, NULL) < 0)
        return 2;
    printf("port %u\n", http_server_port(srv));
    fflush(stdout);
    int r = ev_loop_run(loop);
    srv = http_server_free(srv);
    return r < 0 ? 1 : r;
}
