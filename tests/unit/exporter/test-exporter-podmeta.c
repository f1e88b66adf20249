/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the exporter's pod metadata (exporter-podmeta.h) without a network: label names as
 * dcgm-exporter sanitizes them, the allowlist with Go's unanchored RE2 semantics and its refused
 * patterns, one pod's labels (renamed, filtered, collisions and invalid names dropped, the cap),
 * the cache fed with watch events (added, modified, deleted, synced, full, many pods), the watched
 * path, a watch started on a client, and the pod labels in the exposition: sorted with the
 * label-type fields, left out where the sample already has the name.
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

#include "exporter-podmeta.h"

/* ---- label names ---- */

static void test_sanitize(void **state)
{
    static const char *const cases[][2] = {
        {"app", "app"},
        {"app.kubernetes.io/name", "app_kubernetes_io_name"},
        {"team-a", "team_a"},
        {"A_b9", "A_b9"},
        {"", ""},
        {"caf\xc3\xa9", "caf_"},            /* a two-byte character is one '_' */
        {"\xe6\x97\xa5\xe6\x9c\xac", "__"}, /* two three-byte characters */
        {"a\xff\xfe", "a__"},               /* each byte of malformed UTF-8 is one '_' */
        {"\xf0\x9f\x99\x82x", "_x"},        /* a four-byte character */
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *out = NULL;
        assert_int_equal(exporter_podmeta_sanitize(cases[i][0], &out), 0);
        assert_string_equal(out, cases[i][1]);
        free(out);
    }
}

static void test_name_ok(void **state)
{
    static const char *const good[] = {"a", "_a", "app_kubernetes_io_name", "A9", "_"};
    static const char *const bad[] = {"", "1abc", "9", "__name", "__", "a-b", "a.b"};
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        assert_true(exporter_podmeta_name_ok(good[i]));
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_false(exporter_podmeta_name_ok(bad[i]));
}

/* ---- the allowlist ---- */

static void add_ok(struct exporter_allowlist *al, const char *pattern)
{
    struct diag d;
    diag_init(&d);
    if (exporter_allowlist_add(al, pattern, &d) < 0)
        fail_msg("%s: %s", pattern, d.msg);
}

static void test_allowlist(void **state)
{
    struct exporter_allowlist al;
    (void)state;
    exporter_allowlist_init(&al);
    /* No pattern: everything passes, as upstream's disabled filter. */
    assert_true(exporter_allowlist_pass(&al, "anything"));
    assert_true(exporter_allowlist_pass(NULL, "anything"));

    add_ok(&al, "^app\\.kubernetes\\.io/");
    add_ok(&al, "team");
    assert_int_equal(al.n, 2);
    assert_true(exporter_allowlist_pass(&al, "app.kubernetes.io/name"));
    assert_true(exporter_allowlist_pass(&al, "my-team-label")); /* unanchored: MatchString */
    assert_false(exporter_allowlist_pass(&al, "x.app.kubernetes.io/name"));
    assert_false(exporter_allowlist_pass(&al, "tier"));
    assert_false(exporter_allowlist_pass(&al, "Team")); /* case-sensitive, as Go */
    assert_false(exporter_allowlist_pass(&al, "bad\xff"));
    exporter_allowlist_release(&al);
    assert_int_equal(al.n, 0);

    /* An empty pattern (an empty part of the comma list) matches every name, as in Go. */
    add_ok(&al, "");
    assert_true(exporter_allowlist_pass(&al, "tier"));
    exporter_allowlist_release(&al);

    /* Go's syntax: (?i) flags and classes work. */
    add_ok(&al, "(?i)^TIER$|^[a-c]+$");
    assert_true(exporter_allowlist_pass(&al, "tier"));
    assert_true(exporter_allowlist_pass(&al, "abc"));
    assert_false(exporter_allowlist_pass(&al, "abcd"));
    exporter_allowlist_release(&al);
}

