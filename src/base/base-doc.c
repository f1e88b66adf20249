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
 *
 * This file drives the parser and builds the values; the position table, the core-schema scalar
 * rules and the typed readers are in base-doc-pos.c, base-doc-scalar.c and base-doc-get.c.
 */
#include <errno.h>
#include <libfyaml.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base-doc-internal.h"
#include "base-file.h"
#include "base-internal.h"

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
    size_t total;     /* expanded value count of the current document */
    size_t max_nodes; /* its cap */
    bool positions;   /* record where values came from (doc_position) */
    const struct doc_parse_opts *o;
    size_t ended; /* documents finished so far: the index of the current one */
};

int doc_fail_mark(const struct doc *doc, struct diag *d, int line, int col, int err,
                  const char *what)
{
    if (line > 0)
        return diag_fail_at(d, err, doc->name, line, col, "%s", what);
    return diag_fail(d, err, "%s: %s", doc->name, what);
}

static int fail_at(struct builder *b, int line, int col, int err, const char *what)
{
    return doc_fail_mark(b->doc, b->d, line, col, err, what);
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
 * key, or a mapping's value. anchor (taken too) names it for later aliases. nodes is the value's
 * size with aliases expanded; added how many of those the document's count has not seen yet (a
 * finished mapping or sequence adds only itself: its members were counted as they came). */
static int place(struct builder *b, json_t *v, size_t nodes, size_t added, char *anchor, int line,
                 int col)
{
    struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;
    int r;

    if (added > b->max_nodes || b->total > b->max_nodes - added) {
        char msg[96];

        free(anchor);
        json_decref(v);
        snprintf(msg, sizeof(msg), "document has more than %zu values (aliases expanded)",
                 b->max_nodes);
        return fail_at(b, line, col, -E2BIG, msg);
    }
    b->total += added;
    /* A key's string is freed once copied, and its address reused: only values get a position. */
    if (b->positions && line > 0 && !doc_is_singleton(v) &&
        !(f && json_is_object(f->node) && !f->key)) {
        r = doc_pos_put(&b->doc->pos, v, NULL, line, col);
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
    if (r >= 0 && b->positions && f->key_line > 0)
        r = doc_pos_put(&b->doc->pos, f->node, f->key, f->key_line, f->key_col);
    free(f->key);
    f->key = NULL;
    return r;

fail:
    free(anchor);
    json_decref(v);
    return r;
}

/* ---- events ---- */

/* Where line:col of the parsed text is in its source: the text may be a piece of a larger input
 * that starts at line0:col0 (1:1 for a whole file). */
static void mark_shift(const struct doc_parse_opts *o, int *line, int *col)
{
    if (*line <= 0)
        return;
    if (*line == 1 && *col > 0)
        *col += o->col0 - 1;
    *line += o->line0 - 1;
}

/* An event's 1-based position; 0 for events without one (an implicit empty value). */
static void mark_of(const struct builder *b, struct fy_event *ev, int *ret_line, int *ret_col)
{
    const struct fy_mark *m = doc_fy.event_start_mark(ev);

    *ret_line = m && m->line >= 0 ? m->line + 1 : 0;
    *ret_col = m && m->column >= 0 ? m->column + 1 : 0;
    mark_shift(b->o, ret_line, ret_col);
}

static int take_anchor(struct fy_event *ev, char **ret)
{
    struct fy_token *t = doc_fy.event_get_anchor_token(ev);
    const char *s;
    size_t n;

    *ret = NULL;
    if (!t)
        return 0;
    s = doc_fy.token_get_text(t, &n);
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
    return place(b, f.node, f.nodes + 1, 1, f.anchor, f.line, f.col);
}

static int on_alias(struct builder *b, struct fy_event *ev, int line, int col)
{
    struct fy_token *t = doc_fy.event_get_token(ev);
    const struct anchor *a;
    const char *s;
    size_t n;

    /* libfyaml marks the name; point at the '*' before it. */
    if (col > 1)
        col--;
    s = t ? doc_fy.token_get_text(t, &n) : NULL;
    if (!s)
        return -ENOMEM;
    a = anchor_find(b, s, n);
    if (!a) {
        char msg[256];

        snprintf(msg, sizeof(msg), "unknown anchor \"%.*s\"", (int)(n > 200 ? 200 : n), s);
        return fail_at(b, line, col, -EINVAL, msg);
    }
    return place(b, json_incref(a->value), a->nodes, a->nodes, NULL, line, col);
}

/* A finished document: kept in doc->roots, handed to the caller's each(), or dropped (not the one
 * document asked for). Returns > 0 to end the parse early. */
static int on_document_end(struct builder *b)
{
    const struct doc_parse_opts *o = b->o;
    json_t *root = b->root ? b->root : json_null();
    size_t index = b->ended++;
    int r;

    b->root = NULL;
    anchors_clear(&b->anchors);
    b->total = 0;
    if (o->only_doc != DOC_EVERY && index != o->only_doc) {
        json_decref(root);
        b->positions = o->positions && b->ended == o->only_doc;
        return 0;
    }
    if (o->each) {
        r = o->each(o->each_arg, root, index, b->d);
        json_decref(root);
        return r;
    }
    r = vec_push(&b->doc->roots, &root);
    if (r < 0) {
        json_decref(root);
        return r;
    }
    return o->only_doc != DOC_EVERY ? 1 : 0;
}

static int on_event(struct builder *b, struct fy_event *ev)
{
    _cleanup_free_ char *anchor = NULL;
    json_t *v = NULL;
    int line, col, r;

    mark_of(b, ev, &line, &col);
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
        r = doc_scalar_resolve(b->doc, b->d, ev, line, col, &v);
        if (r < 0)
            return r;
        return place(b, v, 1, 1, TAKE_PTR(anchor), line, col);
    default:
        return 0;
    }
}

