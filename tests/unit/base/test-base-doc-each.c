/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the streaming loader (doc_load_string_each): that it hands exactly the values the
 * whole-document reader builds (a List item by item), that JSON read by jansson and YAML read by
 * libfyaml agree, that every input the JSON path does not take gets the YAML reader's own error
 * message with its file:line:col, that a syntax error is reported before an error of the callback,
 * and that doc_where_reload finds every value at the line and column the whole-document reader
 * gives it — for JSON items cut out of a long line too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-strbuf.h"

static const struct doc_limits LIMITS = {.max_bytes = (size_t)1 << 24};

/* What a load handed out: the values (compact JSON text each) with their indexes. */
struct seen {
    struct strbuf text;
    size_t n;
    int stop_at; /* return 1 from this call (0: never) */
    int fail_at; /* return -EPROTO from this call (0: never) */
    bool reload; /* check doc_where_reload against a whole-document load with positions */
    const char *input;
    size_t len;
};

static void seen_init(struct seen *s, const char *input)
{
    *s = (struct seen){.input = input, .len = strlen(input)};
    strbuf_init(&s->text, 0);
}

/* Compares the positions of every value of a (reloaded) with those of b (the same value read
 * with the whole input). */
static void same_positions(const struct doc *da, json_t *a, const struct doc *db, json_t *b)
{
    int la = 0, ca = 0, lb = 0, cb = 0;
    bool ka = doc_position(da, a, &la, &ca), kb = doc_position(db, b, &lb, &cb);
    const char *k;
    json_t *x;
    size_t i;

    assert_int_equal(ka, kb);
    if (ka) {
        assert_int_equal(la, lb);
        assert_int_equal(ca, cb);
    }
    if (json_is_object(a)) {
        json_object_foreach(a, k, x)
        {
            ka = doc_member_position(da, a, k, &la, &ca);
            kb = doc_member_position(db, b, k, &lb, &cb);
            assert_int_equal(ka, kb);
            if (ka) {
                assert_int_equal(la, lb);
                assert_int_equal(ca, cb);
            }
            same_positions(da, x, db, json_object_get(b, k));
        }
    } else if (json_is_array(a)) {
        json_array_foreach(a, i, x) same_positions(da, x, db, json_array_get(b, i));
    }
}

/* The value `where` names in a whole-document load of the input with positions. */
static void check_reload(const struct seen *s, json_t *v, const struct doc_where *where)
{
    _cleanup_(doc_freep) struct doc *whole = NULL, *again = NULL;
    json_t *root, *want;
    struct diag d;

    assert_int_equal(doc_load_string_limits("t", s->input, s->len, &LIMITS, &d, &whole), 0);
    root = doc_root(whole, where->doc);
    want = where->item == DOC_WHOLE ? root
                                    : json_array_get(json_object_get(root, "items"), where->item);
    assert_non_null(want);
    assert_true(json_equal(v, want));
    assert_int_equal(doc_where_reload(where, &d, &again), 0);
    assert_true(json_equal(doc_root(again, 0), want));
    same_positions(again, doc_root(again, 0), whole, want);
}

static int collect(void *arg, json_t *v, const struct doc_where *where, struct diag *d)
{
    struct seen *s = arg;
    _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    assert_non_null(text);
    s->n++;
    assert_int_equal(strbuf_addf(&s->text, "%zu/%ld %s\n", where->doc,
                                 where->item == DOC_WHOLE ? -1L : (long)where->item, text),
                     0);
    if (s->reload)
        check_reload(s, v, where);
    if ((int)s->n == s->fail_at)
        return diag_fail(d, -EPROTO, "refused %zu", s->n);
    return (int)s->n == s->stop_at ? 1 : 0;
}

/* The same listing from a whole-document load: a List item by item, empty documents as null. */
static int whole(const char *input, struct strbuf *out, struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_string_limits("t", input, strlen(input), &LIMITS, d, &doc);

    if (r < 0)
        return r;
    for (size_t i = 0; i < doc_count(doc); i++) {
        json_t *root = doc_root(doc, i), *items = json_object_get(root, "items"), *x;
        const char *kind = json_string_value(json_object_get(root, "kind"));
        size_t k;

        if (kind && strcmp(kind, "List") == 0 && json_is_array(items)) {
            json_array_foreach(items, k, x)
            {
                _cleanup_free_ char *t = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
                assert_int_equal(strbuf_addf(out, "%zu/%zu %s\n", i, k, t), 0);
            }
        } else {
            _cleanup_free_ char *t = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
            assert_int_equal(strbuf_addf(out, "%zu/-1 %s\n", i, t), 0);
        }
    }
    return 0;
}

