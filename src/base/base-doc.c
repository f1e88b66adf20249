/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration documents: a YAML 1.2 stream read with libfyaml's event parser and built straight
 * into jansson values, with a side table that maps every value (and every mapping key) to the line
 * and column it came from. Events, not libfyaml's document tree, because each event carries its
 * mark and the build can enforce our own rules as it goes (core-schema typing, exact int64, unique
 * string keys, a depth limit, a limit on alias expansion). libfyaml's own diagnostics are
 * collected, never printed: the first error becomes "file:line:col: message" in the caller's struct
 * diag.
 *
 * Positions: 1-based. An alias shares the anchored value (jansson reference counting), so it
 * reports the anchor's position. jansson's null/true/false are process-wide singletons and get no
 * position; the typed readers fall back to the position of the key they were looked up by.
 */
#include <errno.h>
#include <inttypes.h>
#include <libfyaml.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base-doc.h"
#include "base-file.h"
#include "base-internal.h"
#include "base-vec.h"

/* One remembered position: of a value (key NULL) or of key within the mapping ptr. */
struct pos_entry {
    const void *ptr;
    char *key;
    int line;
    int col;
};

struct pos_table {
    struct pos_entry *slots;
    size_t used;
    size_t alloc; /* a power of two, or 0 */
};

struct doc {
    char *name;
    struct vec roots; /* json_t *, one reference each */
    struct pos_table pos;
};

/* ---- the position table: open addressing with linear probing ---- */

static size_t pos_hash(const void *ptr, const char *key)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr * 0x9e3779b97f4a7c15ULL;

    /* FNV-1a over the key, folded in so that members of one mapping spread out. */
    for (const unsigned char *p = (const unsigned char *)key; p && *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return (size_t)(h ^ (h >> 29));
}

static bool pos_match(const struct pos_entry *e, const void *ptr, const char *key)
{
    if (e->ptr != ptr)
        return false;
    if (!e->key || !key)
        return !e->key && !key;
    return strcmp(e->key, key) == 0;
}

static struct pos_entry *pos_find(const struct pos_table *t, const void *ptr, const char *key)
{
    size_t i;

    if (t->alloc == 0)
        return NULL;
    for (i = pos_hash(ptr, key) & (t->alloc - 1);; i = (i + 1) & (t->alloc - 1)) {
        struct pos_entry *e = &t->slots[i];

        if (!e->ptr)
            return NULL;
        if (pos_match(e, ptr, key))
            return e;
    }
}

/* Places an entry that is known to be absent; the table has room. */
static void pos_place(struct pos_table *t, struct pos_entry e)
{
    size_t i = pos_hash(e.ptr, e.key) & (t->alloc - 1);

    while (t->slots[i].ptr)
        i = (i + 1) & (t->alloc - 1);
    t->slots[i] = e;
    t->used++;
}

static int pos_grow(struct pos_table *t)
{
    struct pos_table n = {.alloc = t->alloc ? t->alloc * 2 : 64};

    n.slots = calloc(n.alloc, sizeof(*n.slots));
    if (!n.slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->alloc; i++)
        if (t->slots[i].ptr)
            pos_place(&n, t->slots[i]);
    free(t->slots);
    *t = n;
    return 0;
}

/* Remembers where ptr (or its member key) came from; the first position recorded wins. */
static int pos_put(struct pos_table *t, const void *ptr, const char *key, int line, int col)
{
    struct pos_entry e = {.ptr = ptr, .line = line, .col = col};
    int r;

    if (pos_find(t, ptr, key))
        return 0;
    if ((t->used + 1) * 2 > t->alloc) {
        r = pos_grow(t);
        if (r < 0)
            return r;
    }
    if (key) {
        e.key = strdup(key);
        if (!e.key)
            return -ENOMEM;
    }
    pos_place(t, e);
    return 0;
}

static void pos_release(struct pos_table *t)
{
    for (size_t i = 0; i < t->alloc; i++)
        free(t->slots[i].key);
    free(t->slots);
    t->slots = NULL;
    t->alloc = t->used = 0;
}

