/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs on top of the client's exchanges: one JSON request and its decoded answer, plus the
 * two that take several exchanges: a list that follows "continue" tokens page by page, and the
 * read-modify-write loop that starts over when the write lost a race (409 Conflict).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-internal.h"

/* Items a page asks for when the caller's path does not say (client-go's informers ask 500). */
#define LIST_PAGE_LIMIT 500
/* A filtered list keeps little of each item: smaller pages keep the whole objects of one page
 * small too (large objects such as Nodes are why a caller filters). */
#define LIST_PAGE_LIMIT_FILTERED 100
/* Fresh starts of a read-modify-write after a conflict. */
#define MODIFY_RETRIES 5
#define REASON_MAX 128
/* A server that keeps handing out continue tokens, or a collection past what a node agent can hold,
 * ends the list with an error instead of growing without bound. */
#define LIST_MAX_PAGES 10000u
#define LIST_MAX_ITEMS ((size_t)1 << 20)

enum op_kind {
    OP_PLAIN,
    OP_LIST,
    OP_MODIFY_GET,
    OP_MODIFY_PUT,
};

struct kube_op {
    struct kube_client *c;
    enum op_kind kind;
    kube_done_fn fn;
    void *userdata;
    struct kube_http *http;
    char *path;
    /* lists */
    json_t *items;
    kube_filter_fn filter; /* NULL: items kept whole */
    void *filter_userdata;
    char *cont;
    unsigned pages;
    bool restarted;
    /* read-modify-write */
    kube_mutate_fn mutate;
    unsigned conflicts;
};

static void op_free(struct kube_op *op)
{
    json_decref(op->items);
    free(op->cont);
    free(op->path);
    free(op);
}

static void op_drop(void *userdata)
{
    op_free(userdata);
}

void kube_op_cancel(struct kube_op *op)
{
    if (!op)
        return;
    kube_http_cancel(op->http);
    op_free(op);
}

char *kube_path_add_query(const char *path, const char *query)
{
    char *s = NULL;
    if (asprintf(&s, "%s%c%s", path, strchr(path, '?') ? '&' : '?', query) < 0)
        return NULL;
    return s;
}

/* Calls the caller's function with what the exchange gave, then frees op. */
static void op_finish(struct kube_op *op, int status, json_t *body, const char *raw, size_t len,
                      const char *error)
{
    if (kube_client_closing(op->c)) { /* freed by a callback of this op (mutate) */
        op_free(op);
        return;
    }
    char reason[REASON_MAX] = "", message[DIAG_MSG_MAX] = "";
    if (status == 0)
        snprintf(message, sizeof(message), "%s", error && *error ? error : "no response");
    else if (status < 200 || status > 299)
        kube_status_describe(status, body, raw, len, reason, sizeof(reason), message,
                             sizeof(message));
    struct kube_response res = {
        .status = status, .body = body, .reason = reason, .message = message};
    op->fn(&res, op->userdata);
    op_free(op);
}

static void op_fail(struct kube_op *op, int err, const char *what)
{
    if (err == -ECANCELED) { /* the client is going away: no callbacks any more */
        op_free(op);
        return;
    }
    char msg[DIAG_MSG_MAX];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-err));
    op_finish(op, 0, NULL, NULL, 0, msg);
}

static void on_done(struct kube_http *h, int status, const char *raw, size_t len, const char *error,
                    void *userdata);

static int op_send(struct kube_op *op, const char *method, const char *path, const json_t *body,
                   const char *content_type)
{
    _cleanup_free_ char *text = NULL;
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        if (!text)
            return -ENOMEM;
    }
    struct kube_http_spec spec = {
        .method = method,
        .path = path,
        .body = text,
        .body_len = text ? strlen(text) : 0,
        .content_type = body ? content_type : NULL,
    };
    return kube_http_start(op->c, &spec, on_done, NULL, op_drop, op, &op->http);
}

/* ---- lists ---- */

static void percent_encode(const char *s, struct strbuf *out, int *r)
{
    for (; *s && *r >= 0; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            strchr("-._~", ch))
            *r = strbuf_addch(out, (char)ch);
        else
            *r = strbuf_addf(out, "%%%02X", ch);
    }
}

