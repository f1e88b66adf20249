/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the API server is and who we are: a kubeconfig (its current context) or, inside a pod,
 * the service account's files and the KUBERNETES_SERVICE_* variables. Everything is checked here,
 * at start-up, with a message that names the file, line and column, so that a daemon does not find
 * out on its first request that a CA file was mistyped. Secrets (tokens, key data) are kept, never
 * quoted in a message.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kube-internal.h"

/* Service account files and kubeconfig-referenced secrets are small. */
#define SMALL_FILE_MAX ((size_t)1 << 20)

struct kube_config *kube_config_free(struct kube_config *cfg)
{
    if (!cfg)
        return NULL;
    free(cfg->server);
    free(cfg->ca_file);
    free(cfg->ca_pem);
    if (cfg->token)
        explicit_bzero(cfg->token, strlen(cfg->token));
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->cert_file);
    free(cfg->key_file);
    free(cfg->cert_pem);
    if (cfg->key_pem)
        explicit_bzero(cfg->key_pem, strlen(cfg->key_pem));
    free(cfg->key_pem);
    free(cfg->namespace_);
    free(cfg->source);
    free(cfg);
    return NULL;
}

/* ---- base64 (the kubeconfig's *-data fields) ---- */

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int kube_base64_decode(const char *in, char **ret, size_t *ret_len)
{
    size_t n = strlen(in);
    _cleanup_free_ char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return -ENOMEM;
    size_t len = 0, pads = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        if (ch == '=') {
            pads++;
            continue;
        }
        int v = b64_value(ch);
        if (v < 0 || pads > 0)
            return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* Left-over bits must be the zero padding of the last group; 6 bits alone are no byte. */
    if (pads > 2 || bits >= 6 || (acc & ((1u << bits) - 1)) != 0)
        return -EINVAL;
    out[len] = '\0';
    *ret_len = len;
    *ret = TAKE_PTR(out);
    return 0;
}

/* ---- the kubeconfig ---- */

struct loader {
    const struct doc *doc;
    const char *dir; /* of the kubeconfig: relative paths start there */
    struct diag *d;
    struct kube_config *cfg;
};

/* A string member, NULL when absent or null (kubectl writes nulls for empty sections). */
static int get_str(const struct loader *l, const json_t *obj, const char *key, const char **ret)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *ret = NULL;
        return 0;
    }
    return doc_get_string(l->doc, obj, key, false, NULL, l->d, ret);
}

/* The entry of a named list (clusters, users, contexts) called name: its inner mapping. */
static int find_named(const struct loader *l, const json_t *root, const char *list,
                      const char *inner, const char *name, const json_t *where, json_t **ret)
{
    json_t *arr = json_object_get(root, list);
    if (arr && !json_is_null(arr) && !json_is_array(arr))
        return doc_fail(l->doc, arr, l->d, -EINVAL, "\"%s\": expected a sequence, got %s", list,
                        doc_type_name(arr));
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        const char *n = json_string_value(json_object_get(item, "name"));
        if (!n || strcmp(n, name) != 0)
            continue;
        json_t *v = NULL;
        int r = doc_get_object(l->doc, item, inner, true, l->d, &v);
        if (r < 0)
            return r;
        *ret = v;
        return 0;
    }
    return doc_fail(l->doc, where, l->d, -EINVAL, "no %.*s named \"%s\" in \"%s\"",
                    (int)strlen(list) - 1, list, name, list);
}

/* A file the kubeconfig names, made absolute and checked for readability now. */
static int take_path(const struct loader *l, const json_t *obj, const char *key, const char *value,
                     char **ret)
{
    _cleanup_free_ char *path = NULL;
    if (value[0] == '/')
        path = strdup(value);
    else if (asprintf(&path, "%s/%s", l->dir, value) < 0)
        path = NULL;
    if (!path)
        return -ENOMEM;
    if (access(path, R_OK) < 0) {
        int err = negative_errno();
        return doc_fail(l->doc, json_object_get(obj, key), l->d, err, "%s: cannot read %s: %s", key,
                        path, strerror(-err));
    }
    *ret = TAKE_PTR(path);
    return 0;
}