/* ---- building values from parser events ---- */

/* A mapping or sequence being filled. */
struct frame {
    json_t *node;
    char *key; /* a mapping's key waiting for its value */
    size_t key_len;
    int key_line, key_col;
    char *anchor; /* registered when the node is complete, so an alias cannot make a cycle */
    size_t nodes; /* values inside, counting each alias as the size of what it expands to */
    int line, col;
};

struct anchor {
    char *name;
    json_t *value;
    size_t nodes;
};

struct builder {
    struct doc *doc;
    struct diag *d;
    struct frame stack[DOC_MAX_DEPTH];
    size_t depth;
    struct vec anchors; /* struct anchor, of the current document */
    json_t *root;
    size_t total; /* expanded value count of the current document */
};

static int fail_at(struct builder *b, int line, int col, int err, const char *what)
{
    if (line > 0)
        return diag_fail_at(b->d, err, b->doc->name, line, col, "%s", what);
    return diag_fail(b->d, err, "%s: %s", b->doc->name, what);
}

static void anchors_clear(struct vec *anchors)
{
    for (size_t i = 0; i < anchors->len; i++) {
        struct anchor *a = VEC_AT(anchors, struct anchor, i);

        free(a->name);
        json_decref(a->value);
    }
    anchors->len = 0;
}

static void frame_release(struct frame *f)
{
    json_decref(f->node);
    free(f->key);
    free(f->anchor);
}

static void builder_release(struct builder *b)
{
    while (b->depth > 0)
        frame_release(&b->stack[--b->depth]);
    anchors_clear(&b->anchors);
    vec_release(&b->anchors);
    json_decref(b->root);
    b->root = NULL;
}

static bool is_singleton(const json_t *v)
{
    return json_is_null(v) || json_is_boolean(v);
}

static const struct anchor *anchor_find(const struct builder *b, const char *name, size_t len)
{
    /* The latest definition of a name wins, as YAML says. */
    for (size_t i = b->anchors.len; i > 0; i--) {
        const struct anchor *a = VEC_AT(&b->anchors, struct anchor, i - 1);

        if (strlen(a->name) == len && memcmp(a->name, name, len) == 0)
            return a;
    }
    return NULL;
}

static int anchor_add(struct builder *b, char *name, json_t *value, size_t nodes)
{
    struct anchor a = {.name = name, .value = json_incref(value), .nodes = nodes};
    int r;

    r = vec_push(&b->anchors, &a);
    if (r < 0) {
        free(name);
        json_decref(value);
    }
    return r;
}

/* Makes v (whose reference is taken) a key of the mapping in f. */
static int set_key(struct builder *b, struct frame *f, json_t *v, int line, int col)
{
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);

    if (!json_is_string(v)) {
        json_decref(v);
        return fail_at(b, line, col, -EINVAL, "mapping key must be a string");
    }
    if (json_object_getn(f->node, s, len)) {
        char msg[DIAG_MSG_MAX];

        snprintf(msg, sizeof(msg), "duplicate key \"%s\"", s);
        json_decref(v);
        return fail_at(b, line, col, -EINVAL, msg);
    }
    /* A key may hold a NUL ("\0" in a double-quoted scalar): copy by length. */
    f->key = malloc(len + 1);
    if (f->key) {
        memcpy(f->key, s, len);
        f->key[len] = '\0';
    }
    f->key_len = len;
    f->key_line = line;
    f->key_col = col;
    json_decref(v);
    return f->key ? 0 : -ENOMEM;
}

/* Puts a finished value (its reference taken) where it belongs: the root, a sequence, a mapping's
 * key, or a mapping's value. anchor (taken too) names it for later aliases. */
