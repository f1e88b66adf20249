/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the DRA scheduling simulator (src/sched) through its public API, table-driven from
 * small YAML inputs: ties go to the first node by name, an allocation is committed for later pods,
 * earlier firstAvailable sub-requests win, unschedulable pods with reason counts, named claims,
 * unknown templates. Each case states the result ("pod=node ..." with "-" for unschedulable) or
 * the error.
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
#include "base-strbuf.h"
#include "sched.h"

#define CLASSES                                                                                    \
    "kind: DeviceClass\nmetadata: {name: a}\n"                                                     \
    "spec: {selectors: [{cel: {expression: 'device.driver == \"a\"'}}]}\n---\n"                    \
    "kind: DeviceClass\nmetadata: {name: b}\n"                                                     \
    "spec: {selectors: [{cel: {expression: 'device.driver == \"b\"'}}]}\n---\n"
#define NODE(n) "kind: Node\nmetadata: {name: " n "}\n---\n"
#define SLICE(n, drv, devs)                                                                        \
    "kind: ResourceSlice\nmetadata: {name: s-" n "}\n"                                             \
    "spec: {driver: " drv ", pool: {name: " n ", generation: 1, resourceSliceCount: 1}, "          \
    "nodeName: " n ", devices: " devs "}\n---\n"
#define TMPL(name, reqs)                                                                           \
    "kind: ResourceClaimTemplate\nmetadata: {name: " name ", namespace: default}\n"                \
    "spec: {spec: {devices: {requests: " reqs "}}}\n---\n"
#define POD(name, claims)                                                                          \
    "kind: Pod\nmetadata: {name: " name ", namespace: default}\n"                                  \
    "spec: {resourceClaims: " claims "}\n---\n"
#define ONE_A "[{name: r, exactly: {deviceClassName: a}}]"
#define USE(t) "[{name: g, resourceClaimTemplateName: " t "}]"

struct tcase {
    const char *name;
    const char *yaml;
    int want;           /* 0 or a negative errno */
    const char *placed; /* for 0: "p1=n1 p2=-" */
    const char *msg;    /* for errors: a substring of the message */
};

static const struct tcase CASES[] = {
    {"tie goes to the first node by name",
     CLASSES NODE("n2") NODE("n1") SLICE("n1", "a", "[{name: d}]") SLICE("n2", "a", "[{name: d}]")
         TMPL("t", ONE_A) POD("p1", USE("t")),
     0, "p1=n1", NULL},
    {"an allocation is committed for later pods",
     CLASSES NODE("n1") NODE("n2") SLICE("n1", "a", "[{name: d}]") SLICE("n2", "a", "[{name: d}]")
         TMPL("t", ONE_A) POD("p1", USE("t")) POD("p2", USE("t")),
     0, "p1=n1 p2=n2", NULL},
    {"an earlier firstAvailable sub-request scores higher",
     CLASSES NODE("n1") NODE("n2") SLICE("n1", "a", "[{name: d}]") SLICE("n2", "b", "[{name: d}]")
         TMPL("t", "[{name: r, firstAvailable: [{name: x, deviceClassName: b}, "
                   "{name: y, deviceClassName: a}]}]") POD("p1", USE("t")),
     0, "p1=n2", NULL},
    {"unschedulable",
     CLASSES NODE("n1") SLICE("n1", "a", "[{name: d}]") TMPL("t", ONE_A) POD("p1", USE("t"))
         POD("p2", USE("t")),
     0, "p1=n1 p2=-", NULL},
    {"a named pending claim",
     CLASSES NODE("n1") SLICE(
         "n1", "a", "[{name: d}]") "kind: ResourceClaim\nmetadata: {name: c1, namespace: default}\n"
                                   "spec: {devices: {requests: " ONE_A
                                   "}}\n---\n" POD("p1", "[{name: g, resourceClaimName: c1}]")
                                       POD("p2", "[{name: g, resourceClaimName: c1}]"),
     0, "p1=n1 p2=n1", NULL},
    {"a bound pod is not scheduled",
     CLASSES NODE("n1") "kind: Pod\nmetadata: {name: p0}\nspec: {nodeName: n1}\n---\n", 0, "",
     NULL},
    {"a shared claim pins later pods to its node",
     CLASSES NODE("n1") NODE("n2") SLICE("n1", "a", "[{name: d}]") SLICE("n2", "a", "[{name: d}]")
         TMPL("t", ONE_A) "kind: ResourceClaim\nmetadata: {name: c1, namespace: default}\n"
                          "spec: {devices: {requests: " ONE_A "}}\n---\n" POD("p0", USE("t"))
                              POD("p1", "[{name: g, resourceClaimName: c1}]")
                                  POD("p2", "[{name: g, resourceClaimName: c1}]"),
     0, "p0=n1 p1=n2 p2=n2", NULL},
    {"an allNodes slice is seen from every node, its device used once",
     CLASSES NODE("n1")
         NODE("n2") "kind: ResourceSlice\nmetadata: {name: net}\nspec: {driver: a, pool: {name: "
                    "net, generation: "
                    "1, resourceSliceCount: 1}, allNodes: true, devices: [{name: d}]}\n---\n" SLICE(
                        "n2", "b", "[{name: d}]") TMPL("t", ONE_A) POD("p1", USE("t"))
                        POD("p2", USE("t")),
     0, "p1=n1 p2=-", NULL},
    {"unknown template", CLASSES NODE("n1") POD("p1", USE("nope")), -ENOENT, NULL,
     "ResourceClaimTemplate default/nope not found"},
    {"claim without a source", CLASSES NODE("n1") POD("p1", "[{name: g}]"), -EINVAL, NULL,
     "spec.resourceClaims[0]"},
};

