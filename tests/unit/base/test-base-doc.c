/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the YAML document loader: core-schema typing, multi-document streams, anchors, the error
 * messages (with exact positions) for syntax errors, schema violations and the typed readers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-strbuf.h"

static struct doc *load_ok(const char *text)
{
    struct diag d;
    struct doc *doc = NULL;
    int r;

    diag_init(&d);
    r = doc_load_string("t.yaml", text, strlen(text), &d, &doc);
    if (r < 0)
        print_error("unexpected failure: %s\n", d.msg);
    assert_int_equal(r, 0);
    assert_non_null(doc);
    return doc;
}

/* Loads text expecting failure err with message msg. */
static void load_fails(const char *text, int err, const char *msg)
{
    struct diag d;
    struct doc *doc = NULL;

    diag_init(&d);
    assert_int_equal(doc_load_string("t.yaml", text, strlen(text), &d, &doc), err);
    assert_null(doc);
    assert_string_equal(d.msg, msg);
}

/* One scalar and what it must become, as compact JSON. */
struct scalar_case {
    const char *yaml;
    const char *json;
};

static const struct scalar_case scalar_cases[] = {
    {"v: 42", "{\"v\": 42}"},
    {"v: -7", "{\"v\": -7}"},
    {"v: +7", "{\"v\": 7}"},
    {"v: 0x1F", "{\"v\": 31}"},
    {"v: 0o17", "{\"v\": 15}"},
    {"v: 9223372036854775807", "{\"v\": 9223372036854775807}"},
    {"v: -9223372036854775808", "{\"v\": -9223372036854775808}"},
    {"v: 1.5", "{\"v\": 1.5}"},
    {"v: 1e3", "{\"v\": 1000.0}"},
    {"v: .5", "{\"v\": 0.5}"},
    {"v: true", "{\"v\": true}"},
    {"v: False", "{\"v\": false}"},
    {"v: null", "{\"v\": null}"},
    {"v: ~", "{\"v\": null}"},
    {"v:", "{\"v\": null}"},
    {"v: yes", "{\"v\": \"yes\"}"},
    {"v: \"42\"", "{\"v\": \"42\"}"},
    {"v: '1.5'", "{\"v\": \"1.5\"}"},
    {"v: 1_000", "{\"v\": \"1_000\"}"},
    {"v: 0b101", "{\"v\": \"0b101\"}"},
    {"v: !!str 5", "{\"v\": \"5\"}"},
    {"v: !!float 5", "{\"v\": 5.0}"},
    {"v: ! 5", "{\"v\": \"5\"}"},
    {"v: !local 5", "{\"v\": \"5\"}"},
    {"v: !!int \"5\"", "{\"v\": 5}"},
    {"v: !!null ~", "{\"v\": null}"},
    {"v: GPU-abc", "{\"v\": \"GPU-abc\"}"},
    {"v: \"a\\tb\\u00e9\"", "{\"v\": \"a\\tb\\u00e9\"}"},
    {"v: |\n  line1\n  line2\n", "{\"v\": \"line1\\nline2\\n\"}"},
    {"{\"a\": [1, 2.5, \"x\", null, true]}", "{\"a\": [1, 2.5, \"x\", null, true]}"},
    {"- a\n- [b, {c: d}]\n", "[\"a\", [\"b\", {\"c\": \"d\"}]]"},
    {"a: 1\nb: 2\nc: 3\n", "{\"a\": 1, \"b\": 2, \"c\": 3}"},
    {"<<: {a: 1}\n", "{\"<<\": {\"a\": 1}}"},
};

