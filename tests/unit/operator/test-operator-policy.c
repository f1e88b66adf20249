/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ClusterPolicy model: NVIDIA's defaults for an empty spec, nil against false, every field the
 * renderer uses read back, a table of malformed policies (each must fail naming its JSON path),
 * positions in files, and the name checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <fcntl.h>

#include "base-doc.h"
#include "operator-policy-internal.h"

/* A policy from YAML text (the whole ClusterPolicy or just its spec body under "spec:"). */
static int load(const char *yaml, struct op_policy **ret, struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_string("test.yaml", yaml, strlen(yaml), d, &doc);

    if (r < 0)
        return r;
    return op_policy_from_json(doc_root(doc, 0), ret, d);
}

static struct op_policy *must_load(const char *yaml)
{
    struct op_policy *p = NULL;
    struct diag d;

    diag_init(&d);
    int r = load(yaml, &p, &d);
    if (r < 0)
        fail_msg("%s: %s", yaml, d.msg);
    return p;
}

static void test_defaults(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p = must_load("apiVersion: nvidia.com/v1\n"
                                                               "kind: ClusterPolicy\n"
                                                               "metadata: {name: cluster-policy}\n"
                                                               "spec: {}\n");

    /* nil enabled: NVIDIA's column; draDriver is gpuplane's and off. */
    assert_true(op_policy_enabled(p, OP_DRIVER));
    assert_true(op_policy_enabled(p, OP_TOOLKIT));
    assert_true(op_policy_enabled(p, OP_VALIDATOR));
    assert_true(op_policy_enabled(p, OP_DEVICE_PLUGIN));
    assert_false(op_policy_enabled(p, OP_DRA_DRIVER));
    assert_true(op_policy_enabled(p, OP_DCGM_EXPORTER));
    assert_true(op_policy_enabled(p, OP_GFD));
    assert_true(p->dcgm_enabled);
    assert_true(p->mig_manager_enabled);
    assert_false(p->node_status_exporter_enabled);
    assert_false(p->sandbox_enabled);
    assert_int_equal(p->sandbox_default_workload, OP_WORKLOAD_CONTAINER);
    assert_string_equal(p->sandbox_mode, "kubevirt");
    assert_string_equal(p->mig_manager_config_default, "all-disabled");
    assert_false(p->psa_enabled);
    assert_true(p->cdi_enabled);
    assert_false(p->cdi_default);
    assert_false(p->cdi_nri_plugin);
    assert_string_equal(p->runtime_class, "nvidia");
    assert_string_equal(p->host_root, "/");
    assert_string_equal(p->driver_install_dir, "/run/nvidia/driver");
    assert_string_equal(p->kubelet_root_dir, "/var/lib/kubelet");
    assert_string_equal(p->toolkit_install_dir, "/usr/local/nvidia");
    assert_string_equal(p->mps_root, "/run/nvidia/mps");
    assert_string_equal(p->driver_kernel_module_type, "auto");
    assert_int_equal(p->mig_strategy, OP_MIG_UNSET);
    assert_null(op_mig_strategy_name(p->mig_strategy));
    assert_string_equal(p->daemonsets.priority_class_name, "system-node-critical");
    assert_int_equal(p->daemonsets.update_strategy, OP_UPDATE_ROLLING);
    assert_null(p->daemonsets.max_unavailable);
    assert_int_equal(json_object_size(p->daemonsets.labels), 0);
    assert_null(p->daemonsets.tolerations);
    for (int i = 0; i < OP_COMPONENT_MAX; i++) {
        assert_int_equal(p->comp[i].pull_policy, OP_PULL_IF_NOT_PRESENT);
        assert_null(p->comp[i].repository);
        assert_int_equal(json_array_size(p->comp[i].pull_secrets), 0);
        assert_null(p->comp[i].env);
        assert_null(p->comp[i].resources);
        assert_false(p->comp[i].host_network);
    }
    assert_false(p->exporter_pod_labels);
    assert_false(p->exporter_host_pid);
}

/* A spec that is absent entirely, or a CP that is only a mapping, still has every default. */
static void test_no_spec(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p = must_load("metadata: {name: x}\n");
    assert_true(op_policy_enabled(p, OP_DEVICE_PLUGIN));
    assert_string_equal(p->runtime_class, "nvidia");
}

