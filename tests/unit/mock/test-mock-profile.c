/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile loading in the mock: every bundled profile loads; a broken profile makes nvmlInit_v2 fail
 * with NVML_ERROR_UNKNOWN and mock_nvml_profile_error() say where and why (file:line:col),
 * table-driven over typos, wrong types, bad values and MIG/NVLink inconsistencies; defaults and
 * per-GPU overrides; and the library exports nothing but NVML and mock_nvml_profile_error.
 */
#include "mock-test.h"

#define GPU_DEFAULTS                                                                               \
    "defaults:\n"                                                                                  \
    "  name: \"NVIDIA A100-SXM4-40GB\"\n"                                                          \
    "  architecture: ampere\n"                                                                     \
    "  computeCapability: \"8.0\"\n"                                                               \
    "  memory: 40960\n"

static const struct {
    const char *yaml;
    const char *where; /* ":line:col: " expected after the file name */
    const char *what;  /* a part of the message */
} bad[] = {
    {GPU_DEFAULTS "  memroy: 1\ngpus: []\n", ":6:3: ", "unknown key \"memroy\""},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", numa: zero}\n", ":7:35: ", "\"numa\""},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", uuid: GPU-XYZ}\n", ":7:35: ", "uuid"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"07:00\"}\n", ":7:14: ", "PCI address"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\"}\n  - {busId: \"0000:07:00.0\"}\n",
     ":8:14: ", "duplicate busId"},
    {GPU_DEFAULTS "gpus:\n  - {numa: 0}\n", ":7:5: ", "missing required key \"busId\""},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", architecture: fermi2}\n",
     ":7:43: ", "unknown value \"fermi2\""},
    {"gpus:\n  - {busId: \"0000:07:00.0\", name: x, memory: 1, computeCapability: \"9\", "
     "architecture: hopper}\n",
     ":2:69: ", "computeCapability"},
    {GPU_DEFAULTS "gpus:\n  - busId: \"0000:07:00.0\"\n    mig: {capable: true, enabled: true, "
                  "instances: [{profile: 3g.20gb, placement: 0}, {profile: 4g.20gb}]}\n",
     ":8:", "no free placement left for 4g.20gb"},
    {GPU_DEFAULTS "gpus:\n  - busId: \"0000:07:00.0\"\n    mig: {capable: true, enabled: true, "
                  "instances: [{profile: 3g.20gb, placement: 2}]}\n",
     ":8:", "not a valid free placement"},
    {GPU_DEFAULTS "gpus:\n  - busId: \"0000:07:00.0\"\n    mig: {capable: true, enabled: true, "
                  "instances: [{profile: 5g.25gb}]}\n",
     ":8:", "no GPU instance profile \"5g.25gb\""},
    {GPU_DEFAULTS "gpus:\n  - busId: \"0000:07:00.0\"\n    mig: {capable: true, enabled: true, "
                  "instances: [{profile: 4g.20gb, computeInstances: [{profile: 3c}]}]}\n",
     ":8:", "not a compute instance size"},
    {GPU_DEFAULTS "gpus:\n  - busId: \"0000:07:00.0\"\n    mig: {capable: false, enabled: true}\n",
     ":8:10: ", "not MIG capable"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", nvlink: {peers: {\"1\": 4}}}\n"
                  "  - {busId: \"0000:0f:00.0\", nvlink: {peers: {\"0\": 2}}}\n",
     ":7:", "links to GPU 1"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", nvlink: {switch: 12, peers: {}}}\n",
     ":7:", "exactly one of"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", nvlink: {switch: 37}}\n", ":7:", "switch"},
    {GPU_DEFAULTS "topology: [{gpus: [0, 5], level: node}]\ngpus:\n  - {busId: \"0000:07:00.0\"}\n",
     ":6:19: ", "two GPU indices"},
    {GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\", name: [x]}\n", ":7:", "\"name\""},
    {"gpus: [\n", ":", ""},
};

