/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming loads of manifests (base-doc.h, doc_load_*_each): objects handed one by one and never
 * kept, JSON parsed by jansson with no YAML pass, positions found again only when a message needs
 * one.
 *
 * JSON. A text that starts with '{' or '[' goes to jansson. A top-level `"kind": "List"` object is
 * not parsed as one tree: this file walks its top level itself (keys and the other members through
 * jansson, one json_loadb each) and parses the `items` one at a time, handing each to the caller
 * and dropping it, so a 40 MB cluster never exists as values all at once. When "items" comes before
 * "kind" (kubectl sorts the keys), a quick scan that only matches brackets and quotes finds "kind"
 * first. Anything else is one json_loadb. When the caller shares what it keeps (doc_prep.table),
 * the items are read by base-jread.c instead, straight into its table: jansson's values, without
 * building again a value seen before; what base-jread refuses goes the way of what jansson refuses.
 *
 * Equivalence with the YAML reader. JSON is YAML, and for what jansson accepts with
 * JSON_REJECT_DUPLICATES the YAML reader builds the same values (strings, int64 integers, finite
 * reals, in the same key order), except past its caps, which are checked here on the parsed values
 * (nesting depth, value count). Whenever jansson refuses or a cap is passed, the whole text is read
 * again by the YAML reader, which gives the old error with its file:line:col, or — for YAML-only
 * syntax in a .json file — the values, of which the items already handed are skipped.
 *
 * Two workers. When the caller prepares each object (struct doc_prep), a large List's items are
 * split in two halves parsed and prepared at once on two threads (see struct half).
 *
 * Positions. doc_where_reload reads one value again with the YAML reader keeping positions: a JSON
 * item's own bytes (the lines and columns shifted to where they start in the input), or for YAML
 * the stream up to the document (the later ones are not read).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc-internal.h"
#include "base-file.h"

struct doc_src {
    const char *name;
    const char *text;
    size_t len;
    size_t max_nodes;
};

/* What handing goes through: the caller's fn, and how many items of the first document (a JSON
 * List) the JSON path handed before the YAML reader took over. */
struct each {
    struct doc_src *src;
    doc_each_fn fn;
    void *arg;
    const struct doc_prep *prep; /* or NULL */
    size_t skip;
    /* fn's error, held back while the rest of the input is read: a syntax error anywhere is
     * reported first, as it was when the whole input was read before any object was looked at */
    int refused;
    struct diag refused_d;
};

/* Hands v to fn — what prep makes of it, unless it is prepared already (by the second worker) — or
 * drops it once fn has failed. */
static int hand_prepared(struct each *e, json_t *v, bool prepared, const struct doc_where *where,
                         struct diag *d)
{
    _cleanup_json_ json_t *made = NULL;
    int r;

    if (e->refused)
        return 0;
    if (e->prep && !prepared) {
        made = e->prep->fn(e->prep->arg, 0, v);
        if (!made)
            return diag_fail(d, -ENOMEM, "%s: out of memory", e->src->name);
        v = made;
    }
    r = e->fn(e->arg, v, where, d);
    if (r < 0) {
        e->refused = r;
        if (d)
            e->refused_d = *d;
        return 0;
    }
    return r;
}

static int hand(struct each *e, json_t *v, const struct doc_where *where, struct diag *d)
{
    return hand_prepared(e, v, false, where, d);
}

static bool is_list(const json_t *v)
{
    const char *kind = json_string_value(json_object_get(v, "kind"));

    return kind && strcmp(kind, "List") == 0 && json_is_array(json_object_get(v, "items"));
}

/* Hands document `index` (root borrowed): item by item from `skip` on when it is a List. */
static int hand_doc(struct each *e, json_t *root, size_t index, size_t skip, struct diag *d)
{
    json_t *items = json_object_get(root, "items"), *item;
    size_t i;
    int r;

    if (!is_list(root)) {
        if (skip > 0)
            return 0;
        return hand(e, root, &(struct doc_where){index, DOC_WHOLE, e->src, 0, 0}, d);
    }
    for (i = skip; i < json_array_size(items); i++) {
        item = json_incref(json_array_get(items, i));
        /* Drop the document's reference: what the caller does not keep is freed as it goes. */
        if (json_array_set(items, i, json_null()) < 0) {
            json_decref(item);
            return -ENOMEM;
        }
        r = hand(e, item, &(struct doc_where){index, i, e->src, 0, 0}, d);
        json_decref(item);
        if (r != 0)
            return r;
    }
    return 0;
}

