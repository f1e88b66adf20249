/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of src/kube share: one HTTP exchange on the client's curl multi handle
 * (kube-client.c) that the verbs (kube-request.c) and watches (kube-watch.c) build on, and the pure
 * pieces the unit tests reach directly (token bucket, Status parsing, watch line decoding, base64).
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
