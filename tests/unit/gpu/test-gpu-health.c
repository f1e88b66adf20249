/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Health events end to end: faults appended to the mock's events file while the worker thread waits
 * in nvmlEventSetWait_v2 arrive on the event loop with the right GPU index and UUID (XID, ECC, MIG
 * attribution); a GPU lost at run time makes one wait fail, which arrives as a wait_error event,
 * and events flow again after it recovers; registration failures are reported per GPU; lost GPUs of
 * the inventory are skipped; events still queued when health stops are dropped. The loop itself is
 * the clock: every wait is bounded by a deadline timer, nothing sleeps.
 */
#include <fcntl.h>

#include "gpu-internal.h"
#include "gpu-test.h"

/* Generous: valgrind runs these tests too. */
#define DEADLINE_MS 20000u
#define MAX_EVENTS 32

struct ctx {
    char *dir;
    char events[4200];
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct ev_loop *loop;
    struct gpu_health *health;
    struct gpu_health_event got[MAX_EVENTS];
    size_t n_got;
    size_t want;
};

static void on_event(const struct gpu_health_event *e, void *userdata)
{
    struct ctx *c = userdata;
    if (c->n_got < MAX_EVENTS)
        c->got[c->n_got++] = *e;
    if (c->n_got >= c->want)
        ev_loop_stop(c->loop, 0);
}

