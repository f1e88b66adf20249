/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the device plugin's config file: the defaults, NVIDIA's documented examples, gpuplane's
 * extensions (health, per-GPU replicas, honoured rename and resources), every validation error with
 * its exact file:line:col, the bundled examples, and the JSON rendering (which loads back to the
 * same configuration).
 */
#include "dp-test.h"

static void test_defaults(void **state)
{
    struct dp_config cfg;
    (void)state;
    assert_int_equal(dp_config_init(&cfg), 0);
    char *got = test_json(&cfg);
    assert_string_equal(
        got, "{\"flags\":{\"deviceDiscoveryStrategy\":\"auto\",\"failOnInitError\":true,"
             "\"gdrcopyEnabled\":false,\"gdsEnabled\":false,\"migStrategy\":\"none\","
             "\"mofedEnabled\":false,\"mpsRoot\":\"\",\"nvidiaDevRoot\":\"\","
             "\"nvidiaDriverRoot\":\"/\",\"plugin\":{\"cdiAnnotationPrefix\":\"cdi.k8s.io/\","
             "\"cdiDisableHooks\":[],\"cdiFeatureFlags\":[],\"cdiSpecDir\":\"/var/run/cdi\","
             "\"containerDriverRoot\":\"/driver-root\","
             "\"deviceIDStrategy\":\"uuid\",\"deviceListStrategy\":[\"envvar\"],"
             "\"kubeletSocket\":\"/var/lib/kubelet/device-plugins/kubelet.sock\","
             "\"nvidiaCTKPath\":\"/usr/bin/nvidia-ctk\",\"passDeviceSpecs\":false,"
             "\"sharedDevicesAllocationPolicy\":\"distributed\"},\"useNodeFeatureAPI\":false},"
             "\"health\":{\"enabled\":true,\"ignoredXids\":[13,31,43,45,68,109],"
             "\"probeInterval\":\"5s\",\"recoveryWindow\":\"1m\"},"
             "\"imex\":{\"channelIDs\":[],\"required\":false},"
             "\"resources\":{\"gpus\":[],\"mig\":[]},\"sharing\":{},\"version\":\"v1\"}");
    free(got);
    /* gpuplane's default: unhealthy devices may recover after a quiet minute (0 = never). */
    assert_int_equal(cfg.health.recovery_window_ms, 60000);
    assert_null(dp_config_sharing(&cfg));
    assert_true(dp_health_xid_ignored(&cfg.health, 13));
    assert_true(dp_health_xid_ignored(&cfg.health, 109));
    assert_false(dp_health_xid_ignored(&cfg.health, 79));
    assert_false(dp_health_xid_ignored(&cfg.health, 94));
    assert_false(dp_health_xid_ignored(&cfg.health, 0));
    assert_false(dp_health_xid_ignored(&cfg.health, 100000));
    assert_null(cfg.warnings[0]);
    dp_config_release(&cfg);
    dp_config_release(&cfg); /* released twice is harmless */
}

/* A file and what one part of the effective configuration must be, as compact sorted JSON. */
struct ok_case {
    const char *yaml;
    const char *path;
    const char *json;
};

