/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's side of HTTP/1.1 on the wire (RFC 9112): the request head, parsed in place from the
 * connection's buffer. Only what a metrics server needs is accepted, and it is strict where
 * leniency would be a smuggling risk: whitespace before a header's colon, folded header lines, a
 * bare CR, a Content-Length that is not a plain number, a missing or repeated Host in HTTP/1.1 are
 * all 400. Requests with a body are recognised (so the server can refuse them and close) but the
 * body is never read. Also here: Accept-Encoding and base64, the other pure pieces.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http-internal.h"

size_t http_head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        size_t j = i + 1;
        if (j < len && buf[j] == '\r')
            j++;
        if (j < len && buf[j] == '\n')
            return j + 1;
    }
    return 0;
}

/* tchar of RFC 9110 5.6.2. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!is_tchar((unsigned char)*s))
            return false;
    return true;
}

/* Cuts the next line off *p (its end of line becomes NUL) and returns it; NULL past the end. A
 * bare CR inside a line makes *bad true. */
static char *next_line(char **p, char *end, bool *bad)
{
    char *s = *p;
    if (s >= end)
        return NULL;
    char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        nl = end - 1; /* the caller only passes complete heads */
    *nl = '\0';
    if (nl > s && nl[-1] == '\r')
        nl[-1] = '\0';
    if (strchr(s, '\r'))
        *bad = true;
    *p = nl + 1;
    return s;
}

/* Whether a comma-separated list holds word (any case). */
static bool list_has(const char *v, const char *word)
{
    size_t wl = strlen(word);
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *start = v;
        while (*v && *v != ',')
            v++;
        const char *end = v;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - start) == wl && strncasecmp(start, word, wl) == 0)
            return true;
    }
    return false;
}

/* A q-value of zero: "0", "0.", "0.0", "0.00", "0.000" (RFC 9110 12.4.2). */
static bool q_is_zero(const char *q, size_t n)
{
    if (n == 0 || q[0] != '0')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(i == 1 && q[i] == '.') && q[i] != '0')
            return false;
    return true;
}

bool http_accepts_gzip(const char *value)
{
    const char *v = value;
    bool star = false, gzip = false, gzip_seen = false;
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *name = v;
        while (*v && *v != ',' && *v != ';' && *v != ' ' && *v != '\t')
            v++;
        size_t nl = (size_t)(v - name);
        bool zero = false;
        while (*v && *v != ',') {
            /* parameters: only q matters */
            while (*v == ' ' || *v == '\t' || *v == ';')
                v++;
            if ((*v == 'q' || *v == 'Q') && v[1] == '=') {
                const char *q = v + 2;
                v = q;
                while (*v && *v != ',' && *v != ';' && *v != ' ' && *v != '\t')
                    v++;
                zero = q_is_zero(q, (size_t)(v - q));
            } else {
                while (*v && *v != ',' && *v != ';')
                    v++;
            }
        }
        if (nl == 4 && strncasecmp(name, "gzip", 4) == 0) {
            gzip_seen = true;
            gzip = !zero;
        } else if (nl == 1 && name[0] == '*') {
            star = !zero;
        }
    }
    return gzip_seen ? gzip : star;
}

