internal import CCurl

/// Owns one `CURL` easy handle and its error buffer; recycled between transfers on the driver
/// thread. Never leaves that thread.
///
/// A handle is set up once with the client's options (`applyClientOptions`), which are the same
/// for every request of the client; a transfer then sets only its own (URL, proxy, method and body,
/// headers, callback context), and every one of those on every transfer, so nothing of a previous
/// request carries over. Recycling does not call `curl_easy_reset`: that freed and copied again a
/// dozen options per request (docs/benchmarks.md, "HTTP").
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The proxy choice last set on this handle (`true`: loopback, no proxy); `nil` before the first.
    var bypassesProxy: Bool?

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// Sets the options every request of a client shares; the first code libcurl refused, or
    /// `CURLE_OK`. A handle whose options were refused is not used.
    func applyClientOptions(_ configuration: CurlHTTPClient.Configuration) -> CURLcode {
        var failed: CURLcode = CURLE_OK
        func check(_ code: CURLcode) { if code != CURLE_OK && failed == CURLE_OK { failed = code } }
        func setLong(_ option: CURLoption, _ value: Int) { check(loginkit_curl_easy_setopt_long(raw, option, value)) }
        func setString(_ option: CURLoption, _ value: String) {
            check(value.withCString { loginkit_curl_easy_setopt_string(raw, option, $0) })  // libcurl copies strings
        }
        setLong(CURLOPT_NOSIGNAL, 1)
        setString(CURLOPT_PROTOCOLS_STR, "http,https")
        setLong(CURLOPT_FOLLOWLOCATION, 0)
        setLong(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.clampedMilliseconds)
        setLong(CURLOPT_TIMEOUT_MS, configuration.totalTimeout.clampedMilliseconds)
        check(loginkit_curl_easy_setopt_off_t(raw, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maximumResponseSize)))
        setLong(CURLOPT_SSL_VERIFYPEER, 1)
        setLong(CURLOPT_SSL_VERIFYHOST, 2)
        setLong(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        if let caFile = configuration.tls.caFile { setString(CURLOPT_CAINFO, caFile) }
        if let caDirectory = configuration.tls.caDirectory { setString(CURLOPT_CAPATH, caDirectory) }
        if let pin = configuration.tls.pinnedPublicKey { setString(CURLOPT_PINNEDPUBLICKEY, pin) }
        check(loginkit_curl_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer))
        check(loginkit_curl_easy_setopt_callback(raw, CURLOPT_WRITEFUNCTION, transferWriteCallback))
        check(loginkit_curl_easy_setopt_callback(raw, CURLOPT_HEADERFUNCTION, transferHeaderCallback))
        return failed
    }

    /// Drops what pointed into the finished transfer (its header list, freed next, and the
    /// `Transfer` the callbacks reach), so that no stale pointer stays on a spare handle.
    func detachFromTransfer() {
        _ = loginkit_curl_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, nil)
        _ = loginkit_curl_easy_setopt_pointer(raw, CURLOPT_WRITEDATA, nil)
        _ = loginkit_curl_easy_setopt_pointer(raw, CURLOPT_HEADERDATA, nil)
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }
}
