/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The health state machine with a fake clock, on the mock A100 MIG node (MIG mixed; GPUs 2 and 3
 * time-sliced into 2 replicas each): ignored and fatal XIDs, every replica and MIG sibling marked,
 * events attributed to one MIG device, a lost GPU, recovery only after the quiet window (and never
 * with a window of 0), a fatal event restarting the window, a failed event wait asking for a probe
 * instead of marking every device, a failed event registration, a rebuild's tracker inheriting
 * the running state, and what counts as a device a probe gained.
 */
#include "dp-test-gpu.h"
#include "gpu-nvml-abi.h"

#define CONFIG                                                                                     \
    "flags:\n  migStrategy: mixed\n"                                                               \
    "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"

struct fixture {
    struct node *n;
    struct dp_tracker *t;
    size_t changes;
    struct dp_change last;
};

static void on_change(const struct dp_change *c, void *userdata)
{
    struct fixture *f = userdata;
    f->changes++;
    f->last = *c;
}

static struct fixture *setup(const char *config, unsigned long window_ms)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->n = node_new("a100-mig", config);
    f->n->cfg.health.recovery_window_ms = window_ms;
    assert_int_equal(dp_tracker_new(f->n->inv, &f->n->cfg.health, 1000, &f->t), 0);
    return f;
}

static void teardown(struct fixture *f)
{
    dp_tracker_free(f->t);
    node_free(f->n);
    free(f);
}

static struct gpu_health_event xid(int gpu, unsigned long long x, unsigned gi, unsigned ci)
{
    return (struct gpu_health_event){.gpu_index = gpu,
                                     .type = nvmlEventTypeXidCriticalError,
                                     .xid = x,
                                     .gi_id = gi,
                                     .ci_id = ci};
}

static enum dp_event_result send(struct fixture *f, struct gpu_health_event e, uint64_t now)
{
    return dp_tracker_event(f->t, &e, now, on_change, f);
}

/* The number of unhealthy devices of a resource after applying the tracker. */
static size_t unhealthy(struct fixture *f, const char *name)
{
    struct dp_resource *r = node_resource(f->n, name);
    size_t n = 0;
    dp_resource_apply_health(r, f->t);
    for (size_t i = 0; i < r->n_devices; i++)
        n += !r->devices[i].healthy;
    return n;
}

static void test_ignored_xid(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(2, 13, none, none), 2000), DP_EVENT_IGNORED);
    assert_int_equal(send(f, xid(2, 109, none, none), 2000), DP_EVENT_IGNORED);
    struct gpu_health_event ecc = {.gpu_index = 2, .type = nvmlEventTypeDoubleBitEccError};
    assert_int_equal(send(f, ecc, 2000), DP_EVENT_IGNORED);
    assert_int_equal(f->changes, 0);
    assert_false(dp_tracker_any_unhealthy(f->t));
    assert_int_equal(unhealthy(f, "nvidia.com/gpu"), 0);
    teardown(f);
}

static void test_fatal_xid_marks_every_replica(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(2, 79, none, none), 2000), DP_EVENT_CHANGED);
    assert_int_equal(f->changes, 1);
    assert_string_equal(f->last.uuid, f->n->inv->devices[2].uuid);
    assert_false(f->last.healthy);
    assert_int_equal(f->last.cause, DP_CAUSE_XID);
    assert_int_equal(f->last.xid, 79);
    struct dp_resource *r = node_resource(f->n, "nvidia.com/gpu");
    assert_true(dp_resource_apply_health(r, f->t));
    assert_false(r->devices[0].healthy); /* GPU 2 ::0 */
    assert_false(r->devices[1].healthy); /* GPU 2 ::1 */
    assert_true(r->devices[2].healthy);  /* GPU 3 */
    assert_true(r->devices[3].healthy);
    assert_false(dp_resource_apply_health(r, f->t));
    /* Again on the same GPU: no new change to report. */
    assert_int_equal(send(f, xid(2, 79, none, none), 3000), DP_EVENT_IGNORED);
    assert_int_equal(f->changes, 1);
    teardown(f);
}

static void test_fatal_xid_marks_mig_siblings(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(0, 48, none, none), 2000), DP_EVENT_CHANGED);
    assert_int_equal(unhealthy(f, "nvidia.com/mig-3g.20gb"), 1); /* GPU 0's; GPU 1's is fine */
    assert_int_equal(unhealthy(f, "nvidia.com/mig-2g.10gb"), 1);
    assert_int_equal(unhealthy(f, "nvidia.com/mig-1g.5gb"), 2);
    assert_int_equal(unhealthy(f, "nvidia.com/gpu"), 0);
    teardown(f);
}