static int place(struct builder *b, json_t *v, size_t nodes, char *anchor, int line, int col)
{
    struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;
    int r;

    if (nodes > DOC_MAX_NODES || b->total > DOC_MAX_NODES - nodes) {
        free(anchor);
        json_decref(v);
        return fail_at(b, line, col, -E2BIG, "document has too many values (aliases expanded)");
    }
    b->total += nodes;
    /* A key's string is freed once copied, and its address reused: only values get a position. */
    if (line > 0 && !is_singleton(v) && !(f && json_is_object(f->node) && !f->key)) {
        r = pos_put(&b->doc->pos, v, NULL, line, col);
        if (r < 0)
            goto fail;
    }
    if (anchor) {
        r = anchor_add(b, TAKE_PTR(anchor), v, nodes);
        if (r < 0)
            goto fail;
    }
    if (!f) {
        b->root = v;
        return 0;
    }
    f->nodes += nodes;
    if (json_is_array(f->node))
        return json_array_append_new(f->node, v) < 0 ? -ENOMEM : 0;
    if (!f->key)
        return set_key(b, f, v, line, col);
    r = json_object_setn_new_nocheck(f->node, f->key, f->key_len, v) < 0 ? -ENOMEM : 0;
    if (r >= 0 && f->key_line > 0)
        r = pos_put(&b->doc->pos, f->node, f->key, f->key_line, f->key_col);
    free(f->key);
    f->key = NULL;
    return r;

fail:
    free(anchor);
    json_decref(v);
    return r;
}

/* ---- scalars: the YAML 1.2 core schema ---- */

static bool span_digits(const char **p, const char *end, const char *set)
{
    const char *start = *p;

    while (*p < end && **p && strchr(set, **p))
        (*p)++;
    return *p > start;
}

#define DIGITS "0123456789"

/* [-+]? [0-9]+ | 0o [0-7]+ | 0x [0-9a-fA-F]+ ; returns the base, or 0 when s is no integer. */
static int int_base(const char *s, size_t n)
{
    const char *p = s, *end = s + n;

    if (n > 2 && s[0] == '0' && s[1] == 'o') {
        p += 2;
        return span_digits(&p, end, "01234567") && p == end ? 8 : 0;
    }
    if (n > 2 && s[0] == '0' && s[1] == 'x') {
        p += 2;
        return span_digits(&p, end, DIGITS "abcdefABCDEF") && p == end ? 16 : 0;
    }
    if (p < end && (*p == '-' || *p == '+'))
        p++;
    return span_digits(&p, end, DIGITS) && p == end ? 10 : 0;
}

/* [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )? */
static bool is_float(const char *s, size_t n)
{
    const char *p = s, *end = s + n;

    if (p < end && (*p == '-' || *p == '+'))
        p++;
    if (p < end && *p == '.') {
        p++;
        if (!span_digits(&p, end, DIGITS))
            return false;
    } else {
        if (!span_digits(&p, end, DIGITS))
            return false;
        if (p < end && *p == '.') {
            p++;
            span_digits(&p, end, DIGITS);
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '-' || *p == '+'))
            p++;
        if (!span_digits(&p, end, DIGITS))
            return false;
    }
    return p == end;
}

static bool is_one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(*words, s, n) == 0)
            return true;
    return false;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"true", "True", "TRUE", NULL};
