internal import CCurl
import HTTPTypes

/// Owns one `CURL` easy handle and its error buffer; recycled between transfers.
///
/// Why `@unchecked Sendable` is safe: libcurl lets a handle move between threads as long as one
/// thread at a time uses it, and so does LoginKit. A caller takes a spare handle from the driver's
/// list under its lock, or makes and sets up a new one (`CurlDriver.takeHandle`), configures it
/// alone, and hands it to the driver thread inside its `Transfer` under the driver's lock; that
/// thread alone uses it while the transfer runs, and puts it back under the list's lock once it
/// has left the multi handle (`CurlDriver.recycle`). A caller whose transfer was never queued
/// (configuration refused, cancelled, shut down) puts it back itself. Each hand-off goes through a
/// lock, which orders the threads' accesses. `deinit` (`curl_easy_cleanup`) runs on whichever thread
/// drops the last reference — a handle not kept (the list full, the thread stopped) or its last
/// transfer's — always after the handle left the multi handle, with no other thread holding it.
///
/// A handle is set up once with the client's options (`applyClientOptions`), which are the same
/// for every request of the client; a transfer then sets only its own (URL, proxy, method and body,
/// headers, callback context), and every one of those on every transfer, so nothing of a previous
/// request carries over. Recycling does not call `curl_easy_reset`: that freed and copied again a
/// dozen options per request (docs/benchmarks.md, "HTTP").
final class EasyHandle: @unchecked Sendable {  // safe: see the proof above
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The proxy choice last set on this handle (`true`: loopback, no proxy); `nil` before the first.
    var bypassesProxy: Bool?
    /// The connection choice last set on this handle (`true`: a fresh connection, closed after the
    /// transfer); libcurl's default, `false`, on a new handle; `nil` when unknown.
    var freshConnection: Bool? = false
    /// The header lines last built for a request on this handle, with the request's fields and
    /// body choice they were built from: the next request with the same ones reuses them
    /// (`Transfer`). Owned by the handle: freed when replaced and in `deinit`, after libcurl's
    /// pointer to them was replaced or the handle cleaned up.
    private var kept: (lines: UnsafeMutablePointer<curl_slist>, fields: HTTPFields, sendsBody: Bool)?
    /// The client certificate and key libcurl reads in place (their blobs are not copied): held for
    /// as long as the handle lives, and released only after `curl_easy_cleanup` in `deinit` (a
    /// deinitializer's body runs before the stored properties are released).
    private var credential: ClientCredential?

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// Sets the options every request of a client shares, with the client certificate and key the
    /// client read when it was created (`credential`; `nil`: none); the first code libcurl refused,
    /// or `CURLE_OK`. A handle whose options were refused is not used.
    func applyClientOptions(_ configuration: CurlHTTPClient.Configuration, credential: ClientCredential?) -> CURLcode {
        var options = OptionSetter(raw: raw)
        options.long(CURLOPT_NOSIGNAL, 1)
        options.string(CURLOPT_PROTOCOLS_STR, "http,https")
        options.long(CURLOPT_FOLLOWLOCATION, 0)
        options.long(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.clampedMilliseconds)
        // No CURLOPT_TIMEOUT_MS: the total timeout is the driver's (`CurlLoop`), which reads what
        // has arrived before it declares one; libcurl's would drop an answer already in the socket.
        options.offset(CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maximumResponseSize))
        options.long(CURLOPT_SSL_VERIFYPEER, 1)
        options.long(CURLOPT_SSL_VERIFYHOST, 2)
        options.long(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        if let caFile = configuration.tls.caFile { options.string(CURLOPT_CAINFO, caFile) }
        if let caDirectory = configuration.tls.caDirectory { options.string(CURLOPT_CAPATH, caDirectory) }
        if let pin = configuration.tls.pinnedPublicKey { options.string(CURLOPT_PINNEDPUBLICKEY, pin) }
        // The bytes read when the client was created, never the files' paths: libcurl would open
        // those again, following links, for every new connection.
        if let credential {
            self.credential = credential
            options.blob(CURLOPT_SSLCERT_BLOB, credential.certificate)
            options.string(CURLOPT_SSLCERTTYPE, "PEM")
            options.blob(CURLOPT_SSLKEY_BLOB, credential.key)
            options.string(CURLOPT_SSLKEYTYPE, "PEM")
            // An empty passphrase: an encrypted key then fails to load (CURLE_SSL_CERTPROBLEM)
            // instead of OpenSSL asking for its passphrase on the terminal from the driver thread.
            options.string(CURLOPT_KEYPASSWD, "")
        }
        options.pointer(CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer))
        options.callback(CURLOPT_WRITEFUNCTION, transferWriteCallback)
        options.callback(CURLOPT_HEADERFUNCTION, transferHeaderCallback)
        return options.failed
    }

    /// The kept header lines, when they were built from `fields` (compared by `same`) and the same
    /// body choice.
    func keptHeaderLines(for fields: HTTPFields, sendsBody: Bool, same: (HTTPFields, HTTPFields) -> Bool) -> UnsafeMutablePointer<curl_slist>? {
        guard let kept, kept.sendsBody == sendsBody, same(kept.fields, fields) else { return nil }
        return kept.lines
    }

    /// Keeps `lines`, built from `fields`, for the transfer about to use them and the next ones with
    /// the same fields (`nil`: keeps nothing); frees the lines they replace (no transfer uses them
    /// any more: a handle serves one transfer at a time, and the caller sets the new ones before it
    /// runs).
    func keepHeaderLines(_ lines: UnsafeMutablePointer<curl_slist>?, fields: HTTPFields, sendsBody: Bool) {
        if let old = kept?.lines, old != lines { curl_slist_free_all(old) }
        kept = lines.map { ($0, fields, sendsBody) }
    }

    /// Drops what pointed into the finished transfer (the `Transfer` the callbacks reach; the header
    /// list stays with the handle), so that no stale pointer stays on a spare handle.
    func detachFromTransfer() {
        var options = OptionSetter(raw: raw)  // setting NULL cannot be refused
        options.list(CURLOPT_HTTPHEADER, nil)
        options.pointer(CURLOPT_WRITEDATA, nil)
        options.pointer(CURLOPT_HEADERDATA, nil)
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(raw)
        if let lines = kept?.lines { curl_slist_free_all(lines) }
        errorBuffer.deallocate()
    }
}

