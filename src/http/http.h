/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small HTTP/1.1 server on the event loop, for what a node daemon serves to Prometheus: GET and
 * HEAD of a few paths, keep-alive, gzip, basic authentication and TLS configured by the
 * exporter-toolkit web configuration file. No request bodies, no HTTP/2. zlib, libcrypt and OpenSSL
 * are loaded at first use (base-dlib.h): a plain-HTTP server maps none of them.
 *
 * Rules for the whole API:
 *  - Every function runs on the loop thread, except the struct http_body functions, which any
 *    thread may call (a body is immutable once made; its reference count is atomic).
 *  - Handlers are called on the loop thread and must answer before they return, with
 *    http_respond() or http_respond_body(); a handler that does not answer gets a 500 sent. A
 *    handler must not free the server.
 *  - With basic_auth_users, bcrypt runs on two worker threads of the server's own (the loop's work
 *    pool), so a wrong password does not stall the loop.
 *  - Fallible functions return 0 or a negative errno and write ret_* only on success. The library
 *    does not log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

struct ev_loop;
struct http_server;
struct http_request;
struct http_body;
struct http_web_config;

/* ---- response bodies ---- */

/* A reference-counted, immutable response body: the exporter builds one per snapshot and every
 * scrape sends it without a copy. */

/* A body holding a copy of data. */
_wur_ int http_body_new(const void *data, size_t len, struct http_body **ret);

/* A body that takes ownership of data, a malloc()ed buffer (freed with the last reference). On
 * failure data is freed too, so the caller never frees it. */
_wur_ int http_body_new_take(void *data, size_t len, struct http_body **ret);

struct http_body *http_body_ref(struct http_body *b);
/* Drops a reference; frees the body with the last. NULL-safe; returns NULL. */
struct http_body *http_body_unref(struct http_body *b);
DEFINE_POINTER_CLEANUP(struct http_body, http_body_unref)

const void *http_body_data(const struct http_body *b, size_t *ret_len);

/* Makes and keeps the gzip form of the body (zlib loaded at first use), so later gzip responses
 * with this body do not compress again. Call it from the thread that made the body before the body
 * is shared, or from the loop thread; the server calls it itself for a gzip response. -ENOENT (d
 * names the package) when zlib cannot be loaded. */
_wur_ int http_body_gzip(struct http_body *b, struct diag *d);

/* The gzip form if made (NULL otherwise). */
const void *http_body_gzip_data(const struct http_body *b, size_t *ret_len);

/* ---- the web configuration (exporter-toolkit's --web.config.file) ---- */

enum http_client_auth {
    HTTP_CLIENT_AUTH_NONE,               /* NoClientCert */
    HTTP_CLIENT_AUTH_REQUEST,            /* RequestClientCert */
    HTTP_CLIENT_AUTH_REQUIRE_ANY,        /* RequireAnyClientCert */
    HTTP_CLIENT_AUTH_VERIFY_IF_GIVEN,    /* VerifyClientCertIfGiven */
    HTTP_CLIENT_AUTH_REQUIRE_AND_VERIFY, /* RequireAndVerifyClientCert */
};

/* Loads and checks a web configuration file (YAML; errors read "file:line:col: message"). Keys
 * of exporter-toolkit's format that this server does not implement, and unknown keys, are refused.
 * With basic_auth_users, libcrypt is loaded now (and its bcrypt support checked), so a node
 * without it fails at start, not at the first scrape. */
_wur_ int http_web_config_load(const char *path, struct diag *d, struct http_web_config **ret);
/* The same from text in memory; name is what messages call it. */
_wur_ int http_web_config_load_string(const char *name, const char *text, size_t len,
                                      struct diag *d, struct http_web_config **ret);
struct http_web_config *http_web_config_free(struct http_web_config *wc);
DEFINE_POINTER_CLEANUP(struct http_web_config, http_web_config_free)

bool http_web_config_has_tls(const struct http_web_config *wc);
bool http_web_config_has_auth(const struct http_web_config *wc);

