/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node labelling rules as a table: each row a node's labels and annotation, the operator's
 * configuration, and the merge patch it must send (or none). Then the OS tag and the detection
 * helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "operator-nodes.h"
#include "test-merge-patch.h"

#define GPU "\"feature.node.kubernetes.io/pci-10de.present\": \"true\""
#define ALL_DEPLOY                                                                                 \
    "\"nvidia.com/gpu.deploy.driver\": \"true\", \"nvidia.com/gpu.deploy.container-toolkit\": "    \
    "\"true\", \"nvidia.com/gpu.deploy.operator-validator\": \"true\", "                           \
    "\"nvidia.com/gpu.deploy.device-plugin\": \"true\", \"nvidia.com/gpu.deploy.dcgm-exporter\": " \
    "\"true\", \"nvidia.com/gpu.deploy.gpu-feature-discovery\": \"true\""
#define OWNED_ALL                                                                                  \
    "nvidia.com/gpu.deploy.container-toolkit,nvidia.com/gpu.deploy.dcgm-exporter,"                 \
    "nvidia.com/gpu.deploy.device-plugin,nvidia.com/gpu.deploy.driver,"                            \
    "nvidia.com/gpu.deploy.gpu-feature-discovery,nvidia.com/gpu.deploy.operator-validator,"        \
    "nvidia.com/gpu.present"
#define REMOVE_ALL                                                                                 \
    "\"nvidia.com/gpu.deploy.driver\": null, \"nvidia.com/gpu.deploy.container-toolkit\": null, "  \
    "\"nvidia.com/gpu.deploy.operator-validator\": null, "                                         \
    "\"nvidia.com/gpu.deploy.device-plugin\": "                                                    \
    "null, \"nvidia.com/gpu.deploy.dcgm-exporter\": null, "                                        \
    "\"nvidia.com/gpu.deploy.gpu-feature-discovery\": null"

enum cfg {
    CP,      /* a ClusterPolicy, container workloads */
    CP_DRA,  /* ... with the DRA driver */
    CP_SB,   /* ... with sandbox workloads on, default container */
    CP_SBVM, /* ... with sandbox workloads on, default vm-passthrough */
    NO_CP,
};

