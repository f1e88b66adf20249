/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the join of devices with pods (exporter-series.h) on a synthetic node: GPU 0 whole,
 * GPU 1 in MIG mode (GPU instances 2 and 7, GPU instance 2 split into two compute instances). DRA
 * claims resolved through slices as gpuplane's driver publishes them: a full GPU, a MIG device on
 * its GPU instance's series with dra_mig_profile and dra_mig_device_uuid, a compute instance's MIG
 * device on its GPU instance, the GPU's series when it is exported whole; a claim the slices do
 * not know, of another driver, without slices; one container once; claims before device plugins.
 * Device plugins: the first pod, or every pod with virtual GPUs. pod_uid and pod labels. Virtual
 * GPUs split per process: the device's series for GPU_UTIL and FB_USED, each pod's sums (0 when
 * idle, none when its UID is unknown), the pods' series for every other field; only what was read
 * is split; the exposition of it.
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

#include "exporter-series.h"

#define GPU0 "GPU-11111111-0000-0000-0000-000000000000"
#define GPU1 "GPU-22222222-0000-0000-0000-000000000000"
#define MIG_GI2_CI0 "MIG-aaaaaaaa-0000-0000-0000-000000000000"
#define MIG_GI2_CI1 "MIG-bbbbbbbb-0000-0000-0000-000000000000"
#define MIG_GI7 "MIG-cccccccc-0000-0000-0000-000000000000"

static struct gpu_mig_device migs[] = {
    {.uuid = MIG_GI2_CI0, .index = 0, .gi_id = 2, .ci_id = 0, .profile = "1c.3g.20gb"},
    {.uuid = MIG_GI2_CI1, .index = 1, .gi_id = 2, .ci_id = 1, .profile = "2c.3g.20gb"},
    {.uuid = MIG_GI7, .index = 2, .gi_id = 7, .ci_id = 0, .profile = "1g.5gb"},
};

static struct gpu_device gpus[] = {
    {.index = 0, .uuid = GPU0, .name = "A100", .pci_bus_id = "00000000:07:00.0"},
    {.index = 1,
     .uuid = GPU1,
     .name = "A100",
     .pci_bus_id = "00000000:0F:00.0",
     .mig_enabled = true,
     .n_migs = 3,
     .migs = migs},
};

static const struct gpu_inventory inv = {.n_devices = 2, .devices = gpus};
static const uint64_t last_xid[2];

/* -d f: GPU 0, GPU 1's instances 2 and 7. */
static const struct exporter_dev devs_f[] = {
    {.gpu = 0, .mig = -1, .ok = true},
    {.gpu = 1, .mig = 0, .ok = true},
    {.gpu = 1, .mig = 2, .ok = true},
};
/* -d g: both GPUs whole. */
static const struct exporter_dev devs_g[] = {
    {.gpu = 0, .mig = -1, .ok = true},
    {.gpu = 1, .mig = -1, .ok = true},
};

#define REF(p, c, dev, v)                                                                          \
    {                                                                                              \
        .device = (char *)(dev), .gi = -1, .vgpu = (v), .pod = (char *)(p), .namespace_ = "ns",    \
        .container = (char *)(c)                                                                   \
    }
#define CLAIM(p, c, drv, pl, d)                                                                    \
    {                                                                                              \
        .gi = -1, .vgpu = -1, .pod = (char *)(p), .namespace_ = "ns", .container = (char *)(c),    \
        .claim_name = "claim-" p, .claim_namespace = "ns", .driver = (char *)(drv),                \
        .pool = (char *)(pl), .dra_device = (char *)(d)                                            \
    }

