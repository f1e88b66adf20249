/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the allocator's incremental use (dalloc_try, dalloc_commit, dalloc_set_cel), the way
 * `gpuplane schedule` drives one allocator per node: a try leaves the state as it found it
 * (devices, shared counters), a commit makes devices unavailable to later tries, objects cannot be
 * added once allocation began, and allocators sharing one CEL context agree with one that has its
 * own.
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
#include "dalloc.h"

static const char STATE[] =
    "kind: DeviceClass\nmetadata: {name: a}\n"
    "spec: {selectors: [{cel: {expression: 'device.driver == \"a\"'}}]}\n---\n"
    "kind: ResourceSlice\nmetadata: {name: s1}\n"
    "spec: {driver: a, pool: {name: p, generation: 1, resourceSliceCount: 2}, nodeName: n1,\n"
    "  sharedCounters: [{name: mem, counters: {gb: {value: '2'}}}]}\n---\n"
    "kind: ResourceSlice\nmetadata: {name: s2}\n"
    "spec: {driver: a, pool: {name: p, generation: 1, resourceSliceCount: 2}, nodeName: n1,\n"
    "  devices: [{name: d1, consumesCounters: [{counterSet: mem, counters: {gb: {value: '1'}}}]},\n"
    "            {name: d2, consumesCounters: [{counterSet: mem, counters: {gb: {value: '1'}}}]},\n"
    "            {name: d3, consumesCounters: [{counterSet: mem, counters: {gb: {value: "
    "'1'}}}]}]}\n";

static json_t *claim(const char *name)
{
    json_t *c = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:[{s:s, s:{s:s}}]}}}", "apiVersion",
                          "resource.k8s.io/v1", "kind", "ResourceClaim", "metadata", "name", name,
                          "namespace", "default", "spec", "devices", "requests", "name", "r",
                          "exactly", "deviceClassName", "a");
    assert_non_null(c);
    return c;
}

static struct dalloc *node(struct doc **doc, struct dalloc_cel *cel)
{
    struct dalloc_gates g;
    struct dalloc *a = NULL;
    struct diag d;

    dalloc_gates_default(&g);
    g.partitionable = true;
    if (!*doc)
        assert_int_equal(doc_load_string("state", STATE, strlen(STATE), &d, doc), 0);
    assert_int_equal(dalloc_new("n1", &g, &a), 0);
    if (cel)
        dalloc_set_cel(a, cel);
    for (size_t i = 0; i < doc_count(*doc); i++)
        assert_int_equal(dalloc_add(a, doc_root(*doc, i), &d), 0);
    return a;
}

/* Tries claims named by names (space-separated) and returns the devices, space-separated. */
static int try_devices(struct dalloc *a, const char *names, char *buf, size_t n, json_t **ret)
{
    _cleanup_json_ json_t *claims = json_array();
    _cleanup_json_ json_t *out = NULL;
    char copy[128], *save = NULL;
    struct diag d;
    json_t *c;
    size_t i;
    int r;

    snprintf(copy, sizeof(copy), "%s", names);
    for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        assert_int_equal(json_array_append_new(claims, claim(t)), 0);
    diag_init(&d);
    r = dalloc_try(a, claims, &d, &out);
    buf[0] = '\0';
    if (r == 1)
        snprintf(buf, n, "%.400s", d.msg);
    json_array_foreach(out, i, c)
    {
        json_t *res = json_array_get(
            json_object_get(
                json_object_get(json_object_get(json_object_get(c, "status"), "allocation"),
                                "devices"),
                "results"),
            0);
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? " " : "",
                 json_string_value(json_object_get(res, "device")));
    }
    if (ret)
        *ret = json_incref(out);
    return r;
}

static void test_try_leaves_state(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    char buf[512];

    (void)state;
    a = node(&doc, NULL);
    assert_int_equal(try_devices(a, "c1 c2", buf, sizeof(buf), NULL), 0);
    assert_string_equal(buf, "d1 d2");
    /* the counters (2 GB for 3 devices) came back: the same answer again, and a third claim finds
     * none */
    assert_int_equal(try_devices(a, "c1 c2", buf, sizeof(buf), NULL), 0);
    assert_string_equal(buf, "d1 d2");
    assert_int_equal(try_devices(a, "c1 c2 c3", buf, sizeof(buf), NULL), 1);
    assert_non_null(strstr(buf, "claim default/c3"));
    assert_int_equal(try_devices(a, "c1", buf, sizeof(buf), NULL), 0);
    assert_string_equal(buf, "d1");
}

static void test_commit(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    _cleanup_json_ json_t *got = NULL;
    _cleanup_json_ json_t *pending = json_pack("[o]", claim("late"));
    json_t *out = NULL;
    char buf[512];
    struct diag d;

    (void)state;
    a = node(&doc, NULL);
    assert_int_equal(try_devices(a, "c1", buf, sizeof(buf), &got), 0);
    assert_int_equal(dalloc_commit(a, got, &d), 0);
    assert_int_equal(try_devices(a, "c2", buf, sizeof(buf), NULL), 0);
    assert_string_equal(buf, "d2");                                       /* d1 is in use */
    assert_int_equal(try_devices(a, "c2 c3", buf, sizeof(buf), NULL), 1); /* 1 GB left */
    /* an allocated claim cannot be tried, a pending one cannot be committed */
    assert_int_equal(dalloc_try(a, got, &d, &out), -EINVAL);
    assert_null(out);
    assert_int_equal(dalloc_commit(a, pending, &d), -EINVAL);
    /* the state is fixed once allocation began */
    assert_int_equal(dalloc_add(a, doc_root(doc, 0), &d), -EBUSY);
}

static void test_shared_cel(void **state)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(dalloc_cel_unrefp) struct dalloc_cel *cel = NULL;
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    _cleanup_(dalloc_freep) struct dalloc *b = NULL;
    _cleanup_(dalloc_freep) struct dalloc *own = NULL;
    char x[256], y[256], z[256];

    (void)state;
    assert_int_equal(dalloc_cel_new(&cel), 0);
    a = node(&doc, cel);
    b = node(&doc, cel);
    own = node(&doc, NULL);
    assert_int_equal(try_devices(a, "c1 c2", x, sizeof(x), NULL), 0);
    assert_int_equal(try_devices(b, "c1 c2", y, sizeof(y), NULL), 0);
    assert_int_equal(try_devices(own, "c1 c2", z, sizeof(z), NULL), 0);
    assert_string_equal(x, z);
    assert_string_equal(y, z);
    a = dalloc_free(a); /* b keeps the shared context alive */
    assert_int_equal(try_devices(b, "c1", y, sizeof(y), NULL), 0);
    assert_string_equal(y, "d1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_try_leaves_state),
        cmocka_unit_test(test_commit),
        cmocka_unit_test(test_shared_cel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