static const struct ok_case ok_cases[] = {
    /* empty and minimal files */
    {"", "version", "\"v1\""},
    {"version: v1\n", "flags.migStrategy", "\"none\""},
    {"version: \"\"\n", "version", "\"v1\""},
    {"{}", "flags.failOnInitError", "true"},
    /* JSON is accepted too */
    {"{\"version\": \"v1\", \"flags\": {\"migStrategy\": \"single\"}}", "flags.migStrategy",
     "\"single\""},
    /* flags */
    {"flags:\n  migStrategy: mixed\n", "flags.migStrategy", "\"mixed\""},
    {"flags:\n  failOnInitError: false\n", "flags.failOnInitError", "false"},
    {"flags:\n  nvidiaDriverRoot: /run/nvidia/driver\n", "flags.nvidiaDriverRoot",
     "\"/run/nvidia/driver\""},
    {"flags:\n  nvidiaDevRoot: /\n", "flags.nvidiaDevRoot", "\"/\""},
    {"flags:\n  gdrcopyEnabled: true\n", "flags.gdrcopyEnabled", "true"},
    {"flags:\n  gdsEnabled: true\n", "flags.gdsEnabled", "true"},
    {"flags:\n  mofedEnabled: true\n", "flags.mofedEnabled", "true"},
    {"flags:\n  mpsRoot: /run/nvidia/mps\n", "flags.mpsRoot", "\"/run/nvidia/mps\""},
    {"flags:\n  deviceDiscoveryStrategy: tegra\n", "flags.deviceDiscoveryStrategy", "\"tegra\""},
    {"flags:\n  useNodeFeatureAPI: true\n", "flags.useNodeFeatureAPI", "true"},
    {"flags:\n  migStrategy: null\n", "flags.migStrategy", "\"none\""},
    {"flags:\n  gfd:\n    oneshot: true\n    noTimestamp: false\n    sleepInterval: 60s\n"
     "    outputFile: /etc/kubernetes/node-feature-discovery/features.d/gfd\n"
     "    machineTypeFile: /sys/class/dmi/id/product_name\n",
     "flags.migStrategy", "\"none\""},
    {"flags:\n  plugin:\n    passDeviceSpecs: true\n", "flags.plugin.passDeviceSpecs", "true"},
    {"flags:\n  plugin:\n    deviceListStrategy: volume-mounts\n",
     "flags.plugin.deviceListStrategy", "[\"volume-mounts\"]"},
    {"flags:\n  plugin:\n    deviceListStrategy: [cdi-cri, envvar, cdi-annotations]\n",
     "flags.plugin.deviceListStrategy", "[\"envvar\",\"cdi-annotations\",\"cdi-cri\"]"},
    {"flags:\n  plugin:\n    deviceIDStrategy: index\n", "flags.plugin.deviceIDStrategy",
     "\"index\""},
    {"flags:\n  plugin:\n    cdiAnnotationPrefix: nvidia.cdi.k8s.io/\n",
     "flags.plugin.cdiAnnotationPrefix", "\"nvidia.cdi.k8s.io/\""},
    {"flags:\n  plugin:\n    nvidiaCTKPath: /usr/local/nvidia/toolkit/nvidia-ctk\n",
     "flags.plugin.nvidiaCTKPath", "\"/usr/local/nvidia/toolkit/nvidia-ctk\""},
    {"flags:\n  plugin:\n    containerDriverRoot: /host\n", "flags.plugin.containerDriverRoot",
     "\"/host\""},
    {"flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n",
     "flags.plugin.sharedDevicesAllocationPolicy", "\"packed\""},
    {"flags:\n  plugin:\n    kubeletSocket: /k/kubelet.sock\n", "flags.plugin.kubeletSocket",
     "\"/k/kubelet.sock\""},
    {"flags:\n  plugin:\n    cdiFeatureFlags: [a, b]\n", "flags.plugin.cdiFeatureFlags",
     "[\"a\",\"b\"]"},
    {"flags:\n  plugin:\n    cdiDisableHooks: all\n", "flags.plugin.cdiDisableHooks", "[\"all\"]"},
    /* imex */
    {"imex:\n  channelIDs: [0]\n  required: true\n", "imex",
     "{\"channelIDs\":[0],\"required\":true}"},
    {"imex:\n  channelIDs: []\n", "imex.channelIDs", "[]"},
    /* resources: honoured by gpuplane */
    {"resources:\n  gpus:\n  - pattern: '*A100*'\n    name: a100\n  mig:\n  - pattern: 1g.10gb\n"
     "    name: example.com/mig-small\n",
     "resources",
     "{\"gpus\":[{\"name\":\"nvidia.com/a100\",\"pattern\":\"*A100*\"}],"
     "\"mig\":[{\"name\":\"example.com/mig-small\",\"pattern\":\"1g.10gb\"}]}"},
    /* sharing: NVIDIA's documented time-slicing example */
    {"version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
     "      replicas: 10\n",
     "sharing",
     "{\"timeSlicing\":{\"failRequestsGreaterThanOne\":false,\"renameByDefault\":false,"
     "\"resources\":[{\"devices\":\"all\",\"name\":\"nvidia.com/gpu\",\"replicas\":10}]}}"},
    {"sharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: true\n"
     "    resources:\n    - name: gpu\n      replicas: 2\n",
     "sharing.timeSlicing",
     "{\"failRequestsGreaterThanOne\":true,\"renameByDefault\":true,"
     "\"resources\":[{\"devices\":\"all\",\"name\":\"nvidia.com/gpu\",\"replicas\":2}]}"},
    /* MPS: failRequestsGreaterThanOne defaults to true */
    {"sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
     "sharing.mps.failRequestsGreaterThanOne", "true"},
    /* rename, counts, device lists, per-GPU replicas */
    {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      rename: gpu-ts\n"
     "      replicas: 2\n",
     "sharing.timeSlicing.resources",
     "[{\"devices\":\"all\",\"name\":\"nvidia.com/gpu\",\"rename\":\"nvidia.com/gpu-ts\","
     "\"replicas\":2}]"},
    {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: "
     "3\n",
     "sharing.timeSlicing.resources",
     "[{\"devices\":3,\"name\":\"nvidia.com/gpu\",\"replicas\":2}]"},
    {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
     "      devices: [0, \"1\", GPU-1234abcd, {device: 2, replicas: 5}]\n",
     "sharing.timeSlicing.resources",
     "[{\"devices\":[\"0\",\"1\",\"GPU-1234abcd\",{\"device\":\"2\",\"replicas\":5}],"
     "\"name\":\"nvidia.com/gpu\",\"replicas\":2}]"},
    {"sharing:\n  timeSlicing:\n    resources:\n    - name: mig-1g.10gb\n"
     "      devices:\n      - {device: \"0:1\", replicas: 3}\n"
     "      - {device: MIG-5c2a6c8e-0bd0-5d5a-9b6b-0a1e3c2f5d11, replicas: 1}\n",
     "sharing.timeSlicing.resources",
     "[{\"devices\":[{\"device\":\"0:1\",\"replicas\":3},{\"device\":"
     "\"MIG-5c2a6c8e-0bd0-5d5a-9b6b-0a1e3c2f5d11\",\"replicas\":1}],"
     "\"name\":\"nvidia.com/mig-1g.10gb\"}]"},
    {"resources:\n  gpus:\n  - {pattern: '*', name: tesla}\nsharing:\n  timeSlicing:\n"
     "    resources:\n    - name: tesla\n      replicas: 2\n",
     "sharing.timeSlicing.resources.0.name", "\"nvidia.com/tesla\""},
    /* health */
    {"health:\n  ignoredXids: [48]\n", "health.ignoredXids", "[48]"},
    {"health:\n  ignoredXids: []\n", "health.ignoredXids", "[]"},
    {"health:\n  fatalXids: [109, 13]\n", "health.ignoredXids", "[31,43,45,68]"},
    {"health:\n  fatalXids: all\n", "health.ignoredXids", "[]"},
    {"health:\n  ignoredXids: all\n", "health.ignoredXids", "\"all\""},
    {"health:\n  enabled: false\n", "health.enabled", "false"},
    {"health:\n  probeInterval: 1500ms\n", "health.probeInterval", "\"1500ms\""},
    {"health:\n  probeInterval: 1m30s\n", "health.probeInterval", "\"90s\""},
    {"health:\n  recoveryWindow: 2h\n", "health.recoveryWindow", "\"2h\""},
    {"health:\n  recoveryWindow: \"0\"\n", "health.recoveryWindow", "\"0s\""},
    {"health:\n  recoveryWindow: 0s\n", "health.recoveryWindow", "\"0s\""},
};