static struct exporter_slices *slices(void)
{
    static const char text[] =
        "{\"metadata\": {\"name\": \"node-a-gpu.nvidia.com-0\"}, \"spec\": {\"driver\": "
        "\"gpu.nvidia.com\", \"nodeName\": \"node-a\", \"pool\": {\"name\": \"node-a\", "
        "\"generation\": 1, \"resourceSliceCount\": 1}, \"devices\": ["
        "{\"name\": \"gpu-0\", \"attributes\": {\"type\": {\"string\": \"gpu\"}, \"uuid\": "
        "{\"string\": \"" GPU0 "\"}}},"
        "{\"name\": \"gpu-1-mig-1c3g20gb-9-4\", \"attributes\": {\"type\": {\"string\": \"mig\"}, "
        "\"uuid\": {\"string\": \"" MIG_GI2_CI0 "\"}, \"parentUUID\": {\"string\": \"" GPU1 "\"}, "
        "\"profile\": {\"string\": \"1c.3g.20gb\"}}},"
        "{\"name\": \"gpu-1-mig-2c3g20gb-9-4\", \"attributes\": {\"type\": {\"string\": \"mig\"}, "
        "\"uuid\": {\"string\": \"" MIG_GI2_CI1 "\"}, \"parentUUID\": {\"string\": \"" GPU1 "\"}, "
        "\"profile\": {\"string\": \"2c.3g.20gb\"}}},"
        "{\"name\": \"gpu-1-mig-1g5gb-19-6\", \"attributes\": {\"type\": {\"string\": \"mig\"}, "
        "\"uuid\": {\"string\": \"" MIG_GI7 "\"}, \"parentUUID\": {\"string\": \"" GPU1 "\"}, "
        "\"profile\": {\"string\": \"1g.5gb\"}}}]}}";
    const struct exporter_slices_options o = {0};
    struct exporter_slices *s = NULL;
    json_error_t err;
    json_t *obj = json_loads(text, 0, &err);
    if (!obj)
        fail_msg("%s", err.text);
    assert_int_equal(exporter_slices_new(&o, &s), 0);
    assert_int_equal(exporter_slices_apply(s, KUBE_ADDED, obj), 0);
    json_decref(obj);
    return s;
}

/* The series as "gpu[/gi]{k=v,...}" lines, labels in the order given. */
static void check(const struct exporter_join *j, const struct exporter_dev *devs, size_t n,
                  const char *want)
{
    struct exporter_series_set set;
    struct strbuf sb = STRBUF_INIT;
    assert_int_equal(exporter_series_join(j, devs, n, &set), 0);
    for (size_t i = 0; i < set.n; i++) {
        const struct exporter_series *s = &set.v[i];
        assert_int_equal(strbuf_addf(&sb, "%u", s->gpu), 0);
        if (s->mig_profile)
            assert_int_equal(strbuf_addf(&sb, "/%u", s->gpu_instance_id), 0);
        assert_int_equal(strbuf_addch(&sb, '{'), 0);
        for (size_t k = 0; k < s->n_labels; k++)
            assert_int_equal(
                strbuf_addf(&sb, "%s%s=%s", k ? "," : "", s->labels[k].key, s->labels[k].value), 0);
        for (size_t k = 0; k < s->n_pod_labels; k++)
            assert_int_equal(
                strbuf_addf(&sb, ";%s=%s", s->pod_labels[k].key, s->pod_labels[k].value), 0);
        assert_int_equal(strbuf_addstr(&sb, "}\n"), 0);
    }
    if (strcmp(strbuf_str(&sb), want) != 0)
        fail_msg("got:\n%swant:\n%s", strbuf_str(&sb), want);
    strbuf_release(&sb);
    exporter_series_set_release(&set);
}

#define DRA(claim, dev)                                                                            \
    "dra_claim_name=" claim ",dra_claim_namespace=ns,dra_driver_name=gpu.nvidia.com,dra_pool_"     \
    "name=node-a,dra_device_name=" dev

#define MIG_OF(profile, uuid) ",dra_mig_profile=" profile ",dra_mig_device_uuid=" uuid
/* test_dra's series: p0 on GPU 0, p1 and p2's two containers on MIG devices of GPU 1 */
#define SERIES_P0 "{pod=p0,namespace=ns,container=main," DRA("claim-p0", "gpu-0") "}\n"
#define SERIES_P1                                                                                  \
    "{pod=p1,namespace=ns,container=main," DRA("claim-p1", "gpu-1-mig-2c3g20gb-9-4")               \
        MIG_OF("2c.3g.20gb", MIG_GI2_CI1) "}\n"