/* The preparing step: a copy, and a count of the calls per worker. */
static size_t prepared[2];

static json_t *copy(void *arg, unsigned worker, json_t *v)
{
    (void)arg;
    assert_true(worker < 2);
    __atomic_add_fetch(&prepared[worker], 1, __ATOMIC_RELAXED);
    return json_deep_copy(v);
}

/* Both loads of input agree: the same values, or the same error and message; with a preparing
 * step too, the List items split in two halves from the smallest size on. */
static void agree_prep(const char *input, const struct doc_prep *prep)
{
    _cleanup_strbuf_ struct strbuf want = STRBUF_INIT;
    struct diag dw, de;
    struct seen s;
    int rw, re;

    diag_init(&dw);
    diag_init(&de);
    rw = whole(input, &want, &dw);
    seen_init(&s, input);
    s.reload = rw == 0;
    re = doc_load_string_each_prep("t", input, strlen(input), &LIMITS, prep, collect, &s, &de);
    if (rw != re || (rw == 0 && strcmp(strbuf_str(&want), strbuf_str(&s.text)) != 0) ||
        (rw < 0 && strcmp(dw.msg, de.msg) != 0))
        print_error("input: %s\nwhole (%d): %s%s\neach (%d): %s%s\n", input, rw, strbuf_str(&want),
                    dw.msg, re, strbuf_str(&s.text), de.msg);
    assert_int_equal(re, rw);
    if (rw == 0)
        assert_string_equal(strbuf_str(&s.text), strbuf_str(&want));
    else
        assert_string_equal(de.msg, dw.msg);
    strbuf_release(&s.text);
}

static void agree(const char *input)
{
    const struct doc_prep prep = {.fn = copy, .split_bytes = 1};

    agree_prep(input, NULL);
    agree_prep(input, &prep);
}

static const char *const AGREE[] = {
    /* JSON Lists: kind before and after items, spacing, nesting, nulls */
    ("{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"a\": 1}, {\"b\": [1, 2.5, "
     "-3e2]}]}"),
    ("{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\n      \"kind\": \"Pod\",\n      \"x\": "
     "\"caf\\u00e9 \\ud83d\\ude00\"\n    },\n    null,\n    7\n  ],\n  \"kind\": \"List\",\n  "
     "\"metadata\": {}\n}\n"),
    "{\"kind\":\"List\",\"items\":[]}",
    "{\"items\":[{\"kind\":\"List\",\"items\":[{\"a\":true}]}],\"kind\":\"List\"}",
    "\t{\"kind\" : \"List\" , \"items\" : [ {\"k\":\"v\"} , {\"k\":false} ] }\r\n",
    /* not Lists */
    "{\"kind\": \"ResourceSliceList\", \"items\": [{\"a\": 1}]}",
    "{\"kind\": \"List\", \"items\": {\"a\": 1}}",
    "{\"kind\": 5, \"items\": [1]}",
    "{\"items\": [1, 2]}",
    "[{\"kind\": \"List\", \"items\": [1]}, 2]",
    "{\"a\": {\"b\": {\"c\": [1, {}, []]}}}",
    /* YAML-only syntax in JSON text: the YAML reader takes over where jansson stops */
    "{\"kind\": \"List\", \"items\": [{\"a\": 1}, {b: 2}, {\"c\": 3}]}",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1}, {\"c\": 3}]} # done\n",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1}]}\n---\n{\"kind\": \"Pod\"}\n",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1},]}",
    /* YAML */
    "kind: List\nitems:\n- a: 1\n- b: 2\n---\nkind: Pod\n---\n",
    "a: 1\n---\n---\nb: [1, 2]\n",
    "x: &a {k: v}\ny: *a\n",
    "",
    /* errors: each must give the YAML reader's message */
    "{\"kind\": \"List\", \"items\": [{\"a\": 1}, {\"a\": 2",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1, \"a\": 2}]}",
    "{\"kind\": \"List\", \"kind\": \"List\", \"items\": []}",
    "{\"kind\": \"List\", \"items\": [{\"a\": 99999999999999999999}]}",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1e999}]}",
    "{\"a\": \"\xff\"}",
    "{\"kind\": \"List\", \"items\": [{\"a\": 1}]} x",
    "[1, 2",
};

