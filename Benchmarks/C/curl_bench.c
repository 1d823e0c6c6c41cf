/* The C libcurl peer of `make bench`: POSTs a token-sized JSON body to URL, N times.
 *
 *   curl_bench easy  URL N        one easy handle, one request after another (keep-alive)
 *   curl_bench multi URL N C      one multi handle, C requests in flight, handles reused
 *
 * Prints one JSON line: requests, seconds, p50_us, p99_us. Built by Benchmarks/run.py with gcc -O2.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char body[] = "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"rt-0123456789abcdef0123456789abcdef\",\"client_id\":\"loginkit-cli\"}";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t discard(char *data, size_t size, size_t count, void *user) {
    (void)data; (void)user;
    return size * count;
}

static struct curl_slist *headers;

static CURL *make_handle(const char *url) {
    CURL *handle = curl_easy_init();
    curl_easy_setopt(handle, CURLOPT_URL, url);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, (long)(sizeof body - 1));
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    return handle;
}

/* Puts the value of rank k at index k of values[lower..upper], no larger value before it and no
   smaller one after it (Hoare's selection, the middle element as the pivot): in place, where
   qsort (glibc's merge sort) allocated a copy of the whole array, which the peak RSS counted.
   The Swift peers select the same way (BenchCore's LatencySlots). */
static void select_rank(double *values, long lower, long upper, long k) {
    while (lower < upper) {
        double pivot = values[lower + (upper - lower) / 2];
        long i = lower, j = upper;
        while (i <= j) {
            while (values[i] < pivot) i++;
            while (values[j] > pivot) j--;
            if (i <= j) {
                double swap = values[i];
                values[i] = values[j];
                values[j] = swap;
                i++;
                j--;
            }
        }
        if (k <= j) upper = j;
        else if (k >= i) lower = i;
        else return;
    }
}

static void report(long n, double seconds, double *latencies) {
    long low = n / 2, high = (long)(n * 0.99);
    if (high > n - 1) high = n - 1;
    select_rank(latencies, 0, n - 1, low);
    select_rank(latencies, low, n - 1, high);
    printf("{\"requests\": %ld, \"seconds\": %.6f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", n, seconds,
           latencies[low] * 1e6, latencies[high] * 1e6);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: curl_bench easy URL N | multi URL N C\n");
        return 2;
    }
    const char *url = argv[2];
    long n = atol(argv[3]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    headers = curl_slist_append(NULL, "Content-Type: application/json");
    double *latencies = calloc(n, sizeof *latencies);
    if (!latencies || n <= 0) return 2;

    if (strcmp(argv[1], "easy") == 0) {
        CURL *handle = make_handle(url);
        double start = now();
        for (long i = 0; i < n; i++) {
            double t = now();
            CURLcode code = curl_easy_perform(handle);
            latencies[i] = now() - t;
            if (code != CURLE_OK) { fprintf(stderr, "curl: %s\n", curl_easy_strerror(code)); return 1; }
        }
        report(n, now() - start, latencies);
        curl_easy_cleanup(handle);
    } else if (strcmp(argv[1], "multi") == 0 && argc == 5) {
        long in_flight = atol(argv[4]);
        CURLM *multi = curl_multi_init();
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, in_flight);
        double *started = calloc(in_flight, sizeof *started);
        CURL **handles = calloc(in_flight, sizeof *handles);
        long sent = 0, done = 0;
        double start = now();
        for (long i = 0; i < in_flight && sent < n; i++, sent++) {
            handles[i] = make_handle(url);
            curl_easy_setopt(handles[i], CURLOPT_PRIVATE, (void *)i);
            started[i] = now();
            curl_multi_add_handle(multi, handles[i]);
        }
        while (done < n) {
            int running = 0, queued = 0;
            curl_multi_perform(multi, &running);
            CURLMsg *message;
            while ((message = curl_multi_info_read(multi, &queued))) {
                if (message->msg != CURLMSG_DONE) continue;
                if (message->data.result != CURLE_OK) {
                    fprintf(stderr, "curl: %s\n", curl_easy_strerror(message->data.result));
                    return 1;
                }
                void *slot_pointer;
                curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &slot_pointer);
                long slot = (long)slot_pointer;
                latencies[done++] = now() - started[slot];
                curl_multi_remove_handle(multi, handles[slot]);
                if (sent < n) {
                    sent++;
                    started[slot] = now();
                    curl_multi_add_handle(multi, handles[slot]);
                }
            }
            if (done < n) curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }
        report(n, now() - start, latencies);
    } else {
        fprintf(stderr, "usage: curl_bench easy URL N | multi URL N C\n");
        return 2;
    }
    curl_global_cleanup();
    return 0;
}