static int take_data(const struct loader *l, const json_t *obj, const char *key, const char *value,
                     char **ret)
{
    size_t len;
    char *data = NULL;
    int r = kube_base64_decode(value, &data, &len);
    if (r == -ENOMEM)
        return r;
    if (r < 0 || len == 0 || strlen(data) != len) {
        free(data);
        return doc_fail(l->doc, json_object_get(obj, key), l->d, -EINVAL,
                        "%s: not base64-encoded PEM data", key);
    }
    *ret = data;
    return 0;
}

static int load_cluster(struct loader *l, const json_t *cluster, const char *name)
{
    static const char *const keys[] = {"server",
                                       "certificate-authority",
                                       "certificate-authority-data",
                                       "insecure-skip-tls-verify",
                                       "tls-server-name",
                                       "proxy-url",
                                       "disable-compression",
                                       "extensions",
                                       NULL};
    const char *server, *ca, *ca_data;
    bool insecure = false;
    int r = doc_check_keys(l->doc, cluster, keys, l->d);
    if (r >= 0)
        r = doc_get_string(l->doc, cluster, "server", true, NULL, l->d, &server);
    if (r >= 0)
        r = get_str(l, cluster, "certificate-authority", &ca);
    if (r >= 0)
        r = get_str(l, cluster, "certificate-authority-data", &ca_data);
    if (r >= 0)
        r = doc_get_bool(l->doc, cluster, "insecure-skip-tls-verify", false, false, l->d,
                         &insecure);
    if (r < 0)
        return r;
    /* Better refused than ignored: either would connect somewhere other than asked. */
    static const char *const unsupported[] = {"tls-server-name", "proxy-url"};
    for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++) {
        json_t *v = json_object_get(cluster, unsupported[i]);
        if (v && !json_is_null(v))
            return doc_fail(l->doc, v, l->d, -EINVAL, "cluster \"%s\": %s is not supported", name,
                            unsupported[i]);
    }

    bool https = strncmp(server, "https://", 8) == 0;
    if (!https && strncmp(server, "http://", 7) != 0)
        return doc_fail(l->doc, json_object_get(cluster, "server"), l->d, -EINVAL,
                        "cluster \"%s\": server \"%s\" is not an https:// URL", name, server);
    if (!https && !l->cfg->insecure)
        return doc_fail(l->doc, json_object_get(cluster, "server"), l->d, -EINVAL,
                        "cluster \"%s\": server \"%s\" is plain http, which would send "
                        "credentials in the clear; refused unless insecure connections are "
                        "explicitly allowed",
                        name, server);
    l->cfg->server = strdup(server);
    if (!l->cfg->server)
        return -ENOMEM;
    size_t n = strlen(l->cfg->server);
    while (n > 0 && l->cfg->server[n - 1] == '/')
        l->cfg->server[--n] = '\0';

    if (insecure) {
        if (!l->cfg->insecure)
            return doc_fail(l->doc, cluster, l->d, -EINVAL,
                            "cluster \"%s\" sets insecure-skip-tls-verify: the API server's "
                            "certificate would not be checked; refused unless insecure "
                            "connections are explicitly allowed",
                            name);
        return 0;
    }
    /* Asked for no insecurity: keep verifying even when insecure use was allowed. */
    l->cfg->insecure = false;
    if (ca_data)
        return take_data(l, cluster, "certificate-authority-data", ca_data, &l->cfg->ca_pem);
    if (ca)
        return take_path(l, cluster, "certificate-authority", ca, &l->cfg->ca_file);
    return 0;
}

