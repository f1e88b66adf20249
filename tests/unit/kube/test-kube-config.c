/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the configuration loader: kubeconfig variants (token, tokenFile, client certificate
 * files and data, CA file and data, relative paths, missing pieces, insecure-skip-tls-verify
 * refused unless allowed, $KUBECONFIG) and the in-cluster configuration from a temporary
 * service-account directory and the KUBERNETES_SERVICE_* variables. Each test works in its own
 * temporary directory.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube-internal.h"
#include "test-tmpdir.h"

/* "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" in base64 */
#define PEM_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define PEM_TEXT "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define SECRET "s3cr3t-t0ken-value"

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test_kube_config_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    write_file("ca.crt", PEM_TEXT);
    write_file("client.crt", PEM_TEXT);
    write_file("client.key", "key\n");
    write_file("token", SECRET "\n");
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("GPUPLANE_SERVICEACCOUNT_DIR");
    return 0;
}

static int teardown(void **state)
{
    return test_tmpdir_remove(dir);
}

/* A kubeconfig with one context "c" -> cluster "k", user "u". */
static const char *kubeconfig(const char *cluster, const char *user, const char *extra)
{
    static char text[4096];
    snprintf(text, sizeof(text),
             "apiVersion: v1\n"
             "kind: Config\n"
             "clusters:\n"
             "- name: k\n"
             "  cluster:\n"
             "%s"
             "users:\n"
             "- name: u\n"
             "  user:\n"
             "%s"
             "contexts:\n"
             "- name: c\n"
             "  context: {cluster: k, user: u%s}\n"
             "current-context: c\n",
             cluster, user, extra);
    return text;
}

struct load {
    int r;
    struct diag d;
    struct kube_config *cfg;
};

static struct load load_text(const char *text, bool allow_insecure)
{
    write_file("config", text);
    char path[256];
    snprintf(path, sizeof(path), "%s/config", dir);
    struct kube_config_options opts = {.kubeconfig = path, .allow_insecure = allow_insecure};
    struct load l = {0};
    diag_init(&l.d);
    l.r = kube_config_load(&opts, &l.d, &l.cfg);
    if (l.r >= 0)
        assert_non_null(l.cfg);
    else
        assert_null(l.cfg);
    return l;
}

static void test_token(void **state)
{
    struct load l = load_text(kubeconfig("    server: https://api.example:6443/\n"
                                         "    certificate-authority: ca.crt\n",
                                         "    token: " SECRET "\n", ", namespace: gpu"),
                              false);
    assert_int_equal(l.r, 0);
    assert_string_equal(l.cfg->server, "https://api.example:6443");
    assert_string_equal(l.cfg->token, SECRET);
    assert_null(l.cfg->token_file);
    assert_string_equal(l.cfg->namespace_, "gpu");
    assert_false(l.cfg->insecure);
    /* relative to the kubeconfig's directory */
    char want[256];
    snprintf(want, sizeof(want), "%s/ca.crt", dir);
    assert_string_equal(l.cfg->ca_file, want);
    assert_null(l.cfg->ca_pem);
    snprintf(want, sizeof(want), "%s/config", dir);
    assert_string_equal(l.cfg->source, want);
    kube_config_free(l.cfg);
}

static void test_token_file_and_data(void **state)
{
    char user[512];
    snprintf(user, sizeof(user), "    tokenFile: %s/token\n", dir);
    struct load l = load_text(kubeconfig("    server: https://10.0.0.1\n"
                                         "    certificate-authority-data: " PEM_B64 "\n",
                                         user, ""),
                              false);
    assert_int_equal(l.r, 0);
    assert_null(l.cfg->token);
    assert_non_null(l.cfg->token_file);
    assert_string_equal(l.cfg->ca_pem, PEM_TEXT);
    assert_null(l.cfg->ca_file);
    assert_string_equal(l.cfg->namespace_, "default");

    /* the token is read through the cache, trimmed, and re-read after a change */
    struct kube_token_cache tc = {0};
    const char *tok = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(kube_token_get(&tc, l.cfg, &d, &tok), 0);
    assert_string_equal(tok, SECRET);
    write_file("token", "rotated-token-longer\n");
    assert_int_equal(kube_token_get(&tc, l.cfg, &d, &tok), 0);
    assert_string_equal(tok, "rotated-token-longer");
    /* an empty file mid-rotation keeps the last token */
    write_file("token", "");
    assert_int_equal(kube_token_get(&tc, l.cfg, &d, &tok), 0);
    assert_string_equal(tok, "rotated-token-longer");
    kube_token_cache_release(&tc);
    /* ... but with nothing cached it is an error that does not quote the file */
    assert_int_equal(kube_token_get(&tc, l.cfg, &d, &tok), -EINVAL);
    assert_non_null(strstr(d.msg, "holds no token"));
    kube_token_cache_release(&tc);
    kube_config_free(l.cfg);
}

