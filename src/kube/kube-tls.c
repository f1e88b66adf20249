/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS to the API server with OpenSSL, loaded when the first client of an https server is made
 * (base-dlib.h): only the daemons that talk to the API server map libssl and libcrypto. The context
 * holds what the configuration says about trust and identity: the CA (a file, PEM in memory, or the
 * system's store when none is configured), the client certificate and key, at least TLS 1.2, ALPN
 * "http/1.1". Each connection checks the server's name (or IP address) against its certificate.
 *
 * Non-blocking throughout: a handshake, read or write that cannot go on says which way the socket
 * has to become ready (KUBE_IO_READ / KUBE_IO_WRITE).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "kube-internal.h"
#include "ossl.h"

struct kube_tls {
    SSL_CTX *ctx;
};

struct kube_tls_conn {
    SSL *ssl;
    char host[256];
};

static BIO *pem_bio(const char *pem)
{
    return ossl.BIO_new_mem_buf(pem, (int)strlen(pem));
}

/* Every certificate of a PEM bundle into the context's trust store. */
static int trust_pem(SSL_CTX *ctx, const char *pem, struct diag *d)
{
    BIO *bio = pem_bio(pem);
    if (!bio)
        return -ENOMEM;
    X509_STORE *store = ossl.SSL_CTX_get_cert_store(ctx);
    unsigned n = 0;
    X509 *x;
    while ((x = ossl.PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
        int ok = ossl.X509_STORE_add_cert(store, x);
        ossl.X509_free(x);
        if (!ok) {
            ossl.BIO_free(bio);
            return ossl_fail(d, "certificate-authority-data");
        }
        n++;
    }
    ossl.ERR_clear_error(); /* the end of the bundle reads as an error */
    ossl.BIO_free(bio);
    return n ? 0 : diag_fail(d, -EINVAL, "certificate-authority-data holds no certificate");
}

static int set_trust(SSL_CTX *ctx, const struct kube_config *cfg, struct diag *d)
{
    if (cfg->insecure) {
        ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (cfg->ca_pem)
        return trust_pem(ctx, cfg->ca_pem, d);
    if (cfg->ca_file)
        return ossl.SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL)
                   ? 0
                   : ossl_fail(d, cfg->ca_file);
    return ossl.SSL_CTX_set_default_verify_paths(ctx) ? 0 : ossl_fail(d, "system CA store");
}

static int set_identity(SSL_CTX *ctx, const struct kube_config *cfg, struct diag *d)
{
    if (cfg->cert_pem && cfg->key_pem)
        return ossl_use_identity_pem(ctx, cfg->cert_pem, cfg->key_pem, "client-certificate-data",
                                     "client-key-data", d);
    if (cfg->cert_file && !ossl.SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file))
        return ossl_fail(d, cfg->cert_file);
    if (cfg->key_file && !ossl.SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM))
        return ossl_fail(d, cfg->key_file);
    if ((cfg->cert_pem || cfg->cert_file) && !ossl.SSL_CTX_check_private_key(ctx))
        return ossl_fail(d, "client certificate and key do not match");
    return 0;
}

struct kube_tls *kube_tls_free(struct kube_tls *t)
{
    if (t) {
        if (t->ctx)
            ossl.SSL_CTX_free(t->ctx);
        free(t);
    }
    return NULL;
}

int kube_tls_new(const struct kube_config *cfg, struct diag *d, struct kube_tls **ret)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    int r = ossl_load(d); /* SIGPIPE ignored too: a closed peer gives EPIPE */
    if (r < 0)
        return r;
    _cleanup_(kube_tls_freep) struct kube_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->ctx = ossl.SSL_CTX_new(ossl.TLS_client_method());
    if (!t->ctx)
        return ossl_fail(d, "TLS context");
    ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
    /* Idle connections give their 34 KiB of record buffers back. */
    ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_MODE,
                      SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS,
                      NULL);
    /* A body delimited by the end of the connection must not read as an error. */
    ossl.SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    ossl.SSL_CTX_set_alpn_protos(t->ctx, alpn, sizeof(alpn) - 1);
    r = set_trust(t->ctx, cfg, d);
    if (r >= 0)
        r = set_identity(t->ctx, cfg, d);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(t);
    return 0;
}