/* The YAML reader's each(): document `index`, finished. */
static int yaml_doc(void *arg, json_t *root, size_t index, struct diag *d)
{
    struct each *e = arg;

    return hand_doc(e, root, index, index == 0 ? e->skip : 0, d);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

/* The JSON path cannot take this text (or this part of it): the YAML reader reads it. */
#define NOT_MINE (-EAGAIN)

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* Past the string whose opening quote is at p[-1]; NULL when it does not end. */
static const char *skip_string(const char *p, const char *end)
{
    while (p < end) {
        const char *q = memchr(p, '"', (size_t)(end - p)), *b;

        if (!q)
            return NULL;
        /* escaped when an odd number of backslashes stands before it */
        for (b = q; b > p && b[-1] == '\\'; b--)
            ;
        if ((q - b) % 2 == 0)
            return q + 1;
        p = q + 1;
    }
    return NULL;
}

/* Past the value at p, matching brackets and quotes only (nothing is checked: jansson parses it
 * later); NULL when the text ends first. */
static const char *skip_value(const char *p, const char *end)
{
    size_t depth = 0;

    do {
        p = skip_ws(p, end);
        if (p == end)
            return NULL;
        switch (*p) {
        case '"':
            p = skip_string(p + 1, end);
            if (!p)
                return NULL;
            break;
        case '{':
        case '[':
            depth++;
            p++;
            break;
        case '}':
        case ']':
            if (depth == 0)
                return NULL;
            depth--;
            p++;
            break;
        case ',':
        case ':':
            if (depth == 0)
                return NULL;
            p++;
            break;
        default: {
            const char *start = p;

            while (p < end && *p && !strchr(",:]} \t\r\n\"{[", *p))
                p++;
            if (p == start)
                return NULL; /* a NUL byte: not JSON */
        }
        }
    } while (depth > 0);
    return p;
}

/* One JSON value at p (a new reference), *next past it; NULL when jansson refuses it. */
static json_t *read_value(const char *p, const char *end, const char **next)
{
    json_error_t e;
    json_t *v = json_loadb(p, (size_t)(end - p),
                           JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &e);

    *next = v ? p + e.position : p;
    return v;
}

/* Containers nested in v, v included; adds v's values to *nodes. Stops descending past limit. */
static size_t depth_of(const json_t *v, size_t limit, size_t *nodes)
{
    size_t deepest = 0, i;
    const char *k;
    json_t *x;

    /* The YAML reader counts a mapping's keys as values too. */
    *nodes += 1 + json_object_size(v);
    if (!json_is_object(v) && !json_is_array(v))
        return 0;
    if (limit == 0)
        return 1;
    if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            size_t dx = depth_of(x, limit - 1, nodes);
            deepest = dx > deepest ? dx : deepest;
        }
    } else {
        json_object_foreach((json_t *)v, k, x)
        {
            size_t dx = depth_of(x, limit - 1, nodes);
            deepest = dx > deepest ? dx : deepest;
        }
    }
    return deepest + 1;
}

/* Whether v, at `level` containers deep in its document, keeps the YAML reader's caps: nesting
 * within DOC_MAX_DEPTH containers, at most max_nodes values in the document (*nodes so far). */
static bool within_caps(const struct doc_src *src, const json_t *v, size_t level, size_t *nodes)
{
    return level + depth_of(v, DOC_MAX_DEPTH - level, nodes) <= DOC_MAX_DEPTH &&
           *nodes <= src->max_nodes;
}

/* The top-level object at p ('{'): whether its "kind" is the string "List" and its "items" a
 * sequence, looking past "items" (without parsing it) when "kind" comes later. */
