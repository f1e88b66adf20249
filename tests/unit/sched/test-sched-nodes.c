/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the scheduler's node filters (src/sched/sched-nodes.c), table-driven: each case is a
 * pod spec and a node (YAML flow mappings) and the reason the node is rejected, exactly as the
 * scheduler words it, or NULL when the pod fits. Covered: spec.unschedulable and its toleration,
 * taints against tolerations (Equal, Exists, no operator, empty key, empty effect, NoExecute,
 * PreferNoSchedule ignored, the first untolerated taint named), spec.nodeSelector, every node
 * selector operator, ORed terms and ANDed requirements, empty terms, matchFields on metadata.name,
 * the filters' order, and invalid fields of either object; and each pod of
 * examples/dra/schedule-node-filters.yaml on each of its nodes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-diag.h"
#include "base-doc.h"
#include "base-macro.h"
#include "sched-nodes.h"

struct tcase {
    const char *name;
    const char *pod;  /* the Pod's spec */
    const char *node; /* the Node: {metadata: ..., spec: ...} */
    const char *want; /* NULL: fits */
};

#define PLAIN "{metadata: {name: n1}}"
#define LABELS(l) "{metadata: {name: n1, labels: " l "}}"
#define TAINTS(t) "{metadata: {name: n1}, spec: {taints: " t "}}"
#define CORDONED "{metadata: {name: n1}, spec: {unschedulable: true}}"
#define TOL(t) "{tolerations: " t "}"
#define REQ(terms)                                                                                 \
    "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "                  \
    "{nodeSelectorTerms: " terms "}}}}"
#define EXPR(key, op, values) "[{matchExpressions: [{key: " key ", operator: " op values "}]}]"
#define GPU_NODE LABELS("{gpu: a100, count: '8', zone: z1}")
#define TAINTED TAINTS("[{key: gpu, value: only, effect: NoSchedule}]")
#define AFF SCHED_REASON_AFFINITY
#define UNSCHED SCHED_REASON_UNSCHEDULABLE