struct kube_tls_conn *kube_tls_conn_free(struct kube_tls_conn *tc)
{
    if (tc) {
        if (tc->ssl)
            ossl.SSL_free(tc->ssl);
        free(tc);
    }
    return NULL;
}

static bool is_ip(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int kube_tls_conn_new(struct kube_tls *t, int fd, const char *host, struct diag *d,
                      struct kube_tls_conn **ret)
{
    _cleanup_(kube_tls_conn_freep) struct kube_tls_conn *tc = calloc(1, sizeof(*tc));
    if (!tc)
        return -ENOMEM;
    snprintf(tc->host, sizeof(tc->host), "%s", host);
    tc->ssl = ossl.SSL_new(t->ctx);
    if (!tc->ssl || !ossl.SSL_set_fd(tc->ssl, fd))
        return ossl_fail(d, "TLS connection");
    int ok;
    if (is_ip(host)) /* no SNI for addresses (RFC 6066); the certificate must name the IP */
        ok = ossl.X509_VERIFY_PARAM_set1_ip_asc(ossl.SSL_get0_param(tc->ssl), host);
    else
        ok = ossl.SSL_ctrl(tc->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                           (void *)host) &&
             ossl.SSL_set1_host(tc->ssl, host);
    if (!ok)
        return ossl_fail(d, "TLS server name");
    *ret = TAKE_PTR(tc);
    return 0;
}

/* Maps SSL_get_error() to want flags or a failure message. */
static int io_result(struct kube_tls_conn *tc, int rc, const char *what, enum kube_io *want,
                     struct diag *d)
{
    int e = ossl.SSL_get_error(tc->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *want = KUBE_IO_READ;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *want = KUBE_IO_WRITE;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL: {
        int err = errno;
        ossl.ERR_clear_error();
        return diag_fail(d, -EPIPE, "TLS %s with %s: %s", what, tc->host,
                         err ? strerror(err) : "connection closed");
    }
    default: {
        char why[256];
        long v = ossl.SSL_get_verify_result(tc->ssl);
        ossl_errors(why, sizeof(why));
        if (v != X509_V_OK)
            return diag_fail(d, -EPROTO, "TLS %s with %s: %s: %s", what, tc->host, why,
                             ossl.X509_verify_cert_error_string(v));
        return diag_fail(d, -EPROTO, "TLS %s with %s: %s", what, tc->host, why);
    }
    }
}

int kube_tls_handshake(struct kube_tls_conn *tc, enum kube_io *want, struct diag *d)
{
    int rc = ossl.SSL_connect(tc->ssl);
    if (rc == 1)
        return 0;
    int r = io_result(tc, rc, "handshake", want, d);
    return r == 0 ? diag_fail(d, -EPIPE, "TLS handshake with %s: connection closed", tc->host) : r;
}

ssize_t kube_tls_read(struct kube_tls_conn *tc, void *buf, size_t n, enum kube_io *want,
                      struct diag *d)
{
    int rc = ossl.SSL_read(tc->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    return rc > 0 ? rc : io_result(tc, rc, "read", want, d);
}

ssize_t kube_tls_write(struct kube_tls_conn *tc, const void *buf, size_t n, enum kube_io *want,
                       struct diag *d)
{
    int rc = ossl.SSL_write(tc->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (rc > 0)
        return rc;
    ssize_t r = io_result(tc, rc, "write", want, d);
    return r == 0 ? diag_fail(d, -EPIPE, "TLS write to %s: connection closed", tc->host) : r;
}