static int run_case(const struct tcase *t, struct diag *d, json_t **out)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(sched_freep) struct sched *s = NULL;
    struct dalloc_gates g;
    int r;

    dalloc_gates_default(&g);
    assert_int_equal(doc_load_string(t->name, t->yaml, strlen(t->yaml), d, &doc), 0);
    assert_int_equal(sched_new(&g, &s), 0);
    for (size_t i = 0; i < doc_count(doc); i++) {
        if (json_is_null(doc_root(doc, i)))
            continue;
        if ((r = sched_add(s, doc_root(doc, i), d)) < 0)
            return r;
    }
    return sched_run(s, d, NULL, NULL, NULL, out);
}

static void placed(json_t *res, struct strbuf *sb)
{
    json_t *p;
    size_t i;

    json_array_foreach(res, i, p)
    {
        const char *pod = json_string_value(json_object_get(p, "pod"));
        const char *node = json_string_value(json_object_get(p, "node"));

        assert_int_equal(
            strbuf_addf(sb, "%s%s=%s", sb->len ? " " : "", strchr(pod, '/') + 1, node ? node : "-"),
            0);
    }
}

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        const struct tcase *t = &CASES[i];
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        _cleanup_json_ json_t *out = NULL;
        struct diag d;
        int r;

        diag_init(&d);
        r = run_case(t, &d, &out);
        if (r != t->want || (t->msg && !strstr(d.msg, t->msg)))
            fail_msg("case \"%s\": got %d (%s), want %d (%s)", t->name, r, d.msg, t->want,
                     t->msg ? t->msg : "");
        if (t->placed) {
            placed(out, &sb);
            if (strcmp(strbuf_str(&sb), t->placed) != 0)
                fail_msg("case \"%s\": got \"%s\", want \"%s\"", t->name, strbuf_str(&sb),
                         t->placed);
        }
    }
}

/* Reasons are counted across nodes: the node's name is taken out of the message. */
static void test_reasons(void **state)
{
    static const char YAML[] =
        CLASSES NODE("n1") NODE("n2") NODE("n3") TMPL("t", ONE_A) POD("p1", USE("t"));
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(sched_freep) struct sched *s = NULL;
    _cleanup_json_ json_t *out = NULL;
    struct sched_stats st;
    struct dalloc_gates g;
    struct diag d;
    json_t *reasons, *v;
    const char *k;

    (void)state;
    diag_init(&d);
    dalloc_gates_default(&g);
    assert_int_equal(doc_load_string("reasons", YAML, strlen(YAML), &d, &doc), 0);
    assert_int_equal(sched_new(&g, &s), 0);
    for (size_t i = 0; i < doc_count(doc); i++)
        if (!json_is_null(doc_root(doc, i)))
            assert_int_equal(sched_add(s, doc_root(doc, i), &d), 0);
    assert_int_equal(sched_run(s, &d, &st, NULL, NULL, &out), 0);
    assert_int_equal(st.pods, 1);
    assert_int_equal(st.scheduled, 0);
    assert_int_equal(st.attempts, 3);
    reasons = json_object_get(json_array_get(out, 0), "reasons");
    assert_int_equal(json_object_size(reasons), 1);
    json_object_foreach(reasons, k, v)
    {
        assert_null(strstr(k, "on node"));
        assert_int_equal(json_integer_value(v), 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
