/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the exporter's processes of shared GPUs (exporter-procs.h): the pod UID in a cgroup path
 * in every form the kubelet's cgroup drivers make (cgroupfs and systemd, cgroup v1 and v2, each QoS
 * class, containerd, CRI-O and Docker names), the first match deciding as in dcgm-exporter's
 * regular expression; whole /proc/<pid>/cgroup files (v1 hierarchies before the unified one, a
 * malformed line refusing the file); the file read under a proc root; per-pod sums.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exporter-procs.h"
#include "test-tmpdir.h"

#define UID "7b4f0c2e-3a52-4c88-9f8e-1d2a3b4c5d6e"
#define UID_ "7b4f0c2e_3a52_4c88_9f8e_1d2a3b4c5d6e" /* as systemd's slice names spell it */
#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_paths(void **state)
{
    static const struct {
        const char *path;
        const char *uid; /* NULL: none */
    } cases[] = {
        /* cgroupfs driver, v1 and v2: each QoS class */
        {"/kubepods/burstable/pod" UID "/" CID, UID},
        {"/kubepods/besteffort/pod" UID "/" CID, UID},
        {"/kubepods/pod" UID "/" CID, UID}, /* guaranteed */
        {"/kubepods/burstable/pod" UID, UID},
        /* systemd driver: containerd, CRI-O, Docker scopes */
        {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
         ".slice/cri-containerd-" CID ".scope",
         UID},
        {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" CID
         ".scope",
         UID},
        {"/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" CID ".scope", UID},
        /* a container's own namespaced view under a nested runtime */
        {"/system.slice/containerd.service/kubepods-burstable-pod" UID_
         ".slice:cri-containerd:" CID,
         UID},
        /* not a pod */
        {"/", NULL},
        {"/system.slice/containerd.service", NULL},
        {"/user.slice/user-1000.slice/session-2.scope", NULL},
        /* upstream's pattern also takes Podman's libpod-<id> (a "UID" no pod has), as here */
        {"/machine.slice/libpod-" CID ".scope", "-" CID},
        {"/kubepods.slice/kubepods-besteffort.slice", NULL},
        /* the first match decides, even when too short to be a UID */
        {"/x/podcafe/kubepods/pod" UID "/" CID, NULL},
        /* fewer than 32 characters; upper-case hex is not a UID's */
        {"/kubepods/burstable/pod1234-5678/" CID, NULL},
        {"/kubepods/burstable/pod7B4F0C2E-3A52-4C88-9F8E-1D2A3B4C5D6E/x", NULL},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char uid[EXPORTER_POD_UID_MAX];
        bool found = exporter_cgroup_path_pod_uid(cases[i].path, strlen(cases[i].path), uid);
        if (found != (cases[i].uid != NULL) || (found && strcmp(uid, cases[i].uid) != 0))
            fail_msg("case %zu (%s): got %s", i, cases[i].path, found ? uid : "none");
    }
    /* A run of UID characters too long for any UID. */
    char path[512], uid[EXPORTER_POD_UID_MAX];
    snprintf(path, sizeof(path), "/kubepods/pod%0200d/x", 0);
    assert_false(exporter_cgroup_path_pod_uid(path, strlen(path), uid));
    /* The length given bounds the scan (no NUL needed). */
    const char *cut = "/kubepods/pod" UID "/x";
    assert_false(exporter_cgroup_path_pod_uid(cut, strlen("/kubepods/pod7b4f"), uid));
}

