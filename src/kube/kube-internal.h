/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of src/kube share: the transport (the HTTP/1.1 reader and writer, the server URL
 * and proxy, TLS, the connection pool), one HTTP exchange on it (kube-client.c) that the verbs
 * (kube-request.c) and watches (kube-watch.c) build on, and the pure pieces the unit tests reach
 * directly (token bucket, Status parsing, watch line decoding, base64).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base.h"
#include "kube.h"

/* ---- the token bucket (kube-limit.c) ---- */

struct kube_bucket {
    double qps;
    double burst;
    double tokens;
    uint64_t last_ms;
};

void kube_bucket_init(struct kube_bucket *b, double qps, unsigned burst, uint64_t now_ms);
/* Takes a token and returns 0 when one is there; otherwise takes nothing and returns how many
 * milliseconds until one will be (at least 1). */
uint64_t kube_bucket_take(struct kube_bucket *b, uint64_t now_ms);

/* ---- HTTP/1.1 on the wire (kube-h1.c) ---- */

enum kube_h1_state {
    H1_HEAD,
    H1_BODY_LENGTH, /* Content-Length bytes left */
    H1_BODY_EOF,    /* until the connection closes */
    H1_CHUNK_SIZE,
    H1_CHUNK_DATA,
    H1_CHUNK_END, /* the CRLF after a chunk's data */
    H1_TRAILERS,
    H1_DONE,
};

/* A response being read. */
struct kube_h1 {
    enum kube_h1_state state;
    bool head_only; /* the answer to CONNECT (or HEAD): no body follows the head */
    bool head_complete;
    bool chunked;
    bool close; /* the connection cannot carry another exchange */
    int status;
    int64_t content_length; /* -1: none given */
    uint64_t left;
    struct strbuf line; /* a head or chunk-size line being assembled */
};

void kube_h1_init(struct kube_h1 *p, bool head_only);
void kube_h1_release(struct kube_h1 *p);
/* Reads response bytes: body bytes (de-chunked) are appended to body. Stops at the end of the
 * response (state H1_DONE); *ret_used says how much of in was consumed. A malformed response or a
 * body past body's cap fails with d set, and the connection must be closed. */
_wur_ int kube_h1_feed(struct kube_h1 *p, const char *in, size_t len, struct strbuf *body,
                       struct diag *d, size_t *ret_used);
/* The connection ended: 0 when that ends the response (a body delimited by it), -EPIPE if not. */
_wur_ int kube_h1_eof(struct kube_h1 *p, struct diag *d);
/* Appends a request: the request line, Host, the headers given (NULL entries skipped),
 * Content-Length when there is a body or the method is not GET, and the body. */
_wur_ int kube_h1_request(struct strbuf *out, const char *method, const char *host,
                          const char *target, const char *const *headers, size_t n_headers,
                          const char *body, size_t body_len);

/* ---- where requests go (kube-target.c) ---- */

struct kube_target {
    bool https;
    char host[256]; /* without brackets */
    char port[8];
    char authority[272]; /* host:port as the Host header and CONNECT say it */
    char *base_path;     /* the server URL's path, no trailing '/'; "" for none */
    bool proxied;
    char proxy_host[256];
    char proxy_port[8];
    char *proxy_auth; /* "Proxy-Authorization: Basic ..." or NULL */
};

/* Takes the server URL apart and picks the proxy the environment names for it. */
_wur_ int kube_target_parse(const char *server, struct kube_target *t, struct diag *d);
void kube_target_release(struct kube_target *t);
/* Whether NO_PROXY (list) or the loopback rule exempts host from the proxy. */
bool kube_no_proxy(const char *host, const char *list);
_wur_ int kube_base64_encode(const char *in, size_t n, struct strbuf *out);

/* ---- TLS (kube-tls.c) ---- */

enum kube_io {
    KUBE_IO_READ,
    KUBE_IO_WRITE,
};