static void test_scalars(void **state)
{
    for (size_t i = 0; i < sizeof(scalar_cases) / sizeof(scalar_cases[0]); i++) {
        _cleanup_(doc_freep) struct doc *doc = load_ok(scalar_cases[i].yaml);
        _cleanup_free_ char *got = NULL;

        assert_int_equal(doc_count(doc), 1);
        got = json_dumps(doc_root(doc, 0), JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        assert_non_null(got);
        /* JSON_COMPACT still separates with ": " and ", " unless told otherwise; compare loosely.
         */
        {
            _cleanup_free_ char *want = NULL;
            json_t *w = json_loads(scalar_cases[i].json, JSON_DECODE_ANY, NULL);

            assert_non_null(w);
            want = json_dumps(w, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
            json_decref(w);
            if (strcmp(got, want) != 0)
                print_error("case %zu: %s -> %s, want %s\n", i, scalar_cases[i].yaml, got, want);
            assert_string_equal(got, want);
        }
    }
}

static void test_integer_exact(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = load_ok("big: 9007199254740993\n");

    /* 2^53 + 1 is not a double: it must survive as an exact integer. */
    assert_true(json_is_integer(json_object_get(doc_root(doc, 0), "big")));
    assert_true(json_integer_value(json_object_get(doc_root(doc, 0), "big")) == 9007199254740993LL);
}

static void test_nul_in_key(void **state)
{
    /* jansson keys may hold NUL; such a key must not be cut short or collide with its prefix. */
    _cleanup_(doc_freep) struct doc *doc = load_ok("\"a\\0b\": 1\n\"a\": 2\n");
    json_t *root = doc_root(doc, 0);

    assert_int_equal(json_object_size(root), 2);
    assert_int_equal(json_integer_value(json_object_getn(root, "a\0b", 3)), 1);
    assert_int_equal(json_integer_value(json_object_get(root, "a")), 2);
}

static void test_streams(void **state)
{
    _cleanup_(doc_freep) struct doc *empty = load_ok("");
    _cleanup_(doc_freep) struct doc *comment = load_ok("# nothing here\n");
    _cleanup_(doc_freep) struct doc *bare = load_ok("---\n");
    _cleanup_(doc_freep) struct doc *multi = load_ok("a: 1\n---\nb: 2\n---\n- 3\n...\n");

    assert_int_equal(doc_count(empty), 0);
    assert_null(doc_root(empty, 0));
    assert_int_equal(doc_count(comment), 0);
    assert_int_equal(doc_count(bare), 1);
    assert_true(json_is_null(doc_root(bare, 0)));
    assert_int_equal(doc_count(multi), 3);
    assert_int_equal(json_integer_value(json_object_get(doc_root(multi, 0), "a")), 1);
    assert_int_equal(json_integer_value(json_object_get(doc_root(multi, 1), "b")), 2);
    assert_int_equal(json_integer_value(json_array_get(doc_root(multi, 2), 0)), 3);
    assert_null(doc_root(multi, 3));
    assert_string_equal(doc_name(multi), "t.yaml");
}

static void test_anchors(void **state)
{
    _cleanup_(doc_freep) struct doc *doc =
        load_ok("base: &b {mem: 80, name: h100}\ncopy: *b\nlist: [&x 1, *x, *x]\n");
    json_t *root = doc_root(doc, 0);
    json_t *list = json_object_get(root, "list");
    int line = 0, col = 0;

    assert_true(json_equal(json_object_get(root, "base"), json_object_get(root, "copy")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "copy"), "mem")), 80);
    assert_int_equal(json_array_size(list), 3);
    assert_int_equal(json_integer_value(json_array_get(list, 2)), 1);
    /* An alias reports where the anchored value is. */
    assert_true(doc_position(doc, json_object_get(root, "copy"), &line, &col));
    assert_int_equal(line, 1);
    assert_int_equal(col, 10);
}

static void test_anchor_scope(void **state)
{
    /* Anchors do not cross documents, and a node cannot alias itself. */
    load_fails("a: &x 1\n---\nb: *x\n", -EINVAL, "t.yaml:3:4: unknown anchor \"x\"");
    load_fails("a: &x [*x]\n", -EINVAL, "t.yaml:1:8: unknown anchor \"x\"");
}

struct error_case {
    const char *yaml;
    int err;
    const char *msg;
};