static void test_client_cert(void **state)
{
    struct load l = load_text(kubeconfig("    server: https://h\n",
                                         "    client-certificate: client.crt\n"
                                         "    client-key: client.key\n",
                                         ""),
                              false);
    assert_int_equal(l.r, 0);
    assert_non_null(strstr(l.cfg->cert_file, "/client.crt"));
    assert_non_null(strstr(l.cfg->key_file, "/client.key"));
    assert_null(l.cfg->token);
    kube_config_free(l.cfg);

    l = load_text(kubeconfig("    server: https://h\n",
                             "    client-certificate-data: " PEM_B64 "\n"
                             "    client-key-data: " PEM_B64 "\n",
                             ""),
                  false);
    assert_int_equal(l.r, 0);
    assert_string_equal(l.cfg->cert_pem, PEM_TEXT);
    assert_string_equal(l.cfg->key_pem, PEM_TEXT);
    assert_null(l.cfg->cert_file);
    kube_config_free(l.cfg);
}

/* Configurations that must be refused, and what the message must say. */
static const struct bad_case {
    const char *cluster, *user, *extra;
    int err;
    const char *want;
} bad_cases[] = {
    {"    server: https://h\n    certificate-authority: missing.crt\n", "    token: x\n", "",
     -ENOENT, ":7:28: certificate-authority: cannot read"},
    {"    server: https://h\n", "    client-certificate: client.crt\n", "", -EINVAL,
     "needs its key"},
    {"    server: https://h\n", "    client-key-data: '!!notbase64'\n", "", -EINVAL,
     "client-key-data: not base64-encoded"},
    {"    server: ftp://h\n", "    token: x\n", "", -EINVAL, "not an https:// URL"},
    {"    server: http://h\n", "    token: x\n", "", -EINVAL, "plain http"},
    {"    server: https://h\n    insecure-skip-tls-verify: true\n", "    token: x\n", "", -EINVAL,
     "insecure-skip-tls-verify"},
    {"    certificate-authority: ca.crt\n", "    token: x\n", "", -EINVAL, "server"},
    {"    server: https://h\n    sever: typo\n", "    token: x\n", "", -EINVAL, "sever"},
    {"    server: https://h\n", "    exec: {command: aws}\n", "", -EINVAL, "exec"},
    {"    server: https://h\n    proxy-url: http://proxy:3128\n", "    token: x\n", "", -EINVAL,
     ":7:16: cluster \"k\": proxy-url is not supported"},
    {"    server: https://h\n", "    token: x\n", ", cluster: other", -EINVAL, ""},
};

static void test_refused(void **state)
{
    for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
        const struct bad_case *bc = &bad_cases[i];
        char text[4096];
        snprintf(text, sizeof(text), "%s", kubeconfig(bc->cluster, bc->user, bc->extra));
        struct load l = load_text(text, false);
        if (l.r != bc->err || !strstr(l.d.msg, bc->want))
            fail_msg("case %zu: %d \"%s\"", i, l.r, l.d.msg);
        assert_non_null(strstr(l.d.msg, "kubeconfig "));
    }
}

static void test_insecure_allowed(void **state)
{
    const char *text = kubeconfig("    server: https://h\n    insecure-skip-tls-verify: true\n",
                                  "    token: x\n", "");
    struct load l = load_text(text, true);
    assert_int_equal(l.r, 0);
    assert_true(l.cfg->insecure);
    kube_config_free(l.cfg);
    /* allowed, but not asked for: verification stays on */
    l = load_text(kubeconfig("    server: https://h\n", "    token: x\n", ""), true);
    assert_int_equal(l.r, 0);
    assert_false(l.cfg->insecure);
    kube_config_free(l.cfg);
}

