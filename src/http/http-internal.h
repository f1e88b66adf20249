/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of src/http share inside the module: the request-head parser (pure, so it is
 * unit-tested and fuzzed without a socket), the web configuration's fields, the TLS layer and the
 * zlib and libcrypt tables.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http.h"

/* ---- the request head (http-request.c) ---- */

#define HTTP_MAX_HEADERS 64

struct http_header {
    const char *name; /* NUL-terminated, pointing into the parsed buffer */
    const char *value;
};

struct http_head {
    const char *method;
    const char *path;  /* the target up to '?' */
    const char *query; /* after '?', or "" */
    int minor;         /* HTTP/1.<minor> */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t n_headers;
    bool close;    /* the connection closes after the response */
    bool gzip;     /* the client accepts gzip */
    bool has_body; /* Content-Length > 0 or Transfer-Encoding: not read by this server */
};

/* Where the head in buf[0..len) ends (after the empty line; bare LF line ends are accepted), or 0
 * while it is incomplete. */
size_t http_head_end(const char *buf, size_t len);

/* Parses a complete head of len bytes (as http_head_end() measured it) in place: buf is modified
 * (NULs written) and ret points into it. Returns 0, or the status code to answer with: 400 for a
 * malformed head, 414 for a target longer than max_uri, 431 for too many headers, 505 for an HTTP
 * version other than 1.x. */
int http_head_parse(char *buf, size_t len, size_t max_uri, struct http_head *ret);

/* The first header called name (any case), or NULL. */
const char *http_head_get(const struct http_head *h, const char *name);

/* Whether an Accept-Encoding value accepts gzip (a q of 0 refuses it). */
bool http_accepts_gzip(const char *value);

/* Decodes standard base64 into out (at most out_size - 1 bytes, NUL-terminated). -EINVAL on bad
 * input, -ENOBUFS when it does not fit. */
_wur_ int http_base64_decode(const char *in, char *out, size_t out_size, size_t *ret_len);

/* ---- the web configuration (http-webconfig.c, http-auth.c) ---- */

struct http_web_tls {
    char *cert_file, *key_file; /* or, inline: */
    char *cert_pem, *key_pem;
    char *client_ca_file;
    enum http_client_auth client_auth;
    int min_version, max_version; /* TLS1_x_VERSION; max 0: no limit */
};

struct http_web_user {
    char *name;
    char *hash; /* bcrypt: $2a$, $2b$ or $2y$ */
};

#define HTTP_AUTH_CACHE 32

struct http_auth_cache_entry {
    uint64_t key; /* keyed hash of user, hash and password; 0: empty */
};

struct http_web_config {
    bool tls_enabled;
    struct http_web_tls tls;
    struct http_web_user *users;
    size_t n_users;
    char *headers;   /* http_server_config.headers as header lines, or NULL */
    bool crypt_held; /* a reference on libcrypt */
    uint64_t sip_key[2];
    struct http_auth_cache_entry cache[HTTP_AUTH_CACHE];
    unsigned cache_next;
};

/* Loads libcrypt and checks that it does bcrypt. */
_wur_ int http_crypt_acquire(struct diag *d);
void http_crypt_release(void);

/* The first half of a check: 1 when user and password are a remembered success; else 0 with
 * *ret_hash the hash to check the password against (borrowed from wc; for an unknown user a
 * stand-in, *ret_known false) and *ret_key what to remember on success. Loop thread. */
int http_web_config_lookup(struct http_web_config *wc, const char *user, const char *password,
                           const char **ret_hash, uint64_t *ret_key, bool *ret_known);
/* bcrypt of password against hash, compared in constant time. Any thread: the slow half. */
bool http_bcrypt_matches(const char *password, const char *hash);
/* Remembers a success (key from http_web_config_lookup()). Loop thread. */
void http_web_config_remember(struct http_web_config *wc, uint64_t key);

/* Draws the auth cache's key from the kernel. */
_wur_ int http_auth_init_key(uint64_t key[2]);

/* SipHash-2-4 of data under key: the auth cache's keyed hash. */
uint64_t http_siphash(const uint64_t key[2], const void *data, size_t len);

/* ---- TLS (http-tls.c) ---- */

struct http_tls;
struct http_tls_conn;

_wur_ int http_tls_new(const struct http_web_tls *cfg, struct diag *d, struct http_tls **ret);
struct http_tls *http_tls_free(struct http_tls *t);
DEFINE_POINTER_CLEANUP(struct http_tls, http_tls_free)

_wur_ int http_tls_conn_new(struct http_tls *t, int fd, struct http_tls_conn **ret);
struct http_tls_conn *http_tls_conn_free(struct http_tls_conn *tc);

/* Non-blocking steps: -EAGAIN with *want set to EV_READ or EV_WRITE when the socket must become
 * ready first; other negative errnos are failures. */
_wur_ int http_tls_handshake(struct http_tls_conn *tc, uint32_t *want);
/* Bytes read, 0 at the end of the stream. */
_wur_ ssize_t http_tls_read(struct http_tls_conn *tc, void *buf, size_t n, uint32_t *want);
_wur_ ssize_t http_tls_write(struct http_tls_conn *tc, const void *buf, size_t n, uint32_t *want);
/* Sends close_notify, best effort. */
void http_tls_shutdown(struct http_tls_conn *tc);