static const struct tcase CASES[] = {
    /* NodeUnschedulable */
    {"empty pod, plain node", "{}", PLAIN, NULL},
    {"no spec at all on either side", "null", "{metadata: {name: n1}, spec: null}", NULL},
    {"unschedulable: false", "{}", "{metadata: {name: n1}, spec: {unschedulable: false}}", NULL},
    {"cordoned", "{}", CORDONED, UNSCHED},
    {"cordoned, its taint tolerated",
     TOL("[{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]"),
     CORDONED, NULL},
    {"cordoned, everything tolerated", TOL("[{operator: Exists}]"), CORDONED, NULL},
    {"cordoned, tolerated for NoExecute only",
     TOL("[{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoExecute}]"),
     CORDONED, UNSCHED},
    {"cordoned, a toleration of another key", TOL("[{key: other, operator: Exists}]"), CORDONED,
     UNSCHED},

    /* TaintToleration */
    {"untolerated NoSchedule taint", "{}", TAINTED, "node(s) had untolerated taint {gpu: only}"},
    {"untolerated taint without a value", "{}", TAINTS("[{key: dedicated, effect: NoSchedule}]"),
     "node(s) had untolerated taint {dedicated: }"},
    {"untolerated NoExecute taint", "{}", TAINTS("[{key: k, value: v, effect: NoExecute}]"),
     "node(s) had untolerated taint {k: v}"},
    {"PreferNoSchedule does not filter", "{}",
     TAINTS("[{key: k, value: v, effect: PreferNoSchedule}]"), NULL},
    {"Equal, same value", TOL("[{key: gpu, operator: Equal, value: only, effect: NoSchedule}]"),
     TAINTED, NULL},
    {"Equal, another value", TOL("[{key: gpu, operator: Equal, value: any, effect: NoSchedule}]"),
     TAINTED, "node(s) had untolerated taint {gpu: only}"},
    {"no operator is Equal", TOL("[{key: gpu, value: only}]"), TAINTED, NULL},
    {"no operator is Equal: no value is not any value", TOL("[{key: gpu}]"), TAINTED,
     "node(s) had untolerated taint {gpu: only}"},
    {"no operator, taint without value", TOL("[{key: dedicated}]"),
     TAINTS("[{key: dedicated, effect: NoSchedule}]"), NULL},
    {"Exists, any value", TOL("[{key: gpu, operator: Exists}]"), TAINTED, NULL},
    {"Exists of another key", TOL("[{key: gpux, operator: Exists}]"), TAINTED,
     "node(s) had untolerated taint {gpu: only}"},
    {"empty key with Exists tolerates every taint", TOL("[{operator: Exists}]"),
     TAINTS("[{key: a, value: x, effect: NoSchedule}, {key: b, effect: NoExecute}]"), NULL},
    {"empty key with Exists for one effect", TOL("[{operator: Exists, effect: NoSchedule}]"),
     TAINTS("[{key: a, value: x, effect: NoSchedule}, {key: b, effect: NoExecute}]"),
     "node(s) had untolerated taint {b: }"},
    {"another effect does not tolerate", TOL("[{key: gpu, operator: Exists, effect: NoExecute}]"),
     TAINTED, "node(s) had untolerated taint {gpu: only}"},
    {"empty effect matches every effect", TOL("[{key: k, operator: Exists}]"),
     TAINTS("[{key: k, effect: NoSchedule}, {key: k, effect: NoExecute}]"), NULL},
    {"the first untolerated taint is named", TOL("[{key: a, operator: Exists}]"),
     TAINTS("[{key: a, value: '1', effect: NoSchedule}, {key: b, value: '2', effect: NoSchedule},"
            " {key: c, value: '3', effect: NoExecute}]"),
     "node(s) had untolerated taint {b: 2}"},
    {"any toleration may tolerate a taint",
     TOL("[{key: x, operator: Exists}, {key: gpu, value: only, effect: NoSchedule}]"), TAINTED,
     NULL},

    /* NodeAffinity: nodeSelector */
    {"nodeSelector matches", "{nodeSelector: {gpu: a100, zone: z1}}", GPU_NODE, NULL},
    {"nodeSelector, one label differs", "{nodeSelector: {gpu: a100, zone: z2}}", GPU_NODE, AFF},
    {"nodeSelector, a label missing", "{nodeSelector: {gpu: a100, rack: r1}}", GPU_NODE, AFF},
    {"nodeSelector, node without labels", "{nodeSelector: {gpu: a100}}", PLAIN, AFF},
    {"empty nodeSelector", "{nodeSelector: {}}", PLAIN, NULL},

    /* NodeAffinity: required terms, every operator */
    {"In, matching", REQ(EXPR("gpu", "In", ", values: [h100, a100]")), GPU_NODE, NULL},
    {"In, another value", REQ(EXPR("gpu", "In", ", values: [h100]")), GPU_NODE, AFF},
    {"In, label missing", REQ(EXPR("rack", "In", ", values: [r1]")), GPU_NODE, AFF},
    {"NotIn, value listed", REQ(EXPR("gpu", "NotIn", ", values: [t4, a100]")), GPU_NODE, AFF},
    {"NotIn, value not listed", REQ(EXPR("gpu", "NotIn", ", values: [t4]")), GPU_NODE, NULL},
    {"NotIn, label missing", REQ(EXPR("rack", "NotIn", ", values: [r1]")), GPU_NODE, NULL},
    {"Exists, present", REQ(EXPR("gpu", "Exists", "")), GPU_NODE, NULL},
    {"Exists, missing", REQ(EXPR("rack", "Exists", "")), GPU_NODE, AFF},
    {"DoesNotExist, missing", REQ(EXPR("rack", "DoesNotExist", "")), GPU_NODE, NULL},
    {"DoesNotExist, present", REQ(EXPR("gpu", "DoesNotExist", ", values: []")), GPU_NODE, AFF},
    {"Gt, greater", REQ(EXPR("count", "Gt", ", values: ['4']")), GPU_NODE, NULL},
    {"Gt, equal", REQ(EXPR("count", "Gt", ", values: ['8']")), GPU_NODE, AFF},
    {"Lt, less", REQ(EXPR("count", "Lt", ", values: ['+9']")), GPU_NODE, NULL},
    {"Lt, greater", REQ(EXPR("count", "Lt", ", values: ['3']")), GPU_NODE, AFF},
    {"Lt, negative numbers", REQ(EXPR("t", "Lt", ", values: ['-2']")), LABELS("{t: '-10'}"), NULL},
    {"Gt, label not an integer", REQ(EXPR("gpu", "Gt", ", values: ['1']")), GPU_NODE, AFF},
    {"Gt, label out of int64 range", REQ(EXPR("c", "Gt", ", values: ['1']")),
     LABELS("{c: '9223372036854775808'}"), AFF},
    {"Lt, int64 minimum", REQ(EXPR("c", "Lt", ", values: ['0']")),
     LABELS("{c: '-9223372036854775808'}"), NULL},
    {"Gt, label missing", REQ(EXPR("rack", "Gt", ", values: ['1']")), GPU_NODE, AFF},
    {"requirements of a term are ANDed",
     REQ("[{matchExpressions: [{key: gpu, operator: In, values: [a100]}, "
         "{key: zone, operator: In, values: [z2]}]}]"),
     GPU_NODE, AFF},
    {"terms are ORed",
     REQ("[{matchExpressions: [{key: zone, operator: In, values: [z2]}]}, "
         "{matchExpressions: [{key: gpu, operator: In, values: [a100]}]}]"),
     GPU_NODE, NULL},
    {"no term matches",
     REQ("[{matchExpressions: [{key: zone, operator: In, values: [z2]}]}, "
         "{matchExpressions: [{key: gpu, operator: In, values: [t4]}]}]"),
     GPU_NODE, AFF},
    {"an empty list of terms matches nothing", REQ("[]"), GPU_NODE, AFF},
    {"no nodeSelectorTerms matches nothing",
     "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {}}}}", GPU_NODE,
     AFF},
    {"a term without requirements matches nothing", REQ("[{}]"), GPU_NODE, AFF},
    {"a term with empty lists matches nothing", REQ("[{matchExpressions: [], matchFields: []}]"),
     GPU_NODE, AFF},
    {"...but another term may match",
     REQ("[{}, {matchExpressions: [{key: gpu, operator: Exists}]}]"), GPU_NODE, NULL},
    {"matchFields In, the node's name",
     REQ("[{matchFields: [{key: metadata.name, operator: In, "
         "values: [n1]}]}]"),
     GPU_NODE, NULL},
    {"matchFields In, another name",
     REQ("[{matchFields: [{key: metadata.name, operator: In, "
         "values: [n2]}]}]"),
     GPU_NODE, AFF},
    {"matchFields NotIn, another name",
     REQ("[{matchFields: [{key: metadata.name, operator: NotIn, "
         "values: [n2]}]}]"),
     GPU_NODE, NULL},
    {"matchFields NotIn, the node's name",
     REQ("[{matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]}]"), GPU_NODE, AFF},
    {"matchFields and matchExpressions are ANDed",
     REQ("[{matchFields: [{key: metadata.name, operator: In, values: [n1]}], "
         "matchExpressions: [{key: gpu, operator: In, values: [t4]}]}]"),
     GPU_NODE, AFF},
    {"nodeSelector and affinity must both match",
     "{nodeSelector: {zone: z2}, affinity: {nodeAffinity: "
     "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
     "[{matchExpressions: [{key: gpu, operator: Exists}]}]}}}}",
     GPU_NODE, AFF},
    {"preferred affinity does not filter",
     "{affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, "
     "preference: {matchExpressions: [{key: rack, operator: Exists}]}}]}}}",
     GPU_NODE, NULL},

    /* the scheduler's order: NodeUnschedulable, TaintToleration, NodeAffinity */
    {"cordoned and tainted and not selected", "{nodeSelector: {gpu: t4}}",
     "{metadata: {name: n1, labels: {gpu: a100}}, spec: {unschedulable: true, "
     "taints: [{key: gpu, effect: NoSchedule}]}}",
     UNSCHED},
    {"tainted and not selected", "{nodeSelector: {gpu: t4}}",
     "{metadata: {name: n1, labels: {gpu: a100}}, spec: {taints: [{key: gpu, effect: "
     "NoSchedule}]}}",
     "node(s) had untolerated taint {gpu: }"},

    /* null is an absent field */
    {"null fields", "{nodeSelector: null, tolerations: null, affinity: {nodeAffinity: null}}",
     "{metadata: {name: n1, labels: null}, spec: {taints: null, unschedulable: null}}", NULL},

    /* invalid fields */
    {"spec not a mapping", "[]", PLAIN, "invalid pod: spec: expected a mapping, got sequence"},
    {"tolerations not a sequence", "{tolerations: {key: a}}", PLAIN,
     "invalid pod: spec.tolerations: expected a sequence, got mapping"},
    {"toleration key not a string", TOL("[{operator: Exists}, {key: 1, operator: Exists}]"), PLAIN,
     "invalid pod: spec.tolerations[1].key: expected a string, got integer"},
    {"toleration operator unknown", TOL("[{key: a, operator: Gt, value: '1'}]"), PLAIN,
     "invalid pod: spec.tolerations[0].operator: unsupported operator \"Gt\""},
    {"toleration, empty key without Exists", TOL("[{value: v}]"), PLAIN,
     "invalid pod: spec.tolerations[0].operator: must be Exists when key is empty"},
    {"toleration, Exists with a value", TOL("[{key: a, operator: Exists, value: v}]"), PLAIN,
     "invalid pod: spec.tolerations[0].value: must be empty when operator is Exists"},
    {"toleration effect unknown", TOL("[{key: a, operator: Exists, effect: Never}]"), PLAIN,
     "invalid pod: spec.tolerations[0].effect: unsupported effect \"Never\""},
    {"nodeSelector value not a string", "{nodeSelector: {gpu: true}}", PLAIN,
     "invalid pod: spec.nodeSelector.gpu: expected a string, got boolean"},
    {"affinity not a mapping", "{affinity: []}", PLAIN,
     "invalid pod: spec.affinity: expected a mapping, got sequence"},
    {"terms not a sequence", REQ("{}"), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms: expected a sequence, got mapping"},
    {"requirement without operator", REQ("[{}, {matchExpressions: [{key: a}]}]"), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[1].matchExpressions[0].operator: expected a string, got nothing"},
    {"requirement value not a string", REQ(EXPR("a", "In", ", values: [x, 2]")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].values[1]: expected a string, got integer"},
    {"unknown operator", REQ(EXPR("a", "Matches", ", values: [x]")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].operator: unsupported operator \"Matches\""},
    {"In without values", REQ(EXPR("a", "In", "")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].values: In needs at least one value"},
    {"Exists with values", REQ(EXPR("a", "Exists", ", values: [x]")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].values: Exists takes no values"},
    {"Gt with a value not an integer", REQ(EXPR("a", "Gt", ", values: ['1.5']")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].values: Gt needs exactly one integer value"},
    {"Lt with two values", REQ(EXPR("a", "Lt", ", values: ['1', '2']")), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchExpressions[0].values: Lt needs exactly one integer value"},
    {"matchFields on a label", REQ("[{matchFields: [{key: gpu, operator: In, values: [a]}]}]"),
     PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchFields[0].key: unsupported field \"gpu\" (only metadata.name)"},
    {"matchFields with Exists", REQ("[{matchFields: [{key: metadata.name, operator: Exists}]}]"),
     PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchFields[0].operator: unsupported operator \"Exists\" for a field"},
    {"matchFields In with two names",
     REQ("[{matchFields: [{key: metadata.name, operator: In, values: [n1, n2]}]}]"), PLAIN,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[0].matchFields[0].values: In on a field needs exactly one value"},
    {"an invalid term after a matching one still fails",
     REQ("[{matchExpressions: [{key: gpu, operator: Exists}]}, {matchFields: 1}]"), GPU_NODE,
     "invalid pod: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
     "nodeSelectorTerms[1].matchFields: expected a sequence, got integer"},
    {"invalid tolerations fail on an untainted node", TOL("[1]"), PLAIN,
     "invalid pod: spec.tolerations[0]: expected a mapping, got integer"},
    {"node labels not a mapping", "{}", "{metadata: {name: n1, labels: [a]}}",
     "invalid node: metadata.labels: expected a mapping, got sequence"},
    {"node label not a string", "{}", LABELS("{count: 8}"),
     "invalid node: metadata.labels.count: expected a string, got integer"},
    {"node name not a string", "{}", "{metadata: {name: 1}}",
     "invalid node: metadata.name: expected a string, got integer"},
    {"unschedulable not a boolean", "{}", "{spec: {unschedulable: 'true'}}",
     "invalid node: spec.unschedulable: expected a boolean, got string"},
    {"taints not a sequence", "{}", "{spec: {taints: {key: a}}}",
     "invalid node: spec.taints: expected a sequence, got mapping"},
    {"taint without effect", "{}", TAINTS("[{key: a}]"),
     "invalid node: spec.taints[0].effect: expected a string, got nothing"},
    {"taint value not a string", "{}", TAINTS("[{key: a, value: 1, effect: NoSchedule}]"),
     "invalid node: spec.taints[0].value: expected a string, got integer"},
    {"taint with an empty key", "{}", TAINTS("[{key: '', effect: NoSchedule}]"),
     "invalid node: spec.taints[0].key: must not be empty"},
    {"taint effect unknown", "{}", TAINTS("[{key: a, effect: Sometimes}]"),
     "invalid node: spec.taints[0].effect: unsupported effect \"Sometimes\""},
    {"the pod is checked first", "{tolerations: 1}", "{spec: 1}",
     "invalid pod: spec.tolerations: expected a sequence, got integer"},
};

static json_t *load(struct doc **doc, const char *name, const char *yaml)
{
    struct diag d;

    diag_init(&d);
    if (doc_load_string(name, yaml, strlen(yaml), &d, doc) < 0)
        fail_msg("%s: %s", name, d.msg);
    assert_int_equal(doc_count(*doc), 1);
    return doc_root(*doc, 0);
}

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        const struct tcase *t = &CASES[i];
        _cleanup_(doc_freep) struct doc *pdoc = NULL;
        _cleanup_(doc_freep) struct doc *ndoc = NULL;
        char pod[4096], buf[SCHED_NODE_REASON_MAX];
        const char *reason = "unset";
        json_t *p, *n;
        bool fits;

        snprintf(pod, sizeof(pod), "{kind: Pod, metadata: {name: p}, spec: %s}", t->pod);
        p = load(&pdoc, t->name, pod);
        n = load(&ndoc, t->name, t->node);
        fits = sched_node_fits(p, n, buf, sizeof(buf), &reason);
        if (fits != !t->want || (fits && reason) ||
            (!fits && (!reason || strcmp(reason, t->want) != 0)))
            fail_msg("case \"%s\": got %s (%s), want %s", t->name, fits ? "fit" : "no fit",
                     reason ? reason : "no reason", t->want ? t->want : "fit");
    }
}

/* A Pod or Node that is not a mapping at all. */
static void test_not_objects(void **state)
{
    json_t *obj = json_object(), *num = json_integer(1);
    char buf[SCHED_NODE_REASON_MAX];
    const char *reason = NULL;

    (void)state;
    assert_false(sched_node_fits(num, obj, buf, sizeof(buf), &reason));
    assert_string_equal(reason, "invalid pod: expected a mapping, got integer");
    assert_false(sched_node_fits(obj, NULL, buf, sizeof(buf), &reason));
    assert_string_equal(reason, "invalid node: expected a mapping, got nothing");
    assert_true(sched_node_fits(obj, obj, buf, sizeof(buf), &reason));
    assert_null(reason);
    json_decref(obj);
    json_decref(num);
}

/* Without a buffer the reasons that need one fall back to static texts; a small buffer truncates.
 */
static void test_buffers(void **state)
{
    static const char POD[] = "{spec: {tolerations: 1}}";
    static const char NODE[] = TAINTED;
    _cleanup_(doc_freep) struct doc *pdoc = NULL;
    _cleanup_(doc_freep) struct doc *ndoc = NULL;
    _cleanup_(doc_freep) struct doc *edoc = NULL;
    _cleanup_(doc_freep) struct doc *bdoc = NULL;
    json_t *bad = load(&pdoc, "pod", POD), *node = load(&ndoc, "node", NODE);
    json_t *empty = load(&edoc, "empty", "{}"), *bad_node = load(&bdoc, "bad node", "{spec: 1}");
    const char *reason = NULL;
    char small[16];

    (void)state;
    assert_false(sched_node_fits(empty, node, NULL, 0, &reason));
    assert_string_equal(reason, SCHED_REASON_TAINT);
    assert_false(sched_node_fits(bad, node, NULL, 0, &reason));
    assert_string_equal(reason, "invalid pod");
    assert_false(sched_node_fits(empty, bad_node, NULL, 0, &reason));
    assert_string_equal(reason, "invalid node");
    assert_false(sched_node_fits(empty, node, small, sizeof(small), &reason));
    assert_ptr_equal(reason, small);
    assert_string_equal(reason, "node(s) had unt");
    assert_false(sched_node_fits(bad, node, small, 5, &reason));
    assert_string_equal(reason, "inva");
    assert_false(sched_node_fits(bad, node, small, sizeof(small), &reason));
    assert_string_equal(reason, "invalid pod: sp");
}

/* examples/dra/schedule-node-filters.yaml: what the filters say for each of its pods on each node
 * (the example's header states the schedule that follows). */
static void test_example(void **state)
{
#define TAINT "node(s) had untolerated taint {dedicated: training}"
    static const struct {
        const char *pod, *node, *want;
    } WANT[] = {
        {"plain", "dgx-h100-0", TAINT},
        {"plain", "pcie-t4-0", NULL},
        {"trainer", "dgx-h100-0", NULL},
        {"trainer", "pcie-t4-0", AFF},
        {"trainer-no-toleration", "dgx-h100-0", TAINT},
        {"trainer-no-toleration", "pcie-t4-0", AFF},
        {"inference", "dgx-h100-0", TAINT},
        {"inference", "pcie-t4-0", NULL},
        {"anywhere", "dgx-h100-0", NULL},
        {"anywhere", "pcie-t4-0", NULL},
        {"big-memory", "dgx-h100-0", NULL},
        {"big-memory", "pcie-t4-0", AFF},
    };
#undef TAINT
    _cleanup_(doc_freep) struct doc *doc = NULL;
    size_t checked = 0;
    struct diag d;

    (void)state;
    diag_init(&d);
    if (doc_load_file(DRA_EXAMPLES_DIR "/schedule-node-filters.yaml", &d, &doc) < 0)
        fail_msg("%s", d.msg);
    for (size_t i = 0; i < doc_count(doc); i++) {
        const json_t *pod = doc_root(doc, i);

        if (strcmp(json_string_value(json_object_get(pod, "kind")), "Pod") != 0)
            continue;
        for (size_t j = 0; j < doc_count(doc); j++) {
            const json_t *node = doc_root(doc, j);
            const char *pname, *nname, *reason;
            char buf[SCHED_NODE_REASON_MAX];
            size_t k;
            bool fits;

            if (strcmp(json_string_value(json_object_get(node, "kind")), "Node") != 0)
                continue;
            pname = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
            nname = json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
            for (k = 0; k < ARRAY_SIZE(WANT); k++)
                if (strcmp(WANT[k].pod, pname) == 0 && strcmp(WANT[k].node, nname) == 0)
                    break;
            if (k == ARRAY_SIZE(WANT))
                fail_msg("pod %s on node %s: not in the table", pname, nname);
            fits = sched_node_fits(pod, node, buf, sizeof(buf), &reason);
            if (fits != !WANT[k].want || (!fits && strcmp(reason, WANT[k].want) != 0))
                fail_msg("pod %s on node %s: got %s, want %s", pname, nname, fits ? "fit" : reason,
                         WANT[k].want ? WANT[k].want : "fit");
            checked++;
        }
    }
    assert_int_equal(checked, ARRAY_SIZE(WANT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_not_objects),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