static const struct error_case error_cases[] = {
    {"a: [1\nb: 2\n", -EINVAL, "t.yaml:3:1: flow sequence without a closing bracket"},
    {"x: \"abc\n", -EINVAL, "t.yaml:1:5: double-quoted scalar without closing quote"},
    {"a: b: c\n", -EINVAL, "t.yaml:1:5: invalid nested block mapping on the same line"},
    {"a: 1\nb: 2\na: 3\n", -EINVAL, "t.yaml:3:1: duplicate key \"a\""},
    {"gpus:\n  - id: 0\n    id: 1\n", -EINVAL, "t.yaml:3:5: duplicate key \"id\""},
    {"a:\n  n: 9223372036854775808\n", -ERANGE, "t.yaml:2:6: integer out of the 64-bit range"},
    {"n: -9223372036854775809\n", -ERANGE, "t.yaml:1:4: integer out of the 64-bit range"},
    {"n: 0x8000000000000000\n", -ERANGE, "t.yaml:1:4: integer out of the 64-bit range"},
    {"n: 1e999\n", -ERANGE, "t.yaml:1:4: number out of range"},
    {"n: .inf\n", -EINVAL, "t.yaml:1:4: infinity and NaN are not supported"},
    {"1: a\n", -EINVAL, "t.yaml:1:1: mapping key must be a string"},
    {"a: 1\n~: 2\n", -EINVAL, "t.yaml:2:1: mapping key must be a string"},
    {"? [a]\n: 1\n", -EINVAL, "t.yaml:1:3: mapping key must be a string"},
    {"n: !!int abc\n", -EINVAL, "t.yaml:1:10: value does not match its tag \"!!int\""},
    /* libfyaml would silently drop these bytes: the input is checked before parsing. */
    {"a: \xff\xfe\n", -EINVAL, "t.yaml:1:4: invalid UTF-8"},
    {"a: caf\xc3\n", -EINVAL, "t.yaml:1:7: invalid UTF-8"},
    {"# \xc3\xa9\xc3\xa9\nb: 'x\xed\xa0\x80'\n", -EINVAL, "t.yaml:2:6: invalid UTF-8"},
    {"a: 1\nb: *nope\n", -EINVAL, "t.yaml:2:4: unknown anchor \"nope\""},
};

static void test_errors(void **state)
{
    for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
        struct diag d;
        struct doc *doc = NULL;
        const struct error_case *c = &error_cases[i];

        diag_init(&d);
        assert_int_equal(doc_load_string("t.yaml", c->yaml, strlen(c->yaml), &d, &doc), c->err);
        assert_null(doc);
        if (strcmp(d.msg, c->msg) != 0)
            print_error("case %zu: got \"%s\"\n", i, d.msg);
        assert_string_equal(d.msg, c->msg);
        assert_true(d.line > 0);
    }
}

static void test_nul_byte(void **state)
{
    struct diag d;
    struct doc *doc = NULL;

    diag_init(&d);
    assert_int_equal(doc_load_string("t.yaml", "a: 1\nb: x\0y\n", 11, &d, &doc), -EINVAL);
    assert_null(doc);
    assert_string_equal(d.msg, "t.yaml:2:5: NUL byte in input");
}

static void test_libfyaml_tab_crash(void **state)
{
    /* libfyaml 0.7.12 crashes destroying the parser after this error; found by fuzzing. Only one
     * such load per process here: the loader parks one broken parser and leaks older ones. */
    load_fails("? x:\t>", -EINVAL, "t.yaml:1:5: cannot use tab for indentation of block entry");
}

static void test_depth_cap(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_(doc_freep) struct doc *ok = NULL;
    struct diag d;
    struct doc *doc = NULL;

    /* Exactly DOC_MAX_DEPTH levels load... */
    for (int i = 0; i < DOC_MAX_DEPTH; i++)
        assert_int_equal(strbuf_addch(&sb, '['), 0);
    for (int i = 0; i < DOC_MAX_DEPTH; i++)
        assert_int_equal(strbuf_addch(&sb, ']'), 0);
    ok = load_ok(strbuf_str(&sb));
    assert_int_equal(doc_count(ok), 1);

    /* ...and one more fails at the innermost opening bracket. */
    strbuf_reset(&sb);
    for (int i = 0; i <= DOC_MAX_DEPTH; i++)
        assert_int_equal(strbuf_addch(&sb, '['), 0);
    for (int i = 0; i <= DOC_MAX_DEPTH; i++)
        assert_int_equal(strbuf_addch(&sb, ']'), 0);
    diag_init(&d);
    assert_int_equal(doc_load_string("t.yaml", strbuf_str(&sb), sb.len, &d, &doc), -ELOOP);
    assert_null(doc);
    assert_string_equal(d.msg, "t.yaml:1:65: nesting deeper than 64 levels");
}