static const struct {
    const char *name;
    enum cfg cfg;
    const char *labels;     /* JSON object members */
    const char *annotation; /* gpuplane.dev/operator-labels, or NULL */
    const char *patch;      /* the whole expected patch, or NULL */
} CASES[] = {
    {"CPU node: nothing", CP, "\"kubernetes.io/os\": \"linux\"", NULL, NULL},
    {"fresh GPU node: present and every deploy label", CP, GPU, NULL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY
     "}, \"annotations\": {\"gpuplane.dev/operator-labels\": \"" OWNED_ALL "\"}}}"},
    {"class labels detect a GPU too", CP,
     "\"feature.node.kubernetes.io/pci-0302_10de.present\": \"true\", " ALL_DEPLOY
     ", \"nvidia.com/gpu.present\": \"true\"",
     NULL, NULL},
    {"pci label not true: no GPU", CP, "\"feature.node.kubernetes.io/pci-10de.present\": \"false\"",
     NULL, NULL},
    {"labelled node: nothing to do", CP, GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY,
     OWNED_ALL, NULL},
    {"admin's false and pre-installed kept; empty treated as absent", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", \"nvidia.com/gpu.deploy.driver\": \"false\", "
         "\"nvidia.com/gpu.deploy.container-toolkit\": \"pre-installed\", "
         "\"nvidia.com/gpu.deploy.operator-validator\": \"\", "
         "\"nvidia.com/gpu.deploy.device-plugin\": \"paused-for-mig-change\", "
         "\"nvidia.com/gpu.deploy.dcgm-exporter\": \"true\", "
         "\"nvidia.com/gpu.deploy.gpu-feature-discovery\": \"true\"",
     NULL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.deploy.operator-validator\": \"true\"}, "
     "\"annotations\": {\"gpuplane.dev/operator-labels\": "
     "\"nvidia.com/gpu.deploy.operator-validator\"}}}"},
    {"gpu.present with another value is set true", CP,
     GPU ", \"nvidia.com/gpu.present\": \"false\", " ALL_DEPLOY, NULL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.present\": \"true\"}, \"annotations\": "
     "{\"gpuplane.dev/operator-labels\": \"nvidia.com/gpu.present\"}}}"},
    {"GPU gone: present=false, deploy labels removed", CP,
     "\"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY ", \"nvidia.com/gpu.deploy.dcgm\": "
     "\"true\", \"nvidia.com/gpu.deploy.operands\": \"true\"",
     OWNED_ALL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.present\": \"false\", " REMOVE_ALL
     ", \"nvidia.com/gpu.deploy.dcgm\": null}, \"annotations\": "
     "{\"gpuplane.dev/operator-labels\": \"nvidia.com/gpu.present\"}}}"},
    {"not a GPU node and present=false: stray deploy labels go", CP,
     "\"nvidia.com/gpu.present\": \"false\", \"nvidia.com/gpu.deploy.driver\": \"true\"", NULL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.deploy.driver\": null}}}"},
    {"operands=false: every deploy label goes, operands stays", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", \"nvidia.com/gpu.deploy.operands\": "
         "\"false\", " ALL_DEPLOY ", \"nvidia.com/gpu.deploy.mig-manager\": \"true\"",
     OWNED_ALL,
     "{\"metadata\": {\"labels\": {" REMOVE_ALL ", \"nvidia.com/gpu.deploy.mig-manager\": null}, "
     "\"annotations\": {\"gpuplane.dev/operator-labels\": \"nvidia.com/gpu.present\"}}}"},
    {"DRA driver on: its label too", CP_DRA,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY, NULL,
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.deploy.dra-driver\": \"true\"}, "
     "\"annotations\": {\"gpuplane.dev/operator-labels\": \"nvidia.com/gpu.deploy.dra-driver\"}}}"},
    {"DRA driver off: the label the operator wrote goes", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY
         ", \"nvidia.com/gpu.deploy.dra-driver\": \"true\"",
     "nvidia.com/gpu.deploy.dra-driver",
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.deploy.dra-driver\": null}, "
     "\"annotations\": {\"gpuplane.dev/operator-labels\": null}}}"},
    {"DRA driver off: an admin's dra-driver label stays", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY
         ", \"nvidia.com/gpu.deploy.dra-driver\": \"true\"",
     NULL, NULL},
    {"container node: VM labels go whatever their value", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY
         ", \"nvidia.com/gpu.deploy.vfio-manager\": \"false\", \"nvidia.com/gpu.deploy.dcgm\": "
         "\"true\"",
     NULL, "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.deploy.vfio-manager\": null}}}"},
    {"sandbox on, node says vm-passthrough: no container labels", CP_SB,
     GPU ", \"nvidia.com/gpu.workload.config\": \"vm-passthrough\", \"nvidia.com/gpu.present\": "
         "\"true\", " ALL_DEPLOY,
     NULL, "{\"metadata\": {\"labels\": {" REMOVE_ALL "}}}"},
    {"sandbox on, default VM, node says container", CP_SBVM,
     GPU ", \"nvidia.com/gpu.workload.config\": \"container\", \"nvidia.com/gpu.present\": "
         "\"true\", " ALL_DEPLOY,
     NULL, NULL},
    {"sandbox off: the workload label means nothing", CP,
     GPU ", \"nvidia.com/gpu.workload.config\": \"vm-vgpu\", \"nvidia.com/gpu.present\": "
         "\"true\", " ALL_DEPLOY,
     NULL, NULL},
    {"no ClusterPolicy: what the operator added goes, the rest stays", NO_CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY
         ", \"nvidia.com/gpu.deploy.dcgm\": \"true\", \"team\": \"a\"",
     "nvidia.com/gpu.present,nvidia.com/gpu.deploy.driver,nvidia.com/gpu.deploy.device-plugin",
     "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.present\": null, "
     "\"nvidia.com/gpu.deploy.driver\": null, \"nvidia.com/gpu.deploy.device-plugin\": null}, "
     "\"annotations\": {\"gpuplane.dev/operator-labels\": null}}}"},
    {"no ClusterPolicy: a label the admin changed since stays", NO_CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", \"nvidia.com/gpu.deploy.driver\": \"false\"",
     "nvidia.com/gpu.deploy.driver",
     "{\"metadata\": {\"annotations\": {\"gpuplane.dev/operator-labels\": null}}}"},
    {"no ClusterPolicy, never labelled: nothing", NO_CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY, NULL, NULL},
    {"ownership of a label changed by someone else is dropped", CP,
     GPU ", \"nvidia.com/gpu.present\": \"true\", " ALL_DEPLOY,
     "nvidia.com/gpu.deploy.driver,nvidia.com/gpu.deploy.x-gone",
     "{\"metadata\": {\"annotations\": {\"gpuplane.dev/operator-labels\": "
     "\"nvidia.com/gpu.deploy.driver\"}}}"},
};

