#ifndef CBENCH_H
#define CBENCH_H
#include <stddef.h>
#include <stdint.h>

/// The C floor of a durable save: write `bytes` to `<directory>/c-floor.tmp`, fsync, rename to
/// `<directory>/c-floor.json`, fsync the directory. Returns 0, or -1 with errno set.
int cbench_durable_write(const uint8_t *bytes, size_t count, const char *directory);

/// Allocations counted by Benchmarks/C/malloc_count.c when it is preloaded; -1 when it is not.
long long cbench_malloc_count(void);

/// OpenSSL's P-256 verify alone, as `openssl speed` times it but in this process: a fresh key signs
/// one SHA-256 digest, then `count` `EVP_PKEY_verify` calls on one context initialised once (after
/// 200 to warm up). Returns the µs per verify, or -1 if OpenSSL failed or a verify did not succeed.
double cbench_openssl_p256_verify_us(int count);

/// OpenSSL's ES256 signing alone, in this process: what one DPoP proof's signature costs at the
/// least. A fresh P-256 key; each signature is one `EVP_DigestSignInit` (SHA-256) and one
/// `EVP_DigestSign` of a `signing_input_length`-byte input (a JWS signing input of that size) on
/// one context allocated once, `count` of them after 200 to warm up. Returns the µs per signature,
/// or -1 if OpenSSL failed.
double cbench_openssl_es256_sign_us(size_t signing_input_length, int count);

/// Prints an HTTP run's figures as one JSON line with `printf`, as the C peers print theirs (a
/// figure that is not finite as `null`), and flushes standard output.
void cbench_emit_http(double requests, double seconds, double p50_us, double p99_us, double cpu_s_per_10k);

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the machine, so that times
/// taken in several processes compare.
uint64_t cbench_monotonic_ns(void);

#endif