static bool top_is_list(const char *p, const char *end)
{
    bool list = false, items = false, kind_seen = false;
    const char *next;

    p = skip_ws(p + 1, end);
    while (p < end && *p == '"') {
        _cleanup_json_ json_t *key = read_value(p, end, &next);
        const char *k = json_string_value(key);

        if (!k)
            return false;
        p = skip_ws(next, end);
        if (p == end || *p != ':')
            return false;
        p = skip_ws(p + 1, end);
        if (strcmp(k, "kind") == 0) {
            _cleanup_json_ json_t *v = read_value(p, end, &next);

            if (!v)
                return false;
            kind_seen = true;
            list = json_is_string(v) && strcmp(json_string_value(v), "List") == 0;
        } else {
            if (strcmp(k, "items") == 0) {
                items = p < end && *p == '[';
                if (kind_seen)
                    break; /* the common order: no need to look through the items */
            }
            next = skip_value(p, end);
            if (!next)
                return false;
        }
        if (kind_seen && items)
            break;
        p = skip_ws(next, end);
        if (p < end && *p == ',')
            p = skip_ws(p + 1, end);
    }
    return list && items;
}

/* A reader into the worker's table when the caller wants items shared as they are read; false
 * when it does not. */
static bool jread_for(struct jread *jr, const struct doc_src *src, const struct doc_prep *prep,
                      unsigned worker)
{
    if (!prep || !prep->table)
        return false;
    jread_init(jr, prep->table(prep->arg, worker));
    jr->keep = prep->keep;
    jr->keep_arg = prep->arg;
    jr->level = 2; /* a List's items sit in the List and its items */
    jr->max_depth = DOC_MAX_DEPTH;
    jr->max_nodes = src->max_nodes;
    return true;
}

/* An item read by jansson (jr NULL) or straight into shared values: a new reference. */
static json_t *item_value(const struct doc_src *src, struct jread *jr, const char *p,
                          const char *end, size_t *nodes, const char **next)
{
    json_t *item;
    int err;

    if (!jr) {
        item = read_value(p, end, next);
        if (item && !within_caps(src, item, 2, nodes)) {
            json_decref(item);
            return NULL;
        }
        return item;
    }
    jr->nodes = *nodes;
    item = jread_value(jr, p, end, next, &err);
    *nodes = jr->nodes;
    return json_incref(item);
}

/* One item of a List at p: parsed (a new reference), *next past it and *after at the next item or
 * the closing bracket; NULL when it is not an item the YAML reader would read the same. */
static json_t *json_item(const struct doc_src *src, struct jread *jr, const char *p,
                         const char *end, size_t *nodes, const char **next, const char **after)
{
    json_t *item = item_value(src, jr, p, end, nodes, next);
    const char *a;

    if (!item)
        return NULL;
    /* Only an item followed by "," and another item, or by "]", is an item for the YAML reader
     * too ("a": ... would make it a key, "," "]" is YAML only). */
    a = skip_ws(*next, end);
    if (a < end && *a == ',') {
        a = skip_ws(a + 1, end);
        if (a == end || *a == ']')
            a = NULL;
    } else if (a == end || *a != ']') {
        a = NULL;
    }
    if (!a) {
        json_decref(item);
        return NULL;
    }
    *after = a;
    return item;
}

/*
 * A large List's items are parsed by two workers when the caller prepares them (struct doc_prep):
 * a second thread takes the first half and the caller's thread the second, each parsing and
 * preparing on its own (its own memory, its own prepared values); then the values are handed in
 * order. Each worker's work stays on its core: it is the prepared values, not the parsed trees,
 * that cross. The second thread takes the first half because what comes first in a cluster's file
 * is usually its Nodes and ResourceSlices, which live as long as the process; what comes last
 * (Pods, claims) is dropped while scheduling, and memory freed by this thread is reused by this
 * thread only (glibc gives each thread its own arena).
 */
struct half {
    const struct doc_src *src;
    const struct doc_prep *prep;
    unsigned worker;
    const char *p, *stop, *end; /* its first item, where it ends (the other's first item, or the
                                   closing bracket), the input's end */
    size_t first;               /* the index of its first item */
    atomic_bool *cancel;        /* set when the other half fails: no need to go on */
    /* results */
    struct vec made; /* struct made_item */
    size_t nodes;
    const char *ended; /* where its last item ended (the next item or the closing bracket) */
    int r;             /* 0, or NOT_MINE / -ENOMEM where it stopped */
};

struct made_item {
    json_t *v;
    struct doc_where where;
};