/* request-line = method SP request-target SP HTTP-version */
static int parse_request_line(char *line, size_t max_uri, struct http_head *h)
{
    char *sp1 = strchr(line, ' ');
    if (!sp1)
        return 400;
    *sp1 = '\0';
    char *target = sp1 + 1;
    char *sp2 = strchr(target, ' ');
    if (!sp2)
        return 400;
    *sp2 = '\0';
    const char *version = sp2 + 1;
    if (!is_token(line))
        return 400;
    if (strncmp(version, "HTTP/", 5) != 0 || strlen(version) != 8 || version[6] != '.' ||
        version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
        return 400;
    if (version[5] != '1')
        return 505;
    size_t tl = strlen(target);
    if (tl == 0)
        return 400;
    if (tl > max_uri)
        return 414;
    for (const char *c = target; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return 400;
    h->method = line;
    h->minor = version[7] - '0';
    if (target[0] != '/') {
        /* asterisk-form (OPTIONS *) or absolute-form: no path of ours */
        h->path = target;
        h->query = "";
        return 0;
    }
    char *q = strchr(target, '?');
    if (q) {
        *q = '\0';
        h->query = q + 1;
    } else {
        h->query = "";
    }
    h->path = target;
    return 0;
}

/* Content-Length = 1*DIGIT; a list of equal values is one value (RFC 9112 6.3), tolerated only
 * when they agree. */
static int parse_length(const char *v, bool *nonzero)
{
    bool digits = false;
    const char *p = v;
    while (*p) {
        if (*p >= '0' && *p <= '9') {
            digits = true;
            if (*p != '0')
                *nonzero = true;
        } else if (*p == ',' || *p == ' ' || *p == '\t') {
            /* part of a list; the values are compared by the caller's refusal of any body */
        } else {
            return -EINVAL;
        }
        p++;
    }
    return digits ? 0 : -EINVAL;
}

/* field-line = field-name ":" OWS field-value OWS */
static int parse_field(char *line, struct http_head *h)
{
    if (line[0] == ' ' || line[0] == '\t')
        return 400; /* obs-fold */
    char *colon = strchr(line, ':');
    if (!colon)
        return 400;
    *colon = '\0';
    if (!is_token(line))
        return 400; /* includes whitespace before the colon */
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    char *end = v + strlen(v);
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    for (const char *c = v; *c; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return 400;
    if (h->n_headers == HTTP_MAX_HEADERS)
        return 431;
    h->headers[h->n_headers++] = (struct http_header){line, v};
    return 0;
}

const char *http_head_get(const struct http_head *h, const char *name)
{
    for (size_t i = 0; i < h->n_headers; i++)
        if (strcasecmp(h->headers[i].name, name) == 0)
            return h->headers[i].value;
    return NULL;
}

int http_head_parse(char *buf, size_t len, size_t max_uri, struct http_head *ret)
{
    struct http_head h = {0};
    char *p = buf, *end = buf + len;
    bool bad = false;
    char *line;
    /* RFC 9112 2.2: empty lines before the request line are ignored */
    while ((line = next_line(&p, end, &bad)) && !*line && !bad)
        ;
    if (!line || bad)
        return 400;
    int status = parse_request_line(line, max_uri, &h);
    if (status)
        return status;
    while ((line = next_line(&p, end, &bad)) && *line) {
        if (bad)
            return 400;
        status = parse_field(line, &h);
        if (status)
            return status;
    }
    if (bad)
        return 400;

    unsigned hosts = 0;
    bool keep_alive = false;
    for (size_t i = 0; i < h.n_headers; i++) {
        const char *n = h.headers[i].name, *v = h.headers[i].value;
        if (strcasecmp(n, "Host") == 0) {
            hosts++;
        } else if (strcasecmp(n, "Connection") == 0) {
            if (list_has(v, "close"))
                h.close = true;
            if (list_has(v, "keep-alive"))
                keep_alive = true;
        } else if (strcasecmp(n, "Content-Length") == 0) {
            if (parse_length(v, &h.has_body) < 0)
                return 400;
        } else if (strcasecmp(n, "Transfer-Encoding") == 0) {
            h.has_body = true;
        } else if (strcasecmp(n, "Accept-Encoding") == 0) {
            if (http_accepts_gzip(v))
                h.gzip = true;
        }
    }
    if (hosts > 1 || (h.minor >= 1 && hosts == 0))
        return 400;
    if (h.minor == 0 && !keep_alive)
        h.close = true;
    *ret = h;
    return 0;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int http_base64_decode(const char *in, char *out, size_t out_size, size_t *ret_len)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t n = 0, len = strlen(in);
    while (len > 0 && in[len - 1] == '=')
        len--;
    if (strlen(in) - len > 2)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0)
            return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= out_size)
                return -ENOBUFS;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6) /* a lone sixth bit group: not a whole byte */
        return -EINVAL;
    out[n] = '\0';
    *ret_len = n;
    return 0;
}
