/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the web configuration: what it accepts, the errors it gives with their positions, and
 * basic auth against bcrypt hashes made here with libcrypt (accepted, refused, remembered).
 */
#include <crypt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http-internal.h"

/* A bcrypt hash of password at cost 4 (fast, for tests). */
static void make_hash(const char *password, char *out, size_t n)
{
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    assert_non_null(cd);
    const char *h = crypt_r(password, "$2b$04$0123456789abcdefghijku", cd);
    assert_non_null(h);
    assert_int_equal(strlen(h), 60);
    snprintf(out, n, "%s", h);
    free(cd);
}

static int load(const char *text, struct diag *d, struct http_web_config **ret)
{
    diag_init(d);
    return http_web_config_load_string("web.yml", text, strlen(text), d, ret);
}

static void test_errors(void **state)
{
    static const struct {
        const char *yaml;
        const char *msg; /* a prefix of the message */
    } cases[] = {
        {"tls_server_config:\n  cert_file: a\n  bogus: 1\n", "web.yml:3:3: unknown key \"bogus\""},
        {"basic_auth_users:\n  alice: plain\n",
         "web.yml:2:10: basic_auth_users.alice: not a bcrypt"},
        {"basic_auth_users:\n  alice: 5\n", "web.yml:2:10: basic_auth_users.alice: expected a"},
        {"basic_auth_users: [a]\n", "web.yml:1:19: basic_auth_users: expected a mapping"},
        {"tls_server_config:\n  cert_file: a\n", "web.yml:2:3: missing key_file"},
        {"tls_server_config:\n  key_file: a\n", "web.yml:2:3: missing cert_file"},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n",
         "web.yml:4:21: client_auth_type: unknown value \"Maybe\""},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n",
         "web.yml:4:16: min_version: unknown TLS version"},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
         "web.yml:2:3: client_ca_file is set without"},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n"
         "  client_auth_type: RequireAndVerifyClientCert\n",
         "web.yml:4:21: client_auth_type verifies client certificates"},
        {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n",
         "web.yml:4:18: cipher_suites: not supported"},
        {"rate_limit:\n  burst: 2\n", "web.yml:2:3: rate_limit: not supported"},
        {"http_server_config:\n  http2: yes\n", "web.yml:2:10: \"http2\": expected a boolean"},
        {"http_server_config:\n  headers:\n    X-A: b\n", "web.yml:3:5: unknown key \"X-A\""},
        {"http_server_config:\n  headers:\n    X-Frame-Options: maybe\n",
         "web.yml:3:22: headers.X-Frame-Options: \"maybe\" (deny or sameorigin)"},
        {"http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
         "web.yml:3:29: headers.X-Content-Type-Options"},
        {"http_server_config:\n  headers:\n    X-XSS-Protection: \"1\\r\\nX: y\"\n",
         "web.yml:3:24: headers.X-XSS-Protection: control characters"},
        {"nope: 1\n", "web.yml:1:1: unknown key \"nope\""},
        {"basic_auth_users:\n  alice: [\n", "web.yml:"},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct diag d;
        struct http_web_config *wc = NULL;
        int r = load(cases[i].yaml, &d, &wc);
        if (r >= 0 || strncmp(d.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
            fail_msg("case %zu: r=%d msg \"%s\", want \"%s\"", i, r, d.msg, cases[i].msg);
        assert_null(wc);
    }
}

static void test_valid(void **state)
{
    (void)state;
    struct diag d;
    struct http_web_config *wc = NULL;
    assert_int_equal(load("", &d, &wc), 0);
    assert_false(http_web_config_has_tls(wc));
    assert_false(http_web_config_has_auth(wc));
    wc = http_web_config_free(wc);

    assert_int_equal(load("tls_server_config: {}\nhttp_server_config:\n  http2: false\n", &d, &wc),
                     0);
    assert_false(http_web_config_has_tls(wc));
    wc = http_web_config_free(wc);

    assert_int_equal(load("tls_server_config:\n  cert_file: /c.pem\n  key_file: /k.pem\n"
                          "  client_ca_file: /ca.pem\n"
                          "  client_auth_type: VerifyClientCertIfGiven\n"
                          "  min_version: TLS13\n",
                          &d, &wc),
                     0);
    assert_true(http_web_config_has_tls(wc));
    assert_string_equal(wc->tls.cert_file, "/c.pem");
    assert_string_equal(wc->tls.client_ca_file, "/ca.pem");
    assert_int_equal(wc->tls.client_auth, HTTP_CLIENT_AUTH_VERIFY_IF_GIVEN);
    assert_int_equal(wc->tls.min_version, 0x0304);
    wc = http_web_config_free(wc);

    assert_int_equal(load("http_server_config:\n  headers:\n    X-Frame-Options: DENY\n"
                          "    Strict-Transport-Security: max-age=31536000\n"
                          "    X-XSS-Protection: ''\n",
                          &d, &wc),
                     0);
    assert_string_equal(wc->headers, "X-Frame-Options: DENY\r\n"
                                     "Strict-Transport-Security: max-age=31536000\r\n");
    wc = http_web_config_free(wc);
}

static void test_basic_auth(void **state)
{
    (void)state;
    char alice[64], bob[64], yaml[256];
    make_hash("wonderland", alice, sizeof(alice));
    make_hash("builder", bob, sizeof(bob));
    bob[2] = 'y'; /* $2y$: the same hash under the name PHP and htpasswd use */
    snprintf(yaml, sizeof(yaml), "basic_auth_users:\n  alice: %s\n  bob: '%s'\n", alice, bob);
    struct diag d;
    struct http_web_config *wc = NULL;
    assert_int_equal(load(yaml, &d, &wc), 0);
    assert_true(http_web_config_has_auth(wc));

    assert_false(http_web_config_check_user(wc, "alice", "wrong"));
    assert_false(http_web_config_check_user(wc, "alice", ""));
    assert_false(http_web_config_check_user(wc, "carol", "wonderland"));
    assert_false(http_web_config_check_user(wc, "bob", "wonderland"));
    for (size_t i = 0; i < HTTP_AUTH_CACHE; i++)
        assert_true(wc->cache[i].key == 0); /* failures are not remembered */

    assert_true(http_web_config_check_user(wc, "alice", "wonderland"));
    assert_true(wc->cache[0].key != 0);
    assert_true(http_web_config_check_user(wc, "alice", "wonderland")); /* from the cache */
    assert_int_equal(wc->cache_next, 1);
    assert_true(http_web_config_check_user(wc, "bob", "builder"));
    assert_int_equal(wc->cache_next, 2);
    assert_false(http_web_config_check_user(wc, "bob", "builder2"));
    assert_false(http_web_config_check_user(wc, "alice", "wonderlanD"));
    wc = http_web_config_free(wc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_basic_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