static const char *const false_words[] = {"false", "False", "FALSE", NULL};
static const char *const special_float_words[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                                  "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                                  ".NaN",  ".NAN",  NULL};

static int make_int(const char *s, size_t n, int base, json_t **ret)
{
    _cleanup_free_ char *c = strndup(s, n);
    const char *digits;
    char *end;
    long long v;

    if (!c)
        return -ENOMEM;
    digits = base == 10 ? c : c + 2;
    errno = 0;
    if (base == 10) {
        v = strtoll(digits, &end, 10);
    } else {
        unsigned long long u = strtoull(digits, &end, base);

        if (u > INT64_MAX)
            errno = ERANGE;
        v = (long long)u;
    }
    if (errno == ERANGE || *end)
        return -ERANGE;
    *ret = json_integer(v);
    return *ret ? 0 : -ENOMEM;
}

static int make_real(const char *s, size_t n, json_t **ret)
{
    _cleanup_free_ char *c = strndup(s, n);
    double v;

    if (!c)
        return -ENOMEM;
    errno = 0;
    v = strtod(c, NULL);
    /* Underflow to a tiny or zero value is fine; overflow to infinity is not representable. */
    if (isinf(v))
        return -ERANGE;
    *ret = json_real(v);
    return *ret ? 0 : -ENOMEM;
}

/* A plain scalar's value per the core schema. */
static int resolve_plain(struct builder *b, const char *s, size_t n, int line, int col,
                         json_t **ret)
{
    int base, r;

    if (is_one_of(s, n, null_words)) {
        *ret = json_null();
        return 0;
    }
    if (is_one_of(s, n, true_words) || is_one_of(s, n, false_words)) {
        *ret = json_boolean(is_one_of(s, n, true_words));
        return 0;
    }
    base = int_base(s, n);
    if (base) {
        r = make_int(s, n, base, ret);
        if (r == -ERANGE)
            return fail_at(b, line, col, -ERANGE, "integer out of the 64-bit range");
        return r;
    }
    if (is_float(s, n)) {
        r = make_real(s, n, ret);
        if (r == -ERANGE)
            return fail_at(b, line, col, -ERANGE, "number out of range");
        return r;
    }
    if (is_one_of(s, n, special_float_words))
        return fail_at(b, line, col, -EINVAL, "infinity and NaN are not supported");
    *ret = json_stringn_nocheck(s, n);
    return *ret ? 0 : -ENOMEM;
}

#define YAML_TAG "tag:yaml.org,2002:"

/* Checks *v (resolved from a plain reading of the text) against an explicit core tag such as
 * "int" (want, wn bytes), and turns an integer into a real for "float". */
static int apply_core_tag(struct builder *b, const char *want, size_t wn, int line, int col,
                          json_t **v)
{
    bool ok = (wn == 3 && memcmp(want, "int", 3) == 0 && json_is_integer(*v)) ||
              (wn == 5 && memcmp(want, "float", 5) == 0 && json_is_number(*v)) ||
              (wn == 4 && memcmp(want, "bool", 4) == 0 && json_is_boolean(*v)) ||
              (wn == 4 && memcmp(want, "null", 4) == 0 && json_is_null(*v));

    if (!ok) {
        char msg[256];

        snprintf(msg, sizeof(msg), "value does not match its tag \"!!%.*s\"", (int)wn, want);
        return fail_at(b, line, col, -EINVAL, msg);
    }
    if (json_is_integer(*v) && want[0] == 'f') {
        json_t *real = json_real((double)json_integer_value(*v));

        if (!real)
            return -ENOMEM;
        json_decref(*v);
        *v = real;
    }
    return 0;
}

static int resolve_scalar(struct builder *b, struct fy_event *ev, int line, int col, json_t **ret)
{
    struct fy_token *t = fy_event_get_token(ev);
    struct fy_token *tag = fy_event_get_tag_token(ev);
    const char *s = "", *tg = NULL;
    size_t n = 0, tn = 0, pre = strlen(YAML_TAG);
    json_t *v = NULL;
    int r;

    if (t) {
        s = fy_token_get_text(t, &n);
        if (!s)
            return -ENOMEM;
        /* Only a double-quoted "\0" makes a NUL (the input has none); libfyaml 0.7.12 sometimes
         * miscounts a malformed block scalar and hands out bytes past its text. */
        if ((fy_token_scalar_style(t) != FYSS_DOUBLE_QUOTED && memchr(s, '\0', n)) ||
            !utf8_valid(s, n))
            return fail_at(b, line, col, -EINVAL, "malformed scalar");
    }
    if (tag)
        tg = fy_token_get_text(tag, &tn);
    /* "!", local tags and !!str: the text is a string. Quoted or block text without a tag too. */
    if ((tg && !(tn > pre && memcmp(tg, YAML_TAG, pre) == 0)) ||
        (tg && tn == pre + 3 && memcmp(tg + pre, "str", 3) == 0) ||
        (!tg && t && fy_token_scalar_style(t) != FYSS_PLAIN)) {
        /* The input was checked to be UTF-8 and libfyaml's escapes produce UTF-8. */
        *ret = json_stringn_nocheck(s, n);
        return *ret ? 0 : -ENOMEM;
    }
    r = resolve_plain(b, s, n, line, col, &v);
    if (r < 0)
        return r;
    if (tg) {
        r = apply_core_tag(b, tg + pre, tn - pre, line, col, &v);
        if (r < 0) {
            json_decref(v);
            return r;
        }
    }
    *ret = v;
    return 0;
}

/* ---- events ---- */

/* An event's 1-based position; 0 for events without one (an implicit empty value). */
static void mark_of(struct fy_event *ev, int *ret_line, int *ret_col)
{
    const struct fy_mark *m = fy_event_start_mark(ev);

    *ret_line = m && m->line >= 0 ? m->line + 1 : 0;
    *ret_col = m && m->column >= 0 ? m->column + 1 : 0;
}

static int take_anchor(struct fy_event *ev, char **ret)
{
    struct fy_token *t = fy_event_get_anchor_token(ev);
    const char *s;
    size_t n;

    *ret = NULL;
    if (!t)
        return 0;
    s = fy_token_get_text(t, &n);
    if (!s)
        return -ENOMEM;
    *ret = strndup(s, n);
    return *ret ? 0 : -ENOMEM;
}

static int on_start(struct builder *b, struct fy_event *ev, int line, int col)
{
    struct frame *parent = b->depth ? &b->stack[b->depth - 1] : NULL;
    struct frame *f;
    int r;

    if (parent && json_is_object(parent->node) && !parent->key)
        return fail_at(b, line, col, -EINVAL, "mapping key must be a string");
    if (b->depth == DOC_MAX_DEPTH) {
        char msg[64];

        snprintf(msg, sizeof(msg), "nesting deeper than %d levels", DOC_MAX_DEPTH);
        return fail_at(b, line, col, -ELOOP, msg);
    }
    f = &b->stack[b->depth];
    *f = (struct frame){.line = line, .col = col};
    f->node = ev->type == FYET_MAPPING_START ? json_object() : json_array();
    if (!f->node)
        return -ENOMEM;
    b->depth++;
    r = take_anchor(ev, &f->anchor);
    return r;
}

static int on_end(struct builder *b)
{
    struct frame f = b->stack[--b->depth];

    free(f.key);
    return place(b, f.node, f.nodes + 1, f.anchor, f.line, f.col);
}

static int on_alias(struct builder *b, struct fy_event *ev, int line, int col)
{
    struct fy_token *t = fy_event_get_token(ev);
    const struct anchor *a;
    const char *s;
    size_t n;

    /* libfyaml marks the name; point at the '*' before it. */
    if (col > 1)
        col--;
    s = t ? fy_token_get_text(t, &n) : NULL;
    if (!s)
        return -ENOMEM;
    a = anchor_find(b, s, n);
    if (!a) {
        char msg[256];

        snprintf(msg, sizeof(msg), "unknown anchor \"%.*s\"", (int)(n > 200 ? 200 : n), s);
        return fail_at(b, line, col, -EINVAL, msg);
    }
    return place(b, json_incref(a->value), a->nodes, NULL, line, col);
}

static int on_document_end(struct builder *b)
{
    json_t *root = b->root ? b->root : json_null();
    int r;

    b->root = NULL;
    anchors_clear(&b->anchors);
    b->total = 0;
    r = vec_push(&b->doc->roots, &root);
    if (r < 0)
        json_decref(root);
    return r;
}

static int on_event(struct builder *b, struct fy_event *ev)
{
    _cleanup_free_ char *anchor = NULL;
    json_t *v = NULL;
    int line, col, r;

    mark_of(ev, &line, &col);
    switch (ev->type) {
    case FYET_DOCUMENT_END:
        return on_document_end(b);
    case FYET_MAPPING_START:
    case FYET_SEQUENCE_START:
        return on_start(b, ev, line, col);
    case FYET_MAPPING_END:
    case FYET_SEQUENCE_END:
        return on_end(b);
    case FYET_ALIAS:
        return on_alias(b, ev, line, col);
    case FYET_SCALAR:
        r = take_anchor(ev, &anchor);
        if (r < 0)
            return r;
        r = resolve_scalar(b, ev, line, col, &v);
        if (r < 0)
            return r;
        return place(b, v, 1, TAKE_PTR(anchor), line, col);
    default:
        return 0;
    }
}

/* ---- loading ---- */

static void fy_diag_quiet(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
}

DEFINE_POINTER_CLEANUP(struct fy_diag, fy_diag_destroy)
DEFINE_POINTER_CLEANUP(struct fy_parser, fy_parser_destroy)

/* libfyaml 0.7.12 corrupts its indentation stack on one error path (a tab before a block indicator
 * in a mapping nested in an explicit key, e.g. "? x:\t>"), and fy_parser_destroy() then crashes.
 * After that error the parser is not destroyed but parked here: a few KiB per such malformed
 * input, instead of a crashed daemon. The previous parked parser is leaked for good. */
#define FY_TAB_ERROR "cannot use tab for indentation"
static struct fy_parser *_Atomic parked_parser;

static bool error_corrupts_parser(const struct fy_diag_error *e)
{
    return e && e->msg && strncmp(e->msg, FY_TAB_ERROR, strlen(FY_TAB_ERROR)) == 0;
}

/* Turns libfyaml's first collected error into the caller's diagnostic. */
static int syntax_error(struct builder *b, struct fy_diag *diag, struct fy_parser **parser)
{
    void *iter = NULL;
    struct fy_diag_error *e = fy_diag_errors_iterate(diag, &iter);

    if (error_corrupts_parser(e))
        atomic_exchange(&parked_parser, TAKE_PTR(*parser));
    if (!e)
        return diag_fail(b->d, -EINVAL, "%s: invalid YAML", b->doc->name);
    /* libfyaml's collected positions are already 1-based. */
    return fail_at(b, e->line, e->column, -EINVAL, e->msg ? e->msg : "invalid YAML");
}

/* YAML streams may be UTF-16 or -32 too, but configs are UTF-8; and libfyaml silently drops some
 * malformed bytes (a plain scalar of them becomes null), so the whole input is checked first.
 * YAML allows no NUL character either. */
static int check_utf8(struct doc *doc, const char *text, size_t len, struct diag *d)
{
    const unsigned char *p = (const unsigned char *)text;
    int line = 1, col = 1;

    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq_len(p + i, len - i);

        if (k == 0)
            return diag_fail_at(d, -EINVAL, doc->name, line, col, "invalid UTF-8");
        if (p[i] == '\0')
            return diag_fail_at(d, -EINVAL, doc->name, line, col, "NUL byte in input");
        if (p[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        i += k;
    }
    return 0;
}

static int doc_parse(struct doc *doc, const char *text, size_t len, struct diag *d)
{
    _cleanup_(fy_diag_destroyp) struct fy_diag *diag = NULL;
    _cleanup_(fy_parser_destroyp) struct fy_parser *parser = NULL;
    struct builder b = {.doc = doc, .d = d};
    struct fy_diag_cfg dcfg;
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET};
    int r = 0;

    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = fy_diag_quiet;
    dcfg.colorize = false;
    diag = fy_diag_create(&dcfg);
    if (!diag)
        return -ENOMEM;
    fy_diag_set_collect_errors(diag, true);
    pcfg.diag = diag;
    parser = fy_parser_create(&pcfg);
    if (!parser || fy_parser_set_string(parser, text, len) < 0)
        return -ENOMEM;
    vec_init(&b.anchors, sizeof(struct anchor), 0);
    for (;;) {
        struct fy_event *ev = fy_parser_parse(parser);

        if (!ev) {
            if (fy_parser_get_stream_error(parser))
                r = syntax_error(&b, diag, &parser);
            break;
        }
        r = on_event(&b, ev);
        fy_parser_event_free(parser, ev);
        if (r < 0)
            break;
    }
    builder_release(&b);
    return r;
}

struct doc *doc_free(struct doc *doc)
{
    if (!doc)
        return NULL;
    for (size_t i = 0; i < doc->roots.len; i++)
        json_decref(*VEC_AT(&doc->roots, json_t *, i));
    vec_release(&doc->roots);
    pos_release(&doc->pos);
    free(doc->name);
    free(doc);
    return NULL;
}

int doc_load_string(const char *name, const char *text, size_t len, struct diag *d,
                    struct doc **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r;

    if (!text && len > 0)
        return diag_fail(d, -EINVAL, "%s: no text", name);
    if (len > DOC_MAX_BYTES)
        return diag_fail(d, -EFBIG, "%s: larger than %zu bytes", name, DOC_MAX_BYTES);
    if (!text)
        text = "";
    doc = calloc(1, sizeof(*doc));
    if (!doc)
        return -ENOMEM;
    vec_init(&doc->roots, sizeof(json_t *), 0);
    doc->name = strdup(name ? name : "<input>");
    if (!doc->name)
        return -ENOMEM;
    r = check_utf8(doc, text, len, d);
    if (r < 0)
        return r;
    r = doc_parse(doc, text, len, d);
    if (r < 0) {
        if (r == -ENOMEM)
            diag_fail(d, r, "%s: out of memory", doc->name);
        return r;
    }
    *ret = TAKE_PTR(doc);
    return 0;
}

int doc_load_file(const char *path, struct diag *d, struct doc **ret)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r;

    r = file_read_all(path, DOC_MAX_BYTES, &text, &len);
    if (r == -EFBIG)
        return diag_fail(d, r, "%s: larger than %zu bytes", path, DOC_MAX_BYTES);
    if (r < 0)
        return diag_fail(d, r, "%s: %s", path, strerror(-r));
    return doc_load_string(path, text, len, d, ret);
}