static int load_user(struct loader *l, const json_t *user, const char *name, const json_t *where)
{
    const char *token, *token_file, *cert, *cert_data, *key, *key_data;
    int r = get_str(l, user, "token", &token);
    if (r >= 0)
        r = get_str(l, user, "tokenFile", &token_file);
    if (r >= 0)
        r = get_str(l, user, "client-certificate", &cert);
    if (r >= 0)
        r = get_str(l, user, "client-certificate-data", &cert_data);
    if (r >= 0)
        r = get_str(l, user, "client-key", &key);
    if (r >= 0)
        r = get_str(l, user, "client-key-data", &key_data);
    if (r < 0)
        return r;
    struct kube_config *cfg = l->cfg;

    if (token && *token && !(cfg->token = strdup(token)))
        return -ENOMEM;
    if (token_file && (r = take_path(l, user, "tokenFile", token_file, &cfg->token_file)) < 0)
        return r;
    if (cert_data)
        r = take_data(l, user, "client-certificate-data", cert_data, &cfg->cert_pem);
    else if (cert)
        r = take_path(l, user, "client-certificate", cert, &cfg->cert_file);
    if (r < 0)
        return r;
    if (key_data)
        r = take_data(l, user, "client-key-data", key_data, &cfg->key_pem);
    else if (key)
        r = take_path(l, user, "client-key", key, &cfg->key_file);
    if (r < 0)
        return r;
    bool has_cert = cfg->cert_pem || cfg->cert_file;
    bool has_key = cfg->key_pem || cfg->key_file;
    if (has_cert != has_key)
        return doc_fail(l->doc, user, l->d, -EINVAL,
                        "user \"%s\": a client certificate needs its key and a key its "
                        "certificate",
                        name);
    if (!cfg->token && !cfg->token_file && !has_cert) {
        if (json_object_get(user, "exec") || json_object_get(user, "auth-provider"))
            return doc_fail(l->doc, where, l->d, -EINVAL,
                            "user \"%s\": exec and auth-provider credential plugins are not "
                            "supported; use a token, tokenFile or a client certificate",
                            name);
    }
    return 0;
}

static int load_kubeconfig(const char *path, const struct kube_config_options *opts, struct diag *d,
                           struct kube_config *cfg)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct diag dd;
    diag_init(&dd);
    int r = doc_load_file(path, &dd, &doc);
    if (r < 0)
        return diag_fail(d, r, "kubeconfig %s", dd.msg);
    if (doc_count(doc) != 1 || !json_is_object(doc_root(doc, 0)))
        return diag_fail(d, -EINVAL, "kubeconfig %s: expected one mapping", path);

    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    struct loader l = {.doc = doc, .dir = dirname(copy), .d = &dd, .cfg = cfg};
    cfg->insecure = opts->allow_insecure; /* load_cluster narrows it to what was asked */
    const json_t *root = doc_root(doc, 0);

    const char *current = NULL, *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    json_t *ctx = NULL, *cluster = NULL, *user = NULL;
    r = get_str(&l, root, "current-context", &current);
    if (r >= 0 && (!current || !*current))
        r = doc_fail(doc, root, &dd, -EINVAL, "no current-context");
    if (r >= 0)
        r = find_named(&l, root, "contexts", "context", current,
                       json_object_get(root, "current-context"), &ctx);
    if (r >= 0)
        r = doc_get_string(doc, ctx, "cluster", true, NULL, &dd, &cluster_name);
    if (r >= 0)
        r = get_str(&l, ctx, "user", &user_name);
    if (r >= 0)
        r = get_str(&l, ctx, "namespace", &ns);
    if (r >= 0)
        r = find_named(&l, root, "clusters", "cluster", cluster_name,
                       json_object_get(ctx, "cluster"), &cluster);
    if (r >= 0)
        r = load_cluster(&l, cluster, cluster_name);
    if (r >= 0 && user_name && *user_name)
        r = find_named(&l, root, "users", "user", user_name, json_object_get(ctx, "user"), &user);
    if (r >= 0 && user)
        r = load_user(&l, user, user_name, json_object_get(ctx, "user"));
    if (r < 0)
        return r == -ENOMEM ? r : diag_fail(d, r, "kubeconfig %s", dd.msg);

    cfg->namespace_ = strdup(ns && *ns ? ns : "default");
    cfg->source = strdup(path);
    return cfg->namespace_ && cfg->source ? 0 : -ENOMEM;
}

