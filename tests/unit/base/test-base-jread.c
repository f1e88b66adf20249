/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of reading JSON straight into shared values (base-jread.h): the values jansson reads
 * (strings with every escape, surrogate pairs, raw UTF-8, integers at their limits, reals,
 * literals, large mappings), what jansson refuses refused too, the caps, sharing with the table,
 * and members left out by the keep callback (still checked, the "kind" it is told, keys decoded
 * into a buffer that moves).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-jread.h"
#include "base-strbuf.h"

/* A reader into a table of its own. */
struct reader {
    struct jdedup t;
    struct jread r;
};

static void reader_open(struct reader *rd)
{
    jdedup_init(&rd->t);
    jread_init(&rd->r, &rd->t);
}

static void reader_close(struct reader *rd)
{
    jread_release(&rd->r);
    jdedup_release(&rd->t);
}

/* The value text holds, to its end. */
static json_t *read_all(struct jread *r, const char *text, const char **next, int *err)
{
    return jread_value(r, text, text + strlen(text), next, err);
}

static char *dump(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    assert_non_null(s);
    return s;
}

/* jread's value of text, which must be jansson's too. */
static void agrees(const char *text)
{
    struct reader rd;
    json_error_t e;
    const char *next;
    int err;

    reader_open(&rd);
    {
        json_t *v = read_all(&rd.r, text, &next, &err);
        _cleanup_json_ json_t *want =
            json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
        _cleanup_free_ char *got = NULL, *exp = NULL;

        if (!v)
            fail_msg("refused (%d): %s", err, text);
        assert_non_null(want);
        got = dump(v);
        exp = dump(want);
        assert_string_equal(got, exp);
        assert_int_equal(json_typeof(v), json_typeof(want));
        assert_int_equal(strspn(next, " \t\r\n"), strlen(next)); /* it ends with the value */
    }
    reader_close(&rd);
}