static void *half_run(void *arg)
{
    struct half *h = arg;
    const char *p = h->p, *next, *after;
    struct jread jr;
    bool shared = jread_for(&jr, h->src, h->prep, h->worker);

    for (size_t i = h->first; p < h->stop && *p != ']'; i++) {
        json_t *item, *made;
        struct made_item m;

        if (atomic_load(h->cancel)) {
            h->r = NOT_MINE;
            break;
        }
        item = json_item(h->src, shared ? &jr : NULL, p, h->end, &h->nodes, &next, &after);
        if (!item) {
            h->r = NOT_MINE;
            atomic_store(h->cancel, true);
            break;
        }
        made = h->prep->fn(h->prep->arg, h->worker, item);
        json_decref(item);
        m = (struct made_item){made,
                               {0, i, h->src, (size_t)(p - h->src->text), (size_t)(next - p)}};
        if (!made || vec_push(&h->made, &m) < 0) {
            json_decref(made);
            h->r = -ENOMEM;
            atomic_store(h->cancel, true);
            break;
        }
        p = after;
    }
    if (shared)
        jread_release(&jr);
    h->ended = p;
    return NULL;
}

/* Hands a half's prepared values in order, as far as it got, and drops them. */
static int hand_half(struct each *e, struct half *h, int r, size_t *done, struct diag *d)
{
    for (size_t k = 0; k < h->made.len; k++) {
        struct made_item *m = VEC_AT(&h->made, struct made_item, k);

        if (r == 0 && (r = hand_prepared(e, m->v, true, &m->where, d)) == 0)
            *done = m->where.item + 1;
        json_decref(m->v);
    }
    vec_release(&h->made);
    return r != 0 ? r : h->r;
}

/* Where the second half starts: the first item at or past the middle of the items, found by
 * skipping items without parsing them; NULL when there is none or the items are not well formed. */
static const char *middle_item(const char *p, const char *end, size_t *ret_index)
{
    const char *mid = p + (end - p) / 2;
    size_t i = 0;

    while (p < end && *p != ']') {
        if (p >= mid && i > 0) {
            *ret_index = i;
            return p;
        }
        p = skip_value(p, end);
        if (!p)
            return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == ',')
            p = skip_ws(p + 1, end);
        i++;
    }
    return NULL;
}

/* The items in two halves at once; NOT_MINE when they cannot be split. */
static int json_halves(struct each *e, const char *p, const char *end, size_t *done, size_t *nodes,
                       const char **ret_next, struct diag *d)
{
    const struct doc_src *src = e->src;
    atomic_bool cancel = false;
    struct half first, second;
    size_t at;
    const char *mid = middle_item(p, end, &at);
    pthread_t thread;
    int r;

    if (!mid)
        return NOT_MINE;
    first = (struct half){.src = src,
                          .prep = e->prep,
                          .worker = 1,
                          .p = p,
                          .stop = mid,
                          .end = end,
                          .first = 0,
                          .cancel = &cancel};
    second = (struct half){.src = src,
                           .prep = e->prep,
                           .worker = 0,
                           .p = mid,
                           .stop = end,
                           .end = end,
                           .first = at,
                           .cancel = &cancel};
    vec_init(&first.made, sizeof(struct made_item), 0);
    vec_init(&second.made, sizeof(struct made_item), 0);
    if (pthread_create(&thread, NULL, half_run, &first) != 0)
        return NOT_MINE; /* nothing handed: one thread does it all */
    half_run(&second);
    pthread_join(thread, NULL);
    /* Where jansson ended the first half must be where the quick scan began the second. */
    if (first.r == 0 && first.ended != mid)
        first.r = NOT_MINE;
    r = hand_half(e, &first, 0, done, d);
    r = hand_half(e, &second, r, done, d);
    if (r != 0)
        return r;
    *nodes += first.nodes + second.nodes;
    if (*nodes > src->max_nodes || second.ended == end || *second.ended != ']')
        return NOT_MINE;
    *ret_next = second.ended + 1;
    return 0;
}

/* Hands the items from p on, one at a time, read by jansson or by jr. */
static int json_items_one(struct each *e, struct jread *jr, const char *p, const char *end,
                          size_t *done, size_t *nodes, const char **ret_next, struct diag *d)
{
    const struct doc_src *src = e->src;
    const char *next, *after;
    int r;

    for (size_t i = 0; p < end && *p != ']'; i++) {
        _cleanup_json_ json_t *item = json_item(src, jr, p, end, nodes, &next, &after);

        if (!item)
            return NOT_MINE;
        r = hand(e, item,
                 &(struct doc_where){0, i, src, (size_t)(p - src->text), (size_t)(next - p)}, d);
        if (r != 0)
            return r;
        *done = i + 1;
        p = after;
    }
    if (p == end)
        return NOT_MINE;
    *ret_next = p + 1;
    return 0;
}