size_t doc_count(const struct doc *doc)
{
    return doc->roots.len;
}

json_t *doc_root(const struct doc *doc, size_t i)
{
    return i < doc->roots.len ? *VEC_AT(&doc->roots, json_t *, i) : NULL;
}

const char *doc_name(const struct doc *doc)
{
    return doc->name;
}

/* ---- positions and messages ---- */

bool doc_position(const struct doc *doc, const json_t *value, int *ret_line, int *ret_col)
{
    const struct pos_entry *e;

    if (!value || is_singleton(value))
        return false;
    e = pos_find(&doc->pos, value, NULL);
    if (!e)
        return false;
    *ret_line = e->line;
    *ret_col = e->col;
    return true;
}

static int vfail(const struct doc *doc, const struct pos_entry *at, struct diag *d, int err,
                 const char *fmt, va_list ap) _printf_(5, 0);
static int vfail(const struct doc *doc, const struct pos_entry *at, struct diag *d, int err,
                 const char *fmt, va_list ap)
{
    char msg[DIAG_MSG_MAX];

    if (!d)
        return err;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (at)
        return diag_fail_at(d, err, doc->name, at->line, at->col, "%s", msg);
    return diag_fail(d, err, "%s: %s", doc->name, msg);
}

int doc_fail(const struct doc *doc, const json_t *value, struct diag *d, int err, const char *fmt,
             ...)
{
    struct pos_entry at;
    va_list ap;
    bool known;

    known = doc_position(doc, value, &at.line, &at.col);
    va_start(ap, fmt);
    err = vfail(doc, known ? &at : NULL, d, err, fmt, ap);
    va_end(ap);
    return err;
}

