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