/* Checks user and password against basic_auth_users (bcrypt through libcrypt's crypt_r, compared
 * in constant time), on the calling thread (the server does the bcrypt on its workers). A success
 * is remembered (a keyed hash of user and password, never the password), so a scraper that sends
 * the same credentials every 15 s pays for bcrypt once. Returns true when they match. */
bool http_web_config_check_user(struct http_web_config *wc, const char *user, const char *password);

/* ---- the server ---- */

/* Per-server limits; 0 in a field keeps its default. */
struct http_limits {
    size_t max_head;           /* request line + headers, bytes (8 KiB); past it: 431 */
    size_t max_uri;            /* request target, bytes (4 KiB); past it: 414 */
    unsigned max_conns;        /* connections at once (64); further clients wait in the backlog */
    unsigned max_requests;     /* requests per connection before it is closed (1000) */
    uint64_t idle_timeout_ms;  /* keep-alive connection with no request (60 s) */
    uint64_t head_timeout_ms;  /* from a request's first byte to its last header (10 s) */
    uint64_t write_timeout_ms; /* a response that makes no progress (30 s) */
};

/* A handler: answers req with http_respond() or http_respond_body() before it returns. */
typedef void (*http_handler_fn)(struct http_request *req, void *userdata);

/* Listens on address, in dcgm-exporter's syntax: ":9400" (every address, IPv6 and IPv4),
 * "127.0.0.1:9400", "[::1]:9400", "localhost:9400"; port 0 takes any free port (see
 * http_server_port()). web (may be NULL) is borrowed and must outlive the server; with TLS in it,
 * OpenSSL is loaded and the certificate and key read now. limits may be NULL. */
_wur_ int http_server_new(struct ev_loop *loop, const char *address, struct http_web_config *web,
                          const struct http_limits *limits, struct diag *d,
                          struct http_server **ret);

/* Closes the listening socket and every connection. NULL-safe; returns NULL. */
struct http_server *http_server_free(struct http_server *srv);
DEFINE_POINTER_CLEANUP(struct http_server, http_server_free)

/* Routes requests for path (exact match, query string ignored) to fn. -EEXIST if routed already,
 * -EINVAL if path does not start with '/'. Unrouted paths answer 404. */
_wur_ int http_server_route(struct http_server *srv, const char *path, http_handler_fn fn,
                            void *userdata);

/* The port the server listens on (the one the kernel chose for port 0). */
uint16_t http_server_port(const struct http_server *srv);

/* Connections open now (for tests). */
unsigned http_server_conns(const struct http_server *srv);

/* ---- requests ---- */

/* "GET" or "HEAD" (the server answers other methods itself). */
const char *http_request_method(const struct http_request *req);
/* The path without the query string, as sent (not percent-decoded). */
const char *http_request_path(const struct http_request *req);
/* The query string without '?', or "" when there is none. */
const char *http_request_query(const struct http_request *req);
/* The value of the first header called name (any case), or NULL. Borrowed: valid in the handler.
 */
const char *http_request_header(const struct http_request *req, const char *name);
/* The basic-auth user that was let in, or NULL when the server has no users. */
const char *http_request_user(const struct http_request *req);

/* Answers with a copy of body. content_type may be NULL (no Content-Type). For HEAD, only the
 * head is sent (with the body's Content-Length). A gzip-accepting client gets the body compressed
 * when it is worth it (>= 1 KiB). -EALREADY when the request was answered already. */
_wur_ int http_respond(struct http_request *req, int status, const char *content_type,
                       const void *body, size_t len);

/* Answers with body, taking a reference (the caller keeps its own). A gzip response uses the
 * body's gzip form, made once (http_body_gzip()) and kept with the body. */
_wur_ int http_respond_body(struct http_request *req, int status, const char *content_type,
                            struct http_body *body);

/* The reason phrase of a status code ("OK", "Not Found"), "" for codes it does not know. */
const char *http_status_reason(int status);
