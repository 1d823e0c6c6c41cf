// Typed, non-variadic wrappers over libcurl's variadic setopt/getinfo, for Swift.
// Each wrapper fixes the argument type libcurl documents for the options it is used with.
#ifndef LOGINKIT_CCURL_SHIM_H
#define LOGINKIT_CCURL_SHIM_H

#include <curl/curl.h>
#include <openssl/crypto.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/// Names the calling thread (Linux: what `top -H`, `perf` and debuggers show); elsewhere nothing.
static inline void loginkit_name_current_thread(const char *name) {
#ifdef __linux__
    (void)prctl(PR_SET_NAME, name, 0, 0, 0);
#else
    (void)name;
#endif
}

/// Frees OpenSSL's state for the calling thread (its error queue above all). The driver thread
/// calls it before it reports itself stopped: a process that exits right after the client's
/// `shutdown()` returned would otherwise still hold that state in a thread being torn down, which
/// LeakSanitizer reported as a leak when the machine was loaded (libcurl uses OpenSSL here: the
/// package requires libcurl4-openssl-dev).
static inline void loginkit_tls_thread_stop(void) {
    OPENSSL_thread_stop();
}

typedef size_t (*loginkit_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);

static inline CURLcode loginkit_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode loginkit_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode loginkit_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode loginkit_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// Sets a `struct curl_blob` option to `length` bytes at `data` without copying them
/// (CURL_BLOB_NOCOPY): libcurl reads them where they are, so the caller keeps them unchanged for as
/// long as the handle may use them (until `curl_easy_cleanup` or the option is set again).
static inline CURLcode loginkit_curl_easy_setopt_blob_nocopy(CURL *handle, CURLoption option, const void *data,
                                                             size_t length) {
    struct curl_blob blob;
    blob.data = (void *)data;
    blob.len = length;
    blob.flags = CURL_BLOB_NOCOPY;
    return curl_easy_setopt(handle, option, &blob);
}

/// Overwrites `length` bytes at `data` with zeros in a way the compiler may not drop as a dead
/// store (OpenSSL's `OPENSSL_cleanse`): for buffers that held a private key.
static inline void loginkit_secure_zero(void *data, size_t length) {
    OPENSSL_cleanse(data, length);
}

static inline CURLcode loginkit_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode loginkit_curl_easy_setopt_callback(CURL *handle, CURLoption option,
                                                          loginkit_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode loginkit_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode loginkit_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

#endif
