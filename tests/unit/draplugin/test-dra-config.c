/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA's opaque configs (resource.nvidia.com/v1beta1 GpuConfig and MigDeviceConfig), one table
 * row per document: what each decodes to (defaults included), and every refusal with the words
 * the user sees (unknown fields with their path, wrong types, bad strategies, intervals,
 * percentages and quantities, kinds gpuplane does not support, other API versions).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dra-claim.h"

#define GPU "\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"GpuConfig\""
#define MIG "\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"MigDeviceConfig\""

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &err);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, err.text);
    return v;
}

struct ok_case {
    const char *json;
    bool mig;
    enum dra_sharing sharing;
    enum dra_timeslice interval;
    int pct;
    const char *limit;      /* NULL: unset */
    const char *per_device; /* compact JSON of the map, NULL: unset */
};

static void test_decode_ok(void **state)
{
    static const struct ok_case cases[] = {
        {"{" GPU "}", false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_DEFAULT, -1, NULL, NULL},
        {"{" MIG "}", true, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_DEFAULT, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": null}", false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_DEFAULT, -1,
         NULL, NULL},
        {"{" GPU ", \"sharing\": {}}", false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_DEFAULT, -1,
         NULL, NULL},
        {"{" GPU ", \"sharing\": {\"strategy\": \"TimeSlicing\", \"timeSlicingConfig\": "
         "{\"interval\": \"Long\"}}}",
         false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_LONG, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": {\"timeSlicingConfig\": {\"interval\": \"Short\"}}}", false,
         DRA_SHARING_TIMESLICING, DRA_TIMESLICE_SHORT, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": {\"strategy\": \"TimeSlicing\", \"timeSlicingConfig\": "
         "{\"interval\": \"Medium\"}}}",
         false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_MEDIUM, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": {\"strategy\": \"TimeSlicing\", \"timeSlicingConfig\": {}}}",
         false, DRA_SHARING_TIMESLICING, DRA_TIMESLICE_DEFAULT, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\"}}", false, DRA_SHARING_MPS,
         DRA_TIMESLICE_DEFAULT, -1, NULL, NULL},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 50, \"defaultPinnedDeviceMemoryLimit\": \"10Gi\", "
         "\"defaultPerDevicePinnedMemoryLimit\": {\"0\": \"1Gi\", \"GPU-abc\": 1000}}}}",
         false, DRA_SHARING_MPS, DRA_TIMESLICE_DEFAULT, 50, "10Gi",
         "{\"0\":\"1Gi\",\"GPU-abc\":\"1000\"}"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 0, \"defaultPinnedDeviceMemoryLimit\": 0}}}",
         false, DRA_SHARING_MPS, DRA_TIMESLICE_DEFAULT, 0, "0", NULL},
        {"{" MIG ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 100}}}",
         true, DRA_SHARING_MPS, DRA_TIMESLICE_DEFAULT, 100, NULL, NULL},
        {"{" MIG ", \"sharing\": {\"strategy\": \"TimeSlicing\"}}", true, DRA_SHARING_TIMESLICING,
         DRA_TIMESLICE_DEFAULT, -1, NULL, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct ok_case *c = &cases[i];
        _cleanup_json_ json_t *params = parse(c->json);
        struct dra_config cfg, copy;
        struct diag d;
        diag_init(&d);
        if (dra_config_decode(params, &d, &cfg) < 0)
            fail_msg("case %zu: %s", i, d.msg);
        assert_int_equal(dra_config_copy(&cfg, &copy), 0);
        dra_config_release(&cfg);
        assert_int_equal(copy.mig, c->mig);
        assert_int_equal(copy.sharing, c->sharing);
        assert_int_equal(copy.interval, c->interval);
        assert_int_equal(copy.mps_active_thread_percentage, c->pct);
        if (c->limit)
            assert_string_equal(copy.mps_pinned_memory_limit, c->limit);
        else
            assert_null(copy.mps_pinned_memory_limit);
        if (c->per_device) {
            char *s = json_dumps(copy.mps_per_device_limits, JSON_COMPACT | JSON_SORT_KEYS);
            assert_string_equal(s, c->per_device);
            free(s);
        } else {
            assert_null(copy.mps_per_device_limits);
        }
        dra_config_release(&copy);
        assert_null(copy.mps_pinned_memory_limit);
    }
}