/* Hands the items from p (the first after the opening bracket) on; *done counts those handed,
 * *next is past the closing bracket. */
static int json_items(struct each *e, const char *p, const char *end, size_t *done, size_t *nodes,
                      const char **ret_next, struct diag *d)
{
    struct jread jr;
    bool shared;
    int r;

    if (e->prep &&
        (size_t)(end - p) >= (e->prep->split_bytes ? e->prep->split_bytes : DOC_SPLIT_BYTES)) {
        r = json_halves(e, p, end, done, nodes, ret_next, d);
        if (r != NOT_MINE || *done > 0)
            return r;
    }
    shared = jread_for(&jr, e->src, e->prep, 0);
    r = json_items_one(e, shared ? &jr : NULL, p, end, done, nodes, ret_next, d);
    if (shared)
        jread_release(&jr);
    return r;
}

/* Hands the items of the List object at p one by one; *done counts them. */
static int json_list(struct each *e, const char *p, const char *end, size_t *done, struct diag *d)
{
    struct doc_src *src = e->src;
    _cleanup_json_ json_t *seen = json_object();
    size_t nodes = 1;
    const char *next;
    int r;

    if (!seen)
        return -ENOMEM;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return NOT_MINE; /* no "kind": top_is_list said otherwise */
    for (;;) {
        _cleanup_json_ json_t *key = NULL;
        const char *k;

        if (p == end || *p != '"' || !(key = read_value(p, end, &next)) ||
            !(k = json_string_value(key)))
            return NOT_MINE;
        if (json_object_getn(seen, k, json_string_length(key)))
            return NOT_MINE; /* the YAML reader says "duplicate key" where */
        if (json_object_setn_new_nocheck(seen, k, json_string_length(key), json_null()) < 0)
            return -ENOMEM;
        nodes++;
        p = skip_ws(next, end);
        if (p == end || *p != ':')
            return NOT_MINE;
        p = skip_ws(p + 1, end);
        if (strcmp(k, "items") == 0) {
            if (p == end || *p != '[')
                return NOT_MINE;
            nodes++;
            r = json_items(e, skip_ws(p + 1, end), end, done, &nodes, &next, d);
            if (r != 0)
                return r;
        } else {
            _cleanup_json_ json_t *v = read_value(p, end, &next);

            if (!v || !within_caps(src, v, 1, &nodes))
                return NOT_MINE;
        }
        p = skip_ws(next, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            break;
        return NOT_MINE;
    }
    return skip_ws(p + 1, end) == end ? 0 : NOT_MINE;
}

/* The JSON path: 0, fn's non-zero return, or NOT_MINE (with *done items of document 0 handed). */
static int json_each(struct each *e, size_t *done, struct diag *d)
{
    struct doc_src *src = e->src;
    const char *end = src->text + src->len, *p = skip_ws(src->text, end);
    _cleanup_json_ json_t *root = NULL;
    json_error_t err;
    size_t nodes = 0;

    if (p == end || (*p != '{' && *p != '['))
        return NOT_MINE;
    if (*p == '{' && top_is_list(p, end))
        return json_list(e, p, end, done, d);
    root = json_loadb(src->text, src->len, JSON_REJECT_DUPLICATES, &err);
    if (!root || !within_caps(src, root, 0, &nodes))
        return NOT_MINE;
    return hand_doc(e, root, 0, 0, d);
}

/* ---- loading --------------------------------------------------------------------------------- */

/* The whole load on one thread: JSON first, the YAML reader for what JSON did not take. */
static void line_col_at(const char *text, size_t off, int *ret_line, int *ret_col);

/*
 * A large YAML stream in two halves at once, as a large JSON List (struct half): split at a
 * document start ("---" at the start of a line, which YAML allows inside no value: it ends a block
 * scalar's document and is an error in a quoted one), the first half read by a second thread,
 * the second by the caller's, each building and preparing its documents; nothing is handed before
 * both are done, and when either half is not read without an error the stream is read again
 * whole, so that errors and their positions are the one-thread ones.
 */
struct yhalf {
    struct doc_src part; /* the half's text */
    const struct doc_prep *prep;
    unsigned worker;
    int line0;
    struct vec made; /* struct made_item, with the documents' indexes in the half */
    size_t docs;     /* documents read */
    int r;
};

static int yhalf_keep(struct yhalf *h, json_t *v, size_t doc, size_t item)
{
    struct made_item m = {h->prep->fn(h->prep->arg, h->worker, v), {doc, item, NULL, 0, 0}};

    if (!m.v)
        return -ENOMEM;
    if (vec_push(&h->made, &m) < 0) {
        json_decref(m.v);
        return -ENOMEM;
    }
    return 0;
}

/* The half's each(): document `index` prepared, a List item by item (as hand_doc hands it). */
static int yhalf_doc(void *arg, json_t *root, size_t index, struct diag *d)
{
    struct yhalf *h = arg;
    json_t *items = json_object_get(root, "items");
    int r = 0;

    (void)d;
    h->docs = index + 1;
    if (!is_list(root))
        return yhalf_keep(h, root, index, DOC_WHOLE);
    for (size_t i = 0; r >= 0 && i < json_array_size(items); i++) {
        json_t *item = json_incref(json_array_get(items, i));

        r = json_array_set(items, i, json_null()) < 0 ? -ENOMEM : yhalf_keep(h, item, index, i);
        json_decref(item);
    }
    return r;
}

static void *yhalf_run(void *arg)
{
    struct yhalf *h = arg;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct doc_parse_opts o = {.max_nodes = h->part.max_nodes,
                               .only_doc = DOC_EVERY,
                               .line0 = h->line0,
                               .col0 = 1,
                               .each = yhalf_doc,
                               .each_arg = h};

    h->r = doc_new(h->part.name, &doc);
    if (h->r >= 0)
        h->r = doc_parse_text(doc, h->part.text, h->part.len, &o, NULL);
    return NULL;
}

static void yhalf_drop(struct yhalf *h)
{
    for (size_t k = 0; k < h->made.len; k++)
        json_decref(VEC_AT(&h->made, struct made_item, k)->v);
    vec_release(&h->made);
}

/* Where the second half starts: a "---" line at or past the middle; NULL when there is none. */
static const char *middle_document(const char *text, size_t len)
{
    const char *end = text + len, *p = text + len / 2;

    while ((p = memchr(p, '\n', (size_t)(end - p)))) {
        p++;
        if (end - p >= 3 && memcmp(p, "---", 3) == 0 && (end - p == 3 || strchr(" \t\r\n", p[3])))
            return p;
    }
    return NULL;
}

/* The stream in two halves; NOT_MINE (with nothing handed) when it cannot be read so. */
static int yaml_halves(struct each *e, struct diag *d)
{
    const struct doc_src *src = e->src;
    const char *mid = middle_document(src->text, src->len);
    struct yhalf first, second;
    pthread_t thread;
    int r;

    if (!mid)
        return NOT_MINE;
    first = (struct yhalf){.part = *src, .prep = e->prep, .worker = 1, .line0 = 1};
    first.part.len = (size_t)(mid - src->text);
    second = (struct yhalf){.part = *src, .prep = e->prep, .worker = 0};
    second.part.text = mid;
    second.part.len = src->len - first.part.len;
    line_col_at(src->text, first.part.len, &second.line0, &r);
    vec_init(&first.made, sizeof(struct made_item), 0);
    vec_init(&second.made, sizeof(struct made_item), 0);
    if (pthread_create(&thread, NULL, yhalf_run, &first) != 0)
        return NOT_MINE;
    yhalf_run(&second);
    pthread_join(thread, NULL);
    if (first.r < 0 || second.r < 0) {
        yhalf_drop(&first);
        yhalf_drop(&second);
        return NOT_MINE;
    }
    /* The documents of the first half, then those of the second, numbered on. */
    r = 0;
    for (int k = 0; k < 2; k++) {
        struct yhalf *h = k ? &second : &first;

        for (size_t i = 0; i < h->made.len; i++) {
            struct made_item *m = VEC_AT(&h->made, struct made_item, i);

            m->where.src = src;
            m->where.doc += k ? first.docs : 0;
            if (r == 0)
                r = hand_prepared(e, m->v, true, &m->where, d);
        }
    }
    yhalf_drop(&first);
    yhalf_drop(&second);
    return r;
}

static int load_text(struct doc_src *src, const struct doc_prep *prep, doc_each_fn fn, void *arg,
                     struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct each e = {.src = src, .fn = fn, .arg = arg, .prep = prep};
    struct doc_parse_opts o = {.line0 = 1, .col0 = 1, .only_doc = DOC_EVERY};
    size_t done = 0;
    int r;

    r = json_each(&e, &done, d);
    if (r == NOT_MINE && done == 0 && prep &&
        src->len >= (prep->split_bytes ? prep->split_bytes : DOC_SPLIT_BYTES))
        r = yaml_halves(&e, d);
    if (r == NOT_MINE) {
        e.skip = done;
        o.max_nodes = src->max_nodes;
        o.each = yaml_doc;
        o.each_arg = &e;
        r = doc_new(src->name, &doc);
        if (r >= 0)
            r = doc_parse_text(doc, src->text, src->len, &o, d);
    }
    if (r >= 0 && e.refused) {
        if (d)
            *d = e.refused_d;
        return e.refused;
    }
    return r;
}

int doc_load_string_each(const char *name, const char *text, size_t len,
                         const struct doc_limits *limits, doc_each_fn fn, void *arg, struct diag *d)
{
    return doc_load_string_each_prep(name, text, len, limits, NULL, fn, arg, d);
}

int doc_load_string_each_prep(const char *name, const char *text, size_t len,
                              const struct doc_limits *limits, const struct doc_prep *prep,
                              doc_each_fn fn, void *arg, struct diag *d)
{
    struct doc_src src = {.name = name ? name : "<input>", .text = text ? text : "", .len = len};

    if (!limits)
        limits = &doc_limits_config;
    if (!text && len > 0)
        return diag_fail(d, -EINVAL, "%s: no text", src.name);
    if (len > limits->max_bytes)
        return diag_fail(d, -EFBIG, "%s: larger than %zu bytes", src.name, limits->max_bytes);
    src.max_nodes = doc_max_nodes(limits, len);
    return load_text(&src, prep, fn, arg, d);
}

int doc_load_file_each(const char *path, const struct doc_limits *limits, doc_each_fn fn, void *arg,
                       struct diag *d)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = doc_read_file(path, &limits, &text, &len, d);

    if (r < 0)
        return r;
    return doc_load_string_each(path, text, len, limits, fn, arg, d);
}