static void test_no_current_context(void **state)
{
    struct load l = load_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n", false);
    assert_int_equal(l.r, -EINVAL);
    assert_non_null(strstr(l.d.msg, "no current-context"));

    l = load_text("current-context: nope\ncontexts:\n- name: c\n  context: {cluster: k}\n", false);
    assert_int_equal(l.r, -EINVAL);
    assert_non_null(strstr(l.d.msg, "no context named \"nope\""));
    assert_non_null(strstr(l.d.msg, ":1:18:"));

    l = load_text("current-context: [oops\n", false);
    assert_int_equal(l.r, -EINVAL);
    assert_non_null(strstr(l.d.msg, "kubeconfig "));
}

static void test_secrets_not_in_messages(void **state)
{
    /* a malformed user section next to a token: the message names the key, not the value */
    struct load l = load_text(kubeconfig("    server: https://h\n",
                                         "    token: " SECRET "\n"
                                         "    client-certificate-data: " SECRET "\n",
                                         ""),
                              false);
    assert_int_equal(l.r, -EINVAL);
    assert_null(strstr(l.d.msg, SECRET));
}

static void test_kubeconfig_env(void **state)
{
    write_file("env-config", kubeconfig("    server: https://from-env\n", "    token: x\n", ""));
    char env[512];
    snprintf(env, sizeof(env), "%s/env-config:/nonexistent", dir);
    setenv("KUBECONFIG", env, 1);
    struct kube_config *cfg = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(kube_config_load(NULL, &d, &cfg), 0);
    assert_string_equal(cfg->server, "https://from-env");
    kube_config_free(cfg);
    unsetenv("KUBECONFIG");
}

static void test_in_cluster(void **state)
{
    struct kube_config_options opts = {.serviceaccount_dir = dir};
    struct kube_config *cfg = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(kube_config_load(&opts, &d, &cfg), -ENOENT);
    assert_non_null(strstr(d.msg, "in-cluster: KUBERNETES_SERVICE_HOST is not set"));

    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    assert_int_equal(kube_config_load(&opts, &d, &cfg), -ENOENT);
    assert_non_null(strstr(d.msg, "KUBERNETES_SERVICE_PORT"));
    setenv("KUBERNETES_SERVICE_PORT", "443x", 1);
    assert_int_equal(kube_config_load(&opts, &d, &cfg), -EINVAL);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);

    assert_int_equal(kube_config_load(&opts, &d, &cfg), 0);
    assert_string_equal(cfg->server, "https://10.96.0.1:443");
    assert_string_equal(cfg->source, "in-cluster");
    assert_string_equal(cfg->namespace_, "default"); /* no namespace file */
    assert_non_null(strstr(cfg->token_file, "/token"));
    assert_non_null(strstr(cfg->ca_file, "/ca.crt"));
    assert_null(cfg->token);
    cfg = kube_config_free(cfg);

    write_file("namespace", "gpu-operator\n");
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    assert_int_equal(kube_config_load(&opts, &d, &cfg), 0);
    assert_string_equal(cfg->server, "https://[fd00::1]:443");
    assert_string_equal(cfg->namespace_, "gpu-operator");
    cfg = kube_config_free(cfg);

    /* the directory from the environment */
    setenv("GPUPLANE_SERVICEACCOUNT_DIR", dir, 1);
    assert_int_equal(kube_config_load(NULL, &d, &cfg), 0);
    cfg = kube_config_free(cfg);

    char path[256];
    snprintf(path, sizeof(path), "%s/ca.crt", dir);
    unlink(path);
    assert_int_equal(kube_config_load(&opts, &d, &cfg), -ENOENT);
    assert_non_null(strstr(d.msg, "ca.crt"));
    unsetenv("GPUPLANE_SERVICEACCOUNT_DIR");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_base64(void **state)
{
    static const struct {
        const char *in, *out;
        int r;
    } cases[] = {
        {"", "", 0},
        {"Zg==", "f", 0},
        {"Zm8=", "fo", 0},
        {"Zm9v", "foo", 0},
        {"Zm9vYg", "foob", 0},
        {"Zm9v\nYmFy\n", "foobar", 0},
        {"Zm9v!", NULL, -EINVAL},
        {"Zg==Zg", NULL, -EINVAL},
        {"Z", NULL, -EINVAL},
        {"Zh==", NULL, -EINVAL}, /* non-zero padding bits */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *out = NULL;
        size_t len = 0;
        int r = kube_base64_decode(cases[i].in, &out, &len);
        if (r != cases[i].r)
            fail_msg("case %zu (%s): %d", i, cases[i].in, r);
        if (r == 0) {
            assert_int_equal(len, strlen(cases[i].out));
            assert_memory_equal(out, cases[i].out, len);
        }
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_file_and_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insecure_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_current_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets_not_in_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