/* Fails at the best position for obj's member key: the value's, else the key's, else obj's. */
static int fail_member(const struct doc *doc, const json_t *obj, const char *key,
                       const json_t *value, struct diag *d, const char *fmt, ...) _printf_(6, 7);
static int fail_member(const struct doc *doc, const json_t *obj, const char *key,
                       const json_t *value, struct diag *d, const char *fmt, ...)
{
    const struct pos_entry *e = NULL;
    va_list ap;
    int r;

    if (value && !is_singleton(value))
        e = pos_find(&doc->pos, value, NULL);
    if (!e)
        e = pos_find(&doc->pos, obj, key);
    if (!e)
        e = pos_find(&doc->pos, obj, NULL);
    va_start(ap, fmt);
    r = vfail(doc, e, d, -EINVAL, fmt, ap);
    va_end(ap);
    return r;
}

static const char *type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "mapping";
    case JSON_ARRAY:
        return "sequence";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

/* Looks key up in obj: 1 and the value, 0 when absent and optional, or the error. */
static int lookup(const struct doc *doc, const json_t *obj, const char *key, bool required,
                  struct diag *d, json_t **ret)
{
    json_t *v = NULL;

    if (!json_is_object(obj))
        return doc_fail(doc, obj, d, -EINVAL, "expected a mapping, got %s", type_name(obj));
    v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return doc_fail(doc, obj, d, -EINVAL, "missing required key \"%s\"", key);
        return 0;
    }
    *ret = v;
    return 1;
}