static void test_allowlist_refused(void **state)
{
    /* What Go's regexp.Compile refuses: dcgm-exporter skips it with a warning. */
    static const char *const bad[] = {"(", "a)", "(?=x)", "\\1", "a**", "x{1001}", "a\xff"};
    struct exporter_allowlist al;
    (void)state;
    exporter_allowlist_init(&al);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct diag d;
        diag_init(&d);
        assert_int_equal(exporter_allowlist_add(&al, bad[i], &d), -EINVAL);
        assert_non_null(strstr(d.msg, "invalid RE2 pattern"));
        assert_int_equal(al.n, 0);
    }
    for (size_t i = 0; i < EXPORTER_ALLOWLIST_MAX; i++)
        add_ok(&al, "x");
    struct diag d;
    diag_init(&d);
    assert_int_equal(exporter_allowlist_add(&al, "y", &d), -EINVAL);
    assert_int_equal(al.n, EXPORTER_ALLOWLIST_MAX);
    exporter_allowlist_release(&al);
}

/* ---- one pod's labels ---- */

static json_t *json(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    if (!v)
        fail_msg("%s: %s", text, err.text);
    return v;
}

/* The labels built from the JSON object text, as "k=v,k=v". */
static void check_labels(const struct exporter_allowlist *al, const char *text, const char *want)
{
    struct exporter_pod_labels l;
    struct strbuf sb = STRBUF_INIT;
    json_t *labels = json(text);
    assert_int_equal(exporter_pod_labels_build(al, labels, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(strbuf_addf(&sb, "%s%s=%s", i ? "," : "", l.v[i].key, l.v[i].value), 0);
    if (strcmp(strbuf_str(&sb), want) != 0)
        fail_msg("%s: got \"%s\", want \"%s\"", text, strbuf_str(&sb), want);
    strbuf_release(&sb);
    exporter_pod_labels_release(&l);
    json_decref(labels);
}

static void test_pod_labels(void **state)
{
    struct exporter_allowlist al;
    (void)state;
    exporter_allowlist_init(&al);
    check_labels(&al, "{}", "");
    check_labels(&al, "[]", "");
    /* Renamed and sorted by the new name; not strings skipped. */
    check_labels(&al, "{\"tier\": \"gpu\", \"app.kubernetes.io/name\": \"trainer\", \"n\": 5}",
                 "app_kubernetes_io_name=trainer,tier=gpu");
    /* Two keys with one name: neither (whichever order the object has). */
    check_labels(&al, "{\"a.b\": \"1\", \"a_b\": \"2\", \"c\": \"3\"}", "c=3");
    check_labels(&al, "{\"a_b\": \"2\", \"a.b\": \"1\", \"a-b\": \"0\"}", "");
    /* A name Prometheus cannot take. */
    check_labels(&al, "{\"1password.com/vault\": \"x\", \"ok\": \"\"}", "ok=");
    /* The allowlist sees the key as written, before renaming (as upstream). */
    add_ok(&al, "^app\\.kubernetes\\.io/");
    check_labels(&al, "{\"app.kubernetes.io/name\": \"t\", \"app_kubernetes_io/x\": \"y\"}",
                 "app_kubernetes_io_name=t");
    /* A collision between a key that passes and one that does not is none. */
    check_labels(&al, "{\"app.kubernetes.io/name\": \"t\", \"app_kubernetes_io_name\": \"y\"}",
                 "app_kubernetes_io_name=t");
    exporter_allowlist_release(&al);
}

static void test_pod_labels_cap(void **state)
{
    struct exporter_pod_labels l;
    json_t *labels = json_object();
    (void)state;
    for (int i = 0; i < EXPORTER_POD_LABELS_MAX + 50; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%03d", i);
        assert_int_equal(json_object_set_new(labels, key, json_string("v")), 0);
    }
    assert_int_equal(exporter_pod_labels_build(NULL, labels, &l), 0);
    assert_int_equal(l.n, EXPORTER_POD_LABELS_MAX);
    assert_string_equal(l.v[0].key, "k000"); /* the first in name order are kept */
    assert_string_equal(l.v[l.n - 1].key, "k099");
    exporter_pod_labels_release(&l);
    json_decref(labels);
}

/* ---- the cache ---- */

static json_t *pod(const char *ns, const char *name, const char *uid, const char *labels)
{
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Pod", "metadata",
                          "namespace", ns, "name", name);
    json_t *meta = json_object_get(p, "metadata");
    if (uid)
        assert_int_equal(json_object_set_new(meta, "uid", json_string(uid)), 0);
    if (labels)
        assert_int_equal(json_object_set_new(meta, "labels", json(labels)), 0);
    return p;
}

static void apply(struct exporter_podmeta *pm, enum kube_event ev, json_t *p, int want)
{
    assert_int_equal(exporter_podmeta_apply(pm, ev, p), want);
    json_decref(p);
}

static int synced_calls;
static struct exporter_podmeta_status last_status;

static void on_synced(const struct exporter_podmeta_status *st, void *userdata)
{
    assert_ptr_equal(userdata, &synced_calls);
    synced_calls++;
    last_status = *st;
}

static void test_cache(void **state)
{
    struct exporter_allowlist al;
    struct exporter_podmeta *pm = NULL;
    struct exporter_podmeta_pod m;
    (void)state;
    exporter_allowlist_init(&al);
    add_ok(&al, "^(app|team)$");
    const struct exporter_podmeta_options o = {
        .labels = true, .allowlist = &al, .synced = on_synced, .userdata = &synced_calls};
    synced_calls = 0;
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    assert_false(exporter_podmeta_synced(pm));
    assert_false(exporter_podmeta_find(pm, "ml", "train-0", &m));

    apply(pm, KUBE_ADDED, pod("ml", "train-0", "uid-1", "{\"app\": \"train\", \"x\": \"1\"}"), 0);
    apply(pm, KUBE_ADDED, pod("ml", "train-1", "uid-2", NULL), 0);
    apply(pm, KUBE_ADDED, pod("web", "train-0", NULL, "{\"team\": \"b\"}"), 0);
    apply(pm, KUBE_SYNCED, json_pack("{s:s}", "kind", "PodList"), 0);
    assert_true(exporter_podmeta_synced(pm));
    assert_int_equal(synced_calls, 1);
    assert_int_equal(last_status.pods, 3);
    assert_int_equal(exporter_podmeta_count(pm), 3);

    assert_true(exporter_podmeta_find(pm, "ml", "train-0", &m));
    assert_string_equal(m.uid, "uid-1");
    assert_int_equal(m.n_labels, 1);
    assert_string_equal(m.labels[0].key, "app");
    assert_string_equal(m.labels[0].value, "train");
    assert_true(exporter_podmeta_find(pm, "ml", "train-1", &m));
    assert_string_equal(m.uid, "uid-2");
    assert_int_equal(m.n_labels, 0);
    assert_true(exporter_podmeta_find(pm, "web", "train-0", &m)); /* namespaces apart */
    assert_string_equal(m.uid, "");
    assert_string_equal(m.labels[0].value, "b");
    assert_false(exporter_podmeta_find(pm, "ml", "train-2", &m));
    assert_false(exporter_podmeta_find(pm, "m", "ltrain-0", &m));

    /* MODIFIED replaces the labels. */
    apply(pm, KUBE_MODIFIED, pod("ml", "train-0", "uid-1", "{\"app\": \"eval\", \"team\": \"a\"}"),
          0);
    assert_true(exporter_podmeta_find(pm, "ml", "train-0", &m));
    assert_int_equal(m.n_labels, 2);
    assert_string_equal(m.labels[0].value, "eval");
    assert_string_equal(m.labels[1].key, "team");
    assert_int_equal(exporter_podmeta_count(pm), 3);

    /* DELETED forgets it; deleting an unknown pod is no error. */
    apply(pm, KUBE_DELETED, pod("ml", "train-0", "uid-1", NULL), 0);
    assert_false(exporter_podmeta_find(pm, "ml", "train-0", &m));
    apply(pm, KUBE_DELETED, pod("ml", "nope", NULL, NULL), 0);
    assert_int_equal(exporter_podmeta_count(pm), 2);

    /* Objects that name no pod change nothing. */
    apply(pm, KUBE_ADDED, json_pack("{s:{s:s}}", "metadata", "name", "x"), -EINVAL);
    apply(pm, KUBE_ADDED, pod("", "x", NULL, NULL), -EINVAL);
    apply(pm, KUBE_ADDED, json_pack("[]"), -EINVAL);
    assert_int_equal(exporter_podmeta_count(pm), 2);
    pm = exporter_podmeta_free(pm);
    assert_null(pm);
    exporter_allowlist_release(&al);
}

static void test_cache_uids_only(void **state)
{
    const struct exporter_podmeta_options o = {.labels = false};
    struct exporter_podmeta *pm = NULL;
    struct exporter_podmeta_pod m;
    (void)state;
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    apply(pm, KUBE_ADDED, pod("ml", "p", "u", "{\"app\": \"x\"}"), 0);
    assert_true(exporter_podmeta_find(pm, "ml", "p", &m));
    assert_string_equal(m.uid, "u");
    assert_int_equal(m.n_labels, 0);
    exporter_podmeta_free(pm);
}

static void test_cache_full(void **state)
{
    const struct exporter_podmeta_options o = {
        .labels = true, .max_pods = 2, .synced = on_synced, .userdata = &synced_calls};
    struct exporter_podmeta *pm = NULL;
    struct exporter_podmeta_pod m;
    (void)state;
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    apply(pm, KUBE_ADDED, pod("a", "p1", "1", NULL), 0);
    apply(pm, KUBE_ADDED, pod("a", "p2", "2", NULL), 0);
    apply(pm, KUBE_ADDED, pod("a", "p3", "3", NULL), -ENOSPC);
    apply(pm, KUBE_MODIFIED, pod("a", "p2", "2b", NULL), 0); /* a known pod still changes */
    apply(pm, KUBE_SYNCED, json_object(), 0);
    assert_int_equal(last_status.pods, 2);
    assert_int_equal(last_status.left_out, 1);
    assert_false(exporter_podmeta_find(pm, "a", "p3", &m));
    assert_true(exporter_podmeta_find(pm, "a", "p2", &m));
    assert_string_equal(m.uid, "2b");
    apply(pm, KUBE_DELETED, pod("a", "p1", NULL, NULL), 0);
    apply(pm, KUBE_ADDED, pod("a", "p3", "3", NULL), 0); /* room again */
    assert_true(exporter_podmeta_find(pm, "a", "p3", &m));
    exporter_podmeta_free(pm);
}

/* Enough pods for the table to grow several times; every one found, then every one gone. */
static void test_cache_many(void **state)
{
    const struct exporter_podmeta_options o = {.labels = true};
    struct exporter_podmeta *pm = NULL;
    struct exporter_podmeta_pod m;
    enum {
        N = 5000
    };
    char name[32], uid[32];
    (void)state;
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "pod-%d", i);
        snprintf(uid, sizeof(uid), "uid-%d", i);
        apply(pm, KUBE_ADDED, pod(i % 2 ? "odd" : "even", name, uid, "{\"i\": \"x\"}"), 0);
    }
    assert_int_equal(exporter_podmeta_count(pm), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "pod-%d", i);
        snprintf(uid, sizeof(uid), "uid-%d", i);
        assert_true(exporter_podmeta_find(pm, i % 2 ? "odd" : "even", name, &m));
        assert_string_equal(m.uid, uid);
        assert_false(exporter_podmeta_find(pm, i % 2 ? "even" : "odd", name, &m));
    }
    for (int i = 0; i < N; i += 2) {
        snprintf(name, sizeof(name), "pod-%d", i);
        apply(pm, KUBE_DELETED, pod("even", name, NULL, NULL), 0);
    }
    assert_int_equal(exporter_podmeta_count(pm), N / 2);
    assert_false(exporter_podmeta_find(pm, "even", "pod-0", &m));
    assert_true(exporter_podmeta_find(pm, "odd", "pod-4999", &m));
    exporter_podmeta_free(pm);
}