static void test_agree(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(AGREE) / sizeof(AGREE[0]); i++)
        agree(AGREE[i]);
}

/* Nesting deeper than DOC_MAX_DEPTH: the YAML reader's error, in a List item and whole. */
static void test_depth(void **state)
{
    _cleanup_strbuf_ struct strbuf a = STRBUF_INIT, b = STRBUF_INIT, c = STRBUF_INIT;

    (void)state;
    /* 2 levels (the List, its items) + 62 in the item: the most the YAML reader takes */
    assert_int_equal(strbuf_addstr(&a, "{\"kind\": \"List\", \"items\": ["), 0);
    for (int i = 0; i < 62; i++)
        assert_int_equal(strbuf_addch(&a, '['), 0);
    for (int i = 0; i < 62; i++)
        assert_int_equal(strbuf_addch(&a, ']'), 0);
    assert_int_equal(strbuf_addstr(&a, "]}"), 0);
    agree(strbuf_str(&a));
    assert_int_equal(strbuf_addstr(&b, "{\"kind\": \"List\", \"items\": ["), 0);
    for (int i = 0; i < 63; i++)
        assert_int_equal(strbuf_addch(&b, '['), 0);
    for (int i = 0; i < 63; i++)
        assert_int_equal(strbuf_addch(&b, ']'), 0);
    assert_int_equal(strbuf_addstr(&b, "]}"), 0);
    agree(strbuf_str(&b));
    for (int i = 0; i < 65; i++)
        assert_int_equal(strbuf_addch(&c, '['), 0);
    for (int i = 0; i < 65; i++)
        assert_int_equal(strbuf_addch(&c, ']'), 0);
    agree(strbuf_str(&c));
}

/* The value cap of other limits holds on the JSON path as on the YAML one. */
static void test_value_cap(void **state)
{
    static const char TEXT[] = "{\"kind\": \"List\", \"items\": [[1, 2], [3, 4, 5]]}";
    const struct doc_limits lim = {.max_bytes = 1000, .max_nodes = 6};
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct diag dw, de;
    struct seen s;

    (void)state;
    assert_int_equal(doc_load_string_limits("t", TEXT, strlen(TEXT), &lim, &dw, &doc), -E2BIG);
    seen_init(&s, TEXT);
    assert_int_equal(doc_load_string_each("t", TEXT, strlen(TEXT), &lim, collect, &s, &de), -E2BIG);
    assert_string_equal(de.msg, dw.msg);
    strbuf_release(&s.text);
}

/* A callback's error comes after any syntax error of the input, wherever it is; a positive return
 * ends the load there. */
static void test_callback_returns(void **state)
{
    static const char BROKEN[] = "{\"kind\": \"List\", \"items\": [{\"a\": 1}, {\"b\": 2}, {\"c\"";
    static const char GOOD[] = "kind: List\nitems: [1, 2, 3]\n---\nx: 1\n";
    struct diag d;
    struct seen s;

    (void)state;
    seen_init(&s, BROKEN);
    s.fail_at = 1;
    assert_int_equal(doc_load_string_each("t", BROKEN, strlen(BROKEN), &LIMITS, collect, &s, &d),
                     -EINVAL);
    assert_int_equal(s.n, 1);
    assert_string_equal(d.msg, "t:2:1: missing comma in flow mapping");
    strbuf_release(&s.text);

    seen_init(&s, GOOD);
    s.fail_at = 2;
    assert_int_equal(doc_load_string_each("t", GOOD, strlen(GOOD), &LIMITS, collect, &s, &d),
                     -EPROTO);
    assert_string_equal(d.msg, "refused 2");
    assert_int_equal(s.n, 2);
    strbuf_release(&s.text);

    seen_init(&s, GOOD);
    s.stop_at = 3;
    assert_int_equal(doc_load_string_each("t", GOOD, strlen(GOOD), &LIMITS, collect, &s, &d), 1);
    assert_int_equal(s.n, 3);
    strbuf_release(&s.text);
}

/* Positions found again: JSON items on lines of their own, after others on one long line (columns
 * counted in characters), kubectl's layout, YAML documents and List items. */