static void test_xid_attributed_to_one_mig_device(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    const struct gpu_mig_device *mig = &f->n->inv->devices[0].migs[1]; /* 2g.10gb */
    assert_int_equal(send(f, xid(0, 94, mig->gi_id, mig->ci_id), 2000), DP_EVENT_CHANGED);
    assert_string_equal(f->last.uuid, mig->uuid);
    assert_int_equal(unhealthy(f, "nvidia.com/mig-2g.10gb"), 1);
    assert_int_equal(unhealthy(f, "nvidia.com/mig-1g.5gb"), 0);
    assert_int_equal(unhealthy(f, "nvidia.com/mig-3g.20gb"), 0);
    teardown(f);
}

static void test_recovery_after_window(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(3, 79, none, none), 10000), DP_EVENT_CHANGED);
    assert_false(dp_tracker_probe(f->t, f->n->inv, 69999, on_change, f));
    assert_false(dp_tracker_healthy(f->t, 3, -1));
    /* A new fatal XID restarts the quiet window. */
    assert_int_equal(send(f, xid(3, 79, none, none), 40000), DP_EVENT_IGNORED);
    assert_false(dp_tracker_probe(f->t, f->n->inv, 70000, on_change, f));
    assert_false(dp_tracker_healthy(f->t, 3, -1));
    assert_true(dp_tracker_probe(f->t, f->n->inv, 100000, on_change, f));
    assert_true(dp_tracker_healthy(f->t, 3, -1));
    assert_true(f->last.healthy);
    assert_string_equal(f->last.uuid, f->n->inv->devices[3].uuid);
    assert_false(dp_tracker_any_unhealthy(f->t));
    assert_int_equal(unhealthy(f, "nvidia.com/gpu"), 0);
    teardown(f);
}

static void test_window_zero_never_recovers(void **state)
{
    struct fixture *f = setup(CONFIG, 0);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(3, 79, none, none), 10000), DP_EVENT_CHANGED);
    assert_false(dp_tracker_probe(f->t, f->n->inv, 10000 + 7ull * 24 * 3600 * 1000, on_change, f));
    assert_false(dp_tracker_healthy(f->t, 3, -1));
    teardown(f);
}

static void test_lost_gpu(void **state)
{
    struct fixture *f = setup(CONFIG, 5000);
    struct gpu_inventory *probe = NULL;
    assert_int_equal(gpu_inventory_read(f->n->nvml, NULL, NULL, &probe), 0);
    probe->devices[2].error = NVML_ERROR_GPU_IS_LOST;
    probe->devices[2].lost = true;
    assert_true(dp_tracker_probe(f->t, probe, 2000, on_change, f));
    assert_int_equal(f->last.cause, DP_CAUSE_LOST);
    assert_int_equal(unhealthy(f, "nvidia.com/gpu"), 2);
    /* Still lost later: no recovery, the window keeps restarting. */
    assert_false(dp_tracker_probe(f->t, probe, 9000, on_change, f));
    /* Back, but the quiet window counts from the last time it was seen lost. */
    assert_false(dp_tracker_probe(f->t, f->n->inv, 10000, on_change, f));
    assert_true(dp_tracker_probe(f->t, f->n->inv, 14000, on_change, f));
    assert_int_equal(unhealthy(f, "nvidia.com/gpu"), 0);
    gpu_inventory_free(probe);
    teardown(f);
}

static void test_failed_wait_asks_for_probe(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    struct gpu_health_event e = {.gpu_index = -1, .wait_error = 999};
    assert_int_equal(send(f, e, 2000), DP_EVENT_PROBE);
    assert_int_equal(f->changes, 0);
    assert_false(dp_tracker_any_unhealthy(f->t));
    /* A probe that could not read the inventory decides nothing. */
    assert_false(dp_tracker_probe(f->t, NULL, 3000, on_change, f));
    assert_false(dp_tracker_any_unhealthy(f->t));
    teardown(f);
}

static void test_failed_registration_marks_gpu(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    struct gpu_health_event e = {.gpu_index = 3, .wait_error = 3};
    assert_int_equal(send(f, e, 2000), DP_EVENT_CHANGED);
    assert_int_equal(f->last.cause, DP_CAUSE_REGISTER);
    assert_false(dp_tracker_healthy(f->t, 3, -1));
    assert_true(dp_tracker_healthy(f->t, 2, -1));
    teardown(f);
}

static void test_policy_from_environment(void **state)
{
    struct fixture *f = setup(CONFIG, 60000);
    /* DP_ENABLE_HEALTHCHECKS=13 takes 13 out of the ignored set. */
    dp_tracker_free(f->t);
    assert_int_equal(setenv("DP_ENABLE_HEALTHCHECKS", "13", 1), 0);
    dp_config_release(&f->n->cfg);
    assert_int_equal(dp_config_init(&f->n->cfg), 0);
    char *argv[] = {"device-plugin", NULL};
    struct diag d;
    assert_int_equal(dp_config_parse_args(1, argv, &f->n->cfg, &d), 0);
    unsetenv("DP_ENABLE_HEALTHCHECKS");
    assert_int_equal(dp_tracker_new(f->n->inv, &f->n->cfg.health, 0, &f->t), 0);
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    assert_int_equal(send(f, xid(2, 13, none, none), 1), DP_EVENT_CHANGED);
    teardown(f);
}