int doc_get_string(const struct doc *doc, const json_t *obj, const char *key, bool required,
                   const char *def, struct diag *d, const char **ret)
{
    json_t *v = NULL;
    int r;

    r = lookup(doc, obj, key, required, d, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = def;
        return 0;
    }
    if (!json_is_string(v))
        return fail_member(doc, obj, key, v, d, "\"%s\": expected a string, got %s", key,
                           type_name(v));
    *ret = json_string_value(v);
    return 0;
}

int doc_get_int(const struct doc *doc, const json_t *obj, const char *key, bool required,
                int64_t def, int64_t min, int64_t max, struct diag *d, int64_t *ret)
{
    json_int_t i;
    json_t *v = NULL;
    int r;

    r = lookup(doc, obj, key, required, d, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = def;
        return 0;
    }
    if (!json_is_integer(v))
        return fail_member(doc, obj, key, v, d, "\"%s\": expected an integer, got %s", key,
                           type_name(v));
    i = json_integer_value(v);
    if (i < min || i > max)
        return fail_member(doc, obj, key, v, d,
                           "\"%s\": %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", key,
                           (int64_t)i, min, max);
    *ret = (int64_t)i;
    return 0;
}

int doc_get_bool(const struct doc *doc, const json_t *obj, const char *key, bool required, bool def,
                 struct diag *d, bool *ret)
{
    json_t *v = NULL;
    int r;

