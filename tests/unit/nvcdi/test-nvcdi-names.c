/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of NVIDIA CDI device names: each strategy for GPUs and MIG devices, and the device
 * plugin's mapping from advertised device ids (replicas included) to qualified CDI names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvcdi.h"

static void test_strategy_parse(void **state)
{
    enum nvcdi_name_strategy s;
    assert_int_equal(nvcdi_name_strategy_parse("index", &s), 0);
    assert_int_equal(s, NVCDI_NAME_INDEX);
    assert_int_equal(nvcdi_name_strategy_parse("uuid", &s), 0);
    assert_int_equal(s, NVCDI_NAME_UUID);
    assert_int_equal(nvcdi_name_strategy_parse("type-index", &s), 0);
    assert_int_equal(s, NVCDI_NAME_TYPE_INDEX);
    assert_int_equal(nvcdi_name_strategy_parse("UUID", &s), -EINVAL);
    assert_int_equal(nvcdi_name_strategy_parse(NULL, &s), -EINVAL);
}

static void test_device_names(void **state)
{
    struct gpu_mig_device mig = {.index = 2, .uuid = "MIG-11111111-2222-3333-4444-555555555555"};
    struct gpu_device gpu = {
        .index = 3, .minor = 7, .uuid = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"};
    static const struct {
        bool mig;
        enum nvcdi_name_strategy s;
        const char *want;
    } cases[] = {
        {false, NVCDI_NAME_INDEX, "3"},
        {false, NVCDI_NAME_UUID, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
        {false, NVCDI_NAME_TYPE_INDEX, "gpu3"},
        {true, NVCDI_NAME_INDEX, "3:2"},
        {true, NVCDI_NAME_UUID, "MIG-11111111-2222-3333-4444-555555555555"},
        {true, NVCDI_NAME_TYPE_INDEX, "mig3:2"},
    };
    char buf[NVCDI_NAME_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(nvcdi_device_name(&gpu, cases[i].mig ? &mig : NULL, cases[i].s, buf), 0);
        assert_string_equal(buf, cases[i].want);
    }
    /* A GPU whose UUID could not be read has no uuid name. */
    gpu.uuid[0] = '\0';
    assert_int_equal(nvcdi_device_name(&gpu, NULL, NVCDI_NAME_UUID, buf), -EINVAL);
    char *q = NULL;
    assert_int_equal(nvcdi_qualified_name(NVCDI_KIND, &gpu, &mig, NVCDI_NAME_INDEX, &q), 0);
    assert_string_equal(q, "nvidia.com/gpu=3:2");
    free(q);
}

static void test_for_id(void **state)
{
    static const struct {
        const char *id, *want;
    } cases[] = {
        {"GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
         "k8s.device-plugin.nvidia.com/gpu=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
        {"GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee::3",
         "k8s.device-plugin.nvidia.com/gpu=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
        {"MIG-11111111-2222-3333-4444-555555555555",
         "k8s.device-plugin.nvidia.com/gpu=MIG-11111111-2222-3333-4444-555555555555"},
        {"0", "k8s.device-plugin.nvidia.com/gpu=0"},
        {"1:0", "k8s.device-plugin.nvidia.com/gpu=1:0"},
        {"1:0::2", "k8s.device-plugin.nvidia.com/gpu=1:0"},
    };
    char *q = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(nvcdi_qualified_name_for_id(NVCDI_KIND_DEVICE_PLUGIN, cases[i].id, &q), 0);
        assert_string_equal(q, cases[i].want);
        free(q);
    }
    q = NULL;
    assert_int_equal(nvcdi_qualified_name_for_id(NVCDI_KIND_DEVICE_PLUGIN, "::1", &q), -EINVAL);
    assert_int_equal(nvcdi_qualified_name_for_id(NVCDI_KIND_DEVICE_PLUGIN, "a b", &q), -EINVAL);
    assert_int_equal(nvcdi_qualified_name_for_id(NVCDI_KIND_DEVICE_PLUGIN, "/dev/x", &q), -EINVAL);
    assert_int_equal(nvcdi_qualified_name_for_id("bad", "0", &q), -EINVAL);
    assert_int_equal(nvcdi_qualified_name_for_id(NVCDI_KIND, NULL, &q), -EINVAL);
    assert_null(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strategy_parse),
        cmocka_unit_test(test_device_names),
        cmocka_unit_test(test_for_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
