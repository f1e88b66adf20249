/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenSSL, loaded at first use (base-dlib.h): the table of every libssl and libcrypto call
 * gpuplane makes, shared by the Kubernetes client (src/kube, the client side) and the HTTP server
 * (src/http, the server side), so a daemon that uses neither maps neither library and one that uses
 * both resolves them once. Each pointer is typed after OpenSSL's own header, so a call through the
 * table is checked like a direct call.
 *
 * OpenSSL pins itself in memory at initialisation, so it is loaded for good.
 */
#pragma once

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stddef.h>

#include "base-diag.h"
#include "base-macro.h"

struct ossl_api {
    /* contexts */
    typeof(TLS_client_method) *TLS_client_method;
    typeof(TLS_server_method) *TLS_server_method;
    typeof(SSL_CTX_new) *SSL_CTX_new;
    typeof(SSL_CTX_free) *SSL_CTX_free;
    typeof(SSL_CTX_ctrl) *SSL_CTX_ctrl;
    typeof(SSL_CTX_set_options) *SSL_CTX_set_options;
    typeof(SSL_CTX_set_verify) *SSL_CTX_set_verify;
    typeof(SSL_CTX_set_default_verify_paths) *SSL_CTX_set_default_verify_paths;
    typeof(SSL_CTX_load_verify_locations) *SSL_CTX_load_verify_locations;
    typeof(SSL_CTX_get_cert_store) *SSL_CTX_get_cert_store;
    typeof(SSL_CTX_set_client_CA_list) *SSL_CTX_set_client_CA_list;
    typeof(SSL_load_client_CA_file) *SSL_load_client_CA_file;
    typeof(SSL_CTX_use_certificate) *SSL_CTX_use_certificate;
    typeof(SSL_CTX_use_PrivateKey) *SSL_CTX_use_PrivateKey;
    typeof(SSL_CTX_use_certificate_chain_file) *SSL_CTX_use_certificate_chain_file;
    typeof(SSL_CTX_use_PrivateKey_file) *SSL_CTX_use_PrivateKey_file;
    typeof(SSL_CTX_check_private_key) *SSL_CTX_check_private_key;
    typeof(SSL_CTX_set_alpn_protos) *SSL_CTX_set_alpn_protos;
    typeof(SSL_CTX_set_session_id_context) *SSL_CTX_set_session_id_context;
    /* connections */
    typeof(SSL_new) *SSL_new;
    typeof(SSL_free) *SSL_free;
    typeof(SSL_set_fd) *SSL_set_fd;
    typeof(SSL_ctrl) *SSL_ctrl;
    typeof(SSL_set1_host) *SSL_set1_host;
    typeof(SSL_get0_param) *SSL_get0_param;
    typeof(SSL_connect) *SSL_connect;
    typeof(SSL_accept) *SSL_accept;
    typeof(SSL_read) *SSL_read;
    typeof(SSL_write) *SSL_write;
    typeof(SSL_shutdown) *SSL_shutdown;
    typeof(SSL_get_error) *SSL_get_error;
    typeof(SSL_get_verify_result) *SSL_get_verify_result;
    /* certificates, keys, errors */
    typeof(X509_verify_cert_error_string) *X509_verify_cert_error_string;
    typeof(X509_VERIFY_PARAM_set1_ip_asc) *X509_VERIFY_PARAM_set1_ip_asc;
    typeof(X509_STORE_add_cert) *X509_STORE_add_cert;
    typeof(X509_free) *X509_free;
    typeof(PEM_read_bio_X509) *PEM_read_bio_X509;
    typeof(PEM_read_bio_PrivateKey) *PEM_read_bio_PrivateKey;
    typeof(EVP_PKEY_free) *EVP_PKEY_free;
    typeof(BIO_new_mem_buf) *BIO_new_mem_buf;
    typeof(BIO_free) *BIO_free;
    typeof(ERR_get_error) *ERR_get_error;
    typeof(ERR_clear_error) *ERR_clear_error;
    typeof(ERR_error_string_n) *ERR_error_string_n;
};

/* The table; its pointers are NULL until ossl_load() succeeded. */
extern struct ossl_api ossl;

/* Loads libssl.so.3 (and through it libcrypto.so.3) and resolves the table, once; later calls only
 * check it is there. Also makes SIGPIPE ignored unless someone installed a handler: OpenSSL writes
 * to its sockets with write(2), and a peer that closed its end must give EPIPE, not kill the
 * daemon. On failure d names the library and the package to install. */
_wur_ int ossl_load(struct diag *d);

/* Whether OpenSSL is mapped (for tests). */
bool ossl_loaded(void);

/* OpenSSL's queued errors as one line (the first is the cause; "unknown TLS error" when none), the
 * queue emptied. */
void ossl_errors(char *buf, size_t n);

/* Fails d with "<what>: <OpenSSL's errors>" (-EINVAL), the error queue emptied. */
int ossl_fail(struct diag *d, const char *what);

/* Puts a certificate (then its chain) and its key from PEM text into ctx, as a client identity or
 * a server's; cert_what and key_what name them in messages. */
_wur_ int ossl_use_identity_pem(SSL_CTX *ctx, const char *cert, const char *key,
                                const char *cert_what, const char *key_what, struct diag *d);