/* ---- loading ---- */

static void diag_quiet(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
}

static void fy_diag_destroyp(struct fy_diag **p)
{
    if (*p)
        doc_fy.diag_destroy(*p);
}

static void fy_parser_destroyp(struct fy_parser **p)
{
    if (*p)
        doc_fy.parser_destroy(*p);
}

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
    struct fy_diag_error *e = doc_fy.diag_errors_iterate(diag, &iter);

    if (error_corrupts_parser(e)) {
        doc_fy_pin();
        atomic_exchange(&parked_parser, TAKE_PTR(*parser));
    }
    int line, col;

    if (!e)
        return diag_fail(b->d, -EINVAL, "%s: invalid YAML", b->doc->name);
    /* libfyaml's collected positions are already 1-based. */
    line = e->line;
    col = e->column;
    mark_shift(b->o, &line, &col);
    return fail_at(b, line, col, -EINVAL, e->msg ? e->msg : "invalid YAML");
}

/* YAML streams may be UTF-16 or -32 too, but configs are UTF-8; and libfyaml silently drops some
 * malformed bytes (a plain scalar of them becomes null), so the whole input is checked first.
 * YAML allows no NUL character either. */
static int check_utf8(struct doc *doc, const char *text, size_t len, const struct doc_parse_opts *o,
                      struct diag *d)
{
    const unsigned char *p = (const unsigned char *)text;
    int line = o->line0, col = o->col0;

    for (size_t i = 0; i < len;) {
        size_t k;

        /* ASCII other than NUL and newline is most of any input: take it a byte at a time. */
        if (p[i] >= 0x20 && p[i] < 0x80) {
            col++;
            i++;
            continue;
        }
        k = utf8_seq_len(p + i, len - i);
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

static int doc_parse_events(struct doc *doc, const char *text, size_t len,
                            const struct doc_parse_opts *o, struct diag *d)
{
    _cleanup_(fy_diag_destroyp) struct fy_diag *diag = NULL;
    _cleanup_(fy_parser_destroyp) struct fy_parser *parser = NULL;
    struct builder b = {.doc = doc,
                        .d = d,
                        .max_nodes = o->max_nodes,
                        .positions = o->positions && (o->only_doc == DOC_EVERY || o->only_doc == 0),
                        .o = o};
    struct fy_diag_cfg dcfg;
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET};
    int r = 0;

    doc_fy.diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_quiet;
    dcfg.colorize = false;
    diag = doc_fy.diag_create(&dcfg);
    if (!diag)
        return -ENOMEM;
    doc_fy.diag_set_collect_errors(diag, true);
    pcfg.diag = diag;
    parser = doc_fy.parser_create(&pcfg);
    if (!parser || doc_fy.parser_set_string(parser, text, len) < 0)
        return -ENOMEM;
    vec_init(&b.anchors, sizeof(struct anchor), 0);
    for (;;) {
        struct fy_event *ev = doc_fy.parser_parse(parser);

        if (!ev) {
            if (doc_fy.parser_get_stream_error(parser))
                r = syntax_error(&b, diag, &parser);
            break;
        }
        r = on_event(&b, ev);
        doc_fy.parser_event_free(parser, ev);
        if (r != 0)
            break;
    }
    builder_release(&b);
    return r;
}

/* The library is held around the parse only; the parser and its diagnostics are gone before it is
 * released. */
int doc_parse_text(struct doc *doc, const char *text, size_t len, const struct doc_parse_opts *o,
                   struct diag *d)
{
    int r;