static void test_ok_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
        const struct ok_case *c = &ok_cases[i];
        struct dp_config cfg;
        test_load_ok(&cfg, c->yaml);
        char *got = test_json_at(&cfg, c->path);
        if (strcmp(got, c->json) != 0)
            print_error("case %zu (%s): got %s, want %s\n", i, c->path, got, c->json);
        assert_string_equal(got, c->json);
        free(got);
        dp_config_release(&cfg);
    }
}

static void test_health_allowlist(void **state)
{
    struct dp_config cfg;
    json_t *j = NULL;
    (void)state;
    /* Only 48 (double-bit ECC) and 79 (fallen off the bus) are fatal. */
    test_load_ok(&cfg, "health:\n  ignoredXids: all\n  fatalXids: [48, 79]\n");
    for (unsigned x = 1; x <= DP_XID_MAX; x++)
        assert_int_equal(dp_health_xid_ignored(&cfg.health, x), x != 48 && x != 79);
    assert_int_equal(dp_config_to_json(&cfg, &j), 0);
    json_t *ignored = json_object_get(json_object_get(j, "health"), "ignoredXids");
    assert_int_equal(json_array_size(ignored), DP_XID_MAX - 2);
    assert_int_equal(json_integer_value(json_array_get(ignored, 47)), 49);
    json_decref(j);
    dp_config_release(&cfg);
}

/* A file that must fail, with the exact message. */
struct err_case {
    const char *yaml;
    const char *msg;
};

#define TS "sharing:\n  timeSlicing:\n    resources:\n"