static int list_send_page(struct kube_op *op)
{
    _cleanup_strbuf_ struct strbuf path = STRBUF_INIT;
    int r = strbuf_addstr(&path, op->path);
    bool has_query = strchr(op->path, '?') != NULL;
    bool has_limit = has_query && (strstr(op->path, "?limit=") || strstr(op->path, "&limit="));
    if (r >= 0 && !has_limit)
        r = strbuf_addf(&path, "%climit=%d", has_query ? '&' : '?',
                        op->filter ? LIST_PAGE_LIMIT_FILTERED : LIST_PAGE_LIMIT);
    if (r >= 0 && op->cont) {
        r = strbuf_addstr(&path, "&continue="); /* the limit made it a query */
        percent_encode(op->cont, &path, &r);
    }
    if (r < 0)
        return r;
    return op_send(op, "GET", strbuf_str(&path), NULL, NULL);
}

static void list_page(struct kube_op *op, int status, json_t *body, const char *raw, size_t len,
                      const char *error)
{
    if (status == 410 && op->cont && !op->restarted) {
        /* The continue token expired: the snapshot is gone, start again from a new one. */
        op->restarted = true;
        op->pages = 0;
        free(op->cont);
        op->cont = NULL;
        json_array_clear(op->items);
        int r = list_send_page(op);
        if (r < 0)
            op_fail(op, r, "list");
        return;
    }
    json_t *items = json_object_get(body, "items");
    if (status != 200 || !json_is_object(body) || !(json_is_array(items) || json_is_null(items))) {
        if (status == 200)
            op_finish(op, 0, body, raw, len, "list: the response is not a List");
        else
            op_finish(op, status, body, raw, len, error);
        return;
    }
    if (++op->pages > LIST_MAX_PAGES ||
        json_array_size(op->items) + json_array_size(items) > LIST_MAX_ITEMS) {
        op_finish(op, 0, NULL, NULL, 0, "list: more pages or items than a list may have");
        return;
    }
    if (op->filter) {
        size_t i;
        json_t *item;
        json_array_foreach(items, i, item)
        {
            json_t *kept = op->filter(item, op->filter_userdata);
            if (kept && json_array_append_new(op->items, kept) < 0) {
                op_fail(op, -ENOMEM, "list");
                return;
            }
        }
        json_array_clear(items); /* the page's objects go now, not with the last page */
    } else if (json_array_extend(op->items, items) < 0) {
        op_fail(op, -ENOMEM, "list");
        return;
    }
    json_t *meta = json_object_get(body, "metadata");
    const char *cont = json_string_value(json_object_get(meta, "continue"));
    free(op->cont);
    op->cont = NULL;
    if (cont && *cont) {
        op->cont = strdup(cont);
        int r = op->cont ? list_send_page(op) : -ENOMEM;
        if (r < 0)
            op_fail(op, r, "list");
        return;
    }
    if (json_is_object(meta))
        json_object_del(meta, "continue");
    json_object_set(body, "items", op->items);
    op_finish(op, 200, body, raw, len, NULL);
}

/* ---- read-modify-write ---- */

static void modify_step(struct kube_op *op, int status, json_t *body, const char *raw, size_t len,
                        const char *error)
{
    int r;
    if (op->kind == OP_MODIFY_PUT) {
        if (status == 409 && op->conflicts < MODIFY_RETRIES) {
            op->conflicts++;
            log_debug(4, "kube conflict, reading again", "path", op->path, "attempt",
                      LOG_INT(op->conflicts));
            op->kind = OP_MODIFY_GET;
            r = op_send(op, "GET", op->path, NULL, NULL);
            if (r < 0)
                op_fail(op, r, "modify");
            return;
        }
        op_finish(op, status, body, raw, len, error);
        return;
    }
    if (status != 200 || !json_is_object(body)) {
        op_finish(op, status, body, raw, len, error);
        return;
    }
    r = op->mutate(body, op->userdata);
    if (r < 0) {
        op_fail(op, r, "mutate");
        return;
    }
    if (r > 0) {
        op_finish(op, status, body, raw, len, error);
        return;
    }
    op->kind = OP_MODIFY_PUT;
    r = op_send(op, "PUT", op->path, body, "application/json");
    if (r < 0)
        op_fail(op, r, "modify");
}