struct kube_tls;
struct kube_tls_conn;
/* Loads OpenSSL (the first time) and builds the context for cfg's trust and identity. */
_wur_ int kube_tls_new(const struct kube_config *cfg, struct diag *d, struct kube_tls **ret);
struct kube_tls *kube_tls_free(struct kube_tls *t);
DEFINE_POINTER_CLEANUP(struct kube_tls, kube_tls_free)
_wur_ int kube_tls_conn_new(struct kube_tls *t, int fd, const char *host, struct diag *d,
                            struct kube_tls_conn **ret);
struct kube_tls_conn *kube_tls_conn_free(struct kube_tls_conn *tc);
DEFINE_POINTER_CLEANUP(struct kube_tls_conn, kube_tls_conn_free)
/* 0 when the handshake is done; -EAGAIN with *want when the socket must become ready first. */
_wur_ int kube_tls_handshake(struct kube_tls_conn *tc, enum kube_io *want, struct diag *d);
/* Bytes moved, 0 at the end of the stream (reads), -EAGAIN with *want, or an error with d. */
_wur_ ssize_t kube_tls_read(struct kube_tls_conn *tc, void *buf, size_t n, enum kube_io *want,
                            struct diag *d);
_wur_ ssize_t kube_tls_write(struct kube_tls_conn *tc, const void *buf, size_t n,
                             enum kube_io *want, struct diag *d);

/* ---- connections (kube-conn.c) ---- */

struct kube_pool;
struct kube_conn;

/* The client's brackets around every event the pool handles: the client delivers outcomes when it
 * is left, once the pool no longer touches anything. */
struct kube_pool_hooks {
    void (*enter)(void *userdata);
    void (*leave)(void *userdata);
    void *userdata;
};

/* What an exchange tells its owner. After end, the handle is gone. */
struct kube_conn_ops {
    /* New body bytes were appended to the response buffer (the status is known). */
    void (*body)(void *userdata, int status);
    /* The exchange ended: error NULL for a complete response, else why (status is the response's
     * if its head had come, else 0). */
    void (*end)(void *userdata, int status, const char *error);
    /* The request is being sent again on a new connection: this is its handle now. */
    void (*moved)(void *userdata, struct kube_conn *conn);
};

_wur_ int kube_pool_new(struct ev_loop *loop, const struct kube_config *cfg,
                        const struct kube_pool_hooks *hooks, struct diag *d,
                        struct kube_pool **ret);
/* Closes every connection; no exchange's functions run afterwards. */
struct kube_pool *kube_pool_free(struct kube_pool *p);
DEFINE_POINTER_CLEANUP(struct kube_pool, kube_pool_free)
const struct kube_target *kube_pool_target(const struct kube_pool *p);
/* Sends request (copied) on an idle connection or a new one; the response body goes to resp,
 * which must live until end. timeout_ms 0: no deadline (a watch). The functions of ops are never
 * called inside this call. */
_wur_ int kube_pool_send(struct kube_pool *p, struct strbuf *request, struct strbuf *resp,
                         uint32_t timeout_ms, const struct kube_conn_ops *ops, void *userdata,
                         struct diag *d, struct kube_conn **ret);
/* Ends the exchange and closes its connection; none of its functions runs afterwards. */
void kube_conn_cancel(struct kube_conn *c);

/* ---- one HTTP exchange (kube-client.c) ---- */

struct kube_http;

struct kube_http_spec {
    const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;   /* absolute API path with its query */
    const char *body;   /* NULL: none; borrowed until kube_http_start() returns (copied) */
    size_t body_len;
    const char *content_type; /* of body */
    bool stream; /* a watch: no overall timeout, 200 bodies are handed over as they come */
};

/* status 0 with error set: no response. body is the whole response (for a stream: what was not
 * consumed). The exchange is freed after this returns. */
typedef void (*kube_http_done_fn)(struct kube_http *h, int status, const char *body, size_t len,
                                  const char *error, void *userdata);
/* Streams only: new bytes of a 200 response were appended to buf; consume what is complete
 * (kube_lines_next()). May cancel h. */
typedef void (*kube_http_data_fn)(struct kube_http *h, struct strbuf *buf, void *userdata);
/* Called instead of done when the client is freed first: releases userdata. */
typedef void (*kube_http_drop_fn)(void *userdata);

