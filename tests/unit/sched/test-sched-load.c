/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of what the scheduler keeps of the objects it reads (sched-load.c): a JSON List read
 * straight into its tables (sched_doc_prep, on one thread and on two) gives exactly what reading
 * the same objects with jansson and preparing them gives — Pods and Nodes cut to the fields the
 * scheduler reads whether "kind" comes first or last, the bookkeeping (managedFields, kubectl's
 * last-applied copy) dropped from every other kind, everything else kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-strbuf.h"
#include "sched.h"

#define MANAGED                                                                                    \
    "\"managedFields\": [{\"manager\": \"kubectl\", \"time\": \"2026-01-01T00:00:00Z\"}]"
#define APPLIED "\"kubectl.kubernetes.io/last-applied-configuration\": \"{}\""

static const char LIST[] =
    "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n"
    "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p1\", \"namespace\": "
    "\"ns\", \"labels\": {\"a\": \"b\"}, \"annotations\": {" APPLIED "}, " MANAGED "}, \"spec\": "
    "{\"nodeName\": \"\", \"containers\": [{\"name\": \"c\"}], \"resourceClaims\": [{\"name\": "
    "\"g\", \"resourceClaimName\": \"c1\"}], \"tolerations\": [{\"key\": \"k\"}]}, \"status\": "
    "{\"phase\": \"Pending\"}},\n"
    "{\"metadata\": {\"name\": \"p2\", \"namespace\": \"ns\", " MANAGED "}, \"spec\": "
    "{\"containers\": [], \"nodeSelector\": {\"x\": \"y\"}}, \"status\": {}, \"kind\": \"Pod\"},\n"
    "{\"kind\": \"Node\", \"apiVersion\": \"v1\", \"metadata\": {\"name\": \"n1\", \"labels\": "
    "{\"zone\": \"a\"}, \"annotations\": {" APPLIED ", \"other\": \"kept\"}, " MANAGED "}, "
    "\"spec\": {\"taints\": [{\"key\": \"t\", \"effect\": \"NoSchedule\"}], \"podCIDR\": "
    "\"10.0.0.0/24\"}, \"status\": {\"capacity\": {\"cpu\": \"8\"}}},\n"
    "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\", \"metadata\": "
    "{\"name\": "
    "\"s1\", \"annotations\": {" APPLIED ", \"other\": \"kept\"}, " MANAGED "}, \"spec\": "
    "{\"driver\": \"gpu.nvidia.com\", \"nodeName\": \"n1\", \"pool\": {\"name\": \"n1\", "
    "\"generation\": 1, \"resourceSliceCount\": 1}, \"devices\": [{\"name\": \"gpu-0\", "
    "\"attributes\": {\"managedFields\": {\"int\": 1}}}]}},\n"
    "{\"metadata\": {\"name\": \"c1\", \"namespace\": \"ns\", " MANAGED "}, \"kind\": "
    "\"ResourceClaim\", \"spec\": {\"devices\": {\"requests\": [{\"name\": \"r\", \"exactly\": "
    "{\"deviceClassName\": \"gpu\"}}]}}},\n"
    "{\"kind\": \"DeviceClass\", \"metadata\": {\"name\": \"gpu\"}, \"spec\": {\"selectors\": "
    "[]}}\n"
    "]}\n";

static int collect(void *arg, json_t *v, const struct doc_where *where, struct diag *d)
{
    _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT);

    (void)where;
    (void)d;
    assert_non_null(text);
    return strbuf_addf(arg, "%s\n", text);
}

static json_t *prepare(void *arg, unsigned worker, json_t *v)
{
    return sched_prepare(arg, worker, v);
}

/* What the loader hands of LIST through prep (or sched_doc_prep when NULL), split in two halves
 * from the first byte when `split`. */
static void load(const struct doc_prep *prep, bool split, struct strbuf *out)
{
    struct dalloc_gates g;
    struct sched *s = NULL;
    struct doc_prep p;
    struct diag d;

    dalloc_gates_default(&g);
    assert_int_equal(sched_new(&g, &s), 0);
    p = prep ? *prep : sched_doc_prep(s);
    p.arg = s;
    p.split_bytes = split ? 1 : 0;
    diag_init(&d);
    assert_int_equal(
        doc_load_string_each_prep("list.json", LIST, strlen(LIST), NULL, &p, collect, out, &d), 0);
    sched_free(s);
}

static void test_read_into_tables_as_prepared(void **state)
{
    const struct doc_prep plain = {.fn = prepare};
    _cleanup_strbuf_ struct strbuf want = STRBUF_INIT, one = STRBUF_INIT, two = STRBUF_INIT;
    _cleanup_strbuf_ struct strbuf want_two = STRBUF_INIT;

    (void)state;
    load(&plain, false, &want);
    load(&plain, true, &want_two);
    load(NULL, false, &one);
    load(NULL, true, &two);
    assert_string_equal(strbuf_str(&want), strbuf_str(&want_two));
    assert_string_equal(strbuf_str(&one), strbuf_str(&want));
    assert_string_equal(strbuf_str(&two), strbuf_str(&want));
    /* and what is kept is what the scheduler reads */
    assert_string_equal(
        strbuf_str(&one),
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns\"},\"spec\":{"
        "\"nodeName\":\"\",\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimName\":\"c1\"}],"
        "\"tolerations\":[{\"key\":\"k\"}]}}\n"
        "{\"metadata\":{\"name\":\"p2\",\"namespace\":\"ns\"},\"spec\":{\"nodeSelector\":{\"x\":"
        "\"y\"}},\"kind\":\"Pod\"}\n"
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"zone\":\"a\"}},\"spec\":"
        "{\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]}}\n"
        "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
        "\"s1\",\"annotations\":{\"other\":\"kept\"}},\"spec\":{\"driver\":\"gpu.nvidia.com\","
        "\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":1,\"resourceSliceCount\":1},"
        "\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"managedFields\":{\"int\":1}}}]}}\n"
        "{\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\"},\"kind\":\"ResourceClaim\",\"spec\":"
        "{\"devices\":{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu\"}}]}}}"
        "\n"
        "{\"kind\":\"DeviceClass\",\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"selectors\":[]}}\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_into_tables_as_prepared),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