/* ---- in a pod ---- */

static int read_trimmed(const char *path, char **ret)
{
    char *data = NULL;
    size_t len;
    int r = file_read_all(path, SMALL_FILE_MAX, &data, &len);
    if (r < 0)
        return r;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
        data[--len] = '\0';
    *ret = data;
    return 0;
}

static int load_in_cluster(const struct kube_config_options *opts, struct diag *d,
                           struct kube_config *cfg)
{
    const char *dir = opts->serviceaccount_dir;
    if (!dir)
        dir = getenv("GPUPLANE_SERVICEACCOUNT_DIR");
    if (!dir || !*dir)
        dir = KUBE_SERVICEACCOUNT_DIR;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host)
        return diag_fail(d, -ENOENT,
                         "in-cluster: KUBERNETES_SERVICE_HOST is not set (not in a pod? pass "
                         "--kubeconfig or set KUBECONFIG)");
    if (!port || !*port)
        return diag_fail(d, -ENOENT, "in-cluster: KUBERNETES_SERVICE_PORT is not set");
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
        return diag_fail(d, -EINVAL, "in-cluster: KUBERNETES_SERVICE_PORT \"%.16s\" is not a port",
                         port);
    if (strpbrk(host, "/?#@[] "))
        return diag_fail(d, -EINVAL, "in-cluster: KUBERNETES_SERVICE_HOST \"%.64s\" is not a host",
                         host);
    bool ipv6 = strchr(host, ':') != NULL;
    if (asprintf(&cfg->server, "https://%s%s%s:%s", ipv6 ? "[" : "", host, ipv6 ? "]" : "", port) <
        0) {
        cfg->server = NULL;
        return -ENOMEM;
    }

    if (asprintf(&cfg->token_file, "%s/token", dir) < 0 ||
        asprintf(&cfg->ca_file, "%s/ca.crt", dir) < 0)
        return -ENOMEM;
    if (access(cfg->token_file, R_OK) < 0)
        return diag_fail(d, negative_errno(), "in-cluster: cannot read %s: %s", cfg->token_file,
                         strerror(errno));
    if (access(cfg->ca_file, R_OK) < 0)
        return diag_fail(d, negative_errno(), "in-cluster: cannot read %s: %s", cfg->ca_file,
                         strerror(errno));

    _cleanup_free_ char *ns_path = NULL;
    if (asprintf(&ns_path, "%s/namespace", dir) < 0)
        return -ENOMEM;
    char *ns = NULL;
    int r = read_trimmed(ns_path, &ns);
    if (r == -ENOMEM)
        return r;
    if (r < 0 || !*ns) {
        free(ns);
        ns = strdup("default");
    }
    cfg->namespace_ = ns;
    cfg->source = strdup("in-cluster");
    return cfg->namespace_ && cfg->source ? 0 : -ENOMEM;
}

int kube_config_load(const struct kube_config_options *opts, struct diag *d,
                     struct kube_config **ret)
{
    static const struct kube_config_options defaults = {0};
    if (!opts)
        opts = &defaults;
    _cleanup_(kube_config_freep) struct kube_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return -ENOMEM;

    _cleanup_free_ char *from_env = NULL;
    const char *path = opts->kubeconfig;
    if (!path || !*path) {
        const char *env = getenv("KUBECONFIG");
        if (env && *env) {
            from_env = strndup(env, strcspn(env, ":"));
            if (!from_env)
                return -ENOMEM;
            path = from_env;
        }
    }
    int r = path && *path ? load_kubeconfig(path, opts, d, cfg) : load_in_cluster(opts, d, cfg);
    if (r == -ENOMEM)
        return diag_fail(d, r, "kube configuration: out of memory");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(cfg);
    return 0;
}
