/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The web configuration file of Prometheus' exporter-toolkit (--web.config.file; dcgm-exporter's
 * --web-config-file), read with the project's document loader so every error reads
 * file:line:col. The checks are exporter-toolkit's: cert and key both or neither, a client CA only
 * with a client auth policy, bcrypt hashes for users, the values of the security headers. Keys of
 * the format this server does not implement (cipher and curve lists, allowed SANs, rate limits)
 * are refused rather than silently ignored: a file that asks for them expects them to hold.
 */
#include <errno.h>
#include <openssl/tls1.h>
#include <string.h>
#include <strings.h>

#include "base-doc.h"
#include "base-strbuf.h"
#include "http-internal.h"

struct http_web_config *http_web_config_free(struct http_web_config *wc)
{
    if (!wc)
        return NULL;
    free(wc->tls.cert_file);
    free(wc->tls.key_file);
    free(wc->tls.cert_pem);
    free(wc->tls.key_pem);
    free(wc->tls.client_ca_file);
    for (size_t i = 0; i < wc->n_users; i++) {
        free(wc->users[i].name);
        free(wc->users[i].hash);
    }
    free(wc->users);
    free(wc->headers);
    if (wc->crypt_held)
        http_crypt_release();
    explicit_bzero(wc, sizeof(*wc));
    free(wc);
    return NULL;
}

bool http_web_config_has_tls(const struct http_web_config *wc)
{
    return wc && wc->tls_enabled;
}

bool http_web_config_has_auth(const struct http_web_config *wc)
{
    return wc && wc->n_users > 0;
}

