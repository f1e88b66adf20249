/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 on the wire (RFC 9112), as much of it as a client of the API server needs: writing a
 * request, and reading a response head and its body whether it is framed by Content-Length, by
 * chunked transfer coding (watches) or by the end of the connection. The reader is a pure state
 * machine over the bytes it is fed, so it is unit-tested and fuzzed without a socket.
 *
 * It is strict where leniency would be a smuggling or truncation risk: a Content-Length that is not
 * a plain number, two different lengths, both framings at once, a chunk size or line past its limit
 * are errors, and the connection is not reused after any error.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "kube-internal.h"

#define HEAD_MAX ((size_t)64 << 10)
#define CHUNK_LINE_MAX 1024

void kube_h1_init(struct kube_h1 *p, bool head_only)
{
    *p = (struct kube_h1){.state = H1_HEAD, .head_only = head_only, .content_length = -1};
    strbuf_init(&p->line, HEAD_MAX);
}

void kube_h1_release(struct kube_h1 *p)
{
    strbuf_release(&p->line);
}

int kube_h1_request(struct strbuf *out, const char *method, const char *host, const char *target,
                    const char *const *headers, size_t n_headers, const char *body, size_t body_len)
{
    int r = strbuf_addf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host);
    for (size_t i = 0; r >= 0 && i < n_headers; i++)
        if (headers[i])
            r = strbuf_addf(out, "%s\r\n", headers[i]);
    if (r >= 0 && (body || strcmp(method, "GET") != 0))
        r = strbuf_addf(out, "Content-Length: %zu\r\n", body ? body_len : 0);
    if (r >= 0)
        r = strbuf_add(out, "\r\n", 2);
    if (r >= 0 && body)
        r = strbuf_add(out, body, body_len);
    return r;
}

/* ---- the head ---- */

static bool token_eq(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* Whether a comma-separated header value lists word (Connection: keep-alive, close). */
static bool list_has(const char *v, size_t n, const char *word)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t start = i;
        while (i < n && v[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
            end--;
        if (token_eq(v + start, end - start, word))
            return true;
    }
    return false;
}

static int parse_length(const char *v, size_t n, int64_t *ret)
{
    int64_t x = 0;
    if (n == 0 || n > 18)
        return -EPROTO;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EPROTO;
        x = x * 10 + (v[i] - '0');
    }
    *ret = x;
    return 0;
}

static int on_header(struct kube_h1 *p, const char *name, size_t nn, const char *v, size_t vn,
                     struct diag *d)
{
    if (token_eq(name, nn, "content-length")) {
        int64_t len;
        if (parse_length(v, vn, &len) < 0 || (p->content_length >= 0 && p->content_length != len))
            return diag_fail(d, -EPROTO, "malformed response: bad Content-Length");
        p->content_length = len;
    } else if (token_eq(name, nn, "transfer-encoding")) {
        if (!token_eq(v, vn, "chunked"))
            return diag_fail(d, -EPROTO, "malformed response: unsupported Transfer-Encoding");
        p->chunked = true;
    } else if (token_eq(name, nn, "connection")) {
        if (list_has(v, vn, "close"))
            p->close = true;
    }
    return 0;
}

/* One header line (no CRLF): "Name: value". */
static int header_line(struct kube_h1 *p, const char *s, size_t n, struct diag *d)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s || memchr(s, ' ', (size_t)(colon - s)) ||
        memchr(s, '\t', (size_t)(colon - s)))
        return diag_fail(d, -EPROTO, "malformed response: bad header line");
    const char *v = colon + 1;
    const char *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return on_header(p, s, (size_t)(colon - s), v, (size_t)(end - v), d);
}

/* "HTTP/1.1 200 OK" */
static int status_line(struct kube_h1 *p, const char *s, size_t n, struct diag *d)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
        s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9' ||
        (n > 12 && s[12] != ' '))
        return diag_fail(d, -EPROTO, "malformed response: bad status line");
    p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    if (s[7] == '0')
        p->close = true; /* HTTP/1.0 keeps nothing alive unless asked; we never ask */
    return 0;
}

/* Decides how the body is framed once the head is complete. */
static int head_done(struct kube_h1 *p, struct diag *d)
{
    if (p->status < 200) { /* 1xx: an interim response, the real one follows */
        bool keep_close = p->close;
        kube_h1_release(p);
        kube_h1_init(p, p->head_only);
        p->close = keep_close;
        return 0;
    }
    p->head_complete = true;
    if (p->chunked && p->content_length >= 0)
        return diag_fail(d, -EPROTO, "malformed response: both Content-Length and chunked");
    if (p->head_only || p->status == 204 || p->status == 304)
        p->state = H1_DONE;
    else if (p->chunked)
        p->state = H1_CHUNK_SIZE;
    else if (p->content_length >= 0) {
        p->left = (uint64_t)p->content_length;
        p->state = p->left ? H1_BODY_LENGTH : H1_DONE;
    } else {
        p->close = true;
        p->state = H1_BODY_EOF;
    }
    return 0;
}