static void on_deadline(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

/* Runs the loop until `count` more events arrived, or fails at the deadline. */
static void wait_events(struct ctx *c, size_t count)
{
    struct ev_timer *deadline = NULL;
    c->want = c->n_got + count;
    assert_int_equal(ev_timer_add(c->loop, DEADLINE_MS, 0, on_deadline, c->loop, &deadline), 0);
    int r = ev_loop_run(c->loop);
    ev_timer_del(deadline);
    if (r != 0)
        fail_msg("waited for %zu events, got %zu (%d)", c->want, c->n_got, r);
}

static void append(const struct ctx *c, const char *line)
{
    int fd = open(c->events, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    size_t len = strlen(line);
    assert_int_equal(write(fd, line, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static struct ctx *setup_profile(const char *profile)
{
    struct ctx *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->dir = test_tmpdir();
    snprintf(c->events, sizeof(c->events), "%s/events.jsonl", c->dir);
    test_write_file(c->events, "");
    assert_int_equal(setenv("MOCK_NVML_EVENTS", c->events, 1), 0);
    c->nvml = test_open(profile);
    c->inv = test_read(c->nvml, NULL);
    assert_int_equal(ev_loop_new(&c->loop), 0);
    return c;
}

static void start(struct ctx *c)
{
    const struct gpu_health_options opts = {.wait_timeout_ms = 100, .error_backoff_ms = 20};
    assert_int_equal(
        gpu_health_start_with(c->nvml, c->inv, c->loop, &opts, on_event, c, &c->health), 0);
    assert_non_null(c->health);
}

static void teardown_ctx(struct ctx *c)
{
    gpu_health_stop(c->health);
    ev_loop_free(c->loop);
    gpu_inventory_free(c->inv);
    gpu_nvml_close(c->nvml);
    assert_int_equal(unsetenv("MOCK_NVML_EVENTS"), 0);
    test_rmtree(c->dir);
    free(c->dir);
    free(c);
}

static void assert_event(const struct ctx *c, size_t n, int gpu, unsigned long long type,
                         unsigned long long xid)
{
    const struct gpu_health_event *e = &c->got[n];
    assert_int_equal(e->wait_error, 0);
    assert_int_equal(e->gpu_index, gpu);
    assert_string_equal(e->uuid, c->inv->devices[gpu].uuid);
    assert_int_equal(e->type, type);
    assert_int_equal(e->xid, xid);
}

static void test_xid_arrives_with_index(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    start(c);
    append(c, "{\"gpu\": 3, \"type\": \"xid\", \"xid\": 79}\n");
    wait_events(c, 1);
    assert_event(c, 0, 3, nvmlEventTypeXidCriticalError, 79);
    assert_int_equal(c->got[0].gi_id, NVML_EVENT_NO_INSTANCE);
    assert_int_equal(c->got[0].ci_id, NVML_EVENT_NO_INSTANCE);

    /* by UUID, and ECC events */
    char line[256];
    snprintf(line, sizeof(line), "{\"gpu\": \"%s\", \"type\": \"xid\", \"xid\": 94}\n",
             c->inv->devices[6].uuid);
    append(c, line);
    append(c, "{\"gpu\": 1, \"type\": \"dbe\"}\n");
    wait_events(c, 2);
    assert_event(c, 1, 6, nvmlEventTypeXidCriticalError, 94);
    assert_event(c, 2, 1, nvmlEventTypeDoubleBitEccError, 0);
    teardown_ctx(c);
}

static void test_lost_then_recover(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    start(c);
    append(c, "{\"gpu\": 3, \"type\": \"lost\"}\n");
    wait_events(c, 1);
    assert_int_equal(c->got[0].wait_error, NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(c->got[0].gpu_index, -1);

    append(c, "{\"gpu\": 3, \"type\": \"recover\"}\n");
    append(c, "{\"gpu\": 3, \"type\": \"xid\", \"xid\": 48}\n");
    wait_events(c, 1);
    assert_event(c, 1, 3, nvmlEventTypeXidCriticalError, 48);
    teardown_ctx(c);
}

static void test_mig_attribution(void **state)
{
    struct ctx *c = setup_profile("a100-mig");
    start(c);
    const struct gpu_mig_device *mig = NULL;
    for (size_t m = 0; m < c->inv->devices[0].n_migs; m++)
        if (strcmp(c->inv->devices[0].migs[m].profile, "2g.10gb") == 0)
            mig = &c->inv->devices[0].migs[m];
    assert_non_null(mig);
    if (!mig)
        return; /* tells the compiler what assert_non_null already guarantees */
    char line[256];
    snprintf(line, sizeof(line), "{\"gpu\": \"%s\", \"type\": \"xid\", \"xid\": 43}\n", mig->uuid);
    append(c, line);
    wait_events(c, 1);
    assert_event(c, 0, 0, nvmlEventTypeXidCriticalError, 43);
    assert_int_equal(c->got[0].gi_id, mig->gi_id);
    assert_int_equal(c->got[0].ci_id, mig->ci_id);
    teardown_ctx(c);
}

/* The inventory's lost GPU is not registered (no error event for it); the others still report. */
static void test_inventory_lost_gpu_skipped(void **state)
{
    struct ctx *c = setup_profile("lost-gpu");
    assert_true(c->inv->devices[5].lost);
    start(c);
    append(c, "{\"gpu\": 4, \"type\": \"xid\", \"xid\": 31}\n");
    wait_events(c, 1);
    assert_event(c, 0, 4, nvmlEventTypeXidCriticalError, 31);
    teardown_ctx(c);
}

/* A GPU lost between the inventory and the start: its registration fails, reported once. */
static void test_registration_failure_reported(void **state)
{
    struct ctx *c = setup_profile("pcie-t4");
    append(c, "{\"gpu\": 2, \"type\": \"lost\"}\n");
    start(c);
    wait_events(c, 1);
    assert_int_equal(c->got[0].wait_error, NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(c->got[0].gpu_index, 2);
    assert_string_equal(c->got[0].uuid, c->inv->devices[2].uuid);
    /* the others are watched */
    append(c, "{\"gpu\": 1, \"type\": \"xid\", \"xid\": 13}\n");
    wait_events(c, 1);
    assert_event(c, 1, 1, nvmlEventTypeXidCriticalError, 13);
    teardown_ctx(c);
}

static void on_quiet(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

/* Stopping with deliveries still queued on the loop: they are dropped, not delivered or leaked. */
static void test_stop_drops_queued_events(void **state)
{
    struct ctx *c = setup_profile("pcie-t4");
    struct ev_timer *quiet = NULL;
    append(c, "{\"gpu\": 2, \"type\": \"lost\"}\n");
    start(c); /* queues the registration error for GPU 2 */
    c->health = gpu_health_stop(c->health);
    assert_int_equal(ev_timer_add(c->loop, 50, 0, on_quiet, c->loop, &quiet), 0);
    assert_int_equal(ev_loop_run(c->loop), 0);
    ev_timer_del(quiet);
    assert_int_equal(c->n_got, 0);
    teardown_ctx(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xid_arrives_with_index),
        cmocka_unit_test(test_lost_then_recover),
        cmocka_unit_test(test_mig_attribution),
        cmocka_unit_test(test_inventory_lost_gpu_skipped),
        cmocka_unit_test(test_registration_failure_reported),
        cmocka_unit_test(test_stop_drops_queued_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