/* An optional string field, copied; NULL when absent or empty. */
static int get_str(const struct doc *doc, const json_t *obj, const char *key, struct diag *d,
                   char **ret)
{
    const char *s = NULL;
    int r = doc_get_string(doc, obj, key, false, NULL, d, &s);
    if (r < 0)
        return r;
    if (!s || !*s)
        return 0;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

static int refuse(const struct doc *doc, const json_t *obj, const char *const *keys, struct diag *d)
{
    for (size_t i = 0; keys[i]; i++) {
        json_t *v = json_object_get(obj, keys[i]);
        if (v && !json_is_null(v))
            return doc_fail(doc, v, d, -EOPNOTSUPP, "%s: not supported by this server", keys[i]);
    }
    return 0;
}

static int tls_version(const struct doc *doc, const json_t *obj, const char *key, int def,
                       struct diag *d, int *ret)
{
    static const struct {
        const char *name;
        int v;
    } versions[] = {
        {"TLS10", TLS1_VERSION},
        {"TLS11", TLS1_1_VERSION},
        {"TLS12", TLS1_2_VERSION},
        {"TLS13", TLS1_3_VERSION},
    };
    const char *s = NULL;
    int r = doc_get_string(doc, obj, key, false, NULL, d, &s);
    if (r < 0)
        return r;
    if (!s || !*s) {
        *ret = def;
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
        if (strcmp(s, versions[i].name) == 0) {
            *ret = versions[i].v;
            return 0;
        }
    return doc_fail(doc, json_object_get(obj, key), d, -EINVAL,
                    "%s: unknown TLS version \"%s\" (TLS10, TLS11, TLS12, TLS13)", key, s);
}

static int client_auth(const struct doc *doc, const json_t *obj, struct diag *d,
                       enum http_client_auth *ret)
{
    static const struct {
        const char *name;
        enum http_client_auth v;
    } types[] = {
        {"NoClientCert", HTTP_CLIENT_AUTH_NONE},
        {"RequestClientCert", HTTP_CLIENT_AUTH_REQUEST},
        {"RequireAnyClientCert", HTTP_CLIENT_AUTH_REQUIRE_ANY},
        {"RequireClientCert", HTTP_CLIENT_AUTH_REQUIRE_ANY}, /* the old name */
        {"VerifyClientCertIfGiven", HTTP_CLIENT_AUTH_VERIFY_IF_GIVEN},
        {"RequireAndVerifyClientCert", HTTP_CLIENT_AUTH_REQUIRE_AND_VERIFY},
    };
    const char *s = NULL;
    int r = doc_get_string(doc, obj, "client_auth_type", false, NULL, d, &s);
    if (r < 0)
        return r;
    if (!s || !*s) {
        *ret = HTTP_CLIENT_AUTH_NONE;
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(types); i++)
        if (strcmp(s, types[i].name) == 0) {
            *ret = types[i].v;
            return 0;
        }
    return doc_fail(doc, json_object_get(obj, "client_auth_type"), d, -EINVAL,
                    "client_auth_type: unknown value \"%s\"", s);
}

static int load_tls(const struct doc *doc, const json_t *obj, struct http_web_config *wc,
                    struct diag *d)
{
    static const char *const keys[] = {
        "cert",
        "key",
        "cert_file",
        "key_file",
        "client_ca_file",
        "client_auth_type",
        "min_version",
        "max_version",
        "cipher_suites",
        "curve_preferences",
        "prefer_server_cipher_suites",
        "client_allowed_sans",
        NULL,
    };
    static const char *const unsupported[] = {"cipher_suites", "curve_preferences",
                                              "client_allowed_sans", NULL};
    struct http_web_tls *t = &wc->tls;
    int r = doc_check_keys(doc, obj, keys, d);
    if (r >= 0)
        r = refuse(doc, obj, unsupported, d);
    if (r >= 0)
        r = get_str(doc, obj, "cert", d, &t->cert_pem);
    if (r >= 0)
        r = get_str(doc, obj, "key", d, &t->key_pem);
    if (r >= 0)
        r = get_str(doc, obj, "cert_file", d, &t->cert_file);
    if (r >= 0)
        r = get_str(doc, obj, "key_file", d, &t->key_file);
    if (r >= 0)
        r = get_str(doc, obj, "client_ca_file", d, &t->client_ca_file);
    if (r >= 0)
        r = client_auth(doc, obj, d, &t->client_auth);
    if (r >= 0)
        r = tls_version(doc, obj, "min_version", TLS1_2_VERSION, d, &t->min_version);
    if (r >= 0)
        r = tls_version(doc, obj, "max_version", 0, d, &t->max_version);
    bool prefer = true;
    if (r >= 0)
        r = doc_get_bool(doc, obj, "prefer_server_cipher_suites", false, true, d, &prefer);
    if (r < 0)
        return r;
    (void)prefer; /* OpenSSL servers prefer their own order already (SSL_OP_CIPHER_SERVER_...) */

    bool has_cert = t->cert_file || t->cert_pem, has_key = t->key_file || t->key_pem;
    if (t->cert_file && t->cert_pem)
        return doc_fail(doc, obj, d, -EINVAL, "cert and cert_file are mutually exclusive");
    if (t->key_file && t->key_pem)
        return doc_fail(doc, obj, d, -EINVAL, "key and key_file are mutually exclusive");
    if (!has_cert && !has_key && !t->client_ca_file)
        return 0; /* an empty tls_server_config: plain HTTP, as exporter-toolkit does */
    if (!has_cert)
        return doc_fail(doc, obj, d, -EINVAL, "missing cert_file");
    if (!has_key)
        return doc_fail(doc, obj, d, -EINVAL, "missing key_file");
    if (t->client_ca_file && t->client_auth == HTTP_CLIENT_AUTH_NONE)
        return doc_fail(doc, obj, d, -EINVAL,
                        "client_ca_file is set without a client_auth_type policy");
    if (!t->client_ca_file && (t->client_auth == HTTP_CLIENT_AUTH_VERIFY_IF_GIVEN ||
                               t->client_auth == HTTP_CLIENT_AUTH_REQUIRE_AND_VERIFY))
        return doc_fail(doc, json_object_get(obj, "client_auth_type"), d, -EINVAL,
                        "client_auth_type verifies client certificates: client_ca_file is needed");
    if (t->max_version && t->max_version < t->min_version)
        return doc_fail(doc, obj, d, -EINVAL, "max_version is lower than min_version");
    wc->tls_enabled = true;
    return 0;
}

static int load_users(const struct doc *doc, const json_t *obj, struct http_web_config *wc,
                      struct diag *d)
{
    if (!json_is_object(obj))
        return doc_fail(doc, obj, d, -EINVAL, "basic_auth_users: expected a mapping, got %s",
                        doc_type_name(obj));
    size_t n = json_object_size(obj);
    if (n == 0)
        return 0;
    wc->users = calloc(n, sizeof(*wc->users));
    if (!wc->users)
        return -ENOMEM;
    const char *user;
    json_t *v;
    json_object_foreach((json_t *)obj, user, v)
    {
        if (!json_is_string(v))
            return doc_fail(doc, v, d, -EINVAL,
                            "basic_auth_users.%s: expected a bcrypt hash, got %s", user,
                            doc_type_name(v));
        const char *h = json_string_value(v);
        if (strlen(h) != 60 || (strncmp(h, "$2a$", 4) != 0 && strncmp(h, "$2b$", 4) != 0 &&
                                strncmp(h, "$2y$", 4) != 0))
            return doc_fail(doc, v, d, -EINVAL,
                            "basic_auth_users.%s: not a bcrypt hash ($2a$, $2b$ or $2y$)", user);
        if (strchr(user, ':'))
            return doc_fail(doc, v, d, -EINVAL,
                            "basic_auth_users: user \"%s\" holds ':', which basic auth cannot send",
                            user);
        struct http_web_user *u = &wc->users[wc->n_users++];
        u->name = strdup(user);
        u->hash = strdup(h);
        if (!u->name || !u->hash)
            return -ENOMEM;
    }
    int r = http_auth_init_key(wc->sip_key);
    if (r < 0)
        return diag_fail(d, r, "cannot draw a random key");
    r = http_crypt_acquire(d);
    if (r < 0)
        return r;
    wc->crypt_held = true;
    return 0;
}

/* http_server_config.headers: the security headers exporter-toolkit lets a file add to every
 * response, checked as it checks them. */
static int load_headers(const struct doc *doc, const json_t *obj, struct http_web_config *wc,
                        struct diag *d)
{
    static const char *const keys[] = {"Content-Security-Policy",   "X-Frame-Options",
                                       "X-Content-Type-Options",    "X-XSS-Protection",
                                       "Strict-Transport-Security", NULL};
    int r = doc_check_keys(doc, obj, keys, d);
    if (r < 0)
        return r;
    struct strbuf sb = STRBUF_INIT;
    strbuf_init(&sb, 16384);
    for (size_t i = 0; keys[i] && r >= 0; i++) {
        const char *v = NULL;
        r = doc_get_string(doc, obj, keys[i], false, NULL, d, &v);
        if (r < 0 || !v || !*v)
            continue;
        const json_t *at = json_object_get(obj, keys[i]);
        for (const char *c = v; *c && r >= 0; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                r = doc_fail(doc, at, d, -EINVAL, "headers.%s: control characters", keys[i]);
        if (r >= 0 && strcmp(keys[i], "X-Frame-Options") == 0 && strcasecmp(v, "deny") != 0 &&
            strcasecmp(v, "sameorigin") != 0)
            r = doc_fail(doc, at, d, -EINVAL,
                         "headers.X-Frame-Options: \"%s\" (deny or sameorigin)", v);
        if (r >= 0 && strcmp(keys[i], "X-Content-Type-Options") == 0 &&
            strcasecmp(v, "nosniff") != 0)
            r = doc_fail(doc, at, d, -EINVAL, "headers.X-Content-Type-Options: \"%s\" (nosniff)",
                         v);
        if (r >= 0)
            r = strbuf_addf(&sb, "%s: %s\r\n", keys[i], v);
    }
    if (r >= 0 && sb.len) {
        wc->headers = strbuf_detach(&sb, NULL);
        if (!wc->headers)
            r = -ENOMEM;
    }
    strbuf_release(&sb);
    return r;
}

static int load_doc(const struct doc *doc, struct diag *d, struct http_web_config **ret)
{
    static const char *const keys[] = {"tls_server_config", "http_server_config",
                                       "basic_auth_users", "rate_limit", NULL};
    static const char *const unsupported[] = {"rate_limit", NULL};
    static const char *const server_keys[] = {"http2", "headers", NULL};
    _cleanup_(http_web_config_freep) struct http_web_config *wc = calloc(1, sizeof(*wc));
    if (!wc)
        return -ENOMEM;
    if (doc_count(doc) > 1)
        return doc_fail(doc, doc_root(doc, 1), d, -EINVAL, "expected one document");
    json_t *root = doc_count(doc) ? doc_root(doc, 0) : NULL;
    if (!root || json_is_null(root)) {
        *ret = TAKE_PTR(wc);
        return 0;
    }
    int r = doc_check_keys(doc, root, keys, d);
    if (r >= 0)
        r = refuse(doc, root, unsupported, d);
    if (r < 0)
        return r;
    json_t *tls = json_object_get(root, "tls_server_config");
    if (tls && !json_is_null(tls)) {
        r = load_tls(doc, tls, wc, d);
        if (r < 0)
            return r;
    }
    json_t *srv = json_object_get(root, "http_server_config");
    if (srv && !json_is_null(srv)) {
        bool http2 = false;
        r = doc_check_keys(doc, srv, server_keys, d);
        if (r >= 0) /* accepted; this server speaks HTTP/1.1 only, which every scraper speaks */
            r = doc_get_bool(doc, srv, "http2", false, true, d, &http2);
        json_t *headers = json_object_get(srv, "headers");
        if (r >= 0 && headers && !json_is_null(headers))
            r = load_headers(doc, headers, wc, d);
        if (r < 0)
            return r;
    }
    json_t *users = json_object_get(root, "basic_auth_users");
    if (users && !json_is_null(users)) {
        r = load_users(doc, users, wc, d);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(wc);
    return 0;
}

int http_web_config_load_string(const char *name, const char *text, size_t len, struct diag *d,
                                struct http_web_config **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_string(name, text, len, d, &doc);
    return r < 0 ? r : load_doc(doc, d, ret);
}

/* exporter-toolkit reads relative file names from the configuration file's directory. */
static int resolve(const char *path, char **file)
{
    const char *slash = strrchr(path, '/');
    if (!*file || (*file)[0] == '/' || !slash)
        return 0;
    size_t dl = (size_t)(slash - path) + 1, fl = strlen(*file);
    char *joined = malloc(dl + fl + 1);
    if (!joined)
        return -ENOMEM;
    memcpy(joined, path, dl);
    memcpy(joined + dl, *file, fl + 1);
    free(*file);
    *file = joined;
    return 0;
}

int http_web_config_load(const char *path, struct diag *d, struct http_web_config **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(http_web_config_freep) struct http_web_config *wc = NULL;
    int r = doc_load_file(path, d, &doc);
    if (r >= 0)
        r = load_doc(doc, d, &wc);
    if (r >= 0)
        r = resolve(path, &wc->tls.cert_file);
    if (r >= 0)
        r = resolve(path, &wc->tls.key_file);
    if (r >= 0)
        r = resolve(path, &wc->tls.client_ca_file);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(wc);
    return 0;
}