    r = lookup(doc, obj, key, required, d, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return fail_member(doc, obj, key, v, d, "\"%s\": expected a boolean, got %s", key,
                           type_name(v));
    *ret = json_is_true(v);
    return 0;
}

int doc_get_array(const struct doc *doc, const json_t *obj, const char *key, bool required,
                  struct diag *d, json_t **ret)
{
    json_t *v = NULL;
    int r;

    r = lookup(doc, obj, key, required, d, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = NULL;
        return 0;
    }
    if (!json_is_array(v))
        return fail_member(doc, obj, key, v, d, "\"%s\": expected a sequence, got %s", key,
                           type_name(v));
    *ret = v;
    return 0;
}

int doc_get_object(const struct doc *doc, const json_t *obj, const char *key, bool required,
                   struct diag *d, json_t **ret)
{
    json_t *v = NULL;
    int r;

    r = lookup(doc, obj, key, required, d, &v);
    if (r < 0)
        return r;
    if (r == 0) {
        *ret = NULL;
        return 0;
    }
    if (!json_is_object(v))
        return fail_member(doc, obj, key, v, d, "\"%s\": expected a mapping, got %s", key,
                           type_name(v));
    *ret = v;
    return 0;
}

int doc_check_keys(const struct doc *doc, const json_t *obj, const char *const *allowed,
                   struct diag *d)
{
    const char *key;
    json_t *v = NULL;

    if (!json_is_object(obj))
        return doc_fail(doc, obj, d, -EINVAL, "expected a mapping, got %s", type_name(obj));
    json_object_foreach((json_t *)obj, key, v)
    {
        const struct pos_entry *e;
        size_t i;

        for (i = 0; allowed[i]; i++)
            if (strcmp(allowed[i], key) == 0)
                break;
        if (allowed[i])
            continue;
        e = pos_find(&doc->pos, obj, key);
        if (e)
            return diag_fail_at(d, -EINVAL, doc->name, e->line, e->col, "unknown key \"%s\"", key);
        return fail_member(doc, obj, key, v, d, "unknown key \"%s\"", key);
    }
    return 0;
}
