/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Allocate answer of each device-list strategy, byte for byte what NVIDIA's plugin sends:
 * envvar (UUIDs and indices; replicas folded into one GPU), volume-mounts, both together,
 * cdi-annotations (key with a fixed UUID), cdi-cri, device specs with control nodes and MIG
 * capability nodes under a dev root, MPS, feature variables, IMEX channels, one response per
 * container request; refusals: unknown id, unhealthy id, more than one replica.
 */
#include "dp-test-gpu.h"

static void fixed_uuid(char out[37])
{
    snprintf(out, 37, "%s", "0b8d7e2e-1111-4222-8333-444455556666");
}

/* Runs dp_allocate on ids (comma list) in one container request. */
static int allocate_one(struct node *n, const struct dp_alloc_ctx *ctx, const char *resource,
                        const char *ids, struct dp_error *err, V1beta1__AllocateResponse **resp)
{
    V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *creqs[] = {&creq};
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    char **v = test_split(ids, &creq.n_devices_ids);
    creq.devices_ids = v;
    req.n_container_requests = 1;
    req.container_requests = creqs;
    int r = dp_allocate(ctx, node_resource(n, resource), &req, err, resp);
    free(v);
    return r;
}

/* Allocates ids (comma list) in one container request; asserts success. */
static V1beta1__AllocateResponse *allocate_ok(struct node *n, const char *resource, const char *ids,
                                              bool all_nodes)
{
    struct dp_alloc_ctx ctx;
    dp_alloc_ctx_init(&ctx, &n->cfg);
    for (size_t i = 0; i < DP_N_NODES; i++)
        ctx.node_present[i] = all_nodes && i != DP_NODE_MODESET;
    ctx.uuid_fn = fixed_uuid;
    V1beta1__AllocateResponse *resp = NULL;
    struct dp_error err = {0};
    if (allocate_one(n, &ctx, resource, ids, &err, &resp) < 0)
        fail_msg("dp_allocate: %s", err.msg);
    assert_int_equal(resp->n_container_responses, 1);
    /* It must be a valid message. */
    assert_true(protobuf_c_message_check(&resp->base));
    return resp;
}

static void free_resp(V1beta1__AllocateResponse *resp)
{
    protobuf_c_message_free_unpacked(&resp->base, NULL);
}

static const char *env(const V1beta1__ContainerAllocateResponse *c, const char *key)
{
    for (size_t i = 0; i < c->n_envs; i++)
        if (strcmp(c->envs[i]->key, key) == 0)
            return c->envs[i]->value;
    return NULL;
}