/* Queues the exchange behind the rate limiter. Callbacks never run inside this call. */
_wur_ int kube_http_start(struct kube_client *c, const struct kube_http_spec *spec,
                          kube_http_done_fn done, kube_http_data_fn data, kube_http_drop_fn drop,
                          void *userdata, struct kube_http **ret);
/* Ends the exchange; none of its callbacks runs afterwards (drop neither: the caller keeps
 * userdata). */
void kube_http_cancel(struct kube_http *h);

struct ev_loop *kube_client_loop(const struct kube_client *c);
/* kube_client_free() was called (from a callback still unwinding): call nobody any more. */
bool kube_client_closing(const struct kube_client *c);

/* Something built on the client that must stop when the client is freed (a watch): detach is
 * called from kube_client_free(), before the exchanges still queued are dropped. */
struct kube_client_hook {
    struct kube_client_hook *prev, *next;
    void (*detach)(struct kube_client_hook *hook);
};
void kube_client_hook_add(struct kube_client *c, struct kube_client_hook *hook);
void kube_client_hook_remove(struct kube_client *c, struct kube_client_hook *hook);

/* Reads the bearer token for the next request: cfg->token_file when set (re-read only when its
 * inode, size or mtime changed), else cfg->token. *ret is borrowed from the cache (NULL: no token).
 * The message in d never holds the token. */
struct kube_token_cache {
    char *token;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool valid;
};
_wur_ int kube_token_get(struct kube_token_cache *tc, const struct kube_config *cfg, struct diag *d,
                         const char **ret);
void kube_token_cache_release(struct kube_token_cache *tc);

/* ---- responses (kube-status.c) ---- */

/* The reason and message of a failed response: a Status body's reason and message, else a reason
 * named after the HTTP status and the start of the body. Writes NUL-terminated strings. */
void kube_status_describe(int status, const json_t *body, const char *raw, size_t raw_len,
                          char *reason, size_t reason_n, char *message, size_t message_n);

/* ---- list operations shared with watches (kube-request.c) ---- */

struct kube_op;
/* kube_list() with a handle the caller may cancel (no callback afterwards). The op frees itself
 * after its callback. */
_wur_ int kube_list_op(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata,
                       struct kube_op **ret);
/* The same, each item of each page passed through filter (kube_watch_new_filtered) as it comes. */
_wur_ int kube_list_op_filtered(struct kube_client *c, const char *path, kube_filter_fn filter,
                                void *filter_userdata, kube_done_fn fn, void *userdata,
                                struct kube_op **ret);
void kube_op_cancel(struct kube_op *op);

/* path + (path has a '?' ? '&' : '?') + query, in a new string; NULL on -ENOMEM. */
char *kube_path_add_query(const char *path, const char *query);

/* ---- watch events (kube-watch-decode.c) ---- */

enum kube_wire_event {
    KUBE_WIRE_ADDED,
    KUBE_WIRE_MODIFIED,
    KUBE_WIRE_DELETED,
    KUBE_WIRE_BOOKMARK,
    KUBE_WIRE_ERROR,
};

/* The longest watch event line accepted. */
#define KUBE_LINE_MAX ((size_t)16 << 20)

/* Takes the next complete line ('\n'-terminated) off the front of buf: *ret_line points into a
 * copy the caller frees. 0 and NULL when no line is complete; -EMSGSIZE when an incomplete line is
 * already longer than KUBE_LINE_MAX. */
_wur_ int kube_lines_next(struct strbuf *buf, char **ret_line, size_t *ret_len);

/* Decodes one event line {"type": ..., "object": {...}}; *ret_obj is a new reference. Empty lines
 * are -ENODATA (skip them). -EINVAL with d for anything else malformed. */
_wur_ int kube_watch_decode(const char *line, size_t len, enum kube_wire_event *ret_type,
                            json_t **ret_obj, struct diag *d);

/* ---- kubeconfig data (kube-config.c) ---- */

/* Decodes standard base64 (padding optional, whitespace ignored). -EINVAL on other characters. */
_wur_ int kube_base64_decode(const char *in, char **ret, size_t *ret_len);