/* nil is the default, false is false, and explicit true turns draDriver on. */
static void test_nil_against_false(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p = must_load("spec:\n"
                                                               "  driver: {enabled: false}\n"
                                                               "  toolkit: {enabled: null}\n"
                                                               "  devicePlugin: {enabled: false}\n"
                                                               "  draDriver: {enabled: true}\n"
                                                               "  dcgm: {}\n"
                                                               "  cdi: {enabled: false}\n"
                                                               "  psa: {enabled: true}\n"
                                                               "  gfd: {enabled: ~}\n");
    assert_false(op_policy_enabled(p, OP_DRIVER));
    assert_true(op_policy_enabled(p, OP_TOOLKIT));
    assert_false(op_policy_enabled(p, OP_DEVICE_PLUGIN));
    assert_true(op_policy_enabled(p, OP_DRA_DRIVER));
    assert_true(p->dcgm_enabled);
    assert_false(p->cdi_enabled);
    assert_true(p->psa_enabled);
    assert_true(op_policy_enabled(p, OP_GFD));
}

static void test_fields(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p = must_load(
        "spec:\n"
        "  operator: {runtimeClass: nvidia-cdi, defaultRuntime: containerd}\n"
        "  daemonsets:\n"
        "    labels: {team: gpu, app: ignored-on-pods}\n"
        "    annotations: {a.example.com/x: 'y'}\n"
        "    tolerations: [{key: k, operator: Equal, value: v, effect: NoExecute, "
        "tolerationSeconds: 30, bogus: 1}]\n"
        "    priorityClassName: gpu-critical\n"
        "    updateStrategy: RollingUpdate\n"
        "    rollingUpdate: {maxUnavailable: '25%'}\n"
        "    podSecurityContext: {runAsUser: 0}\n"
        "  devicePlugin:\n"
        "    repository: nvcr.io/nvidia\n"
        "    image: k8s-device-plugin\n"
        "    version: v0.20.0\n"
        "    imagePullPolicy: Always\n"
        "    imagePullSecrets: [regcred, regcred, other]\n"
        "    args: [--fail-on-init-error=false]\n"
        "    env: [{name: A, value: '1'}, {name: B}]\n"
        "    resources: {limits: {memory: 64Mi, cpu: 0.5, nvidia.com/x: 2}}\n"
        "    config: {name: plugin-configs, default: time-slicing.yaml}\n"
        "    mps: {root: /run/mps}\n"
        "    hostNetwork: true\n"
        "  gfd: {imagePullPolicy: Sometimes}\n"
        "  validator:\n"
        "    imagePullPolicy: Never\n"
        "    plugin: {env: [{name: WITH_WORKLOAD, value: 'false'}]}\n"
        "    driver: {env: [{name: DISABLE_DEV_CHAR_SYMLINK_CREATION, value: 'true'}]}\n"
        "  mig: {strategy: mixed}\n"
        "  hostPaths: {rootFS: /host, driverInstallDir: /opt/nvidia, kubeletRootDir: "
        "/data/kubelet}\n"
        "  toolkit: {installDir: /opt/nvidia-toolkit}\n"
        "  driver:\n"
        "    kernelModuleType: open\n"
        "    rdma: {enabled: true, useHostMofed: true}\n"
        "    upgradePolicy: {autoUpgrade: true}\n"
        "    manager: {repository: nvcr.io/nvidia/cloud-native, image: k8s-driver-manager, "
        "version: v0.12.0}\n"
        "  dcgmExporter:\n"
        "    config: {name: metrics}\n"
        "    enablePodLabels: true\n"
        "    podLabelAllowlistRegex: ['^app$', '^team']\n"
        "    hostPID: true\n"
        "    service: {type: NodePort, internalTrafficPolicy: Local}\n"
        "    annotations: {prometheus.io/port: '9400'}\n"
        "  sandboxWorkloads: {enabled: true, defaultWorkload: vm-vgpu, mode: kata}\n"
        "  migManager: {enabled: false, config: {default: ''}}\n"
        "  cdi: {enabled: true, default: true, nriPluginEnabled: true}\n"
        "  somethingNew: {x: 1}\n");

    assert_string_equal(p->runtime_class, "nvidia-cdi");
    assert_string_equal(json_string_value(json_object_get(p->daemonsets.labels, "team")), "gpu");
    json_t *t = json_array_get(p->daemonsets.tolerations, 0);
    assert_string_equal(json_string_value(json_object_get(t, "effect")), "NoExecute");
    assert_int_equal(json_integer_value(json_object_get(t, "tolerationSeconds")), 30);
    assert_null(json_object_get(t, "bogus"));
    assert_string_equal(p->daemonsets.priority_class_name, "gpu-critical");
    assert_string_equal(p->daemonsets.max_unavailable, "25%");
    assert_non_null(p->daemonsets.pod_security_context);

    const struct op_component_spec *dp = &p->comp[OP_DEVICE_PLUGIN];
    assert_string_equal(dp->repository, "nvcr.io/nvidia");
    assert_int_equal(dp->pull_policy, OP_PULL_ALWAYS);
    assert_int_equal(json_array_size(dp->pull_secrets), 2); /* duplicates dropped */
    assert_string_equal(json_string_value(json_array_get(dp->args, 0)),
                        "--fail-on-init-error=false");
    assert_string_equal(json_string_value(json_object_get(json_array_get(dp->env, 1), "value")),
                        "");
    json_t *limits = json_object_get(dp->resources, "limits");
    assert_string_equal(json_string_value(json_object_get(limits, "cpu")), "0.5");
    assert_string_equal(json_string_value(json_object_get(limits, "nvidia.com/x")), "2");
    assert_string_equal(dp->config_name, "plugin-configs");
    assert_string_equal(dp->config_default, "time-slicing.yaml");
    assert_true(dp->host_network);
    assert_string_equal(p->mps_root, "/run/mps");
    /* Anything but Always and Never is IfNotPresent, as NVIDIA's. */
    assert_int_equal(p->comp[OP_GFD].pull_policy, OP_PULL_IF_NOT_PRESENT);
    assert_int_equal(p->comp[OP_VALIDATOR].pull_policy, OP_PULL_NEVER);
    assert_int_equal(json_array_size(p->validator_env[OP_CHECK_PLUGIN]), 1);
    assert_int_equal(json_array_size(p->validator_env[OP_CHECK_DRIVER]), 1);
    assert_null(p->validator_env[OP_CHECK_TOOLKIT]);
    assert_int_equal(p->mig_strategy, OP_MIG_MIXED);
    assert_string_equal(op_mig_strategy_name(p->mig_strategy), "mixed");
    assert_string_equal(p->host_root, "/host");
    assert_string_equal(p->driver_install_dir, "/opt/nvidia");
    assert_string_equal(p->kubelet_root_dir, "/data/kubelet");
    assert_string_equal(p->toolkit_install_dir, "/opt/nvidia-toolkit");
    assert_string_equal(p->driver_kernel_module_type, "open");
    assert_true(p->driver_rdma_enabled);
    assert_true(p->driver_rdma_use_host_mofed);
    assert_true(p->driver_auto_upgrade);
    assert_string_equal(p->driver_manager.image, "k8s-driver-manager");
    assert_string_equal(p->comp[OP_DCGM_EXPORTER].config_name, "metrics");
    assert_true(p->exporter_pod_labels);
    assert_false(p->exporter_pod_uid);
    assert_string_equal(p->exporter_pod_label_allowlist, "^app$,^team");
    assert_true(p->exporter_host_pid);
    assert_string_equal(p->exporter_service_type, "NodePort");
    assert_string_equal(p->exporter_internal_traffic_policy, "Local");
    assert_int_equal(json_object_size(p->exporter_annotations), 1);
    assert_true(p->sandbox_enabled);
    assert_int_equal(p->sandbox_default_workload, OP_WORKLOAD_VM_VGPU);
    assert_string_equal(op_workload_name(p->sandbox_default_workload), "vm-vgpu");
    assert_string_equal(p->sandbox_mode, "kata");
    assert_false(p->mig_manager_enabled);
    assert_string_equal(p->mig_manager_config_default, ""); /* "": no default config */
    assert_true(p->cdi_default);
    assert_true(p->cdi_nri_plugin);
}