/* A rebuild's tracker keeps the running one's decisions: an XID-marked GPU stays unhealthy with
 * its window, a marked MIG device too; a GPU the new inventory cannot read stays lost. */
static void test_inherit(void **state)
{
    struct fixture *f = setup(CONFIG, 5000);
    struct dp_tracker *t2 = NULL;
    struct gpu_inventory *inv = NULL;
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    const struct gpu_device *g0 = &f->n->inv->devices[0];
    assert_int_equal(send(f, xid(3, 79, none, none), 2000), DP_EVENT_CHANGED);
    assert_int_equal(send(f, xid(0, 94, g0->migs[1].gi_id, g0->migs[1].ci_id), 2000),
                     DP_EVENT_CHANGED);
    assert_int_equal(gpu_inventory_read(f->n->nvml, NULL, NULL, &inv), 0);
    inv->devices[1].error = NVML_ERROR_GPU_IS_LOST;
    inv->devices[1].lost = true;
    assert_int_equal(dp_tracker_new(inv, &f->n->cfg.health, 3000, &t2), 0);
    dp_tracker_inherit(t2, f->t);
    assert_false(dp_tracker_healthy(t2, 3, -1));
    assert_true(dp_tracker_healthy(t2, 2, -1));
    assert_false(dp_tracker_healthy(t2, 0, 1));
    assert_true(dp_tracker_healthy(t2, 0, 0));
    assert_false(dp_tracker_healthy(t2, 1, -1)); /* lost now, whatever the old one said */
    /* The window still counts from the XID at 2000, not from the rebuild. */
    inv->devices[1].error = 0;
    inv->devices[1].lost = false;
    assert_false(dp_tracker_probe(t2, inv, 6999, NULL, NULL));
    assert_true(dp_tracker_probe(t2, inv, 7000, NULL, NULL));
    assert_true(dp_tracker_healthy(t2, 3, -1));
    assert_true(dp_tracker_healthy(t2, 0, 1));
    /* Nothing to inherit from: unchanged. */
    dp_tracker_inherit(t2, NULL);
    dp_tracker_free(t2);
    gpu_inventory_free(inv);
    teardown(f);
}

/* A probe gains a device when it names one the running inventory could not: a GPU back from
 * being lost, a new MIG device. Losing one is not a gain. */
static void test_inventory_gained(void **state)
{
    struct fixture *f = setup(CONFIG, 5000);
    struct gpu_inventory *cur = NULL;
    assert_int_equal(gpu_inventory_read(f->n->nvml, NULL, NULL, &cur), 0);
    assert_false(dp_inventory_gained(cur, f->n->inv));
    assert_false(dp_inventory_gained(cur, NULL));
    /* GPU 2 was lost before NVML could name it. */
    cur->devices[2].error = NVML_ERROR_GPU_IS_LOST;
    cur->devices[2].uuid[0] = '\0';
    assert_true(dp_inventory_gained(cur, f->n->inv));
    assert_false(dp_inventory_gained(f->n->inv, cur));
    /* Lost at the last build, with its UUID known: still a gain when it answers. */
    snprintf(cur->devices[2].uuid, sizeof(cur->devices[2].uuid), "%s", f->n->inv->devices[2].uuid);
    assert_true(dp_inventory_gained(cur, f->n->inv));
    cur->devices[2].error = 0;
    /* A MIG device the running inventory lacks. */
    size_t n_migs = cur->devices[0].n_migs;
    assert_true(n_migs > 1);
    cur->devices[0].n_migs = n_migs - 1;
    assert_true(dp_inventory_gained(cur, f->n->inv));
    assert_false(dp_inventory_gained(f->n->inv, cur));
    cur->devices[0].n_migs = n_migs;
    assert_false(dp_inventory_gained(cur, f->n->inv));
    gpu_inventory_free(cur);
    teardown(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ignored_xid),
        cmocka_unit_test(test_fatal_xid_marks_every_replica),
        cmocka_unit_test(test_fatal_xid_marks_mig_siblings),
        cmocka_unit_test(test_xid_attributed_to_one_mig_device),
        cmocka_unit_test(test_recovery_after_window),
        cmocka_unit_test(test_window_zero_never_recovers),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_failed_wait_asks_for_probe),
        cmocka_unit_test(test_failed_registration_marks_gpu),
        cmocka_unit_test(test_policy_from_environment),
        cmocka_unit_test(test_inherit),
        cmocka_unit_test(test_inventory_gained),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