#define SERIES_P2(container)                                                                       \
    "{pod=p2,namespace=ns,container=" container "," DRA("claim-p2", "gpu-1-mig-1g5gb-19-6")        \
        MIG_OF("1g.5gb", MIG_GI7) "}\n"

static void test_dra(void **state)
{
    struct exporter_pod_ref refs[] = {
        CLAIM("p0", "main", "gpu.nvidia.com", "node-a", "gpu-0"),
        CLAIM("p1", "main", "gpu.nvidia.com", "node-a", "gpu-1-mig-2c3g20gb-9-4"),
        CLAIM("p2", "main", "gpu.nvidia.com", "node-a", "gpu-1-mig-1g5gb-19-6"),
        /* the same container twice on one device: once */
        CLAIM("p2", "main", "gpu.nvidia.com", "node-a", "gpu-1-mig-1g5gb-19-6"),
        /* another container of the pod: a series of its own */
        CLAIM("p2", "side", "gpu.nvidia.com", "node-a", "gpu-1-mig-1g5gb-19-6"),
        /* not known to the slices; another driver; another pool */
        CLAIM("p3", "main", "gpu.nvidia.com", "node-a", "gpu-5"),
        CLAIM("p4", "main", "compute-domain.nvidia.com", "node-a", "gpu-0"),
        CLAIM("p5", "main", "gpu.nvidia.com", "node-b", "gpu-0"),
        /* a device plugin's pod on GPU 0: the claim comes first */
        REF("p6", "main", GPU0, -1),
    };
    struct exporter_pods pods = {.v = refs, .n = sizeof(refs) / sizeof(refs[0])};
    struct exporter_slices *s = slices();
    struct exporter_join j = {.inv = &inv, .last_xid = last_xid, .pods = &pods, .slices = s};
    (void)state;

    check(&j, devs_f, 3,
          "0" SERIES_P0 "1/2" SERIES_P1 "1/7" SERIES_P2("main") "1/7" SERIES_P2("side"));

    /* GPU 1 exported whole: its MIG devices' claims label its series. */
    check(&j, devs_g, 2, "0" SERIES_P0 "1" SERIES_P1 "1" SERIES_P2("main") "1" SERIES_P2("side"));

    /* Without slices (no API server) claims label nothing; the device plugin's pod does. */
    j.slices = NULL;
    check(&j, devs_f, 3, "0{pod=p6,namespace=ns,container=main}\n1/2{}\n1/7{}\n");
    exporter_slices_free(s);
}

static void test_device_plugins(void **state)
{
    struct exporter_pod_ref refs[] = {
        REF("a", "c", GPU0, 0),
        REF("b", "c", GPU0, 1),
        REF("m", "c", MIG_GI2_CI1, -1),
        {.device = "nvidia1", .gi = 7, .vgpu = 3, .pod = "g", .namespace_ = "ns", .container = "c"},
        REF("x", "c", "GPU-unknown", -1),
    };
    struct exporter_pods pods = {.v = refs, .n = sizeof(refs) / sizeof(refs[0])};
    struct exporter_join j = {.inv = &inv, .last_xid = last_xid, .pods = &pods};
    (void)state;
    check(&j, devs_f, 3,
          "0{pod=a,namespace=ns,container=c}\n"
          "1/2{pod=m,namespace=ns,container=c}\n"
          "1/7{pod=g,namespace=ns,container=c}\n");
    j.virtual_gpus = true;
    check(&j, devs_f, 3,
          "0{pod=a,namespace=ns,container=c,vgpu=0}\n"
          "0{pod=b,namespace=ns,container=c,vgpu=1}\n"
          "1/2{pod=m,namespace=ns,container=c}\n"
          "1/7{pod=g,namespace=ns,container=c,vgpu=3}\n");
    /* nvidia<N> names a GPU only with --kubernetes-gpu-id-type=device-name. */
    struct exporter_pod_ref by_name[] = {REF("n", "c", "nvidia0", -1)};
    struct exporter_pods named = {.v = by_name, .n = 1};
    j = (struct exporter_join){.inv = &inv, .last_xid = last_xid, .pods = &named};
    check(&j, devs_g, 2, "0{}\n1{}\n");
    j.id_type = EXPORTER_ID_DEVICE_NAME;
    check(&j, devs_g, 2, "0{pod=n,namespace=ns,container=c}\n1{}\n");
    /* A device whose read failed is no series. */
    struct exporter_dev failed[] = {{.gpu = 0, .mig = -1, .ok = false},
                                    {.gpu = 1, .mig = -1, .ok = true}};
    check(&j, failed, 2, "1{}\n");
}