/* Takes one line off the front of in (CRLF or LF ended) into p->line; 1 when complete. */
static int take_line(struct kube_h1 *p, const char **in, size_t *len, size_t max, struct diag *d)
{
    const char *nl = memchr(*in, '\n', *len);
    size_t n = nl ? (size_t)(nl - *in) + 1 : *len;
    if (p->line.len + n > max || strbuf_add(&p->line, *in, n) < 0)
        return diag_fail(d, -EMSGSIZE, "malformed response: header or chunk line too long");
    *in += n;
    *len -= n;
    if (!nl)
        return 0;
    p->line.len -= 1;
    if (p->line.len && p->line.buf[p->line.len - 1] == '\r')
        p->line.len--;
    p->line.buf[p->line.len] = '\0';
    return 1;
}

static int feed_head(struct kube_h1 *p, const char **in, size_t *len, struct diag *d)
{
    int r = take_line(p, in, len, HEAD_MAX, d);
    if (r <= 0)
        return r;
    const char *s = p->line.buf;
    size_t n = p->line.len;
    if (p->status == 0)
        r = status_line(p, s, n, d);
    else if (n == 0)
        r = head_done(p, d);
    else
        r = header_line(p, s, n, d);
    strbuf_reset(&p->line);
    return r;
}

static int chunk_size(struct kube_h1 *p, struct diag *d)
{
    const char *s = strbuf_str(&p->line);
    uint64_t x = 0;
    size_t i = 0;
    for (; s[i] && s[i] != ';' && s[i] != ' ' && s[i] != '\t'; i++) {
        int v = hex_digit_value((unsigned char)s[i]);
        if (v < 0 || i >= 15)
            return diag_fail(d, -EPROTO, "malformed response: bad chunk size");
        x = x * 16 + (uint64_t)v;
    }
    if (i == 0)
        return diag_fail(d, -EPROTO, "malformed response: bad chunk size");
    p->left = x;
    p->state = x ? H1_CHUNK_DATA : H1_TRAILERS;
    return 0;
}

static int feed_chunked(struct kube_h1 *p, const char **in, size_t *len, struct diag *d)
{
    int r = take_line(p, in, len, p->state == H1_TRAILERS ? HEAD_MAX : CHUNK_LINE_MAX, d);
    if (r <= 0)
        return r;
    if (p->state == H1_CHUNK_SIZE)
        r = chunk_size(p, d);
    else if (p->state == H1_CHUNK_END) {
        if (p->line.len != 0)
            r = diag_fail(d, -EPROTO, "malformed response: chunk not followed by CRLF");
        p->state = H1_CHUNK_SIZE;
    } else if (p->line.len == 0) /* H1_TRAILERS: trailers are read and ignored */
        p->state = H1_DONE;
    strbuf_reset(&p->line);
    return r;
}

static int feed_data(struct kube_h1 *p, const char **in, size_t *len, struct strbuf *body,
                     struct diag *d)
{
    size_t n = *len;
    if (p->state != H1_BODY_EOF && n > p->left)
        n = (size_t)p->left;
    if (strbuf_add(body, *in, n) < 0)
        return diag_fail(d, -EMSGSIZE, "response larger than %zu bytes", body->cap);
    *in += n;
    *len -= n;
    if (p->state == H1_BODY_EOF)
        return 0;
    p->left -= n;
    if (p->left == 0)
        p->state = p->state == H1_CHUNK_DATA ? H1_CHUNK_END : H1_DONE;
    return 0;
}

int kube_h1_feed(struct kube_h1 *p, const char *in, size_t len, struct strbuf *body, struct diag *d,
                 size_t *ret_used)
{
    const char *start = in;
    int r = 0;
    while (len > 0 && r >= 0 && p->state != H1_DONE) {
        switch (p->state) {
        case H1_HEAD:
            r = feed_head(p, &in, &len, d);
            break;
        case H1_CHUNK_SIZE:
        case H1_CHUNK_END:
        case H1_TRAILERS:
            r = feed_chunked(p, &in, &len, d);
            break;
        case H1_BODY_LENGTH:
        case H1_CHUNK_DATA:
        case H1_BODY_EOF:
            r = feed_data(p, &in, &len, body, d);
            break;
        case H1_DONE:
            break;
        }
    }
    if (r < 0) {
        p->close = true;
        return r;
    }
    *ret_used = (size_t)(in - start);
    return 0;
}

int kube_h1_eof(struct kube_h1 *p, struct diag *d)
{
    if (p->state == H1_BODY_EOF) {
        p->state = H1_DONE;
        return 0;
    }
    if (p->state == H1_DONE)
        return 0;
    p->close = true;
    return diag_fail(d, -EPIPE,
                     p->head_complete ? "connection closed before the response ended"
                                      : "connection closed before a response came");
}
