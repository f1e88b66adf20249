/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events and fault injection in the mock: lines appended to the fault file arrive through
 * nvmlEventSetWait_v2 (XID, ECC, MIG-attributed), only for types and GPUs a set registered; the
 * wait blocks and wakes when a line arrives, and times out; "lost" makes the GPU's calls fail (with
 * or without an event set, once through a waiting set) until "recover"; bad lines are skipped;
 * lines are not replayed after a re-init.
 */
#include <pthread.h>

#include "mock-test.h"

#define ECC_XID                                                                                    \
    (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |                              \
     nvmlEventTypeDoubleBitEccError)

/* A fresh, empty fault file named name, given to the library before init. */
static const char *events_file(const char *name)
{
    const char *path = tmp_write(name, "");

    assert_int_equal(setenv("MOCK_NVML_EVENTS", path, 1), 0);
    return path;
}

static nvmlEventSet_t register_all(unsigned n, unsigned long long types)
{
    nvmlEventSet_t set;

    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(N.nvmlDeviceRegisterEvents(dev(i), types, set), NVML_SUCCESS);
    return set;
}

static void test_delivery(void **state)
{
    const char *path = events_file("delivery.jsonl");
    nvmlEventSet_t set;
    nvmlEventData_t e;

    (void)state;
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    tmp_append(path, "{\"gpu\": 3, \"type\": \"xid\", \"xid\": 79}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(3));
    assert_true(e.eventType == nvmlEventTypeXidCriticalError);
    assert_true(e.eventData == 79);
    assert_int_equal(e.gpuInstanceId, NVML_EVENT_NO_INSTANCE);
    assert_int_equal(e.computeInstanceId, NVML_EVENT_NO_INSTANCE);
    tmp_append(path, "{\"gpu\": \"GPU-79783acb-65dd-4b40-be66-c03e1f6d9b7e\", \"type\": \"dbe\"}");
    tmp_append(path, "{\"gpu\": 7, \"type\": \"sbe\"}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(4));
    assert_true(e.eventType == nvmlEventTypeDoubleBitEccError);
    assert_true(e.eventData == 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(7));
    assert_true(e.eventType == nvmlEventTypeSingleBitEccError);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 10), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_only_registered(void **state)
{
    const char *path = events_file("registered.jsonl");
    nvmlEventSet_t set, other;
    nvmlEventData_t e;

    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(0), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    other = register_all(2, nvmlEventTypeDoubleBitEccError);
    tmp_append(path, "{\"gpu\": 1, \"type\": \"xid\", \"xid\": 31}");
    tmp_append(path, "{\"gpu\": 0, \"type\": \"dbe\"}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 100), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetWait_v2(other, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(0));
    assert_true(e.eventType == nvmlEventTypeDoubleBitEccError);
    assert_int_equal(N.nvmlEventSetWait_v2(other, &e, 10), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(other), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_timeout(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t e;
    uint64_t start, took;

    (void)state;
    events_file("timeout.jsonl");
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    start = mono_ms();
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 150), NVML_ERROR_TIMEOUT);
    took = mono_ms() - start;
    assert_true(took >= 150);
    assert_true(took < 150 + 3000);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 0), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

struct writer {
    const char *path;
    unsigned delay_ms;
};

static void *write_later(void *arg)
{
    const struct writer *w = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)w->delay_ms * 1000000};

    nanosleep(&ts, NULL);
    tmp_append(w->path, "{\"gpu\": 6, \"type\": \"xid\", \"xid\": 94}");
    return NULL;
}

static void test_wakes_up(void **state)
{
    struct writer w = {.path = events_file("wake.jsonl"), .delay_ms = 100};
    nvmlEventSet_t set;
    nvmlEventData_t e;
    pthread_t t;
    uint64_t start, took;

    (void)state;
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    start = mono_ms();
    assert_int_equal(pthread_create(&t, NULL, write_later, &w), 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 20000), NVML_SUCCESS);
    took = mono_ms() - start;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(e.eventData == 94);
    assert_true(took < 10000);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_lost_without_set(void **state)
{
    const char *path = events_file("lost.jsonl");
    nvmlDevice_t d;
    unsigned idx;
    char uuid[96];

    (void)state;
    init_profile("dgx-h100");
    d = dev(2);
    tmp_append(path, "{\"gpu\": 2, \"type\": \"lost\"}");
    assert_int_equal(N.nvmlDeviceGetIndex(d, &idx), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetUUID(d, uuid, sizeof(uuid)), NVML_ERROR_GPU_IS_LOST);
    /* Lost at run time: the loader can still list the index. */
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetIndex(dev(1), &idx), NVML_SUCCESS);
    {
        nvmlGpuTopologyLevel_t l;

        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(1), d, &l),
                         NVML_ERROR_GPU_IS_LOST);
    }
    tmp_append(path, "{\"gpu\": 2, \"type\": \"recover\"}");
    assert_int_equal(N.nvmlDeviceGetIndex(d, &idx), NVML_SUCCESS);
    assert_int_equal(idx, 2);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_lost_through_wait(void **state)
{
    const char *path = events_file("lostwait.jsonl");
    nvmlEventSet_t set, unrelated;
    nvmlEventData_t e;

    (void)state;
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    assert_int_equal(N.nvmlEventSetCreate(&unrelated), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(0), ECC_XID, unrelated), NVML_SUCCESS);
    tmp_append(path, "{\"gpu\": 5, \"type\": \"lost\"}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 50), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetWait_v2(unrelated, &e, 50), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(5), ECC_XID, unrelated),
                     NVML_ERROR_GPU_IS_LOST);
    tmp_append(path, "{\"gpu\": 5, \"type\": \"recover\"}");
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(5), ECC_XID, unrelated), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(unrelated), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_recover_lost_from_start(void **state)
{
    const char *path = events_file("recover.jsonl");
    nvmlDevice_t d;

    (void)state;
    init_profile("lost-gpu");
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(5, &d), NVML_ERROR_GPU_IS_LOST);
    tmp_append(path, "{\"gpu\": 5, \"type\": \"recover\"}");
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(5, &d), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_bad_lines(void **state)
{
    static const char *const bad[] = {
        "not json",
        "[1, 2]",
        "{\"gpu\": 3}",
        "{\"gpu\": 3, \"type\": \"meltdown\"}",
        "{\"gpu\": 99, \"type\": \"xid\", \"xid\": 79}",
        "{\"gpu\": \"GPU-nope\", \"type\": \"xid\", \"xid\": 79}",
        "{\"gpu\": 3, \"type\": \"xid\"}",
        "{\"gpu\": 3, \"type\": \"xid\", \"xid\": -1}",
        "{\"gpu\": 3, \"type\": \"xid\", \"xid\": 79, \"extra\": 1}",
        "",
    };
    const char *path = events_file("bad.jsonl");
    nvmlEventSet_t set;
    nvmlEventData_t e;
    char longline[6000];

    (void)state;
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        tmp_append(path, bad[i]);
    memset(longline, 'x', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    tmp_append(path, longline);
    tmp_append(path, "{\"gpu\": 1, \"type\": \"xid\", \"xid\": 48}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(1));
    assert_true(e.eventData == 48);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 10), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_mig_attributed(void **state)
{
    const char *path = events_file("mig.jsonl");
    nvmlEventSet_t set;
    nvmlEventData_t e;

    (void)state;
    init_profile("a100-mig");
    set = register_all(4, ECC_XID);
    tmp_append(path, "{\"gpu\": 0, \"type\": \"xid\", \"xid\": 94, \"gi\": 2, \"ci\": 0}");
    tmp_append(path, "{\"gpu\": \"MIG-87a7c223-6f8c-4104-9824-8cb913487064\", \"type\": \"xid\", "
                     "\"xid\": 43}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(0));
    assert_int_equal(e.gpuInstanceId, 2);
    assert_int_equal(e.computeInstanceId, 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_ptr_equal(e.device, dev(1));
    assert_int_equal(e.gpuInstanceId, 2);
    assert_int_equal(e.computeInstanceId, 1);
    assert_true(e.eventData == 43);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_no_replay(void **state)
{
    const char *path = events_file("replay.jsonl");
    nvmlEventSet_t set;
    nvmlEventData_t e;

    (void)state;
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    tmp_append(path, "{\"gpu\": 0, \"type\": \"xid\", \"xid\": 13}");
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 5000), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    init_profile("dgx-h100");
    set = register_all(8, ECC_XID);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 50), NVML_ERROR_TIMEOUT);
    /* Sets left open are freed by the last shutdown. */
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_set_errors(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t e;
    unsigned long long types;
    int bogus;

    (void)state;
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_ERROR_UNINITIALIZED);
    unsetenv("MOCK_NVML_EVENTS");
    init_profile("pcie-t4");
    assert_int_equal(N.nvmlEventSetCreate(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlEventSetWait_v2((nvmlEventSet_t)&bogus, &e, 10),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetWait_v2(set, NULL, 10), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetSupportedEventTypes(dev(0), &types), NVML_SUCCESS);
    assert_true(types & nvmlEventTypeXidCriticalError);
    assert_true(types & nvmlEventTypeDoubleBitEccError);
    assert_false(types & nvmlEventMigConfigChange);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(0), nvmlEventMigConfigChange, set),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceRegisterEvents(NULL, nvmlEventTypeXidCriticalError, set),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 20), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivery),
        cmocka_unit_test(test_only_registered),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_wakes_up),
        cmocka_unit_test(test_lost_without_set),
        cmocka_unit_test(test_lost_through_wait),
        cmocka_unit_test(test_recover_lost_from_start),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_mig_attributed),
        cmocka_unit_test(test_no_replay),
        cmocka_unit_test(test_set_errors),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