/* ---- positions, on demand -------------------------------------------------------------------- */

/* The line and column (in characters) where text[off] is. */
static void line_col_at(const char *text, size_t off, int *ret_line, int *ret_col)
{
    const char *p = text, *end = text + off, *nl;
    int line = 1, col = 1;

    while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
        line++;
        p = nl + 1;
    }
    for (; p < end; p++)
        col += ((unsigned char)*p & 0xc0) != 0x80;
    *ret_line = line;
    *ret_col = col;
}

int doc_where_reload(const struct doc_where *where, struct diag *d, struct doc **ret)
{
    const struct doc_src *src = where->src;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct doc_parse_opts o = {.positions = true, .max_nodes = src->max_nodes};
    json_t *root, *item;
    int r;

    r = doc_new(src->name, &doc);
    if (r < 0)
        return r;
    if (where->len > 0) {
        o.only_doc = DOC_EVERY;
        line_col_at(src->text, where->off, &o.line0, &o.col0);
        r = doc_parse_text(doc, src->text + where->off, where->len, &o, d);
    } else {
        o.only_doc = where->doc;
        o.line0 = o.col0 = 1;
        r = doc_parse_text(doc, src->text, src->len, &o, d);
    }
    if (r < 0)
        return r;
    root = doc_root(doc, 0);
    if (!root)
        return diag_fail(d, -ENOENT, "%s: document %zu not found again", src->name, where->doc);
    if (where->len == 0 && where->item != DOC_WHOLE) {
        item = json_array_get(json_object_get(root, "items"), where->item);
        if (!item)
            return diag_fail(d, -ENOENT, "%s: item %zu not found again", src->name, where->item);
        /* The item becomes root 0; the List stays as root 1, so that no value with a position is
         * freed (the table is keyed by address). */
        r = vec_push(&doc->roots, &root);
        if (r < 0)
            return r;
        *VEC_AT(&doc->roots, json_t *, 0) = json_incref(item);
    }
    *ret = TAKE_PTR(doc);
    return 0;
}