static const struct err_case err_cases[] = {
    /* syntax and shape */
    {"version: [", "c.yaml:2:1: flow sequence without a closing bracket"},
    {"- a\n", "c.yaml:1:1: expected a mapping, got sequence"},
    {"version: v1\n---\nversion: v1\n", "c.yaml:3:1: expected one document, found 2"},
    /* version */
    {"version: v2\n", "c.yaml:1:10: unknown version: v2 (want v1)"},
    {"version: 1\n", "c.yaml:1:10: \"version\": expected a string, got integer"},
    /* unknown keys at every level */
    {"verison: v1\n", "c.yaml:1:1: unknown key \"verison\""},
    {"flags:\n  migstrategy: none\n", "c.yaml:2:3: unknown key \"migstrategy\""},
    {"flags:\n  plugin:\n    deviceListStrategies: envvar\n",
     "c.yaml:3:5: unknown key \"deviceListStrategies\""},
    {"flags:\n  gfd:\n    oneShot: true\n", "c.yaml:3:5: unknown key \"oneShot\""},
    {"resources:\n  gpu: []\n", "c.yaml:2:3: unknown key \"gpu\""},
    {"resources:\n  gpus:\n  - pattern: '*'\n    nam: gpu\n", "c.yaml:4:5: unknown key \"nam\""},
    {"sharing:\n  timeslicing: {}\n", "c.yaml:2:3: unknown key \"timeslicing\""},
    {"sharing:\n  timeSlicing:\n    renameByDefualt: true\n",
     "c.yaml:3:5: unknown key \"renameByDefualt\""},
    {TS "    - name: gpu\n      replica: 2\n", "c.yaml:5:7: unknown key \"replica\""},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [{device: 0, replica: 2}]\n",
     "c.yaml:6:29: unknown key \"replica\""},
    {"imex:\n  channelIds: [0]\n", "c.yaml:2:3: unknown key \"channelIds\""},
    {"health:\n  ignoreXids: [1]\n", "c.yaml:2:3: unknown key \"ignoreXids\""},
    /* wrong types */
    {"flags: []\n", "c.yaml:1:8: \"flags\": expected a mapping, got sequence"},
    {"flags:\n  migStrategy: 1\n", "c.yaml:2:16: \"migStrategy\": expected a string, got integer"},
    {"flags:\n  failOnInitError: \"true\"\n",
     "c.yaml:2:21: \"failOnInitError\": expected a boolean, got string"},
    {"flags:\n  nvidiaDriverRoot: true\n",
     "c.yaml:2:3: \"nvidiaDriverRoot\": expected a string, got boolean"},
    {"flags:\n  useNodeFeatureAPI: yes\n",
     "c.yaml:2:22: \"useNodeFeatureAPI\": expected a boolean, got string"},
    {"flags:\n  gfd:\n    sleepInterval: 60\n",
     "c.yaml:3:20: \"sleepInterval\": expected a string, got integer"},
    {"flags:\n  plugin:\n    deviceListStrategy: {a: 1}\n",
     "c.yaml:3:25: \"deviceListStrategy\": expected a string or a sequence, got mapping"},
    {"flags:\n  plugin:\n    deviceListStrategy: [envvar, 1]\n",
     "c.yaml:3:34: \"deviceListStrategy\": expected a sequence of strings, got integer"},
    {"imex:\n  channelIDs: 0\n", "c.yaml:2:15: \"channelIDs\": expected a sequence, got integer"},
    {"imex:\n  channelIDs: [\"0\"]\n",
     "c.yaml:2:17: \"channelIDs\": expected a sequence of integers, got string"},
    {"sharing:\n  timeSlicing:\n    renameByDefault: 1\n",
     "c.yaml:3:22: \"renameByDefault\": expected a boolean, got integer"},
    {"sharing:\n  timeSlicing:\n    resources: {}\n",
     "c.yaml:3:16: \"resources\": expected a sequence, got mapping"},
    {TS "    - name: gpu\n      replicas: \"2\"\n",
     "c.yaml:5:18: \"replicas\": expected an integer, got string"},
    {TS "    - name: 5\n      replicas: 2\n",
     "c.yaml:4:13: \"name\": expected a string, got integer"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: {a: 1}\n",
     "c.yaml:6:16: \"devices\": expected \"all\", a count or a sequence, got mapping"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [true]\n",
     "c.yaml:6:16: expected a GPU index, a device id or {device, replicas}, got boolean"},
    {"health:\n  enabled: 1\n", "c.yaml:2:12: \"enabled\": expected a boolean, got integer"},
    {"health:\n  ignoredXids: 13\n",
     "c.yaml:2:16: \"ignoredXids\": expected \"all\" or a sequence of XIDs, got integer"},
    {"health:\n  fatalXids: [\"79\"]\n",
     "c.yaml:2:16: \"fatalXids\": expected an XID number, got string"},
    {"health:\n  probeInterval: 5\n",
     "c.yaml:2:18: \"probeInterval\": expected a duration string such as \"5s\", got integer"},
    /* bad enum values */
    {"flags:\n  migStrategy: foo\n",
     "c.yaml:2:16: \"migStrategy\": invalid value \"foo\": want none, single or mixed"},
    {"flags:\n  plugin:\n    deviceIDStrategy: serial\n",
     "c.yaml:3:23: \"deviceIDStrategy\": invalid value \"serial\": want uuid or index"},
    {"flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi]\n",
     "c.yaml:3:34: \"deviceListStrategy\": invalid value \"cdi\": want envvar, volume-mounts, "
     "cdi-annotations or cdi-cri"},
    {"flags:\n  plugin:\n    deviceListStrategy: \"envvar,bogus\"\n",
     "c.yaml:3:26: \"deviceListStrategy\": invalid value \"bogus\": want envvar, volume-mounts, "
     "cdi-annotations or cdi-cri"},
    {"flags:\n  plugin:\n    deviceListStrategy: []\n",
     "c.yaml:3:25: \"deviceListStrategy\": want at least one of envvar, volume-mounts, "
     "cdi-annotations or cdi-cri"},
    {"flags:\n  plugin:\n    sharedDevicesAllocationPolicy: spread\n",
     "c.yaml:3:36: \"sharedDevicesAllocationPolicy\": invalid value \"spread\": want distributed "
     "or packed"},
    {"flags:\n  deviceDiscoveryStrategy: wsl\n",
     "c.yaml:2:28: \"deviceDiscoveryStrategy\": invalid value \"wsl\": want auto, nvml or tegra"},
    {"imex:\n  channelIDs: [1]\n", "c.yaml:2:15: \"channelIDs\": invalid value \"1\": the only "
                                   "valid channel lists are [] and [0]"},
    {"imex:\n  channelIDs: [0, 0]\n",
     "c.yaml:2:15: \"channelIDs\": invalid value \"0,0\": the only valid channel lists are [] and "
     "[0]"},
    /* sharing rules */
    {"sharing:\n  timeSlicing: {}\n", "c.yaml:2:16: missing required key \"resources\""},
    {"sharing:\n  timeSlicing:\n    resources: []\n",
     "c.yaml:3:16: \"resources\": no resources specified"},
    {TS "    - replicas: 2\n", "c.yaml:4:7: missing required key \"name\""},
    {TS "    - name: gpu\n", "c.yaml:4:7: missing required key \"replicas\""},
    {TS "    - name: gpu\n      replicas: 0\n",
     "c.yaml:5:17: \"replicas\": 0 is out of range [1, 1024]"},
    {TS "    - name: gpu\n      replicas: -3\n",
     "c.yaml:5:17: \"replicas\": -3 is out of range [1, 1024]"},
    {TS "    - name: gpu\n      replicas: 5000\n",
     "c.yaml:5:17: \"replicas\": 5000 is out of range [1, 1024]"},
    {TS "    - name: gpu\n      replicas: 2\n    - name: nvidia.com/gpu\n      replicas: 4\n",
     "c.yaml:6:13: \"name\": duplicate resource \"nvidia.com/gpu\" (first at line 4)"},
    {TS "    - name: gpu\n      replicas: 2\n      rename: shared\n"
        "    - name: mig-1g.10gb\n      replicas: 2\n      rename: nvidia.com/shared\n",
     "c.yaml:9:15: resource \"nvidia.com/shared\" is already advertised by the entry at line 4"},
    {TS "    - name: gpu\n      replicas: 2\n      rename: Big_GPU\n",
     "c.yaml:6:15: \"rename\": invalid resource name \"Big_GPU\": want lower-case letters, digits, "
     "'-' and '.' (a DNS-1123 subdomain) on each side of the '/'"},
    {TS "    - name: gpu\n      replicas: 2\n      rename: a/b/c\n",
     "c.yaml:6:15: \"rename\": invalid resource name \"a/b/c\": want <prefix>/<name> with a single "
     "'/'"},
    {TS "    - name: gpu\n      replicas: 2\n      rename: \"\"\n",
     "c.yaml:6:16: \"rename\": invalid resource name \"\": a resource name cannot be empty"},
    {TS "    - name: gpu\n      replicas: 2\n"
        "      rename: a-very-long-resource-name-that-does-not-fit-in-sixty-three\n",
     "c.yaml:6:15: \"rename\": invalid resource name "
     "\"a-very-long-resource-name-that-does-not-fit-in-sixty-three\": longer than 63 characters"},
    {TS "    - name: -gpu\n      replicas: 2\n",
     "c.yaml:4:13: \"name\": invalid resource name \"-gpu\": want lower-case letters, digits, '-' "
     "and '.' (a DNS-1123 subdomain) on each side of the '/'"},
    {TS "    - name: gpus\n      replicas: 2\n",
     "c.yaml:4:13: \"name\": unknown resource \"nvidia.com/gpus\": want nvidia.com/gpu, "
     "nvidia.com/mig-<profile> or a name from resources"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: some\n",
     "c.yaml:6:16: \"devices\": invalid value \"some\": the only valid string is \"all\""},
    {TS "    - name: gpu\n      replicas: 2\n      devices: 0\n",
     "c.yaml:6:16: \"devices\": a count must be from 1 to 4096, got 0"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: []\n",
     "c.yaml:6:16: \"devices\": no devices listed"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [0, \"0\"]\n",
     "c.yaml:6:21: duplicate device \"0\""},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [gpu0]\n",
     "c.yaml:6:17: invalid device \"gpu0\": want a GPU index, <gpu>:<mig> indices, or a GPU-/MIG- "
     "UUID"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [-1]\n",
     "c.yaml:6:17: expected a GPU index, a device id or {device, replicas}, got integer"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [\"1:\"]\n",
     "c.yaml:6:18: invalid device \"1:\": want a GPU index, <gpu>:<mig> indices, or a GPU-/MIG- "
     "UUID"},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [{replicas: 2}]\n",
     "c.yaml:6:17: missing required key \"device\""},
    {TS "    - name: gpu\n      devices: [{device: 0, replicas: 2}, 1]\n",
     "c.yaml:4:7: missing required key \"replicas\""},
    {TS "    - name: gpu\n      replicas: 2\n      devices: [{device: 0, replicas: 0}]\n",
     "c.yaml:6:39: \"replicas\": 0 is out of range [1, 1024]"},
    {"sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
     "    - name: mig-7g.80gb-with-a-very-long-profile-name-suffix-xx\n      replicas: 2\n",
     "c.yaml:5:13: \"name\": "
     "\"nvidia.com/mig-7g.80gb-with-a-very-long-profile-name-suffix-xx.shared\" "
     "(renameByDefault) is longer than 63 characters"},
    {"resources:\n  gpus:\n  - pattern: ''\n    name: gpu\n",
     "c.yaml:3:15: \"pattern\": a pattern cannot be empty"},
    {"resources:\n  gpus:\n  - pattern: '*'\n", "c.yaml:3:5: missing required key \"name\""},
    {"resources:\n  gpus:\n  - pattern: '*'\n    name: GPU\n",
     "c.yaml:4:11: \"name\": invalid resource name \"GPU\": want lower-case letters, digits, '-' "
     "and '.' (a DNS-1123 subdomain) on each side of the '/'"},
    /* health */
    {"health:\n  ignoredXids: [13, 0]\n",
     "c.yaml:2:21: \"ignoredXids\": invalid XID 0: want 1 to 1023"},
    {"health:\n  fatalXids: [1024]\n",
     "c.yaml:2:15: \"fatalXids\": invalid XID 1024: want 1 to 1023"},
    {"health:\n  fatalXids: [-79]\n",
     "c.yaml:2:15: \"fatalXids\": invalid XID -79: want 1 to 1023"},
    {"health:\n  ignoredXids: none\n",
     "c.yaml:2:16: \"ignoredXids\": expected \"all\" or a sequence of XIDs, got string"},
    {"health:\n  probeInterval: 5 s\n", "c.yaml:2:18: \"probeInterval\": invalid duration \"5 s\": "
                                        "want a number with a unit (ms, s, m, "
                                        "h), e.g. \"5s\""},
    {"health:\n  probeInterval: 5d\n", "c.yaml:2:18: \"probeInterval\": invalid duration \"5d\": "
                                       "want a number with a unit (ms, s, m, "
                                       "h), e.g. \"5s\""},
    {"health:\n  probeInterval: 10ms\n",
     "c.yaml:2:18: \"probeInterval\": 10ms is out of range [100ms, 1h]"},
    {"health:\n  probeInterval: 2h\n",
     "c.yaml:2:18: \"probeInterval\": 2h is out of range [100ms, 1h]"},
    {"health:\n  recoveryWindow: 8760h\n",
     "c.yaml:2:19: \"recoveryWindow\": 8760h is out of range [0s, 168h]"},
    {"health:\n  recoveryWindow: 99999999999h\n",
     "c.yaml:2:19: \"recoveryWindow\": invalid duration \"99999999999h\": want a number with a "
     "unit "
     "(ms, s, m, h), e.g. \"5s\""},
};

