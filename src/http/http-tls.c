/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTPS for the server with OpenSSL, loaded when a server with tls_server_config is made
 * (base-dlib.h): a plain-HTTP exporter maps neither libssl nor libcrypto. The context holds the
 * certificate chain and key (files or PEM from the web configuration), the minimum and maximum
 * protocol version, and the client certificate policy, mapped from Go's tls.ClientAuthType:
 *
 *   NoClientCert                 no certificate asked for
 *   RequestClientCert            asked for, not required, not verified
 *   RequireAnyClientCert         required, not verified
 *   VerifyClientCertIfGiven      asked for, verified against client_ca_file when sent
 *   RequireAndVerifyClientCert   required and verified against client_ca_file
 *
 * Non-blocking throughout: a step that cannot go on says which way the socket has to become ready.
 * The symbol table is src/ossl's, shared with the Kubernetes client.
 */
#include <errno.h>
#include <string.h>

#include "ev.h"
#include "http-internal.h"
#include "ossl.h"

struct http_tls {
    SSL_CTX *ctx;
};

struct http_tls_conn {
    SSL *ssl;
};

static int set_identity(SSL_CTX *ctx, const struct http_web_tls *cfg, struct diag *d)
{
    if (cfg->cert_pem && cfg->key_pem) {
        int r = ossl_use_identity_pem(ctx, cfg->cert_pem, cfg->key_pem, "tls_server_config.cert",
                                      "tls_server_config.key", d);
        if (r < 0)
            return r;
    } else {
        if (cfg->cert_pem || cfg->key_pem)
            return diag_fail(d, -EINVAL,
                             "tls_server_config: give cert and key inline, or both as files");
        if (!ossl.SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file))
            return ossl_fail(d, cfg->cert_file);
        if (!ossl.SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM))
            return ossl_fail(d, cfg->key_file);
    }
    if (!ossl.SSL_CTX_check_private_key(ctx))
        return ossl_fail(d, "tls_server_config: certificate and key do not match");
    return 0;
}

/* Accepts whatever certificate the client sends: RequestClientCert and RequireAnyClientCert ask
 * for one without checking it, as Go's crypto/tls does. */
static int accept_any(int preverify_ok, X509_STORE_CTX *store)
{
    (void)preverify_ok;
    (void)store;
    return 1;
}

static int set_client_auth(SSL_CTX *ctx, const struct http_web_tls *cfg, struct diag *d)
{
    if (cfg->client_ca_file) {
        if (!ossl.SSL_CTX_load_verify_locations(ctx, cfg->client_ca_file, NULL))
            return ossl_fail(d, cfg->client_ca_file);
        STACK_OF(X509_NAME) *names = ossl.SSL_load_client_CA_file(cfg->client_ca_file);
        if (!names)
            return ossl_fail(d, cfg->client_ca_file);
        ossl.SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
    }
    switch (cfg->client_auth) {
    case HTTP_CLIENT_AUTH_NONE:
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        break;
    case HTTP_CLIENT_AUTH_REQUEST:
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
        break;
    case HTTP_CLIENT_AUTH_REQUIRE_ANY:
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any);
        break;
    case HTTP_CLIENT_AUTH_VERIFY_IF_GIVEN:
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        break;
    case HTTP_CLIENT_AUTH_REQUIRE_AND_VERIFY:
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        break;
    }
    return 0;
}

struct http_tls *http_tls_free(struct http_tls *t)
{
    if (t) {
        if (t->ctx)
            ossl.SSL_CTX_free(t->ctx);
        free(t);
    }
    return NULL;
}

int http_tls_new(const struct http_web_tls *cfg, struct diag *d, struct http_tls **ret)
{
    static const unsigned char sid_ctx[] = "gpuplane-http";
    int r = ossl_load(d); /* SIGPIPE ignored too: a closed peer gives EPIPE */
    if (r < 0)
        return r;
    _cleanup_(http_tls_freep) struct http_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->ctx = ossl.SSL_CTX_new(ossl.TLS_server_method());
    if (!t->ctx)
        return ossl_fail(d, "TLS context");
    ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, cfg->min_version, NULL);
    if (cfg->max_version)
        ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, cfg->max_version, NULL);
    /* Idle keep-alive connections give their record buffers back. */
    ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_MODE,
                      SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS,
                      NULL);
    ossl.SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                         SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* Session resumption with client certificates needs a context id. */
    ossl.SSL_CTX_set_session_id_context(t->ctx, sid_ctx, sizeof(sid_ctx) - 1);
    r = set_identity(t->ctx, cfg, d);
    if (r >= 0)
        r = set_client_auth(t->ctx, cfg, d);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(t);
    return 0;
}

struct http_tls_conn *http_tls_conn_free(struct http_tls_conn *tc)
{
    if (tc) {
        if (tc->ssl)
            ossl.SSL_free(tc->ssl);
        free(tc);
    }
    return NULL;
}

int http_tls_conn_new(struct http_tls *t, int fd, struct http_tls_conn **ret)
{
    struct http_tls_conn *tc = calloc(1, sizeof(*tc));
    if (!tc)
        return -ENOMEM;
    tc->ssl = ossl.SSL_new(t->ctx);
    if (!tc->ssl || !ossl.SSL_set_fd(tc->ssl, fd)) {
        ossl.ERR_clear_error();
        http_tls_conn_free(tc);
        return -ENOMEM;
    }
    *ret = tc;
    return 0;
}

static int io_result(struct http_tls_conn *tc, int rc, uint32_t *want)
{
    int e = ossl.SSL_get_error(tc->ssl, rc);
    int err = errno;
    ossl.ERR_clear_error();
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *want = EV_READ;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *want = EV_WRITE;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        return err ? -err : -EPIPE;
    default:
        return -EPROTO;
    }
}

int http_tls_handshake(struct http_tls_conn *tc, uint32_t *want)
{
    int rc = ossl.SSL_accept(tc->ssl);
    if (rc == 1)
        return 0;
    int r = io_result(tc, rc, want);
    return r == 0 ? -EPIPE : r;
}

ssize_t http_tls_read(struct http_tls_conn *tc, void *buf, size_t n, uint32_t *want)
{
    int rc = ossl.SSL_read(tc->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return rc > 0 ? rc : io_result(tc, rc, want);
}

ssize_t http_tls_write(struct http_tls_conn *tc, const void *buf, size_t n, uint32_t *want)
{
    int rc = ossl.SSL_write(tc->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (rc > 0)
        return rc;
    ssize_t r = io_result(tc, rc, want);
    return r == 0 ? -EPIPE : r;
}

void http_tls_shutdown(struct http_tls_conn *tc)
{
    (void)ossl.SSL_shutdown(tc->ssl);
    ossl.ERR_clear_error();
}
