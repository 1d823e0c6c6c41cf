#define _GNU_SOURCE
#include "cbench.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cbench_durable_write(const uint8_t *bytes, size_t count, const char *directory) {
    char temporary[PATH_MAX], final[PATH_MAX];
    snprintf(temporary, sizeof temporary, "%s/c-floor.tmp", directory);
    snprintf(final, sizeof final, "%s/c-floor.json", directory);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t written = 0;
    while (written < count) {
        ssize_t n = write(fd, bytes + written, count - written);
        if (n < 0) { close(fd); return -1; }
        written += (size_t)n;
    }
    if (fsync(fd) != 0) { close(fd); return -1; }
    close(fd);
    if (rename(temporary, final) != 0) return -1;
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    int result = fsync(dir);
    close(dir);
    return result;
}

/* One JSON member: a number, or null when it is not finite (JSON has no NaN or infinity). */
static void emit_member(const char *name, double value, const char *after) {
    if (isfinite(value)) printf("\"%s\": %.9g%s", name, value, after);
    else printf("\"%s\": null%s", name, after);
}

void cbench_emit_http(double requests, double seconds, double p50_us, double p99_us, double cpu_s_per_10k) {
    printf("{");
    emit_member("cpu_s_per_10k", cpu_s_per_10k, ", ");
    emit_member("p50_us", p50_us, ", ");
    emit_member("p99_us", p99_us, ", ");
    emit_member("requests", requests, ", ");
    emit_member("seconds", seconds, "}\n");
    fflush(stdout);
}

long long cbench_malloc_count(void) {
    long long (*counter)(void) = (long long (*)(void))dlsym(RTLD_DEFAULT, "loginkit_malloc_count");
    return counter ? counter() : -1;
}

double cbench_openssl_p256_verify_us(int count) {
    double result = -1;
    unsigned char digest[SHA256_DIGEST_LENGTH], signature[128];
    size_t signatureLength = sizeof signature;
    SHA256((const unsigned char *)"header.payload", 14, digest);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    EVP_PKEY_CTX *signer = key ? EVP_PKEY_CTX_new(key, NULL) : NULL;
    EVP_PKEY_CTX *verifier = key ? EVP_PKEY_CTX_new(key, NULL) : NULL;
    if (!signer || !verifier || EVP_PKEY_sign_init(signer) != 1
        || EVP_PKEY_sign(signer, signature, &signatureLength, digest, sizeof digest) != 1
        || EVP_PKEY_verify_init(verifier) != 1) goto done;
    for (int i = 0; i < 200; i++)
        if (EVP_PKEY_verify(verifier, signature, signatureLength, digest, sizeof digest) != 1) goto done;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < count; i++)
        if (EVP_PKEY_verify(verifier, signature, signatureLength, digest, sizeof digest) != 1) goto done;
    clock_gettime(CLOCK_MONOTONIC, &end);
    result = ((double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3) / count;
done:
    EVP_PKEY_CTX_free(verifier);
    EVP_PKEY_CTX_free(signer);
    EVP_PKEY_free(key);
    return result;
}

/* One ES256 signature of `input`, as a JWS signer makes it: the context initialised for the key
   with SHA-256, then the one-shot sign (hash and ECDSA). 1 on success. */
static int es256_sign_once(EVP_MD_CTX *context, EVP_PKEY *key, const unsigned char *input, size_t length) {
    unsigned char signature[160];
    size_t signatureLength = sizeof signature;
    return EVP_MD_CTX_reset(context) == 1
        && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(context, signature, &signatureLength, input, length) == 1;
}

double cbench_openssl_es256_sign_us(size_t signing_input_length, int count) {
    double result = -1;
    unsigned char *input = malloc(signing_input_length > 0 ? signing_input_length : 1);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (!input || !key || !context || count <= 0) goto done;
    memset(input, 'e', signing_input_length);
    for (int i = 0; i < 200; i++)
        if (!es256_sign_once(context, key, input, signing_input_length)) goto done;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < count; i++)
        if (!es256_sign_once(context, key, input, signing_input_length)) goto done;
    clock_gettime(CLOCK_MONOTONIC, &end);
    result = ((double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3) / count;
done:
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    free(input);
    return result;
}

uint64_t cbench_monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}