    if (!text)
        text = "";
    r = check_utf8(doc, text, len, o, d);
    if (r < 0)
        return r;
    r = doc_fy_acquire(d);
    if (r < 0)
        return r;
    r = doc_parse_events(doc, text, len, o, d);
    doc_fy_release();
    if (r == -ENOMEM)
        diag_fail(d, r, "%s: out of memory", doc->name);
    return r;
}

int doc_new(const char *name, struct doc **ret)
{
    _cleanup_(doc_freep) struct doc *doc = calloc(1, sizeof(*doc));

    if (!doc)
        return -ENOMEM;
    vec_init(&doc->roots, sizeof(json_t *), 0);
    doc->name = strdup(name ? name : "<input>");
    if (!doc->name)
        return -ENOMEM;
    *ret = TAKE_PTR(doc);
    return 0;
}

size_t doc_max_nodes(const struct doc_limits *limits, size_t len)
{
    if (limits->max_nodes)
        return limits->max_nodes;
    return len > DOC_MAX_NODES ? len : DOC_MAX_NODES;
}

struct doc *doc_free(struct doc *doc)
{
    if (!doc)
        return NULL;
    for (size_t i = 0; i < doc->roots.len; i++)
        json_decref(*VEC_AT(&doc->roots, json_t *, i));
    vec_release(&doc->roots);
    doc_pos_release(&doc->pos);
    free(doc->name);
    free(doc);
    return NULL;
}

const struct doc_limits doc_limits_config = {.max_bytes = DOC_MAX_BYTES,
                                             .max_nodes = DOC_MAX_NODES};
const struct doc_limits doc_limits_manifest = {.max_bytes = DOC_MANIFEST_MAX_BYTES,
                                               .no_positions = true};

int doc_load_string_limits(const char *name, const char *text, size_t len,
                           const struct doc_limits *limits, struct diag *d, struct doc **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct doc_parse_opts o = {.line0 = 1, .col0 = 1, .only_doc = DOC_EVERY};
    int r;

    if (!limits)
        limits = &doc_limits_config;
    if (!text && len > 0)
        return diag_fail(d, -EINVAL, "%s: no text", name);
    if (len > limits->max_bytes)
        return diag_fail(d, -EFBIG, "%s: larger than %zu bytes", name, limits->max_bytes);
    o.max_nodes = doc_max_nodes(limits, len);
    o.positions = !limits->no_positions;
    r = doc_new(name, &doc);
    if (r < 0)
        return r;
    r = doc_parse_text(doc, text, len, &o, d);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(doc);
    return 0;
}

int doc_load_string(const char *name, const char *text, size_t len, struct diag *d,
                    struct doc **ret)
{
    return doc_load_string_limits(name, text, len, &doc_limits_config, d, ret);
}

int doc_read_file(const char *path, const struct doc_limits **limits, char **ret_text,
                  size_t *ret_len, struct diag *d)
{
    int r;

    if (!*limits)
        *limits = &doc_limits_config;
    r = file_read_all(path, (*limits)->max_bytes, ret_text, ret_len);
    if (r == -EFBIG)
        return diag_fail(d, r, "%s: larger than %zu bytes", path, (*limits)->max_bytes);
    if (r < 0)
        return diag_fail(d, r, "%s: %s", path, strerror(-r));
    return 0;
}

int doc_load_file_limits(const char *path, const struct doc_limits *limits, struct diag *d,
                         struct doc **ret)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = doc_read_file(path, &limits, &text, &len, d);

    if (r < 0)
        return r;
    return doc_load_string_limits(path, text, len, limits, d, ret);
}

int doc_load_file(const char *path, struct diag *d, struct doc **ret)
{
    return doc_load_file_limits(path, &doc_limits_config, d, ret);
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