static void test_err_cases(void **state)
{
    size_t failed = 0;
    (void)state;
    /* Every mismatch is printed before the test fails: a table is easier to fix all at once. */
    for (size_t i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
        const struct err_case *c = &err_cases[i];
        struct dp_config cfg;
        struct diag d;
        diag_init(&d);
        assert_int_equal(dp_config_init(&cfg), 0);
        int r = dp_config_load_string(&cfg, "c.yaml", c->yaml, strlen(c->yaml), &d);
        if (r >= 0 || strcmp(d.msg, c->msg) != 0) {
            print_error("case %zu: got %d \"%s\",\n  want \"%s\"\n", i, r, d.msg, c->msg);
            failed++;
        }
        dp_config_release(&cfg);
    }
    assert_int_equal(failed, 0);
}

/* A NULL diagnostic is allowed and the error still comes back. */
static void test_null_diag(void **state)
{
    struct dp_config cfg;
    const char *text = "flags:\n  migStrategy: foo\n";
    (void)state;
    assert_int_equal(dp_config_init(&cfg), 0);
    assert_int_equal(dp_config_load_string(&cfg, "c.yaml", text, strlen(text), NULL), -EINVAL);
    dp_config_release(&cfg);
}

static void test_per_gpu_replicas(void **state)
{
    struct dp_config cfg;
    (void)state;
    test_load_ok(&cfg, TS "    - name: gpu\n      replicas: 2\n"
                          "      devices: [0, {device: 1, replicas: 4}, GPU-aa]\n");
    const struct dp_sharing *sh = dp_config_sharing(&cfg);
    assert_ptr_equal(sh, &cfg.time_slicing);
    assert_int_equal(sh->n_resources, 1);
    const struct dp_shared_resource *res = &sh->resources[0];
    assert_string_equal(res->name, "nvidia.com/gpu");
    assert_string_equal(res->advertised, "nvidia.com/gpu");
    assert_false(res->renamed);
    assert_int_equal(res->devices_kind, DP_DEVICES_LIST);
    assert_int_equal(res->n_devices, 3);
    assert_string_equal(res->devices[0].id, "0");
    assert_int_equal(res->devices[0].replicas, 2);
    assert_string_equal(res->devices[1].id, "1");
    assert_int_equal(res->devices[1].replicas, 4);
    assert_string_equal(res->devices[2].id, "GPU-aa");
    assert_int_equal(res->devices[2].replicas, 2);
    dp_config_release(&cfg);
}

