/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of `gpuplane schedule`'s output written a pod at a time (sched-print.h): for every format
 * the text is byte for byte what the command printed when it built the whole document first —
 * jansson's indented dump and yaml_emit of {"pods": [...], "summary": {...}}, and the table
 * printed row by row with printf — for no pods, one, and a run of scheduled and unschedulable pods
 * with devices, reasons, messages and strings that need escaping.
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
#include "base-yaml.h"
#include "sched-print.h"

static const char *const RESULTS[] = {
    ("{\"pod\": \"default/p1\", \"node\": \"n1\", \"score\": 1, \"devices\": "
     "[\"p1-gpus/gpus=gpu.nvidia.com/n1/gpu-0\", \"p1-gpus/gpus=gpu.nvidia.com/n1/gpu-1\"], "
     "\"reasons\": {}}"),
    ("{\"pod\": \"bench/p2\", \"node\": null, \"score\": 0, \"devices\": [], \"reasons\": "
     "{\"cannot allocate all claims\": 2, \"node(s) had untolerated taint {k: v}\": 1}, "
     "\"message\": \"0/3 nodes are available: 2 cannot allocate all claims.\"}"),
    ("{\"pod\": \"default/caf\\u00e9 \\\"q\\\"\\n\", \"node\": \"n-2\", \"score\": 0, "
     "\"devices\": [\"c/r=a/p/d\"], \"reasons\": {\"x\": 1}}"),
    "{\"pod\": \"default/p4\", \"node\": null, \"score\": 0, \"devices\": [], \"reasons\": {}}",
};

/* What the command printed before: the table, with printf. */
static void old_table(FILE *f, json_t *res, size_t pods, size_t scheduled)
{
    json_t *p, *v;
    const char *k;
    size_t i, j;

    fprintf(f, "%-32s %-20s %-6s %s\n", "POD", "NODE", "SCORE", "DEVICES / REASONS");
    json_array_foreach(res, i, p)
    {
        const char *node = json_string_value(json_object_get(p, "node"));

        fprintf(f, "%-32s %-20s ", json_string_value(json_object_get(p, "pod")),
                node ? node : "<none>");
        if (node) {
            fprintf(f, "%-6lld", (long long)json_integer_value(json_object_get(p, "score")));
            json_array_foreach(json_object_get(p, "devices"), j, v)
                fprintf(f, "%s%s", j ? ", " : " ", json_string_value(v));
        } else {
            fprintf(f, "%-6s", "-");
            j = 0;
            json_object_foreach(json_object_get(p, "reasons"), k, v) fprintf(
                f, "%s%lld node(s): %s", j++ ? "; " : " ", (long long)json_integer_value(v), k);
        }
        fputc('\n', f);
    }
    fprintf(f, "\nscheduled %zu of %zu pods, %zu unschedulable\n", scheduled, pods,
            pods - scheduled);
}

/* What the command printed before: the whole document, as JSON (puts) or YAML. */
static char *old_output(json_t *res, enum sched_fmt fmt, size_t pods, size_t scheduled)
{
    _cleanup_json_ json_t *doc = NULL;
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (fmt == SCHED_FMT_TABLE) {
        f = open_memstream(&text, &len);
        assert_non_null(f);
        old_table(f, res, pods, scheduled);
        fclose(f);
        return text;
    }
    doc = json_pack("{s:O, s:{s:I, s:I, s:I}}", "pods", res, "summary", "pods", (json_int_t)pods,
                    "scheduled", (json_int_t)scheduled, "unschedulable",
                    (json_int_t)(pods - scheduled));
    assert_non_null(doc);
    if (fmt == SCHED_FMT_JSON) {
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        assert_non_null(s);
        assert_int_equal(strbuf_addstr(&sb, s), 0);
        assert_int_equal(strbuf_addch(&sb, '\n'), 0);
        free(s);
    } else {
        assert_int_equal(yaml_emit(&sb, doc), 0);
    }
    return strbuf_detach(&sb, NULL);
}

/* The first n results, streamed and printed the old way, in every format. */
static void compare(size_t n)
{
    static const enum sched_fmt FMTS[] = {SCHED_FMT_TABLE, SCHED_FMT_JSON, SCHED_FMT_YAML};
    _cleanup_json_ json_t *res = json_array();
    size_t scheduled = 0;

    for (size_t i = 0; i < n; i++) {
        json_error_t e;
        json_t *r = json_loads(RESULTS[i % (sizeof(RESULTS) / sizeof(RESULTS[0]))], 0, &e);

        assert_non_null(r);
        scheduled += json_is_string(json_object_get(r, "node"));
        assert_int_equal(json_array_append_new(res, r), 0);
    }
    for (size_t f = 0; f < sizeof(FMTS) / sizeof(FMTS[0]); f++) {
        _cleanup_free_ char *want = old_output(res, FMTS[f], n, scheduled);
        struct sched_printer p;
        json_t *r;
        size_t i;

        sched_printer_init(&p, FMTS[f]);
        json_array_foreach(res, i, r) assert_int_equal(sched_printer_pod(&p, r), 0);
        assert_int_equal(sched_printer_end(&p, n, scheduled), 0);
        if (strcmp(strbuf_str(&p.out), want) != 0)
            print_error("format %zu, %zu pods\nwant:\n%s\ngot:\n%s\n", f, n, want,
                        strbuf_str(&p.out));
        assert_string_equal(strbuf_str(&p.out), want);
        sched_printer_release(&p);
    }
}

static void test_no_pods(void **state)
{
    (void)state;
    compare(0);
}

static void test_one_pod(void **state)
{
    (void)state;
    compare(1);
    compare(2);
}

static void test_many_pods(void **state)
{
    (void)state;
    compare(4);
    compare(101);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_pods),
        cmocka_unit_test(test_one_pod),
        cmocka_unit_test(test_many_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
