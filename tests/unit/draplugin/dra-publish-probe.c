/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs the ResourceSlice publisher of a mock node profile against an API server, for
 * tests/integration/test_dra_publish.py (with the fake API server):
 *
 *   dra-publish-probe KUBECONFIG PROFILE.yaml NODE SYSFS_ROOT LINGER_MS STEP...
 *
 * Each STEP is one dra_publish with the GPUs of a comma-separated list of NVML indices unhealthy
 * ("-": none), started when the previous one is done. One JSON line per step:
 * {"step": i, "result": <0 or -errno>, "generation": g}. After the last step the loop keeps
 * running LINGER_MS more (so that the publisher's own retries can be watched), then a last line
 * {"generation": g} is printed. Exit status 0, or 2 on usage and setup errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra-slices.h"

struct probe {
    struct ev_loop *loop;
    struct dra_publisher *pub;
    const struct gpu_inventory *inv;
    bool *unhealthy;
    char **steps;
    int n_steps, step;
    unsigned long linger_ms;
    struct ev_timer *linger;
};

static int set_health(struct probe *p, const char *spec)
{
    char buf[256];
    memset(p->unhealthy, 0, p->inv->n_devices * sizeof(*p->unhealthy));
    if (strcmp(spec, "-") == 0)
        return 0;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *s = buf, *end; *s; s = *end ? end + 1 : end) {
        unsigned long i = strtoul(s, &end, 10);
        if (end == s || (*end && *end != ',') || i >= p->inv->n_devices)
            return -EINVAL;
        p->unhealthy[i] = true;
    }
    return 0;
}

static void on_linger(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct probe *p = userdata;
    printf("{\"generation\": %lld}\n", (long long)dra_publisher_generation(p->pub));
    fflush(stdout);
    ev_loop_stop(p->loop, 0);
}

static void next_step(struct probe *p);

static void on_done(int result, void *userdata)
{
    struct probe *p = userdata;
    printf("{\"step\": %d, \"result\": %d, \"generation\": %lld}\n", p->step, result,
           (long long)dra_publisher_generation(p->pub));
    fflush(stdout);
    p->step++;
    next_step(p);
}

static void next_step(struct probe *p)
{
    if (p->step >= p->n_steps) {
        if (ev_timer_add(p->loop, p->linger_ms, 0, on_linger, p, &p->linger) < 0)
            ev_loop_stop(p->loop, 2);
        return;
    }
    if (set_health(p, p->steps[p->step]) < 0 || dra_publish(p->pub, on_done, p) < 0) {
        fprintf(stderr, "step %d (%s) failed to start\n", p->step, p->steps[p->step]);
        ev_loop_stop(p->loop, 2);
    }
}

int main(int argc, char **argv)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_(kube_config_freep) struct kube_config *cfg = NULL;
    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    _cleanup_free_ bool *unhealthy = NULL;
    struct kube_client *client = NULL;
    struct probe p = {0};
    struct diag d;
    int r;

    if (argc < 7) {
        fprintf(stderr, "usage: %s KUBECONFIG PROFILE.yaml NODE SYSFS_ROOT LINGER_MS STEP...\n",
                argv[0]);
        return 2;
    }
    log_setup(2, LOG_FORMAT_TEXT);
    diag_init(&d);
    struct kube_config_options copts = {.kubeconfig = argv[1]};
    if (setenv("MOCK_NVML_PROFILE", argv[2], 1) < 0 ||
        (r = gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml)) < 0 ||
        (r = gpu_inventory_read(nvml, NULL, &d, &inv)) < 0 ||
        (r = kube_config_load(&copts, &d, &cfg)) < 0) {
        fprintf(stderr, "setup: %s\n", d.msg);
        return 2;
    }
    unhealthy = calloc(inv->n_devices + 1, sizeof(*unhealthy));
    struct kube_client_options kopts = {.qps = 100, .burst = 100};
    if (!unhealthy || ev_loop_new(&loop) < 0 || kube_client_new(loop, cfg, &kopts, &client) < 0)
        return 2;
    struct dra_slices_options opts = {
        .node = argv[3],
        .driver = "gpu.nvidia.com",
        .sysfs_root = argv[4],
        .unhealthy = unhealthy,
    };
    p = (struct probe){.loop = loop,
                       .inv = inv,
                       .unhealthy = unhealthy,
                       .steps = argv + 6,
                       .n_steps = argc - 6,
                       .linger_ms = strtoul(argv[5], NULL, 10)};
    if (dra_publisher_new(loop, client, inv, &opts, &p.pub) < 0) {
        kube_client_free(client);
        return 2;
    }
    next_step(&p);
    r = ev_loop_run(loop);
    dra_publisher_free(p.pub);
    kube_client_free(client);
    ev_timer_del(p.linger);
    return r == 0 ? 0 : 2;
}