/* renameByDefault gives <name>.shared; an explicit rename wins over it (NVIDIA ignores rename). */
static void test_rename(void **state)
{
    struct dp_config cfg;
    (void)state;
    test_load_ok(&cfg, "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
                       "    - name: gpu\n      replicas: 2\n"
                       "    - name: mig-1g.10gb\n      replicas: 2\n      rename: small\n");
    assert_string_equal(cfg.time_slicing.resources[0].advertised, "nvidia.com/gpu.shared");
    assert_string_equal(cfg.time_slicing.resources[1].advertised, "nvidia.com/small");
    assert_true(cfg.time_slicing.resources[1].renamed);
    dp_config_release(&cfg);
}

static void test_mps_wins(void **state)
{
    struct dp_config cfg;
    (void)state;
    test_load_ok(&cfg, "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n"
                       "  mps:\n    resources:\n    - {name: gpu, replicas: 3}\n");
    assert_ptr_equal(dp_config_sharing(&cfg), &cfg.mps);
    assert_string_equal(cfg.warnings[0],
                        "sharing.timeSlicing is ignored: sharing.mps is also configured");
    assert_null(cfg.warnings[1]);
    dp_config_release(&cfg);
}

/* NVIDIA's start-up checks, after every source is merged. */
static void test_validate(void **state)
{
    static const struct {
        const char *yaml;
        const char *msg; /* NULL: valid */
    } cases[] = {
        {"sharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2}\n",
         "sharing.mps needs an MPS root: set --mps-root, MPS_ROOT or flags.mpsRoot (Helm uses "
         "/run/nvidia/mps)"},
        {"flags: {mpsRoot: /m}\nsharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2}\n",
         NULL},
        {"flags: {mpsRoot: /m, migStrategy: mixed}\nsharing:\n  mps:\n    resources:\n"
         "    - {name: gpu, replicas: 2}\n",
         "sharing.mps is not supported with mig strategy \"mixed\""},
        {"flags: {mpsRoot: /m, migStrategy: single}\nsharing:\n  mps:\n    resources:\n"
         "    - {name: mig-1g.10gb, replicas: 2}\n",
         "sharing.mps: MIG devices cannot be shared with MPS (nvidia.com/mig-1g.10gb)"},
        {"flags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources:\n"
         "    - {name: mig-1g.10gb, replicas: 2}\n",
         NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dp_config cfg;
        struct diag d;
        diag_init(&d);
        test_load_ok(&cfg, cases[i].yaml);
        int r = dp_config_validate(&cfg, &d);
        if (cases[i].msg) {
            assert_int_equal(r, -EINVAL);
            assert_string_equal(d.msg, cases[i].msg);
        } else {
            assert_int_equal(r, 0);
        }
        dp_config_release(&cfg);
    }
}

static void test_resource_names(void **state)
{
    static const struct {
        const char *in;
        const char *out; /* NULL: invalid */
    } cases[] = {
        {"gpu", "nvidia.com/gpu"},
        {"nvidia.com/gpu", "nvidia.com/gpu"},
        {"mig-1g.10gb.me", "nvidia.com/mig-1g.10gb.me"},
        {"example.com/x", "example.com/x"},
        {"a", "nvidia.com/a"},
        {"", NULL},
        {"/gpu", NULL},
        {"nvidia.com/", NULL},
        {"gpu.", NULL},
        {"g..pu", NULL},
        {"gpu-", NULL},
        {"Gpu", NULL},
        {"nvidia_com/gpu", NULL},
        {"a/b/c", NULL},
        {"x23456789012345678901234567890123456789012345678901234567890123", NULL},
        {"x234567890123456789012345678901234567890123456789012",
         "nvidia.com/x234567890123456789012345678901234567890123456789012"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        const char *why = NULL;
        int r = dp_resource_name_normalize(cases[i].in, &out, &why);
        if (cases[i].out) {
            assert_int_equal(r, 0);
            assert_string_equal(out, cases[i].out);
            free(out);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_null(out);
            assert_non_null(why);
        }
    }
}

static void test_examples_load(void **state)
{
    static const char *const files[] = {"time-slicing.yaml", "mig-mixed.yaml", "health.yaml",
                                        "rename.yaml"};
    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096];
        struct dp_config cfg;
        struct diag d;
        diag_init(&d);
        snprintf(path, sizeof(path), "%s/%s", EXAMPLES_DIR, files[i]);
        assert_int_equal(dp_config_init(&cfg), 0);
        int r = dp_config_load_file(&cfg, path, &d);
        if (r < 0)
            print_error("%s\n", d.msg);
        assert_int_equal(r, 0);
        assert_int_equal(dp_config_validate(&cfg, &d), 0);
        assert_string_equal(cfg.config_file, path);
        dp_config_release(&cfg);
    }
}