static void test_envvar_uuid(void **state)
{
    struct node *n = node_new("dgx-h100", "");
    const struct gpu_device *g = n->inv->devices;
    char ids[256], want[256];
    snprintf(ids, sizeof(ids), "%s,%s", g[3].uuid, g[1].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu", ids, true);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_int_equal(c->n_envs, 1);
    snprintf(want, sizeof(want), "%s,%s", g[3].uuid, g[1].uuid);
    assert_string_equal(env(c, "NVIDIA_VISIBLE_DEVICES"), want);
    assert_int_equal(c->n_mounts, 0);
    assert_int_equal(c->n_devices, 0); /* no --pass-device-specs */
    assert_int_equal(c->n_annotations, 0);
    assert_int_equal(c->n_cdi_devices, 0);
    free_resp(resp);
    node_free(n);
}

static void test_envvar_index_and_replicas(void **state)
{
    struct node *n = node_new("dgx-h100", "flags:\n  plugin:\n    deviceIDStrategy: index\n"
                                          "sharing:\n  timeSlicing:\n    resources:\n"
                                          "    - name: gpu\n      replicas: 2\n");
    const struct gpu_device *g = n->inv->devices;
    char ids[512];
    snprintf(ids, sizeof(ids), "%s::1,%s::0,%s::1", g[5].uuid, g[2].uuid, g[2].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu", ids, false);
    /* Two replicas of GPU 2 are one device for the container. */
    assert_string_equal(env(resp->container_responses[0], "NVIDIA_VISIBLE_DEVICES"), "5,2");
    free_resp(resp);
    node_free(n);
}

static void test_volume_mounts(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  plugin:\n"
                                         "    deviceListStrategy: [envvar, volume-mounts]\n");
    const struct gpu_device *g = n->inv->devices;
    char ids[256], path[256];
    snprintf(ids, sizeof(ids), "%s,%s", g[0].uuid, g[2].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu", ids, false);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_string_equal(env(c, "NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
    assert_int_equal(c->n_envs, 1);
    assert_int_equal(c->n_mounts, 2);
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/var/run/nvidia-container-devices/%s", g[i * 2].uuid);
        assert_string_equal(c->mounts[i]->container_path, path);
        assert_string_equal(c->mounts[i]->host_path, "/dev/null");
        assert_false(c->mounts[i]->read_only);
    }
    free_resp(resp);
    node_free(n);
}

static void test_cdi_annotations(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  plugin:\n"
                                         "    deviceListStrategy: cdi-annotations\n"
                                         "    cdiAnnotationPrefix: cdi.example.com/\n");
    const struct gpu_device *g = n->inv->devices;
    char ids[256], want[512];
    snprintf(ids, sizeof(ids), "%s,%s", g[1].uuid, g[0].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu", ids, true);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_int_equal(c->n_annotations, 1);
    assert_string_equal(
        c->annotations[0]->key,
        "cdi.example.com/nvidia-device-plugin_0b8d7e2e-1111-4222-8333-444455556666");
    snprintf(want, sizeof(want),
             "k8s.device-plugin.nvidia.com/gpu=%s,k8s.device-plugin.nvidia.com/gpu=%s", g[1].uuid,
             g[0].uuid);
    assert_string_equal(c->annotations[0]->value, want);
    /* Only CDI strategies: no variables, mounts or device specs at all. */
    assert_int_equal(c->n_envs, 0);
    assert_int_equal(c->n_mounts, 0);
    assert_int_equal(c->n_devices, 0);
    assert_int_equal(c->n_cdi_devices, 0);
    free_resp(resp);
    node_free(n);
}

static void test_cdi_cri_with_features(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  gdsEnabled: true\n  mofedEnabled: true\n"
                                         "  plugin:\n    deviceListStrategy: [cdi-cri, envvar]\n"
                                         "    deviceIDStrategy: index\n");
    V1beta1__AllocateResponse *resp =
        allocate_ok(n, "nvidia.com/gpu", n->inv->devices[3].uuid, false);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_int_equal(c->n_cdi_devices, 3);
    assert_string_equal(c->cdi_devices[0]->name, "k8s.device-plugin.nvidia.com/gpu=3");
    assert_string_equal(c->cdi_devices[1]->name, "k8s.device-plugin.nvidia.com/gds=all");
    assert_string_equal(c->cdi_devices[2]->name, "k8s.device-plugin.nvidia.com/mofed=all");
    assert_string_equal(env(c, "NVIDIA_GDS"), "enabled");
    assert_string_equal(env(c, "NVIDIA_MOFED"), "enabled");
    assert_null(env(c, "NVIDIA_GDRCOPY"));
    assert_string_equal(env(c, "NVIDIA_VISIBLE_DEVICES"), "3");
    assert_int_equal(c->n_annotations, 0);
    free_resp(resp);
    node_free(n);
}

static void test_device_specs(void **state)
{
    struct node *n = node_new("dgx-h100", "flags:\n  nvidiaDevRoot: /run/nvidia/driver\n"
                                          "  plugin:\n    passDeviceSpecs: true\n");
    const struct gpu_device *g = n->inv->devices;
    char ids[256];
    snprintf(ids, sizeof(ids), "%s,%s", g[6].uuid, g[1].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu", ids, true);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    static const char *const want[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                       "/dev/nvidia6", "/dev/nvidia1"};
    char host[128];
    assert_int_equal(c->n_devices, ARRAY_SIZE(want));
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        snprintf(host, sizeof(host), "/run/nvidia/driver%s", want[i]);
        assert_string_equal(c->devices[i]->container_path, want[i]);
        assert_string_equal(c->devices[i]->host_path, host);
        assert_string_equal(c->devices[i]->permissions, "rw");
    }
    free_resp(resp);
    node_free(n);
}

static void test_mig_device_specs(void **state)
{
    static const char minors[] = "gpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\n";
    struct node *n = calloc(1, sizeof(*n));
    node_open(n, "a100-mig",
              "flags:\n  migStrategy: mixed\n  plugin:\n    passDeviceSpecs: true\n");
    node_build(n, minors);
    const char *id = n->inv->devices[0].migs[1].uuid;
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/mig-2g.10gb", id, false);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_string_equal(env(c, "NVIDIA_VISIBLE_DEVICES"), id);
    assert_int_equal(c->n_devices, 3);
    assert_string_equal(c->devices[0]->container_path, "/dev/nvidia0");
    assert_string_equal(c->devices[0]->host_path, "/dev/nvidia0");
    assert_string_equal(c->devices[1]->container_path, "/dev/nvidia-caps/nvidia-cap30");
    assert_string_equal(c->devices[2]->container_path, "/dev/nvidia-caps/nvidia-cap31");
    free_resp(resp);
    node_free(n);
}