static json_t *node_of(const char *labels, const char *annotation)
{
    char text[8192];
    snprintf(text, sizeof(text), "{\"metadata\": {\"name\": \"n\", \"labels\": {%s}}}", labels);
    json_error_t err;
    json_t *node = json_loads(text, 0, &err);
    if (!node)
        fail_msg("bad labels: %s: %s", err.text, labels);
    if (annotation)
        json_object_set_new(json_object_get(node, "metadata"), "annotations",
                            json_pack("{s:s}", OP_ANNOTATION_LABELS, annotation));
    return node;
}

static struct op_label_config config(enum cfg c)
{
    struct op_label_config cfg = {.policy = c != NO_CP};
    cfg.dra_driver = c == CP_DRA;
    cfg.sandbox = c == CP_SB || c == CP_SBVM;
    cfg.default_workload = c == CP_SBVM ? OP_WORKLOAD_VM_PASSTHROUGH : OP_WORKLOAD_CONTAINER;
    return cfg;
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        json_t *node = node_of(CASES[i].labels, CASES[i].annotation);
        struct op_label_config cfg = config(CASES[i].cfg);
        json_t *patch = NULL;
        assert_int_equal(op_node_label_patch(node, &cfg, &patch), 0);
        json_t *want = CASES[i].patch ? json_loads(CASES[i].patch, 0, NULL) : NULL;
        if (CASES[i].patch && !want)
            fail_msg("%s: bad expected patch", CASES[i].name);
        if (!json_equal(patch, want) && (patch || want)) {
            char *got = patch ? json_dumps(patch, JSON_SORT_KEYS) : NULL;
            fail_msg("%s:\n got  %s\n want %s", CASES[i].name, got ? got : "none",
                     CASES[i].patch ? CASES[i].patch : "none");
        }
        /* applied, the patch is a fixed point: the next pass writes nothing */
        if (patch) {
            test_merge_metadata(node, patch);
            json_t *again = NULL;
            assert_int_equal(op_node_label_patch(node, &cfg, &again), 0);
            if (again) {
                char *got = json_dumps(again, JSON_SORT_KEYS);
                fail_msg("%s: not a fixed point: %s", CASES[i].name, got);
            }
        }
        json_decref(patch);
        json_decref(want);
        json_decref(node);
    }
}

static void test_helpers(void **state)
{
    (void)state;
    char tag[64];
    json_t *l = json_pack("{s:s,s:s}", "feature.node.kubernetes.io/system-os_release.ID", "ubuntu",
                          "feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04");
    assert_true(op_node_os_tag(l, tag, sizeof(tag)));
    assert_string_equal(tag, "ubuntu22.04");
    assert_true(op_node_has_nfd(l));
    assert_false(op_node_has_gpu(l));
    assert_false(op_node_gpu_present(l));
    json_object_set_new(l, "feature.node.kubernetes.io/system-os_release.ID", json_string("rhel"));
    json_object_set_new(l, "feature.node.kubernetes.io/system-os_release.VERSION_ID",
                        json_string("9.4"));
    assert_true(op_node_os_tag(l, tag, sizeof(tag)));
    assert_string_equal(tag, "rhel9");
    json_object_set_new(l, "feature.node.kubernetes.io/system-os_release.ID", json_string("a/b"));
    assert_false(op_node_os_tag(l, tag, sizeof(tag)));
    json_object_del(l, "feature.node.kubernetes.io/system-os_release.ID");
    assert_false(op_node_os_tag(l, tag, sizeof(tag)));
    json_decref(l);
    l = json_pack("{s:s,s:s}", "feature.node.kubernetes.io/pci-0300_10de.present", "true",
                  "nvidia.com/gpu.present", "true");
    assert_true(op_node_has_gpu(l));
    assert_true(op_node_gpu_present(l));
    json_decref(l);
    assert_false(op_node_has_gpu(NULL));
    assert_false(op_node_has_nfd(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