static void test_example_contents(void **state)
{
    struct dp_config cfg;
    struct diag d;
    (void)state;
    diag_init(&d);
    assert_int_equal(dp_config_init(&cfg), 0);
    assert_int_equal(dp_config_load_file(&cfg, EXAMPLES_DIR "/rename.yaml", &d), 0);
    test_assert_json_at(&cfg, "sharing.timeSlicing.resources.0",
                        "{\"devices\":[\"0\",{\"device\":\"1\",\"replicas\":4},{\"device\":"
                        "\"GPU-8f2c3d4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f\",\"replicas\":8}],"
                        "\"name\":\"nvidia.com/h100\",\"rename\":\"nvidia.com/h100-slice\","
                        "\"replicas\":2}");
    dp_config_release(&cfg);
    assert_int_equal(dp_config_init(&cfg), 0);
    assert_int_equal(dp_config_load_file(&cfg, EXAMPLES_DIR "/health.yaml", &d), 0);
    test_assert_json_at(&cfg, "health",
                        "{\"enabled\":true,\"ignoredXids\":[13,31,43,45,68],"
                        "\"probeInterval\":\"5s\",\"recoveryWindow\":\"10m\"}");
    dp_config_release(&cfg);
    assert_int_equal(dp_config_init(&cfg), 0);
    assert_int_equal(dp_config_load_file(&cfg, EXAMPLES_DIR "/mig-mixed.yaml", &d), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_MIXED);
    assert_int_equal(cfg.device_list_strategy, DP_LIST_CDI_ANNOTATIONS | DP_LIST_CDI_CRI);
    dp_config_release(&cfg);
}

