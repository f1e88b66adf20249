/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OpenSSL table (ossl.h) and its loading: one struct dlib, pinned at first use.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base-dlib.h"
#include "ossl.h"

struct ossl_api ossl;

#define SYM(fn) DLIB_SYM(ossl.fn, fn)
static const struct dlib_sym ossl_syms[] = {
    SYM(TLS_client_method),
    SYM(TLS_server_method),
    SYM(SSL_CTX_new),
    SYM(SSL_CTX_free),
    SYM(SSL_CTX_ctrl),
    SYM(SSL_CTX_set_options),
    SYM(SSL_CTX_set_verify),
    SYM(SSL_CTX_set_default_verify_paths),
    SYM(SSL_CTX_load_verify_locations),
    SYM(SSL_CTX_get_cert_store),
    SYM(SSL_CTX_set_client_CA_list),
    SYM(SSL_load_client_CA_file),
    SYM(SSL_CTX_use_certificate),
    SYM(SSL_CTX_use_PrivateKey),
    SYM(SSL_CTX_use_certificate_chain_file),
    SYM(SSL_CTX_use_PrivateKey_file),
    SYM(SSL_CTX_check_private_key),
    SYM(SSL_CTX_set_alpn_protos),
    SYM(SSL_CTX_set_session_id_context),
    SYM(SSL_new),
    SYM(SSL_free),
    SYM(SSL_set_fd),
    SYM(SSL_ctrl),
    SYM(SSL_set1_host),
    SYM(SSL_get0_param),
    SYM(SSL_connect),
    SYM(SSL_accept),
    SYM(SSL_read),
    SYM(SSL_write),
    SYM(SSL_shutdown),
    SYM(SSL_get_error),
    SYM(SSL_get_verify_result),
    SYM(X509_verify_cert_error_string),
    SYM(X509_VERIFY_PARAM_set1_ip_asc),
    SYM(X509_STORE_add_cert),
    SYM(X509_free),
    SYM(PEM_read_bio_X509),
    SYM(PEM_read_bio_PrivateKey),
    SYM(EVP_PKEY_free),
    SYM(BIO_new_mem_buf),
    SYM(BIO_free),
    SYM(ERR_get_error),
    SYM(ERR_clear_error),
    SYM(ERR_error_string_n),
};
#undef SYM

/* libssl's handle resolves libcrypto's symbols too (dlsym searches a library's dependencies). */
static struct dlib ossl_lib = DLIB_INIT("libssl.so.3", "libssl3", ossl_syms, false);

static void ignore_sigpipe(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}

int ossl_load(struct diag *d)
{
    int r = dlib_pin(&ossl_lib, d);
    if (r < 0)
        return r;
    ignore_sigpipe();
    return 0;
}

bool ossl_loaded(void)
{
    return dlib_loaded(&ossl_lib);
}

void ossl_errors(char *buf, size_t n)
{
    unsigned long e = ossl.ERR_get_error();
    if (!e) {
        snprintf(buf, n, "unknown TLS error");
        return;
    }
    ossl.ERR_error_string_n(e, buf, n);
    ossl.ERR_clear_error();
}

int ossl_fail(struct diag *d, const char *what)
{
    char why[256];
    ossl_errors(why, sizeof(why));
    return diag_fail(d, -EINVAL, "%s: %s", what, why);
}

int ossl_use_identity_pem(SSL_CTX *ctx, const char *cert, const char *key, const char *cert_what,
                          const char *key_what, struct diag *d)
{
    BIO *bio = ossl.BIO_new_mem_buf(cert, (int)strlen(cert));
    if (!bio)
        return -ENOMEM;
    X509 *x = ossl.PEM_read_bio_X509(bio, NULL, NULL, NULL);
    int ok = x && ossl.SSL_CTX_use_certificate(ctx, x);
    if (x)
        ossl.X509_free(x);
    while (ok && (x = ossl.PEM_read_bio_X509(bio, NULL, NULL, NULL))) /* the context takes x */
        ok = ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 0, x) == 1;
    ossl.BIO_free(bio);
    if (!ok)
        return ossl_fail(d, cert_what);
    ossl.ERR_clear_error(); /* the end of the bundle reads as an error */
    bio = ossl.BIO_new_mem_buf(key, (int)strlen(key));
    if (!bio)
        return -ENOMEM;
    EVP_PKEY *k = ossl.PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    ok = k && ossl.SSL_CTX_use_PrivateKey(ctx, k);
    if (k)
        ossl.EVP_PKEY_free(k);
    ossl.BIO_free(bio);
    return ok ? 0 : ossl_fail(d, key_what);
}