static void test_alias_bomb(void **state)
{
    /* Each level doubles the expansion: 2^25 values from a few hundred bytes. */
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct diag d;
    struct doc *doc = NULL;

    assert_int_equal(strbuf_addstr(&sb, "a0: &a0 [x, x]\n"), 0);
    for (int i = 1; i <= 25; i++)
        assert_int_equal(strbuf_addf(&sb, "a%d: &a%d [*a%d, *a%d]\n", i, i, i - 1, i - 1), 0);
    diag_init(&d);
    assert_int_equal(doc_load_string("t.yaml", strbuf_str(&sb), sb.len, &d, &doc), -E2BIG);
    assert_null(doc);
    assert_int_equal(strncmp(d.msg, "t.yaml:", 7), 0);
    assert_non_null(strstr(d.msg, ": document has more than 1048576 values (aliases expanded)"));
}

static void test_size_cap(void **state)
{
    struct diag d;
    struct doc *doc = NULL;

    /* The cap is checked before the text is read, so the text itself need not be that long. */
    diag_init(&d);
    assert_int_equal(doc_load_string("big.yaml", "a: 1", DOC_MAX_BYTES + 1, &d, &doc), -EFBIG);
    assert_null(doc);
    assert_non_null(strstr(d.msg, "big.yaml: larger than"));
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/test_doc_XXXXXX";
    struct diag d;
    struct doc *doc = NULL;
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a: [1,\n", 7), 7);
    close(fd);
    diag_init(&d);
    assert_int_equal(doc_load_file(path, &d, &doc), -EINVAL);
    assert_non_null(strstr(d.msg, path));
    assert_int_equal(strncmp(d.msg, path, strlen(path)), 0);
    assert_int_equal(d.line, 2);
    unlink(path);

    diag_init(&d);
    assert_int_equal(doc_load_file("/nonexistent/x.yaml", &d, &doc), -ENOENT);
    assert_string_equal(d.msg, "/nonexistent/x.yaml: No such file or directory");
    /* NULL diag is allowed. */
    assert_int_equal(doc_load_file("/nonexistent/x.yaml", NULL, &doc), -ENOENT);
    assert_null(doc);
}

/* "[0,0,...,0]" with n elements. */
static void zeros(struct strbuf *sb, size_t n)
{
    strbuf_reset(sb);
    assert_int_equal(strbuf_addch(sb, '['), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(strbuf_add(sb, i ? ",0" : "0", i ? 2 : 1), 0);
    assert_int_equal(strbuf_addch(sb, ']'), 0);
}

static void test_value_cap_config(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct diag d;

    /* Each value counts once however deep it is: 600,000 values two levels down load. */
    assert_int_equal(strbuf_addch(&sb, '['), 0);
    for (size_t i = 0; i < 3; i++) {
        struct strbuf inner = STRBUF_INIT;

        zeros(&inner, 200000);
        assert_int_equal(strbuf_add(&sb, i ? "," : "", i ? 1 : 0), 0);
        assert_int_equal(strbuf_add(&sb, inner.buf, inner.len), 0);
        strbuf_release(&inner);
    }
    assert_int_equal(strbuf_addch(&sb, ']'), 0);
    diag_init(&d);
    assert_int_equal(doc_load_string("t.json", strbuf_str(&sb), sb.len, &d, &doc), 0);
    assert_int_equal(json_array_size(json_array_get(doc_root(doc, 0), 2)), 200000);
    doc = doc_free(doc);

    /* Configuration limits: at most DOC_MAX_NODES values, however long the input. The value past
     * the cap is element 2^20, at column 2 + 2 * 2^20. */
    zeros(&sb, DOC_MAX_NODES + 10);
    diag_init(&d);
    assert_int_equal(doc_load_string("t.json", strbuf_str(&sb), sb.len, &d, &doc), -E2BIG);
    assert_null(doc);
    assert_string_equal(d.msg, "t.json:1:2097154: document has more than 1048576 values "
                               "(aliases expanded)");
    assert_int_equal(doc_load_string_limits("t.json", strbuf_str(&sb), sb.len, NULL, &d, &doc),
                     -E2BIG);

    /* Other fixed limits: the sequence itself is the fourth value. */
    diag_init(&d);
    assert_int_equal(doc_load_string_limits(
                         "t.yaml", "[1, 2, 3]", 9,
                         &(const struct doc_limits){.max_bytes = 100, .max_nodes = 3}, &d, &doc),
                     -E2BIG);
    assert_string_equal(d.msg, "t.yaml:1:1: document has more than 3 values (aliases expanded)");
    assert_int_equal(doc_load_string_limits("t.yaml", "[1, 2, 3]", 9,
                                            &(const struct doc_limits){.max_bytes = 8}, &d, &doc),
                     -EFBIG);
    assert_string_equal(d.msg, "t.yaml: larger than 8 bytes");
}

static void test_value_cap_manifest(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct diag d;

    /* Manifest limits scale with the input: a JSON array of more than 2^20 elements loads. */
    zeros(&sb, DOC_MAX_NODES + 10);
    diag_init(&d);
    assert_int_equal(
        doc_load_string_limits("t.json", strbuf_str(&sb), sb.len, &doc_limits_manifest, &d, &doc),
        0);
    assert_int_equal(doc_count(doc), 1);
    assert_int_equal(json_array_size(doc_root(doc, 0)), DOC_MAX_NODES + 10);
}

/* "a: &a [0,...]" (1,024 zeros), "b: [*a, ...]" (n aliases), then a comment of pad bytes. */
static void alias_doc(struct strbuf *sb, size_t n, size_t pad)
{
    strbuf_reset(sb);
    assert_int_equal(strbuf_addstr(sb, "a: &a "), 0);
    {
        struct strbuf list = STRBUF_INIT;

        zeros(&list, 1024);
        assert_int_equal(strbuf_add(sb, list.buf, list.len), 0);
        strbuf_release(&list);
    }
    assert_int_equal(strbuf_addstr(sb, "\nb: ["), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(strbuf_addstr(sb, i ? ", *a" : "*a"), 0);
    assert_int_equal(strbuf_addstr(sb, "]\n# "), 0);
    for (size_t i = 0; i < pad; i++)
        assert_int_equal(strbuf_addch(sb, 'x'), 0);
    assert_int_equal(strbuf_addch(sb, '\n'), 0);
}

static void test_value_cap_manifest_aliases(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    const size_t pad = (size_t)3 << 20;
    char want[160];
    size_t k;
    struct diag d;

    /* 2,048 aliases of 1,025 values each: 2.1 million values, more than 2^20 but fewer than the
     * 3 MiB of input: they load. */
    alias_doc(&sb, 2048, pad);
    diag_init(&d);
    assert_int_equal(
        doc_load_string_limits("t.yaml", strbuf_str(&sb), sb.len, &doc_limits_manifest, &d, &doc),
        0);
    assert_int_equal(json_array_size(json_object_get(doc_root(doc, 0), "b")), 2048);
    doc = doc_free(doc);

    /* 4,096 aliases expand past the input's size: refused at the first alias past the cap. Before
     * the aliases the document has key a, its 1,024 zeros, the sequence and key b. */
    alias_doc(&sb, 4096, pad);
    for (k = 0; 1027 + 1025 * (k + 1) <= sb.len; k++)
        ;
    snprintf(want, sizeof(want),
             "t.yaml:2:%zu: document has more than %zu values (aliases expanded)", 5 + 4 * k,
             sb.len);
    diag_init(&d);
    assert_int_equal(
        doc_load_string_limits("t.yaml", strbuf_str(&sb), sb.len, &doc_limits_manifest, &d, &doc),
        -E2BIG);
    assert_null(doc);
    assert_string_equal(d.msg, want);
    assert_int_equal(d.line, 2);
}

static void test_size_cap_manifest(void **state)
{
    char path[] = "/tmp/test_doc_XXXXXX";
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_free_ char *chunk = malloc(1 << 20);
    struct diag d;
    int fd = mkstemp(path);

    /* A file just over the configuration cap: a comment line of 16 MiB, then a value. */
    assert_true(fd >= 0);
    assert_non_null(chunk);
    memset(chunk, 'x', 1 << 20);
    chunk[0] = '#';
    for (int i = 0; i < 16; i++)
        assert_int_equal(write(fd, chunk, 1 << 20), 1 << 20);
    assert_int_equal(write(fd, "\na: 1\n", 6), 6);
    close(fd);

    diag_init(&d);
    assert_int_equal(doc_load_file(path, &d, &doc), -EFBIG);
    assert_null(doc);
    snprintf(chunk, 1 << 20, "%s: larger than %zu bytes", path, DOC_MAX_BYTES);
    assert_string_equal(d.msg, chunk);

    diag_init(&d);
    assert_int_equal(doc_load_file_limits(path, &doc_limits_manifest, &d, &doc), 0);
    assert_int_equal(json_integer_value(json_object_get(doc_root(doc, 0), "a")), 1);
    unlink(path);

    /* The manifest cap is checked before the text is read. */
    diag_init(&d);
    assert_int_equal(doc_load_string_limits("big.json", "a: 1", DOC_MANIFEST_MAX_BYTES + 1,
                                            &doc_limits_manifest, &d, &doc),
                     -EFBIG);
    assert_string_equal(d.msg, "big.json: larger than 268435456 bytes");
}

static const char *const gpu_yaml = "version: v1\n"
                                    "gpus:\n"
                                    "  - uuid: GPU-1\n"
                                    "    memory: lots\n"
                                    "    mig: yes\n"
                                    "    count: 9\n"
                                    "    memroy: 5\n"
                                    "    flag: null\n"
                                    "    flags: true\n"
                                    "  - index: 1\n";

static void test_getters(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = load_ok(gpu_yaml);
    json_t *root = doc_root(doc, 0), *gpus = NULL, *g0, *none = NULL;
    const char *s = NULL;
    int64_t n = 0;
    bool b = false;
    struct diag d;

    diag_init(&d);
    assert_int_equal(doc_get_string(doc, root, "version", true, NULL, &d, &s), 0);
    assert_string_equal(s, "v1");
    assert_int_equal(doc_get_string(doc, root, "kind", false, "Config", &d, &s), 0);
    assert_string_equal(s, "Config");
    assert_int_equal(doc_get_array(doc, root, "gpus", true, &d, &gpus), 0);
    assert_int_equal(json_array_size(gpus), 2);
    assert_int_equal(doc_get_object(doc, root, "absent", false, &d, &none), 0);
    assert_null(none);
    g0 = json_array_get(gpus, 0);

    assert_int_equal(doc_get_int(doc, g0, "count", true, 0, 0, 100, &d, &n), 0);
    assert_int_equal(n, 9);
    assert_int_equal(doc_get_int(doc, g0, "other", false, 3, 0, 100, &d, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(doc_get_bool(doc, g0, "flags", true, false, &d, &b), 0);
    assert_true(b);

    /* Out-parameters stay untouched on failure. */
    n = 1234;
    assert_int_equal(doc_get_int(doc, g0, "memory", true, 0, 0, 100, &d, &n), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:4:13: \"memory\": expected an integer, got string");
    assert_int_equal(n, 1234);
    assert_int_equal(d.line, 4);
    assert_int_equal(d.col, 13);

    assert_int_equal(doc_get_int(doc, g0, "count", true, 0, 0, 8, &d, &n), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:6:12: \"count\": 9 is out of range [0, 8]");

    assert_int_equal(doc_get_bool(doc, g0, "mig", true, false, &d, &b), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:5:10: \"mig\": expected a boolean, got string");

    /* A null value has no position of its own: the key's is used. */
    assert_int_equal(doc_get_string(doc, g0, "flag", true, NULL, &d, &s), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:8:5: \"flag\": expected a string, got null");
    assert_int_equal(doc_get_int(doc, g0, "flags", true, 0, 0, 1, &d, &n), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:9:5: \"flags\": expected an integer, got boolean");

    assert_int_equal(doc_get_string(doc, json_array_get(gpus, 1), "uuid", true, NULL, &d, &s),
                     -EINVAL);
    assert_string_equal(d.msg, "t.yaml:10:5: missing required key \"uuid\"");

    assert_int_equal(doc_get_object(doc, root, "gpus", true, &d, &none), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:3:3: \"gpus\": expected a mapping, got sequence");
    assert_int_equal(doc_get_array(doc, g0, "uuid", true, &d, &none), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:3:11: \"uuid\": expected a sequence, got string");

    assert_int_equal(doc_get_string(doc, gpus, "uuid", true, NULL, &d, &s), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:3:3: expected a mapping, got sequence");

    /* A missing mapping (say, an absent optional section passed on) is an error, not a crash. */
    assert_int_equal(doc_get_string(doc, NULL, "uuid", false, "d", &d, &s), -EINVAL);
    assert_string_equal(d.msg, "t.yaml: expected a mapping, got nothing");

    /* NULL diag: the error code still comes back. */
    assert_int_equal(doc_get_int(doc, g0, "memory", true, 0, 0, 100, NULL, &n), -EINVAL);
}

static void test_check_keys(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = load_ok(gpu_yaml);
    json_t *g0 = json_array_get(json_object_get(doc_root(doc, 0), "gpus"), 0);
    static const char *const allowed[] = {"uuid", "memory", "mig", "count", "flag", "flags", NULL};
    static const char *const all[] = {"uuid",   "memory", "mig",   "count",
                                      "memroy", "flag",   "flags", NULL};
    struct diag d;

    diag_init(&d);
    assert_int_equal(doc_check_keys(doc, g0, allowed, &d), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:7:5: unknown key \"memroy\"");
    diag_init(&d);
    assert_int_equal(doc_check_keys(doc, g0, all, &d), 0);
    assert_string_equal(d.msg, "");
}

static void test_positions(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = load_ok("# c\nlist:\n  - 1\n  - [a, b]\nt: true\n");
    json_t *root = doc_root(doc, 0), *list = json_object_get(root, "list");
    int line = -1, col = -1;
    struct diag d;

    assert_true(doc_position(doc, root, &line, &col));
    assert_int_equal(line, 2);
    assert_int_equal(col, 1);
    assert_true(doc_position(doc, list, &line, &col));
    assert_int_equal(line, 3);
    assert_int_equal(col, 3);
    assert_true(doc_position(doc, json_array_get(json_array_get(list, 1), 1), &line, &col));
    assert_int_equal(line, 4);
    assert_int_equal(col, 9);

    /* Singletons: unknown, and the out-parameters are left alone. */
    line = col = -1;
    assert_false(doc_position(doc, json_object_get(root, "t"), &line, &col));
    assert_int_equal(line, -1);
    /* A value that is not from this doc has no position either. */
    {
        _cleanup_json_ json_t *other = json_integer(5);

        assert_false(doc_position(doc, other, &line, &col));
    }

    assert_int_equal(doc_fail(doc, list, &d, -EINVAL, "bad %s", "list"), -EINVAL);
    assert_string_equal(d.msg, "t.yaml:3:3: bad list");
    assert_int_equal(doc_fail(doc, json_object_get(root, "t"), &d, -ENOENT, "bad t"), -ENOENT);
    assert_string_equal(d.msg, "t.yaml: bad t");
    assert_int_equal(d.line, 0);
    assert_int_equal(doc_fail(doc, list, NULL, -EINVAL, "x"), -EINVAL);
}

/* Manifests keep no positions; their syntax errors still have them. */
static void test_no_positions(void **state)
{
    static const char TEXT[] = "list:\n  - 1\n  - [a, b]\n";
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int line = -1, col = -1;
    struct diag d;

    (void)state;
    assert_int_equal(
        doc_load_string_limits("t.yaml", TEXT, strlen(TEXT), &doc_limits_manifest, &d, &doc), 0);
    assert_false(doc_position(doc, doc_root(doc, 0), &line, &col));
    assert_false(doc_position(doc, json_object_get(doc_root(doc, 0), "list"), &line, &col));
    doc = doc_free(doc);
    assert_int_equal(doc_load_string_limits("t.yaml", "a: [1\n", 6, &doc_limits_manifest, &d, &doc),
                     -EINVAL);
    assert_int_equal(d.line, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_integer_exact),
        cmocka_unit_test(test_nul_in_key),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_anchor_scope),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_libfyaml_tab_crash),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_depth_cap),
        cmocka_unit_test(test_alias_bomb),
        cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_check_keys),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_no_positions),
        cmocka_unit_test(test_value_cap_config),
        cmocka_unit_test(test_value_cap_manifest),
        cmocka_unit_test(test_value_cap_manifest_aliases),
        cmocka_unit_test(test_size_cap_manifest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