static void on_done(struct kube_http *h, int status, const char *raw, size_t len, const char *error,
                    void *userdata)
{
    struct kube_op *op = userdata;
    op->http = NULL;
    _cleanup_json_ json_t *body = len > 0 ? json_loadb(raw, len, 0, NULL) : NULL;
    switch (op->kind) {
    case OP_LIST:
        list_page(op, status, body, raw, len, error);
        break;
    case OP_MODIFY_GET:
    case OP_MODIFY_PUT:
        modify_step(op, status, body, raw, len, error);
        break;
    case OP_PLAIN:
        op_finish(op, status, body, raw, len, error);
        break;
    }
}

/* ---- the verbs ---- */

static struct kube_op *op_new(struct kube_client *c, enum op_kind kind, const char *path,
                              kube_done_fn fn, void *userdata)
{
    struct kube_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->c = c;
    op->kind = kind;
    op->fn = fn;
    op->userdata = userdata;
    op->path = strdup(path);
    if (!op->path) {
        free(op);
        return NULL;
    }
    return op;
}

static int plain(struct kube_client *c, const char *method, const char *path, const json_t *body,
                 const char *content_type, kube_done_fn fn, void *userdata)
{
    if (!path || path[0] != '/')
        return -EINVAL;
    struct kube_op *op = op_new(c, OP_PLAIN, path, fn, userdata);
    if (!op)
        return -ENOMEM;
    int r = op_send(op, method, path, body, content_type);
    if (r < 0)
        op_free(op);
    return r;
}

int kube_get(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata)
{
    return plain(c, "GET", path, NULL, NULL, fn, userdata);
}

int kube_create(struct kube_client *c, const char *path, json_t *obj, kube_done_fn fn,
                void *userdata)
{
    return obj ? plain(c, "POST", path, obj, "application/json", fn, userdata) : -EINVAL;
}

int kube_update(struct kube_client *c, const char *path, json_t *obj, kube_done_fn fn,
                void *userdata)
{
    return obj ? plain(c, "PUT", path, obj, "application/json", fn, userdata) : -EINVAL;
}

int kube_merge_patch(struct kube_client *c, const char *path, json_t *patch, kube_done_fn fn,
                     void *userdata)
{
    return patch ? plain(c, "PATCH", path, patch, "application/merge-patch+json", fn, userdata)
                 : -EINVAL;
}

int kube_delete(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata)
{
    return plain(c, "DELETE", path, NULL, NULL, fn, userdata);
}

int kube_list_op(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata,
                 struct kube_op **ret)
{
    return kube_list_op_filtered(c, path, NULL, NULL, fn, userdata, ret);
}

int kube_list_op_filtered(struct kube_client *c, const char *path, kube_filter_fn filter,
                          void *filter_userdata, kube_done_fn fn, void *userdata,
                          struct kube_op **ret)
{
    if (!path || path[0] != '/')
        return -EINVAL;
    struct kube_op *op = op_new(c, OP_LIST, path, fn, userdata);
    if (!op)
        return -ENOMEM;
    op->filter = filter;
    op->filter_userdata = filter_userdata;
    op->items = json_array();
    int r = op->items ? list_send_page(op) : -ENOMEM;
    if (r < 0) {
        op_free(op);
        return r;
    }
    if (ret)
        *ret = op;
    return 0;
}

int kube_list(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata)
{
    return kube_list_op(c, path, fn, userdata, NULL);
}

int kube_modify(struct kube_client *c, const char *path, kube_mutate_fn mutate, kube_done_fn fn,
                void *userdata)
{
    if (!path || path[0] != '/' || !mutate)
        return -EINVAL;
    struct kube_op *op = op_new(c, OP_MODIFY_GET, path, fn, userdata);
    if (!op)
        return -ENOMEM;
    op->mutate = mutate;
    int r = op_send(op, "GET", path, NULL, NULL);
    if (r < 0)
        op_free(op);
    return r;
}