static void test_values_as_jansson(void **state)
{
    static const char *const texts[] = {
        "{}",
        "[]",
        "{\"a\": {\"b\": [1, 2, {\"c\": []}], \"d\": {}}, \"e\": \"f\"}",
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\\ud83d\\ude00\", \"caf\xc3\xa9 "
        "\xe2\x82\xac "
        "\xf0\x9f\x98\x80\"]",
        "{\"k\\u00e9y\\n\": 1, \"\\\"\": 2, \"\": 3}",
        "[0, -0, 7, -7, 9223372036854775807, -9223372036854775808]",
        "[1.5, -0.0, 0.0, 1e10, 1E-5, 2.5e+3, 5e-324, 1e-400, 1.7976931348623157e308]",
        "[true, false, null]",
        "\"a string alone\"",
        "42",
        "  \t\r\n{ \"spaced\" :\t[ 1 ,2 ] }  ",
        "\"\x7f is DEL\"",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        agrees(texts[i]);
}

static void test_large_containers(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    (void)state;
    /* a node's many labels: more keys than are compared pairwise */
    assert_int_equal(strbuf_addstr(&sb, "{"), 0);
    for (int i = 0; i < 200; i++)
        assert_int_equal(strbuf_addf(&sb, "%s\"label-%03d\": \"v%d\"", i ? "," : "", i, i % 7), 0);
    assert_int_equal(strbuf_addstr(&sb, ", \"list\": ["), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(strbuf_addf(&sb, "%s{\"n\": %d}", i ? "," : "", i % 3), 0);
    assert_int_equal(strbuf_addstr(&sb, "]}"), 0);
    agrees(strbuf_str(&sb));
}

/* text is refused with err, and jansson refuses it too (or, for caps, reads it). */
static void refused(struct jread *r, const char *text, size_t len, int want_err)
{
    const char *next = NULL;
    json_error_t e;
    int err = 0;
    json_t *v = jread_value(r, text, text + len, &next, &err);

    if (v)
        fail_msg("accepted: %.*s", (int)len, text);
    assert_int_equal(err, want_err);
    assert_ptr_equal(next, text);
    if (want_err == -EINVAL) {
        json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);

        if (j) {
            json_decref(j);
            fail_msg("jansson reads it: %.*s", (int)len, text);
        }
    }
}

static void test_refused_as_jansson(void **state)
{
    static const char *const texts[] = {
        "{\"a\": 1, \"a\": 2}",
        "{\"a\": 1, \"\\u0061\": 2}",
        "\"\\u0000\"",
        "{\"\\u0000\": 1}",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\ud800\\u0041\"",
        "\"\\x\"",
        "\"\\u12G4\"",
        "\"tab\there\"",
        "\"\xc0\x80\"",
        "\"\xed\xa0\x80\"",
        "\"\xf5\x80\x80\x80\"",
        "\"\xe2\x82\"",
        "01",
        "-",
        "1.",
        ".5",
        "1e",
        "+1",
        "9223372036854775808",
        "-9223372036854775809",
        "1e400",
        "tru",
        "nul",
        "\"open",
        "{\"a\": 1",
        "[1, 2",
        "[1,]",
        "{\"a\": 1,}",
        "{\"a\" 1}",
        "{1: 2}",
        "[1 2]",
        "",
        "   ",
    };
    struct reader rd;

    (void)state;
    reader_open(&rd);
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        refused(&rd.r, texts[i], strlen(texts[i]), -EINVAL);
    /* a duplicate among many keys */
    {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

        assert_int_equal(strbuf_addstr(&sb, "{"), 0);
        for (int i = 0; i < 40; i++)
            assert_int_equal(strbuf_addf(&sb, "\"k%d\": %d, ", i, i), 0);
        assert_int_equal(strbuf_addstr(&sb, "\"k17\": 0}"), 0);
        refused(&rd.r, strbuf_str(&sb), strlen(strbuf_str(&sb)), -EINVAL);
    }
    reader_close(&rd);
}

static void test_ends_after_value(void **state)
{
    static const char text[] = "{\"a\": [1, \"x\"]} , {\"b\": 2}]";
    struct reader rd;
    const char *next;
    int err;

    (void)state;
    reader_open(&rd);
    assert_non_null(read_all(&rd.r, text, &next, &err));
    assert_string_equal(next, " , {\"b\": 2}]");
    /* a number ends where its digits do */
    assert_non_null(read_all(&rd.r, "123,4", &next, &err));
    assert_string_equal(next, ",4");
    reader_close(&rd);
}

static void test_caps(void **state)
{
    struct reader rd;
    const char *next;
    int err;

    (void)state;
    reader_open(&rd);
    rd.r.level = 2;
    rd.r.max_depth = 5;
    assert_non_null(read_all(&rd.r, "[[[1]]]", &next, &err));
    refused(&rd.r, "[[[[1]]]]", 9, -E2BIG);
    refused(&rd.r, "{\"a\": {\"b\": {\"c\": {}}}}", 24, -E2BIG);
    /* values are counted as the YAML reader counts them: a mapping's keys too */
    rd.r.max_depth = 0;
    rd.r.max_nodes = 5;
    rd.r.nodes = 0;
    assert_non_null(read_all(&rd.r, "{\"a\": [1, 2]}", &next, &err));
    assert_int_equal(rd.r.nodes, 5);
    rd.r.nodes = 0;
    refused(&rd.r, "{\"a\": [1, 2, 3]}", 16, -E2BIG);
    /* counted across calls */
    rd.r.nodes = 4;
    refused(&rd.r, "[1]", 3, -E2BIG);
    reader_close(&rd);
}

static void test_shared_with_table(void **state)
{
    static const char a[] =
        "{\"name\": \"gpu-0\", \"attributes\": {\"type\": {\"string\": \"gpu\"}}}";
    static const char b[] =
        "{\"name\": \"gpu-1\", \"attributes\": {\"type\": {\"string\": \"gpu\"}}}";
    struct reader rd;
    json_t *va, *vb, *again;
    json_error_t e;
    const char *next;
    int err;

    (void)state;
    reader_open(&rd);
    va = read_all(&rd.r, a, &next, &err);
    vb = read_all(&rd.r, b, &next, &err);
    assert_non_null(va);
    assert_non_null(vb);
    assert_ptr_not_equal(va, vb);
    assert_ptr_equal(json_object_get(va, "attributes"), json_object_get(vb, "attributes"));
    again = read_all(&rd.r, a, &next, &err);
    assert_ptr_equal(again, va);
    /* the table knows them as its own, and gives them back for equal values parsed elsewhere */
    assert_true(jdedup_holds(&rd.t, va));
    {
        _cleanup_json_ json_t *parsed = json_loads(a, 0, &e);
        _cleanup_json_ json_t *shared = jdedup_value(&rd.t, parsed);

        assert_false(jdedup_holds(&rd.t, parsed));
        assert_ptr_equal(shared, va);
    }
    reader_close(&rd);
}

/* What the keep callback was asked, and its rules: drop members named "drop" anywhere, "spec" of a
 * Pod, and metadata.annotations.secret. */
struct asked {
    struct strbuf log;
};

static bool keep(void *arg, const char *kind, const struct jread_key *path, size_t depth)
{
    struct asked *a = arg;

    assert_int_equal(strbuf_addf(&a->log, "%s:", kind ? kind : "-"), 0);
    for (size_t i = 0; i < depth; i++)
        assert_int_equal(strbuf_addf(&a->log, "%s%.*s", i ? "." : "", (int)path[i].len, path[i].s),
                         0);
    assert_int_equal(strbuf_addstr(&a->log, " "), 0);
    if (jread_key_is(&path[depth - 1], "drop"))
        return false;
    if (depth == 1 && kind && strcmp(kind, "Pod") == 0 && jread_key_is(&path[0], "spec"))
        return false;
    return !(depth == 3 && jread_key_is(&path[0], "metadata") &&
             jread_key_is(&path[1], "annotations") && jread_key_is(&path[2], "secret"));
}

static void kept_as(const char *text, const char *want, const char *want_log)
{
    struct asked a = {STRBUF_INIT};
    struct reader rd;
    const char *next;
    int err;
    json_t *v;

    reader_open(&rd);
    rd.r.keep = keep;
    rd.r.keep_arg = &a;
    v = read_all(&rd.r, text, &next, &err);
    if (!want) {
        assert_null(v);
        assert_int_equal(err, -EINVAL);
    } else {
        _cleanup_free_ char *got = NULL;

        assert_non_null(v);
        got = dump(v);
        assert_string_equal(got, want);
    }
    if (want_log)
        assert_string_equal(strbuf_str(&a.log), want_log);
    strbuf_release(&a.log);
    reader_close(&rd);
}

static void test_keep(void **state)
{
    (void)state;
    kept_as("{\"kind\": \"Pod\", \"metadata\": {\"name\": \"p\", \"drop\": {\"x\": 1}, "
            "\"annotations\": {\"secret\": \"s\", \"a\": {\"deep\": {\"drop\": 1}}}}, "
            "\"spec\": {\"c\": 1}, \"items\": [{\"drop\": 1}]}",
            "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"annotations\":{\"a\":{\"deep\":{"
            "\"drop\":1}}}},\"items\":[{\"drop\":1}]}",
            "-:kind Pod:metadata Pod:metadata.name Pod:metadata.drop Pod:metadata.annotations "
            "Pod:metadata.annotations.secret Pod:metadata.annotations.a Pod:spec Pod:items ");
    /* "kind" after the member: not known when it is asked about */
    kept_as("{\"spec\": {\"c\": 1}, \"kind\": \"Pod\"}", "{\"spec\":{\"c\":1},\"kind\":\"Pod\"}",
            "-:spec -:spec.c -:kind ");
    /* a member left out is read through all the same */
    kept_as("{\"drop\": {\"a\": 1, \"a\": 2}}", NULL, NULL);
    kept_as("{\"drop\": [\"\\u0000\"]}", NULL, NULL);
    kept_as("{\"drop\": [1, 2}", NULL, NULL);
    kept_as("{\"drop\": {\"a\": 1}, \"drop\": 2}", NULL, NULL);
}

static void test_keys_decoded_while_buffer_grows(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT, want_log = STRBUF_INIT;
    _cleanup_strbuf_ struct strbuf key1 = STRBUF_INIT, key2 = STRBUF_INIT;
    _cleanup_strbuf_ struct strbuf esc1 = STRBUF_INIT, esc2 = STRBUF_INIT;

    (void)state;
    /* keys with escapes are decoded into the scratch buffer; a later, longer one moves it */
    for (int i = 0; i < 300; i++) {
        assert_int_equal(strbuf_addstr(&key1, "a\n"), 0);
        assert_int_equal(strbuf_addstr(&esc1, "a\\n"), 0);
    }
    for (int i = 0; i < 3000; i++) {
        assert_int_equal(strbuf_addstr(&key2, "b\t"), 0);
        assert_int_equal(strbuf_addstr(&esc2, "b\\t"), 0);
    }
    assert_int_equal(strbuf_addf(&sb, "{\"%s\": {\"%s\": {\"drop\": 1, \"k\": 2}}}",
                                 strbuf_str(&esc1), strbuf_str(&esc2)),
                     0);
    assert_int_equal(strbuf_addf(&want_log, "-:%s -:%s.%s -:%s.%s.drop -:%s.%s.k ",
                                 strbuf_str(&key1), strbuf_str(&key1), strbuf_str(&key2),
                                 strbuf_str(&key1), strbuf_str(&key2), strbuf_str(&key1),
                                 strbuf_str(&key2)),
                     0);
    {
        _cleanup_strbuf_ struct strbuf want = STRBUF_INIT;

        assert_int_equal(strbuf_addstr(&want, "{"), 0);
        assert_int_equal(strbuf_add_json_string(&want, strbuf_str(&key1)), 0);
        assert_int_equal(strbuf_addstr(&want, ":{"), 0);
        assert_int_equal(strbuf_add_json_string(&want, strbuf_str(&key2)), 0);
        assert_int_equal(strbuf_addstr(&want, ":{\"k\":2}}}"), 0);
        kept_as(strbuf_str(&sb), strbuf_str(&want), strbuf_str(&want_log));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_as_jansson),
        cmocka_unit_test(test_large_containers),
        cmocka_unit_test(test_refused_as_jansson),
        cmocka_unit_test(test_ends_after_value),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_shared_with_table),
        cmocka_unit_test(test_keep),
        cmocka_unit_test(test_keys_decoded_while_buffer_grows),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