/* maxUnavailable as an integer (what a values file often holds) reads as its decimal string. */
static void test_max_unavailable_integer(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p =
        must_load("spec: {daemonsets: {updateStrategy: OnDelete, rollingUpdate: "
                  "{maxUnavailable: 2}}}\n");
    assert_string_equal(p->daemonsets.max_unavailable, "2");
    assert_int_equal(p->daemonsets.update_strategy, OP_UPDATE_ON_DELETE);
}

struct bad_case {
    const char *yaml;
    const char *want; /* a substring of the message */
};

static const struct bad_case BAD[] = {
    {"[]\n", "a ClusterPolicy must be a mapping"},
    {"kind: Pod\n", "kind: expected ClusterPolicy"},
    {"spec: []\n", "spec: expected a mapping, got sequence"},
    {"spec: {driver: yes}\n", "spec.driver: expected a mapping, got string"},
    {"spec: {driver: {enabled: 'true'}}\n", "spec.driver.enabled: expected a boolean, got string"},
    {"spec: {devicePlugin: {imagePullPolicy: 3}}\n",
     "spec.devicePlugin.imagePullPolicy: expected a string, got integer"},
    {"spec: {devicePlugin: {repository: [a]}}\n",
     "spec.devicePlugin.repository: expected a string"},
    {"spec: {gfd: {imagePullSecrets: regcred}}\n",
     "spec.gfd.imagePullSecrets: expected a sequence of strings"},
    {"spec: {gfd: {imagePullSecrets: [ok, 7]}}\n",
     "spec.gfd.imagePullSecrets[1]: expected a string"},
    {"spec: {gfd: {imagePullSecrets: [Bad_Name]}}\n",
     "spec.gfd.imagePullSecrets[0]: \"Bad_Name\" is not a valid name"},
    {"spec: {gfd: {args: [--a, {b: 1}]}}\n", "spec.gfd.args[1]: expected a string, got mapping"},
    {"spec: {toolkit: {env: {A: b}}}\n", "spec.toolkit.env: expected a sequence of {name, value}"},
    {"spec: {toolkit: {env: [A=b]}}\n", "spec.toolkit.env[0]: expected a mapping {name, value}"},
    {"spec: {toolkit: {env: [{value: b}]}}\n", "spec.toolkit.env[0]: name: required"},
    {"spec: {toolkit: {env: [{name: A, value: 1}]}}\n",
     "spec.toolkit.env[0].value: expected a string, got integer"},
    {"spec: {toolkit: {env: [{name: 'A=B', value: x}]}}\n", "spec.toolkit.env[0].name: \"A=B\""},
    {"spec: {dcgmExporter: {resources: {limits: {memory: [1]}}}}\n",
     "spec.dcgmExporter.resources.limits.memory: expected a quantity"},
    {"spec: {dcgmExporter: {resources: []}}\n", "spec.dcgmExporter.resources: expected a mapping"},
    {"spec: {devicePlugin: {config: {name: Not_Valid}}}\n",
     "spec.devicePlugin.config.name: \"Not_Valid\" is not a valid name"},
    {"spec: {devicePlugin: {config: {name: cfg, default: ../etc/passwd}}}\n",
     "spec.devicePlugin.config.default: \"../etc/passwd\" is not a valid ConfigMap key"},
    {"spec: {daemonsets: {updateStrategy: Recreate}}\n",
     "spec.daemonsets.updateStrategy: invalid value \"Recreate\": want one of RollingUpdate, "
     "OnDelete"},
    {"spec: {daemonsets: {rollingUpdate: {maxUnavailable: lots}}}\n",
     "spec.daemonsets.rollingUpdate.maxUnavailable: \"lots\" is neither a number nor a percentage"},
    {"spec: {daemonsets: {labels: {a: 1}}}\n",
     "spec.daemonsets.labels.a: expected a string, got integer"},
    {"spec: {daemonsets: {tolerations: [{key: k, tolerationSeconds: soon}]}}\n",
     "spec.daemonsets.tolerations[0].tolerationSeconds: expected an integer"},
    {"spec: {daemonsets: {tolerations: [k]}}\n", "spec.daemonsets.tolerations[0]: expected a "
                                                 "toleration mapping"},
    {"spec: {daemonsets: {priorityClassName: UPPER}}\n",
     "spec.daemonsets.priorityClassName: \"UPPER\" is not a valid name"},
    {"spec: {daemonsets: {podSecurityContext: 0}}\n",
     "spec.daemonsets.podSecurityContext: expected a mapping"},
    {"spec: {mig: {strategy: double}}\n",
     "spec.mig.strategy: invalid value \"double\": want one of none, single, mixed"},
    {"spec: {sandboxWorkloads: {defaultWorkload: vm}}\n", "spec.sandboxWorkloads.defaultWorkload"},
    {"spec: {sandboxWorkloads: {mode: docker}}\n", "spec.sandboxWorkloads.mode: invalid value"},
    {"spec: {driver: {kernelModuleType: closed}}\n", "spec.driver.kernelModuleType: invalid value"},
    {"spec: {driver: {rdma: {enabled: 1}}}\n", "spec.driver.rdma.enabled: expected a boolean"},
    {"spec: {driver: {manager: {env: 3}}}\n", "spec.driver.manager.env: expected a sequence"},
    {"spec: {driver: {upgradePolicy: {autoUpgrade: maybe}}}\n",
     "spec.driver.upgradePolicy.autoUpgrade: expected a boolean"},
    {"spec: {operator: {runtimeClass: 'nvidia runtime'}}\n",
     "spec.operator.runtimeClass: \"nvidia runtime\" is not a valid name"},
    {"spec: {hostPaths: {rootFS: relative/path}}\n",
     "spec.hostPaths.rootFS: \"relative/path\" is not an absolute path"},
    {"spec: {hostPaths: {kubeletRootDir: /var/lib/../kubelet}}\n",
     "spec.hostPaths.kubeletRootDir: \"/var/lib/../kubelet\" is not an absolute path"},
    {"spec: {toolkit: {installDir: /usr/local/..}}\n", "spec.toolkit.installDir"},
    {"spec: {devicePlugin: {mps: {root: mps}}}\n", "spec.devicePlugin.mps.root"},
    {"spec: {dcgmExporter: {podLabelAllowlistRegex: '^app$'}}\n",
     "spec.dcgmExporter.podLabelAllowlistRegex: expected a sequence of strings"},
    {"spec: {dcgmExporter: {service: {type: Headless}}}\n",
     "spec.dcgmExporter.service.type: invalid value \"Headless\""},
    {"spec: {dcgmExporter: {service: {internalTrafficPolicy: Nearest}}}\n",
     "spec.dcgmExporter.service.internalTrafficPolicy: invalid value"},
    {"spec: {dcgmExporter: {enablePodUID: on}}\n",
     "spec.dcgmExporter.enablePodUID: expected a boolean, got string"},
    {"spec: {dcgmExporter: {annotations: []}}\n", "spec.dcgmExporter.annotations"},
    {"spec: {validator: {plugin: {env: [{name: 5}]}}}\n",
     "spec.validator.plugin.env[0].name: expected a string"},
    {"spec: {validator: {toolkit: []}}\n", "spec.validator.toolkit: expected a mapping"},
    {"spec: {psa: {enabled: 'yes'}}\n", "spec.psa.enabled: expected a boolean"},
    {"spec: {cdi: {nriPluginEnabled: true, enabled: false}}\n",
     "spec.cdi.nriPluginEnabled: the NRI plugin needs cdi.enabled and toolkit.enabled"},
    {"spec: {cdi: {nriPluginEnabled: true}, toolkit: {enabled: false}}\n",
     "spec.cdi.nriPluginEnabled"},
    {"spec: {draDriver: {enabled: 'no'}}\n", "spec.draDriver.enabled: expected a boolean"},
    {"spec: {migManager: {enabled: 0}}\n", "spec.migManager.enabled: expected a boolean"},
};