static void test_reload_positions(void **state)
{
    static const char *const INPUTS[] = {
        "{\"kind\": \"List\", \"items\": [\n{\"a\": {\"b\": [1, \"x\"]}},\n  {\"c\": null, "
        "\"d\": true}\n]}\n",
        "{\"kind\":\"List\",\"items\":[{\"n\":\"\xc3\xa9\xc3\xa9\"},{\"m\":{\"k\":[1,{\"z\":2}]}},"
        "{\"q\":\"\xe2\x82\xac\"}]}",
        "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\n            \"kind\": "
        "\"Pod\",\n            \"spec\": {\"x\": [1, 2]}\n        }\n    ],\n    \"kind\": "
        "\"List\"\n}\n",
        "{\"a\": [1, {\"b\": 2}]}",
        "a: 1\n---\nkind: List\nitems:\n  - x: [1, 2]\n  - y: {z: w}\n---\nb: [3]\n",
    };
    struct diag d;
    struct seen s;

    (void)state;
    for (size_t i = 0; i < sizeof(INPUTS) / sizeof(INPUTS[0]); i++) {
        seen_init(&s, INPUTS[i]);
        s.reload = true;
        assert_int_equal(doc_load_string_each("t", s.input, s.len, &LIMITS, collect, &s, &d), 0);
        assert_true(s.n > 0);
        strbuf_release(&s.text);
    }
}

/* A List large enough to be split in halves: every item goes through the preparing step once,
 * those of the second half with worker 1, and all come out in order. */
static void test_two_workers(void **state)
{
    const struct doc_prep prep = {.fn = copy, .split_bytes = (size_t)64 << 10};
    _cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
    const char *line;
    struct diag d;
    struct seen s;
    size_t n = 0;

    (void)state;
    assert_int_equal(strbuf_addstr(&text, "{\"kind\": \"List\", \"items\": [\n"), 0);
    while (text.len < prep.split_bytes * 2) {
        assert_int_equal(strbuf_addf(&text,
                                     "%s{\"kind\": \"Pod\", \"metadata\": {\"name\": \"p%zu\"}, "
                                     "\"spec\": {\"x\": [1, 2, \"\\\"%050zu\"]}}",
                                     n ? ",\n" : "", n, n),
                         0);
        n++;
    }
    assert_int_equal(strbuf_addstr(&text, "\n]}\n"), 0);
    prepared[0] = prepared[1] = 0;
    seen_init(&s, strbuf_str(&text));
    assert_int_equal(
        doc_load_string_each_prep("t", s.input, s.len, &LIMITS, &prep, collect, &s, &d), 0);
    assert_int_equal(s.n, n);
    assert_int_equal(prepared[0] + prepared[1], n);
    assert_true(prepared[1] > n / 4 && prepared[0] > n / 4);
    line = strbuf_str(&s.text);
    for (size_t i = 0; i < n; i++) {
        char want[128];

        snprintf(want, sizeof(want), "0/%zu {\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%zu\"}", i,
                 i);
        assert_memory_equal(line, want, strlen(want));
        line = strchr(line, '\n') + 1;
    }
    strbuf_release(&s.text);
}

/* The same for a YAML stream split at a document start: documents numbered on across the halves,
 * a List item by item, empty documents as null. */
static void test_two_workers_yaml(void **state)
{
    const struct doc_prep prep = {.fn = copy, .split_bytes = (size_t)64 << 10};
    _cleanup_strbuf_ struct strbuf text = STRBUF_INIT, want = STRBUF_INIT;
    struct diag d;
    struct seen s;
    size_t n = 0;

    (void)state;
    while (text.len < prep.split_bytes * 2) {
        assert_int_equal(strbuf_addf(&text,
                                     "---\nkind: Pod\nmetadata: {name: p%zu}\nspec:\n  x: |\n"
                                     "    %050zu\n",
                                     n, n),
                         0);
        if (n % 100 == 0)
            assert_int_equal(strbuf_addstr(&text, "---\nkind: List\nitems: [1, {a: b}]\n---\n"), 0);
        n++;
    }
    assert_int_equal(whole(strbuf_str(&text), &want, &d), 0);
    prepared[0] = prepared[1] = 0;
    seen_init(&s, strbuf_str(&text));
    assert_int_equal(
        doc_load_string_each_prep("t", s.input, s.len, &LIMITS, &prep, collect, &s, &d), 0);
    assert_string_equal(strbuf_str(&s.text), strbuf_str(&want));
    assert_true(prepared[1] > n / 4 && prepared[0] > n / 4);
    strbuf_release(&s.text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agree),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_value_cap),
        cmocka_unit_test(test_callback_returns),
        cmocka_unit_test(test_reload_positions),
        cmocka_unit_test(test_two_workers),
        cmocka_unit_test(test_two_workers_yaml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