static void test_pod_metadata(void **state)
{
    const struct exporter_podmeta_options o = {.labels = true};
    struct exporter_podmeta *pm = NULL;
    struct exporter_pod_ref refs[] = {REF("a", "c", GPU0, 0), REF("b", "c", GPU0, 1)};
    struct exporter_pods pods = {.v = refs, .n = 2};
    json_error_t err;
    json_t *pod = json_loads("{\"metadata\": {\"namespace\": \"ns\", \"name\": \"a\", \"uid\": "
                             "\"uid-a\", \"labels\": {\"team\": \"x\"}}}",
                             0, &err);
    (void)state;
    assert_non_null(pod);
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    assert_int_equal(exporter_podmeta_apply(pm, KUBE_ADDED, pod), 0);
    json_decref(pod);
    struct exporter_join j = {
        .inv = &inv, .last_xid = last_xid, .pods = &pods, .podmeta = pm, .virtual_gpus = true};
    check(&j, devs_g, 1,
          "0{pod=a,namespace=ns,container=c,vgpu=0}\n0{pod=b,namespace=ns,container=c,vgpu=1}\n");
    j.pod_uid = j.pod_labels = true;
    check(&j, devs_g, 1,
          "0{pod=a,namespace=ns,container=c,pod_uid=uid-a,vgpu=0;team=x}\n"
          "0{pod=b,namespace=ns,container=c,vgpu=1}\n");
    exporter_podmeta_free(pm);
}

#define BIT(m) (UINT64_C(1) << (m))

static struct exporter_podmeta *podmeta_of(const char *const *pods_json, size_t n)
{
    const struct exporter_podmeta_options o = {.labels = true};
    struct exporter_podmeta *pm = NULL;
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    for (size_t i = 0; i < n; i++) {
        json_error_t err;
        json_t *pod = json_loads(pods_json[i], 0, &err);
        assert_non_null(pod);
        assert_int_equal(exporter_podmeta_apply(pm, KUBE_ADDED, pod), 0);
        json_decref(pod);
    }
    return pm;
}

/* The exposition of the join for a counters file of GPU_UTIL, FB_USED and GPU_TEMP, without the
 * fixed labels (each line from "{gpu" up to the first label after modelName dropped). */
static void render_check(const struct exporter_join *j, const struct exporter_dev *devs, size_t n,
                         const char *want)
{
    const char *csv = "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_GPU_UTIL, gauge, u\n"
                      "DCGM_FI_DEV_FB_USED, gauge, f\n";
    const struct exporter_render_options ro = {0};
    struct exporter_counters c;
    struct exporter_series_set set;
    struct strbuf out = STRBUF_INIT, got = STRBUF_INIT;
    struct diag d;
    exporter_counters_init(&c);
    diag_init(&d);
    assert_int_equal(exporter_counters_parse(csv, strlen(csv), "t.csv", &c, &d), 0);
    assert_int_equal(exporter_series_join(j, devs, n, &set), 0);
    const struct exporter_snapshot snap = {.series = set.v, .n = set.n};
    assert_int_equal(exporter_render(&c, &snap, &ro, &out), 0);
    for (const char *line = strbuf_str(&out); *line;) {
        const char *end = strchr(line, '\n'), *brace = strchr(line, '{');
        if (line[0] != '#') {
            const char *rest = strstr(line, "modelName=\"A100\"");
            assert_non_null(rest);
            rest += strlen("modelName=\"A100\"");
            assert_int_equal(strbuf_add(&got, line, (size_t)(brace - line) + 1), 0);
            assert_int_equal(
                strbuf_add(&got, rest + (*rest == ','), (size_t)(end - rest) - (*rest == ',')), 0);
            assert_int_equal(strbuf_addch(&got, '\n'), 0);
        }
        line = end + 1;
    }
    if (strcmp(strbuf_str(&got), want) != 0)
        fail_msg("got:\n%swant:\n%s", strbuf_str(&got), want);
    strbuf_release(&got);
    strbuf_release(&out);
    exporter_series_set_release(&set);
    exporter_counters_release(&c);
}