static void test_bad_policies(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        struct op_policy *p = NULL;
        struct diag d;
        diag_init(&d);
        int r = load(BAD[i].yaml, &p, &d);
        if (r != -EINVAL || !strstr(d.msg, BAD[i].want))
            fail_msg("case %zu (%s): r=%d, message \"%s\", want \"%s\"", i, BAD[i].yaml, r, d.msg,
                     BAD[i].want);
        assert_null(p);
    }
}

/* Messages name the file, line and column of the bad value. */
static void test_file_positions(void **state)
{
    (void)state;
    char path[] = "/tmp/test-operator-policy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "apiVersion: nvidia.com/v1\n"
                        "kind: ClusterPolicy\n"
                        "metadata:\n"
                        "  name: cluster-policy\n"
                        "spec:\n"
                        "  devicePlugin:\n"
                        "    imagePullPolicy: [Always]\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);

    struct op_policy *p = NULL;
    json_t *obj = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(op_policy_from_file(path, &p, &obj, &d), -EINVAL);
    char want[256];
    snprintf(want, sizeof(want),
             "%s:7:22: spec.devicePlugin.imagePullPolicy: expected a string, got sequence", path);
    assert_string_equal(d.msg, want);
    assert_null(p);
    assert_null(obj);

    /* A null-valued boolean error (no position of its own) points at its mapping. */
    const char text2[] = "spec:\n  driver:\n    enabled: 7\n";
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text2, sizeof(text2) - 1), (ssize_t)(sizeof(text2) - 1));
    close(fd);
    diag_init(&d);
    assert_int_equal(op_policy_from_file(path, &p, NULL, &d), -EINVAL);
    snprintf(want, sizeof(want), "%s:3:14: spec.driver.enabled: expected a boolean", path);
    assert_non_null(strstr(d.msg, want));

    /* Two documents are not one ClusterPolicy; a syntax error keeps the loader's position. */
    const char text3[] = "spec: {}\n---\nspec: {}\n";
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, text3, sizeof(text3) - 1), (ssize_t)(sizeof(text3) - 1));
    close(fd);
    diag_init(&d);
    assert_int_equal(op_policy_from_file(path, &p, NULL, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "expected one ClusterPolicy document, found 2"));

    const char text4[] = "spec: {driver: [}\n";
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, text4, sizeof(text4) - 1), (ssize_t)(sizeof(text4) - 1));
    close(fd);
    diag_init(&d);
    assert_true(op_policy_from_file(path, &p, NULL, &d) < 0);
    snprintf(want, sizeof(want), "%s:1:", path);
    assert_non_null(strstr(d.msg, want));

    /* A good file gives the policy and the object as read. */
    const char text5[] = "metadata: {name: cp, uid: 1234}\nspec: {gfd: {enabled: false}}\n";
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, text5, sizeof(text5) - 1), (ssize_t)(sizeof(text5) - 1));
    close(fd);
    diag_init(&d);
    assert_int_equal(op_policy_from_file(path, &p, &obj, &d), 0);
    assert_false(op_policy_enabled(p, OP_GFD));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "cp");
    op_policy_free(p);
    json_decref(obj);
    unlink(path);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(op_valid_subdomain("nvidia"));
    assert_true(op_valid_subdomain("a.b-c.d0"));
    assert_false(op_valid_subdomain(""));
    assert_false(op_valid_subdomain("-a"));
    assert_false(op_valid_subdomain("a-"));
    assert_false(op_valid_subdomain("a..b"));
    assert_false(op_valid_subdomain("a."));
    assert_false(op_valid_subdomain("A"));
    assert_false(op_valid_subdomain("a_b"));
    assert_true(op_valid_label("gpu-operator"));
    assert_false(op_valid_label("gpu.operator"));
    assert_false(
        op_valid_label("0123456789012345678901234567890123456789012345678901234567890123"));
    assert_true(op_valid_config_key("time-slicing.yaml"));
    assert_true(op_valid_config_key("A_b"));
    assert_false(op_valid_config_key(".."));
    assert_false(op_valid_config_key("a/b"));
    assert_false(op_valid_config_key(""));
    assert_true(op_valid_host_path("/"));
    assert_true(op_valid_host_path("/run/nvidia/driver"));
    assert_true(op_valid_host_path("/a/..b/c.."));
    assert_false(op_valid_host_path("run"));
    assert_false(op_valid_host_path("/.."));
    assert_false(op_valid_host_path("/a/../b"));
    assert_false(op_valid_host_path("/a/.."));
    assert_false(op_valid_host_path("/a\nb"));
    assert_true(op_valid_max_unavailable("1"));
    assert_true(op_valid_max_unavailable("25%"));
    assert_false(op_valid_max_unavailable("%"));
    assert_false(op_valid_max_unavailable("1.5"));
    assert_false(op_valid_max_unavailable("-1"));
    assert_false(op_valid_max_unavailable("12%%"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_no_spec),
        cmocka_unit_test(test_nil_against_false),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_max_unavailable_integer),
        cmocka_unit_test(test_bad_policies),
        cmocka_unit_test(test_file_positions),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