static void test_files(void **state)
{
    static const struct {
        const char *text;
        int want;
        const char *uid;
    } cases[] = {
        /* cgroup v1: the controllers' hierarchies */
        {"12:memory:/kubepods/burstable/pod" UID "/" CID "\n"
         "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID "\n"
         "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n"
         "0::/\n",
         1, UID},
        /* cgroup v2 only */
        {"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
         ".slice/cri-containerd-" CID ".scope\n",
         1, UID},
        /* hybrid: v1 hierarchies without a pod, the unified one with */
        {"1:name=systemd:/user.slice\n0::/kubepods/pod" UID "/" CID "\n", 1, UID},
        /* the v1 hierarchies are looked at before the unified one */
        {"0::/kubepods/pod11111111-2222-3333-4444-555555555555/x\n"
         "3:cpuset:/kubepods/pod" UID "/x\n",
         1, UID},
        /* no trailing newline */
        {"0::/kubepods/pod" UID "/" CID, 1, UID},
        /* not a pod */
        {"0::/system.slice/sshd.service\n", 0, NULL},
        {"", 0, NULL},
        {"\n", 0, NULL},
        /* a line without two colons refuses the file, as upstream's parser does */
        {"0::/kubepods/pod" UID "/x\ngarbage\n", -EINVAL, NULL},
        {"12:memory\n", -EINVAL, NULL},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char uid[EXPORTER_POD_UID_MAX] = "unchanged";
        int r = exporter_cgroup_pod_uid(cases[i].text, strlen(cases[i].text), uid);
        if (r != cases[i].want || (r == 1 && strcmp(uid, cases[i].uid) != 0))
            fail_msg("case %zu: got %d %s", i, r, uid);
        if (r != 1)
            assert_string_equal(uid, "unchanged");
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void test_proc_root(void **state)
{
    char root[] = "/tmp/gpuplane-procs-XXXXXX";
    char path[4096], uid[EXPORTER_POD_UID_MAX];
    (void)state;
    assert_non_null(mkdtemp(root));
    snprintf(path, sizeof(path), "%s/proc", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/proc/4242", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/proc/4242/cgroup", root);
    write_file(path, "0::/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-x.scope\n");
    assert_int_equal(exporter_proc_pod_uid(root, 4242, uid), 1);
    assert_string_equal(uid, UID);
    assert_int_equal(exporter_proc_pod_uid(root, 4243, uid), -ENOENT);
    /* This process' own cgroup, under the real root: whatever it says, it parses. */
    int r = exporter_proc_pod_uid(NULL, (uint32_t)getpid(), uid);
    assert_true(r == 0 || r == 1);
    assert_int_equal(exporter_proc_pod_uid("/", (uint32_t)getpid(), uid), r);
    assert_int_equal(test_tmpdir_remove(root), 0);
}

static void test_pod_values(void **state)
{
    struct exporter_proc v[] = {
        {.pid = 1,
         .uid = "a",
         .have_memory = true,
         .memory_mib = 1024,
         .have_util = true,
         .sm_util = 20},
        {.pid = 2,
         .uid = "a",
         .have_memory = true,
         .memory_mib = 512,
         .have_util = true,
         .sm_util = 15},
        {.pid = 3, .uid = "b", .have_util = true, .sm_util = 40}, /* memory unknown */
        {.pid = 4,
         .uid = "",
         .have_memory = true,
         .memory_mib = 100,
         .have_util = true,
         .sm_util = 5}, /* no pod's */
    };
    struct exporter_procs p = {.v = v, .n = 4, .memory_ok = true, .util_ok = true};
    double x = -1;
    (void)state;
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_FB_USED, "a", &x));
    assert_true(x == 1536);
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, "a", &x));
    assert_true(x == 35);
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_FB_USED, "b", &x));
    assert_true(x == 0);
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, "b", &x));
    assert_true(x == 40);
    /* A pod without processes: 0. */
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, "idle", &x));
    assert_true(x == 0);
    /* No UID, another metric, a list not read: no value. */
    assert_false(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, "", &x));
    assert_false(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, NULL, &x));
    assert_false(exporter_procs_pod_value(&p, GPU_METRIC_GPU_TEMP, "a", &x));
    p.util_ok = false;
    assert_false(exporter_procs_pod_value(&p, GPU_METRIC_GPU_UTIL, "a", &x));
    assert_true(exporter_procs_pod_value(&p, GPU_METRIC_FB_USED, "a", &x));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_proc_root),
        cmocka_unit_test(test_pod_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