static void test_missing_file(void **state)
{
    struct dp_config cfg;
    struct diag d;
    (void)state;
    diag_init(&d);
    assert_int_equal(dp_config_init(&cfg), 0);
    assert_int_equal(dp_config_load_file(&cfg, "/nonexistent/config.yaml", &d), -ENOENT);
    assert_non_null(strstr(d.msg, "/nonexistent/config.yaml"));
    assert_null(cfg.config_file);
    dp_config_release(&cfg);
}

/* print-config's output is itself a config file that gives the same configuration back. */
static void test_round_trip(void **state)
{
    static const char *const texts[] = {
        "",
        "flags:\n  migStrategy: mixed\n  plugin:\n    deviceListStrategy: [volume-mounts, "
        "cdi-cri]\n"
        "    cdiFeatureFlags: [x]\nimex: {channelIDs: [0]}\n",
        "resources:\n  gpus: [{pattern: '*', name: g}]\nsharing:\n  timeSlicing:\n"
        "    renameByDefault: true\n    resources:\n    - {name: g, replicas: 3, devices: 2}\n"
        "    - name: gpu\n      rename: other\n      devices: [{device: 0, replicas: 2}, "
        "{device: '1:0', replicas: 3}]\n",
        "flags: {mpsRoot: /m}\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 4, "
        "devices: [0, 1]}]\n",
        "health:\n  enabled: false\n  ignoredXids: all\n  fatalXids: [79]\n  probeInterval: 250ms\n"
        "  recoveryWindow: 90m\n",
        "health:\n  fatalXids: all\n",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct dp_config a, b;
        test_load_ok(&a, texts[i]);
        char *ja = test_json(&a);
        test_load_ok(&b, ja);
        char *jb = test_json(&b);
        assert_string_equal(ja, jb);
        free(ja);
        free(jb);
        dp_config_release(&a);
        dp_config_release(&b);
    }
}

static void test_enum_names(void **state)
{
    enum dp_mig_strategy m;
    enum dp_id_strategy id;
    enum dp_alloc_policy p;
    enum dp_discovery disc;
    unsigned bit;
    (void)state;
    assert_int_equal(dp_mig_strategy_from_string("single", &m), 0);
    assert_int_equal(m, DP_MIG_SINGLE);
    assert_string_equal(dp_mig_strategy_to_string(m), "single");
    assert_int_equal(dp_mig_strategy_from_string("Single", &m), -EINVAL);
    assert_int_equal(dp_id_strategy_from_string("index", &id), 0);
    assert_string_equal(dp_id_strategy_to_string(id), "index");
    assert_int_equal(dp_alloc_policy_from_string("packed", &p), 0);
    assert_string_equal(dp_alloc_policy_to_string(p), "packed");
    assert_int_equal(dp_discovery_from_string("nvml", &disc), 0);
    assert_string_equal(dp_discovery_to_string(disc), "nvml");
    assert_int_equal(dp_list_strategy_from_string("cdi-cri", &bit), 0);
    assert_int_equal(bit, DP_LIST_CDI_CRI);
    assert_int_equal(dp_list_strategy_from_string("", &bit), -EINVAL);
    assert_string_equal(dp_mig_strategy_to_string((enum dp_mig_strategy)9), "?");
}

/* flags.gfd and flags.useNodeFeatureAPI are kept for discover (src/dpconfig is shared), with the
 * sleep interval as written and its position; the device plugin's configuration is the same as
 * without them. */
static void test_gfd_kept(void **state)
{
    (void)state;
    struct dp_config cfg, plain;
    test_load_ok(&cfg, "version: v1\nflags:\n  migStrategy: single\n  useNodeFeatureAPI: false\n"
                       "  gfd:\n    oneshot: true\n    sleepInterval: soon\n"
                       "    outputFile: /out/gfd\n");
    assert_true(cfg.gfd.has_oneshot);
    assert_true(cfg.gfd.oneshot);
    assert_false(cfg.gfd.has_no_timestamp);
    assert_string_equal(cfg.gfd.sleep_interval, "soon");
    assert_int_equal(cfg.gfd.sleep_interval_line, 7);
    assert_int_equal(cfg.gfd.sleep_interval_col, 20);
    assert_string_equal(cfg.gfd.output_file, "/out/gfd");
    assert_null(cfg.gfd.machine_type_file);
    assert_true(cfg.gfd.has_use_node_feature_api);
    assert_false(cfg.use_node_feature_api);

    test_load_ok(&plain,
                 "version: v1\nflags:\n  migStrategy: single\n  useNodeFeatureAPI: false\n");
    assert_false(plain.gfd.has_oneshot);
    assert_null(plain.gfd.sleep_interval);
    char *a = test_json(&cfg), *b = test_json(&plain);
    assert_string_equal(a, b);
    free(a);
    free(b);
    dp_config_release(&cfg);
    dp_config_release(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_ok_cases),
        cmocka_unit_test(test_health_allowlist), cmocka_unit_test(test_err_cases),
        cmocka_unit_test(test_null_diag),        cmocka_unit_test(test_per_gpu_replicas),
        cmocka_unit_test(test_rename),           cmocka_unit_test(test_mps_wins),
        cmocka_unit_test(test_validate),         cmocka_unit_test(test_resource_names),
        cmocka_unit_test(test_examples_load),    cmocka_unit_test(test_example_contents),
        cmocka_unit_test(test_missing_file),     cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_enum_names),       cmocka_unit_test(test_gfd_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