static void test_mps(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  mpsRoot: /run/nvidia/mps\n"
                                         "sharing:\n  mps:\n    renameByDefault: true\n"
                                         "    resources:\n    - name: gpu\n      replicas: 2\n");
    char id[128];
    snprintf(id, sizeof(id), "%s::1", n->inv->devices[0].uuid);
    V1beta1__AllocateResponse *resp = allocate_ok(n, "nvidia.com/gpu.shared", id, false);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_string_equal(env(c, "CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu.shared/pipe");
    assert_string_equal(env(c, "NVIDIA_VISIBLE_DEVICES"), n->inv->devices[0].uuid);
    assert_int_equal(c->n_mounts, 2);
    assert_string_equal(c->mounts[0]->container_path, "/mps/nvidia.com/gpu.shared/pipe");
    assert_string_equal(c->mounts[0]->host_path, "/run/nvidia/mps/nvidia.com/gpu.shared/pipe");
    assert_string_equal(c->mounts[1]->container_path, "/dev/shm");
    assert_string_equal(c->mounts[1]->host_path, "/run/nvidia/mps/shm");
    free_resp(resp);
    node_free(n);
}

static void test_imex_channels(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  plugin:\n    passDeviceSpecs: true\n"
                                         "imex:\n  channelIDs: [0]\n");
    V1beta1__AllocateResponse *resp =
        allocate_ok(n, "nvidia.com/gpu", n->inv->devices[0].uuid, false);
    const V1beta1__ContainerAllocateResponse *c = resp->container_responses[0];
    assert_string_equal(env(c, "NVIDIA_IMEX_CHANNELS"), "0");
    assert_int_equal(c->n_devices, 2);
    assert_string_equal(c->devices[1]->container_path, "/dev/nvidia-caps-imex-channels/channel0");
    free_resp(resp);
    node_free(n);
}

/* Runs one request expected to fail; returns the error. */
static struct dp_error allocate_fail(struct node *n, const char *resource, const char *ids)
{
    struct dp_alloc_ctx ctx;
    dp_alloc_ctx_init(&ctx, &n->cfg);
    V1beta1__AllocateResponse *resp = NULL;
    struct dp_error err = {0};
    assert_int_equal(allocate_one(n, &ctx, resource, ids, &err, &resp), -EINVAL);
    assert_null(resp);
    return err;
}

static void test_refusals(void **state)
{
    struct node *n = node_new("dgx-h100", "");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char ids[256];
    snprintf(ids, sizeof(ids), "%s,GPU-nope", r->devices[0].id);
    struct dp_error e = allocate_fail(n, "nvidia.com/gpu", ids);
    assert_int_equal(e.code, RPC_INVALID_ARGUMENT);
    assert_string_equal(
        e.msg, "invalid allocation request for \"nvidia.com/gpu\": unknown device: GPU-nope");
    r->devices[4].healthy = false;
    e = allocate_fail(n, "nvidia.com/gpu", r->devices[4].id);
    assert_int_equal(e.code, RPC_FAILED_PRECONDITION);
    assert_non_null(strstr(e.msg, r->devices[4].id));
    assert_non_null(strstr(e.msg, "unhealthy"));
    node_free(n);

    n = node_new("pcie-t4", "sharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
                            "    resources:\n    - name: gpu\n      replicas: 4\n");
    r = node_resource(n, "nvidia.com/gpu");
    snprintf(ids, sizeof(ids), "%s,%s", r->devices[0].id, r->devices[5].id);
    e = allocate_fail(n, "nvidia.com/gpu", ids);
    assert_int_equal(e.code, RPC_INVALID_ARGUMENT);
    assert_string_equal(e.msg, "maximum request size for shared resources is 1; found 2");
    node_free(n);
}

static void test_one_response_per_container(void **state)
{
    struct node *n = node_new("pcie-t4", "");
    struct dp_alloc_ctx ctx;
    dp_alloc_ctx_init(&ctx, &n->cfg);
    V1beta1__ContainerAllocateRequest a = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest b = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *creqs[] = {&a, &b};
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    char *ida[] = {n->inv->devices[0].uuid}, *idb[] = {n->inv->devices[1].uuid};
    a.n_devices_ids = b.n_devices_ids = 1;
    a.devices_ids = ida;
    b.devices_ids = idb;
    req.n_container_requests = 2;
    req.container_requests = creqs;
    V1beta1__AllocateResponse *resp = NULL;
    struct dp_error err = {0};
    assert_int_equal(dp_allocate(&ctx, node_resource(n, "nvidia.com/gpu"), &req, &err, &resp), 0);
    assert_int_equal(resp->n_container_responses, 2);
    assert_string_equal(env(resp->container_responses[1], "NVIDIA_VISIBLE_DEVICES"), idb[0]);
    free_resp(resp);
    node_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envvar_uuid),
        cmocka_unit_test(test_envvar_index_and_replicas),
        cmocka_unit_test(test_volume_mounts),
        cmocka_unit_test(test_cdi_annotations),
        cmocka_unit_test(test_cdi_cri_with_features),
        cmocka_unit_test(test_device_specs),
        cmocka_unit_test(test_mig_device_specs),
        cmocka_unit_test(test_mps),
        cmocka_unit_test(test_imex_channels),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_one_response_per_container),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