static void test_bad_profiles(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char name[32], want[256];
        const char *path, *err;

        snprintf(name, sizeof(name), "bad%zu.yaml", i);
        path = tmp_write(name, bad[i].yaml);
        setenv("MOCK_NVML_PROFILE", path, 1);
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
        err = N.profile_error();
        assert_non_null(err);
        snprintf(want, sizeof(want), "%s%s", path, bad[i].where);
        if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, bad[i].what))
            fail_msg("case %zu: got \"%s\", want \"%s...%s\"", i, err, want, bad[i].what);
        /* Still uninitialised. */
        assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    }
}

static void test_missing_file(void **state)
{
    (void)state;
    setenv("MOCK_NVML_PROFILE", "/nonexistent/profile.yaml", 1);
    assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    assert_non_null(N.profile_error());
    assert_non_null(strstr(N.profile_error(), "/nonexistent/profile.yaml"));
}

static void test_bundled(void **state)
{
    static const char *const profiles[] = {"dgx-h100", "a100-mig", "pcie-t4", "lost-gpu"};

    (void)state;
    for (size_t i = 0; i < 4; i++) {
        init_profile(profiles[i]);
        assert_null(N.profile_error());
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    }
}

static void test_defaults_and_overrides(void **state)
{
    static const char yaml[] =
        "driver: {version: \"535.129.03\", cuda: 12020}\n" GPU_DEFAULTS "  numa: 1\n"
        "gpus:\n"
        "  - {busId: \"0000:07:00.0\"}\n"
        "  - {busId: \"0000:0F:00.0\", numa: 0, minor: 9, name: \"Other\", brand: tesla,\n"
        "     persistenceMode: false, serial: \"123\"}\n";
    char buf[96];
    unsigned u;
    int cuda;
    nvmlBrandType_t brand;
    nvmlEnableState_t pm;

    (void)state;
    setenv("MOCK_NVML_PROFILE", tmp_write("defaults.yaml", yaml), 1);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "535.129.03");
    assert_int_equal(N.nvmlSystemGetNVMLVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "12.535.129.03");
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12020);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(dev(0), &u), NVML_SUCCESS);
    assert_int_equal(u, 1);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(dev(1), &u), NVML_SUCCESS);
    assert_int_equal(u, 0);
    assert_int_equal(N.nvmlDeviceGetMinorNumber(dev(1), &u), NVML_SUCCESS);
    assert_int_equal(u, 9);
    assert_int_equal(N.nvmlDeviceGetName(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA A100-SXM4-40GB");
    assert_int_equal(N.nvmlDeviceGetName(dev(1), buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "Other");
    assert_int_equal(N.nvmlDeviceGetBrand(dev(1), &brand), NVML_SUCCESS);
    assert_int_equal(brand, NVML_BRAND_TESLA);
    assert_int_equal(N.nvmlDeviceGetPersistenceMode(dev(1), &pm), NVML_SUCCESS);
    assert_int_equal(pm, NVML_FEATURE_DISABLED);
    assert_int_equal(N.nvmlDeviceGetSerial(dev(1), buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "123");
    /* Derived UUIDs are well formed and distinct. */
    {
        char a[96], b[96];

        assert_int_equal(N.nvmlDeviceGetUUID(dev(0), a, sizeof(a)), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetUUID(dev(1), b, sizeof(b)), NVML_SUCCESS);
        assert_int_equal(strlen(a), 40);
        assert_string_not_equal(a, b);
    }
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_no_numa(void **state)
{
    unsigned u;

    (void)state;
    setenv("MOCK_NVML_PROFILE",
           tmp_write("nonuma.yaml", GPU_DEFAULTS "gpus:\n  - {busId: \"0000:07:00.0\"}\n"), 1);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(dev(0), &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_exports(void **state)
{
    static const char *const hidden[] = {
        "mock_profile_load", "mock_device", "mock_lock", "doc_load_file",
        "diag_fail",         "strbuf_add",  "mock",      "log_kv"};

    (void)state;
    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
        if (dlsym(N.dl, hidden[i]))
            fail_msg("%s is exported", hidden[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_profiles), cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_bundled),      cmocka_unit_test(test_defaults_and_overrides),
        cmocka_unit_test(test_no_numa),      cmocka_unit_test(test_exports),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
