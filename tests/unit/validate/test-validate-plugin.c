/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of what the plugin check reads from the API: Kubernetes quantities compared with 1 (plain,
 * milli, SI and binary suffixes, exponents, signs, garbage), the GPU resources of a Node's
 * allocatable (nvidia.com/gpu, a renamed shared resource, MIG resources, zero counts, other
 * vendors, capacity without allocatable) and the device count of a ResourceSlice list.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "validate-internal.h"

static void test_quantities(void **state)
{
    static const struct {
        const char *q;
        int r;
        bool one;
    } cases[] = {
        {"1", 0, true},         {"8", 0, true},         {"0", 0, false},
        {"+2", 0, true},        {"-1", 0, false},       {"1000m", 0, true},
        {"999m", 0, false},     {"1500m", 0, true},     {"0.5", 0, false},
        {"1.0", 0, true},       {"1k", 0, true},        {"0.001k", 0, true},
        {"0.0001k", 0, false},  {"1Ki", 0, true},       {"1e0", 0, true},
        {"1e-1", 0, false},     {"1E3", 0, true},       {"5n", 0, false},
        {"2u", 0, false},       {"1M", 0, true},        {"", -EINVAL, false},
        {"x", -EINVAL, false},  {"1x", -EINVAL, false}, {"1Kb", -EINVAL, false},
        {"1e", -EINVAL, false}, {".", -EINVAL, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        bool one = !cases[i].one;
        int r = validate_quantity_at_least_one(cases[i].q, &one);
        if (r != cases[i].r || (r == 0 && one != cases[i].one))
            fail_msg("\"%s\": %d %d", cases[i].q, r, one);
    }
}

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    if (!v)
        fail_msg("bad fixture: %s", err.text);
    return v;
}

static void test_node(void **state)
{
    static const struct {
        const char *node;
        const char *resource;
    } cases[] = {
        {"{\"status\":{\"allocatable\":{\"cpu\":\"8\",\"nvidia.com/gpu\":\"8\"}}}",
         "nvidia.com/gpu"},
        {"{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"0\",\"nvidia.com/"
         "gpu.shared\":\"4\"}}}",
         "nvidia.com/gpu.shared"},
        {"{\"status\":{\"allocatable\":{\"nvidia.com/mig-1g.10gb\":\"7\"}}}",
         "nvidia.com/mig-1g.10gb"},
        {"{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"0\"}}}", NULL},
        {"{\"status\":{\"allocatable\":{\"amd.com/gpu\":\"2\",\"nvidia.com/gpux\":\"junk\"}}}",
         NULL},
        {"{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},\"allocatable\":{}}}", NULL},
        {"{\"status\":{}}", NULL},
        {"{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":8}}}", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *node = parse(cases[i].node);
        const char *q = NULL;
        const char *res = validate_node_gpu_resource(node, &q);
        if (cases[i].resource ? !res || strcmp(res, cases[i].resource) != 0 : res != NULL)
            fail_msg("case %zu: %s", i, res ? res : "(none)");
        if (res)
            assert_non_null(q);
        json_decref(node);
    }
}

static void test_slices(void **state)
{
    json_t *list =
        parse("{\"items\":["
              "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"devices\":[{\"name\":\"gpu-0\"},"
              "{\"name\":\"gpu-1\"}]}},"
              "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"devices\":[]}},"
              "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"devices\":[{\"name\":\"mig\"}]}}"
              "]}");
    assert_int_equal(validate_slice_devices(list), 3);
    json_decref(list);
    list = parse("{\"items\":[]}");
    assert_int_equal(validate_slice_devices(list), 0);
    json_decref(list);
    assert_int_equal(validate_slice_devices(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantities),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
