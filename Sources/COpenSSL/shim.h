// OpenSSL 3 for Swift: the headers LoginKitJOSE uses, plus typed wrappers for the function-like
// macros Swift cannot import.
#ifndef LOGINKIT_COPENSSL_SHIM_H
#define LOGINKIT_COPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/x509.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

/// EVP_PKEY_fromdata selections (composite macros Swift does not import).
static const int loginkit_evp_pkey_public_key = EVP_PKEY_PUBLIC_KEY;
static const int loginkit_evp_pkey_keypair = EVP_PKEY_KEYPAIR;

static inline int loginkit_evp_cipher_ctx_set_gcm_ivlen(EVP_CIPHER_CTX *ctx, int length) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, length, NULL);
}

static inline int loginkit_evp_cipher_ctx_get_gcm_tag(EVP_CIPHER_CTX *ctx, int length, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, length, tag);
}

static inline int loginkit_evp_cipher_ctx_set_gcm_tag(EVP_CIPHER_CTX *ctx, int length, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, length, tag);
}

/// A PEM private key (PKCS#8, PKCS#1 RSA or SEC 1 EC) from memory, or NULL. Encrypted keys fail:
/// the passphrase callback refuses at once, so OpenSSL never prompts on the terminal.
static inline int loginkit_no_passphrase(char *buffer, int size, int rwflag, void *user) {
    (void)buffer; (void)size; (void)rwflag; (void)user;
    return -1;
}

static inline EVP_PKEY *loginkit_read_private_key_pem(const void *bytes, int length) {
    BIO *bio = BIO_new_mem_buf(bytes, length);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, loginkit_no_passphrase, NULL);
    BIO_free(bio);
    return key;
}

#endif