/// Sets options on one easy handle through the typed shims and keeps the first code libcurl
/// refused (`failed`), so that a caller sets them all and checks once.
struct OptionSetter {
    let raw: UnsafeMutableRawPointer
    private(set) var failed: CURLcode = CURLE_OK

    init(raw: UnsafeMutableRawPointer) {
        self.raw = raw
    }

    private mutating func check(_ code: CURLcode) {
        if code != CURLE_OK && failed == CURLE_OK { failed = code }
    }

    mutating func long(_ option: CURLoption, _ value: Int) {
        check(loginkit_curl_easy_setopt_long(raw, option, value))
    }

    /// libcurl copies strings; `nil` restores the option's default.
    mutating func string(_ option: CURLoption, _ value: String?) {
        guard let value else {
            check(loginkit_curl_easy_setopt_string(raw, option, nil))
            return
        }
        let raw = self.raw
        check(value.withCString { loginkit_curl_easy_setopt_string(raw, option, $0) })
    }

    mutating func offset(_ option: CURLoption, _ value: curl_off_t) {
        check(loginkit_curl_easy_setopt_off_t(raw, option, value))
    }

    mutating func pointer(_ option: CURLoption, _ value: UnsafeMutableRawPointer?) {
        check(loginkit_curl_easy_setopt_pointer(raw, option, value))
    }

    /// libcurl reads the bytes in place, without copying them: the handle holds `bytes` for as long
    /// as libcurl may read them (`EasyHandle.credential`).
    mutating func blob(_ option: CURLoption, _ bytes: CredentialBytes) {
        check(loginkit_curl_easy_setopt_blob_nocopy(raw, option, bytes.start, bytes.count))
    }

    mutating func list(_ option: CURLoption, _ value: UnsafeMutablePointer<curl_slist>?) {
        check(loginkit_curl_easy_setopt_slist(raw, option, value))
    }

    mutating func callback(_ option: CURLoption, _ value: loginkit_curl_data_callback) {
        check(loginkit_curl_easy_setopt_callback(raw, option, value))
    }
}