/* ---- the watch ---- */

static void test_path(void **state)
{
    char buf[128], small[20];
    (void)state;
    assert_int_equal(exporter_podmeta_path(NULL, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/api/v1/pods");
    assert_int_equal(exporter_podmeta_path("", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/api/v1/pods");
    assert_int_equal(exporter_podmeta_path("gpu-node-1.example", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-node-1.example");
    assert_int_equal(exporter_podmeta_path("a b&c=d", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/api/v1/pods?fieldSelector=spec.nodeName%3Da%20b%26c%3Dd");
    assert_int_equal(exporter_podmeta_path("node", small, sizeof(small)), -ENAMETOOLONG);
}

static void test_watch_on_a_client(void **state)
{
    const struct exporter_podmeta_options o = {.labels = true};
    struct kube_config cfg = {.server = "http://127.0.0.1:1", .source = "test"};
    struct exporter_podmeta *pm = NULL;
    struct kube_client *kube = NULL;
    struct ev_loop *loop = NULL;
    char long_name[2048];
    struct diag d;
    (void)state;
    diag_init(&d);
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(ev_loop_new(&loop), 0);
    assert_int_equal(kube_client_new(loop, &cfg, NULL, &kube), 0);
    assert_int_equal(exporter_podmeta_new(&o, &pm), 0);
    /* A node name no path can hold: refused, with the reason. */
    assert_int_equal(exporter_podmeta_watch(pm, kube, long_name, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "NODE_NAME"));
    /* Else the watch starts on the borrowed client (and retries on its own). */
    assert_int_equal(exporter_podmeta_watch(pm, kube, "node-1", &d), 0);
    assert_false(exporter_podmeta_synced(pm));
    exporter_podmeta_free(pm);
    kube_client_free(kube);
    ev_loop_free(loop);
}

/* ---- pod labels in the exposition ---- */

static void render_check(const struct exporter_snapshot *s, const struct exporter_render_options *o,
                         const char *want)
{
    struct exporter_counters c;
    struct diag d;
    struct strbuf out = STRBUF_INIT;
    const char *csv = "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
                      "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.\n"
                      "DCGM_FI_DRIVER_VERSION, label, Driver Version\n";
    exporter_counters_init(&c);
    diag_init(&d);
    if (exporter_counters_parse(csv, strlen(csv), "t.csv", &c, &d) < 0)
        fail_msg("%s", d.msg);
    assert_int_equal(exporter_render(&c, s, o, &out), 0);
    if (strcmp(strbuf_str(&out), want) != 0)
        fail_msg("got:\n%s\nwant:\n%s", strbuf_str(&out), want);
    strbuf_release(&out);
    exporter_counters_release(&c);
}

static void test_render(void **state)
{
    /* As exporter_pod_labels_build hands them: sorted, distinct. Several collide with names the
     * sample has: fixed labels, a label field, attributes, XID's err_code. */
    static const struct exporter_label pod_labels[] = {
        {"DCGM_FI_DRIVER_VERSION", "no"},
        {"GPU_I_ID", "mig-only"},
        {"UUID", "no"},
        {"app", "web\"1\""},
        {"container", "no"},
        {"err_code", "xid-only"},
        {"gpu", "no"},
        {"hostname", "no"},
        {"pod_uid", "no"},
        {"uuid", "old-only"},
        {"zone", "a"},
    };
    static const struct exporter_label attrs[] = {
        {"pod", "p"}, {"namespace", "ns"}, {"container", "c"}, {"pod_uid", "u-1"}};
    struct exporter_series se = {
        .gpu = 0,
        .uuid = "GPU-0",
        .pci_bus_id = "00000000:1B:00.0",
        .model_name = "H100",
        .have_xid = true,
        .last_xid = 0,
        .labels = attrs,
        .n_labels = ARRAY_SIZE(attrs),
        .pod_labels = pod_labels,
        .n_pod_labels = ARRAY_SIZE(pod_labels),
    };
    se.sample.have = UINT64_C(1) << GPU_METRIC_GPU_TEMP;
    se.sample.v[GPU_METRIC_GPU_TEMP] = 40;
    const struct exporter_snapshot s = {.series = &se, .n = 1, .driver_version = "550"};
    struct exporter_render_options o = {.hostname = "n1"};
    (void)state;

    /* Pod labels sorted in with DCGM_FI_DRIVER_VERSION (uppercase first, as Go sorts bytes),
     * before the attributes; every name the sample already has stays the exporter's. */
    render_check(&s, &o,
                 "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
                 "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
                 "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:1B:00.0\","
                 "device=\"nvidia0\",modelName=\"H100\",hostname=\"n1\","
                 "DCGM_FI_DRIVER_VERSION=\"550\",GPU_I_ID=\"mig-only\",app=\"web\\\"1\\\"\","
                 "err_code=\"xid-only\",uuid=\"old-only\",zone=\"a\",container=\"c\","
                 "namespace=\"ns\",pod=\"p\",pod_uid=\"u-1\"} 40\n"
                 "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
                 "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
                 "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:1B:00.0\","
                 "device=\"nvidia0\",modelName=\"H100\",hostname=\"n1\","
                 "DCGM_FI_DRIVER_VERSION=\"550\",GPU_I_ID=\"mig-only\",app=\"web\\\"1\\\"\","
                 "uuid=\"old-only\",zone=\"a\",container=\"c\",err_code=\"0\","
                 "err_msg=\"No Error\",namespace=\"ns\",pod=\"p\",pod_uid=\"u-1\"} 0\n");

    /* A MIG series, no hostname, the old names: what is taken changes with them. */
    se.mig_profile = "1g.10gb";
    se.gpu_instance_id = 3;
    se.sample.have = UINT64_C(1) << GPU_METRIC_GPU_TEMP;
    se.have_xid = false;
    o = (struct exporter_render_options){.use_old_namespace = true};
    render_check(&s, &o,
                 "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
                 "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
                 "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",uuid=\"GPU-0\",pci_bus_id=\"00000000:1B:00.0\","
                 "device=\"nvidia0\",modelName=\"H100\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\","
                 "DCGM_FI_DRIVER_VERSION=\"550\",UUID=\"no\",app=\"web\\\"1\\\"\","
                 "container=\"no\",err_code=\"xid-only\",hostname=\"no\",zone=\"a\","
                 "container_name=\"c\",pod_name=\"p\",pod_namespace=\"ns\",pod_uid=\"u-1\"} 40\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sanitize),   cmocka_unit_test(test_name_ok),
        cmocka_unit_test(test_allowlist),  cmocka_unit_test(test_allowlist_refused),
        cmocka_unit_test(test_pod_labels), cmocka_unit_test(test_pod_labels_cap),
        cmocka_unit_test(test_cache),      cmocka_unit_test(test_cache_uids_only),
        cmocka_unit_test(test_cache_full), cmocka_unit_test(test_cache_many),
        cmocka_unit_test(test_path),       cmocka_unit_test(test_watch_on_a_client),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