static void test_decode_refused(void **state)
{
    static const struct {
        const char *json;
        const char *msg;
    } cases[] = {
        {"[]", "parameters: expected an object, got array"},
        {"\"GpuConfig\"", "parameters: expected an object, got string"},
        {"{}", "no kind (want GpuConfig or MigDeviceConfig of resource.nvidia.com/v1beta1)"},
        {"{\"kind\": \"GpuConfig\"}",
         "unsupported apiVersion \"\" of kind \"GpuConfig\" (want GpuConfig or MigDeviceConfig "
         "of resource.nvidia.com/v1beta1)"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1alpha1\", \"kind\": \"GpuConfig\"}",
         "unsupported apiVersion \"resource.nvidia.com/v1alpha1\" of kind \"GpuConfig\" (want "
         "GpuConfig or MigDeviceConfig of resource.nvidia.com/v1beta1)"},
        {"{\"apiVersion\": \"gpu.resource.example.com/v1\", \"kind\": \"GpuConfig\"}",
         "unsupported apiVersion \"gpu.resource.example.com/v1\" of kind \"GpuConfig\" (want "
         "GpuConfig or MigDeviceConfig of resource.nvidia.com/v1beta1)"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"Foo\"}",
         "unsupported kind \"Foo\" (want GpuConfig or MigDeviceConfig of "
         "resource.nvidia.com/v1beta1)"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": 3}",
         "kind: expected a string, got number"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"VfioDeviceConfig\"}",
         "kind VfioDeviceConfig is not supported by gpuplane (only GpuConfig and MigDeviceConfig "
         "are)"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": "
         "\"ComputeDomainChannelConfig\"}",
         "kind ComputeDomainChannelConfig is not supported by gpuplane (only GpuConfig and "
         "MigDeviceConfig are)"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": "
         "\"ComputeDomainDaemonConfig\"}",
         "kind ComputeDomainDaemonConfig is not supported by gpuplane (only GpuConfig and "
         "MigDeviceConfig are)"},
        {"{" GPU ", \"metadata\": {}}", "unknown field \"metadata\""},
        {"{" GPU ", \"sharing\": []}", "sharing: expected an object, got array"},
        {"{" GPU ", \"sharing\": {\"stratgy\": \"MPS\"}}", "unknown field \"sharing.stratgy\""},
        {"{" GPU ", \"sharing\": {\"strategy\": \"Exclusive\"}}",
         "sharing.strategy: unknown strategy \"Exclusive\" (want TimeSlicing or MPS)"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"mps\"}}",
         "sharing.strategy: unknown strategy \"mps\" (want TimeSlicing or MPS)"},
        {"{" GPU ", \"sharing\": {\"strategy\": true}}",
         "sharing.strategy: expected a string, got boolean"},
        {"{" GPU ", \"sharing\": {\"timeSlicingConfig\": {\"interval\": \"Forever\"}}}",
         "sharing.timeSlicingConfig.interval: unknown interval \"Forever\" (want Default, Short, "
         "Medium or Long)"},
        {"{" GPU ", \"sharing\": {\"timeSlicingConfig\": {\"interval\": 5}}}",
         "sharing.timeSlicingConfig.interval: expected a string, got number"},
        {"{" GPU ", \"sharing\": {\"timeSlicingConfig\": {\"intervall\": \"Long\"}}}",
         "unknown field \"sharing.timeSlicingConfig.intervall\""},
        {"{" GPU ", \"sharing\": {\"strategy\": \"TimeSlicing\", \"mpsConfig\": {}}}",
         "sharing.mpsConfig: not allowed with strategy TimeSlicing"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"timeSlicingConfig\": {}}}",
         "sharing.timeSlicingConfig: not allowed with strategy MPS"},
        {"{" MIG ", \"sharing\": {\"timeSlicingConfig\": {}}}",
         "unknown field \"sharing.timeSlicingConfig\""},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": {\"threads\": 1}}}",
         "unknown field \"sharing.mpsConfig.threads\""},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 101}}}",
         "sharing.mpsConfig.defaultActiveThreadPercentage: must be between 0 and 100"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": -1}}}",
         "sharing.mpsConfig.defaultActiveThreadPercentage: must be between 0 and 100"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": \"50\"}}}",
         "sharing.mpsConfig.defaultActiveThreadPercentage: expected an integer, got string"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 12.5}}}",
         "sharing.mpsConfig.defaultActiveThreadPercentage: expected an integer, got number"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPinnedDeviceMemoryLimit\": \"-1Gi\"}}}",
         "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: must not be negative, got \"-1Gi\""},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPinnedDeviceMemoryLimit\": \"lots\"}}}",
         "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid quantity \"lots\": "},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPinnedDeviceMemoryLimit\": [1]}}}",
         "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: expected a quantity, got array"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPerDevicePinnedMemoryLimit\": {\"0\": \"1Zi\"}}}}",
         "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[0]: invalid quantity \"1Zi\": "},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPerDevicePinnedMemoryLimit\": {\"\": \"1Gi\"}}}}",
         "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[]: empty device name"},
        {"{" GPU ", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPerDevicePinnedMemoryLimit\": [\"1Gi\"]}}}",
         "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: expected an object, got array"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *params = parse(cases[i].json);
        struct dra_config cfg = {.sharing = DRA_SHARING_NONE};
        struct diag d;
        diag_init(&d);
        int r = dra_config_decode(params, &d, &cfg);
        if (r != -EINVAL || strncmp(d.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
            fail_msg("case %zu: %d \"%s\", want \"%s\"", i, r, d.msg, cases[i].msg);
        /* Never written on failure. */
        assert_int_equal(cfg.sharing, DRA_SHARING_NONE);
    }
}

static void test_decode_null(void **state)
{
    struct dra_config cfg;
    struct diag d;
    diag_init(&d);
    assert_int_equal(dra_config_decode(NULL, &d, &cfg), -EINVAL);
    assert_string_equal(d.msg, "parameters: expected an object, got nothing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_ok),
        cmocka_unit_test(test_decode_refused),
        cmocka_unit_test(test_decode_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