static void test_virtual_gpu_processes(void **state)
{
    static const char *const objects[] = {
        ("{\"metadata\": {\"namespace\": \"ns\", \"name\": \"a\", \"uid\": \"uid-a\", "
         "\"labels\": {\"team\": \"x\"}}}"),
        "{\"metadata\": {\"namespace\": \"ns\", \"name\": \"b\", \"uid\": \"uid-b\"}}",
        "{\"metadata\": {\"namespace\": \"ns\", \"name\": \"idle\", \"uid\": \"uid-i\"}}",
    };
    struct exporter_pod_ref refs[] = {REF("a", "c", GPU0, 0), REF("b", "c", GPU0, 1),
                                      REF("idle", "c", GPU0, 2), REF("new", "c", GPU0, 3)};
    struct exporter_pods pods = {.v = refs, .n = 4};
    struct exporter_proc v[] = {
        {.pid = 1,
         .uid = "uid-a",
         .have_memory = true,
         .memory_mib = 1024,
         .have_util = true,
         .sm_util = 20},
        {.pid = 2,
         .uid = "uid-a",
         .have_memory = true,
         .memory_mib = 512,
         .have_util = true,
         .sm_util = 15},
        {.pid = 3,
         .uid = "uid-b",
         .have_memory = true,
         .memory_mib = 2048,
         .have_util = true,
         .sm_util = 40},
        {.pid = 4,
         .uid = "",
         .have_memory = true,
         .memory_mib = 7,
         .have_util = true,
         .sm_util = 5},
    };
    struct exporter_procs procs[2] = {{.v = v, .n = 4, .memory_ok = true, .util_ok = true}, {0}};
    struct exporter_dev devs[2] = {{.gpu = 0, .mig = -1, .ok = true},
                                   {.gpu = 1, .mig = -1, .ok = true}};
    for (size_t i = 0; i < 2; i++) {
        devs[i].sample.have =
            BIT(GPU_METRIC_GPU_UTIL) | BIT(GPU_METRIC_FB_USED) | BIT(GPU_METRIC_GPU_TEMP);
        devs[i].sample.v[GPU_METRIC_GPU_UTIL] = 90;
        devs[i].sample.v[GPU_METRIC_FB_USED] = 4000;
        devs[i].sample.v[GPU_METRIC_GPU_TEMP] = 40;
    }
    struct exporter_podmeta *pm = podmeta_of(objects, 3);
    struct exporter_join j = {.inv = &inv,
                              .pods = &pods,
                              .podmeta = pm,
                              .procs = procs,
                              .virtual_gpus = true,
                              .pod_labels = true};
    (void)state;
    /* Every field but the two per pod (pod_uid only with its flag); the device's and each known
     * pod's sums for those two (pod_uid always); "new", not known yet, has no sums; GPU 1 has no
     * pods. */
    render_check(
        &j, devs, 2,
        "DCGM_FI_DEV_GPU_TEMP{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",vgpu=\"0\"} "
        "40\n"
        "DCGM_FI_DEV_GPU_TEMP{container=\"c\",namespace=\"ns\",pod=\"b\",vgpu=\"1\"} 40\n"
        "DCGM_FI_DEV_GPU_TEMP{container=\"c\",namespace=\"ns\",pod=\"idle\",vgpu=\"2\"} 40\n"
        "DCGM_FI_DEV_GPU_TEMP{container=\"c\",namespace=\"ns\",pod=\"new\",vgpu=\"3\"} 40\n"
        "DCGM_FI_DEV_GPU_TEMP{} 40\n"
        "DCGM_FI_DEV_GPU_UTIL{} 90\n"
        "DCGM_FI_DEV_GPU_UTIL{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",pod_uid=\"uid-"
        "a\",vgpu=\"0\"} 35\n"
        "DCGM_FI_DEV_GPU_UTIL{container=\"c\",namespace=\"ns\",pod=\"b\",pod_uid=\"uid-b\",vgpu="
        "\"1\"} 40\n"
        "DCGM_FI_DEV_GPU_UTIL{container=\"c\",namespace=\"ns\",pod=\"idle\",pod_uid=\"uid-i\",vgpu="
        "\"2\"} 0\n"
        "DCGM_FI_DEV_GPU_UTIL{} 90\n"
        "DCGM_FI_DEV_FB_USED{} 4000\n"
        "DCGM_FI_DEV_FB_USED{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",pod_uid=\"uid-"
        "a\",vgpu=\"0\"} 1536\n"
        "DCGM_FI_DEV_FB_USED{container=\"c\",namespace=\"ns\",pod=\"b\",pod_uid=\"uid-b\",vgpu="
        "\"1\"} 2048\n"
        "DCGM_FI_DEV_FB_USED{container=\"c\",namespace=\"ns\",pod=\"idle\",pod_uid=\"uid-i\",vgpu="
        "\"2\"} 0\n"
        "DCGM_FI_DEV_FB_USED{} 4000\n");

    /* The utilisation samples could not be read: only FB_USED is split; GPU_UTIL is the pods'. */
    procs[0].util_ok = false;
    pods.n = 1;
    render_check(&j, devs, 1,
                 "DCGM_FI_DEV_GPU_TEMP{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",vgpu="
                 "\"0\"} 40\n"
                 "DCGM_FI_DEV_GPU_UTIL{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",vgpu="
                 "\"0\"} 90\n"
                 "DCGM_FI_DEV_FB_USED{} 4000\n"
                 "DCGM_FI_DEV_FB_USED{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",pod_"
                 "uid=\"uid-a\",vgpu=\"0\"} 1536\n");

    /* Without pod metadata (no API server), or a device that has no FB_USED: no split. */
    procs[0].util_ok = true;
    j.podmeta = NULL;
    render_check(
        &j, devs, 1,
        "DCGM_FI_DEV_GPU_TEMP{container=\"c\",namespace=\"ns\",pod=\"a\",vgpu=\"0\"} 40\n"
        "DCGM_FI_DEV_GPU_UTIL{container=\"c\",namespace=\"ns\",pod=\"a\",vgpu=\"0\"} 90\n"
        "DCGM_FI_DEV_FB_USED{container=\"c\",namespace=\"ns\",pod=\"a\",vgpu=\"0\"} 4000\n");
    j.podmeta = pm;
    devs[0].sample.have &= ~(BIT(GPU_METRIC_FB_USED) | BIT(GPU_METRIC_GPU_UTIL));
    render_check(&j, devs, 1,
                 "DCGM_FI_DEV_GPU_TEMP{team=\"x\",container=\"c\",namespace=\"ns\",pod=\"a\",vgpu="
                 "\"0\"} 40\n");
    /* Whether a device is worth reading the processes of. */
    assert_true(exporter_series_has_pods(&j, &devs[0]));
    assert_false(exporter_series_has_pods(&j, &devs[1]));
    exporter_podmeta_free(pm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra),
        cmocka_unit_test(test_device_plugins),
        cmocka_unit_test(test_pod_metadata),
        cmocka_unit_test(test_virtual_gpu_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
