internal import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One request: its options, the response being received, and the caller's continuation. Reached
/// from libcurl's callbacks through an unretained pointer; the loop's `transfers` table keeps it
/// alive until the transfer is removed from the multi handle.
///
/// Why `@unchecked Sendable` is safe: a transfer is used by one thread at a time, and handed from
/// one to the next under a lock. The calling task makes and configures it (`CurlHTTPClient.send`:
/// the per-request options are set there, off the driver thread that every transfer of a client
/// goes through), then queues it in a `DriverCommand` under the driver's lock and does not touch it
/// again; from then on only the driver thread does (libcurl's callbacks run on that thread). The
/// caller's local reference lives on until its closure returns, so the last release, and `deinit`,
/// may happen on the caller's thread after the driver is done: reference counting orders that after
/// the driver's last access, and `deinit` only frees lines `recycle` has already released. A
/// transfer refused before it is queued (cancelled, shut down) never leaves its caller.
final class Transfer: @unchecked Sendable {  // safe: see the proof above
    let handle: EasyHandle
    let continuation: Completion
    private let submission: Submission
    private let configuration: CurlHTTPClient.Configuration
    private(set) var body = Data()
    /// The response's fields so far, as bytes (`ReceivedResponse`): the caller's task turns them
    /// into `HTTPFields` on its own thread, since this one bounds the client's throughput.
    private var head: [UInt8] = []
    private var fieldCount = 0
    private var exceededCap = false
    /// The response had more than ``maximumHeaderFields`` fields: the transfer was stopped.
    private var exceededHeaderFields = false
    /// Header lines that may hold a secret, built for this transfer alone (`headerList()`).
    private var ownedHeaderList: UnsafeMutablePointer<curl_slist>?

    /// The most fields a response may have. `HTTPFields` traps at 65,535, and libcurl lets a
    /// response's head reach 300 KB: four-byte lines (`a:` CR LF) would pass the trap. No real
    /// response comes near this.
    static let maximumHeaderFields = 1_000

    /// When the client's total timeout ends this request, in `CLOCK_MONOTONIC` nanoseconds, counted
    /// from when its caller made it; `CurlLoop` enforces it (`UInt64.max`: never).
    let deadline: UInt64

    /// The request's id (`cancel` commands name it).
    var id: UInt64 { submission.id }

    init(submission: Submission, handle: EasyHandle, configuration: CurlHTTPClient.Configuration) {
        self.submission = submission
        self.handle = handle
        self.continuation = submission.continuation
        self.configuration = configuration
        self.deadline = Self.deadline(after: configuration.totalTimeout, from: configuration.monotonicClock())
        head.reserveCapacity(512)
    }

    /// `now` plus `timeout` in nanoseconds, `UInt64.max` when that overflows.
    static func deadline(after timeout: Duration, from now: UInt64) -> UInt64 {
        let (nanoseconds, overflow) = UInt64(timeout.clampedMilliseconds).multipliedReportingOverflow(by: 1_000_000)
        let (sum, overflowAgain) = now.addingReportingOverflow(nanoseconds)
        return overflow || overflowAgain ? .max : sum
    }

    /// Sets this request's options on a handle that holds the client's (`EasyHandle`); returns the
    /// error when an option is refused. Every option a request may change is set here each time.
    func configure() -> NetworkError? {
        var options = OptionSetter(raw: handle.raw)
        handle.errorBuffer[0] = 0
        options.string(CURLOPT_URL, submission.url)
        // The proxy options depend only on whether the destination is loopback (the client's
        // configuration is fixed): set them when the handle's last choice was different or unknown.
        let proxyChoice = handle.bypassesProxy
        handle.bypassesProxy = nil  // unknown until every option below is in
        if proxyChoice != submission.bypassesProxy { configureProxy(&options) }
        // A request with a one-time credential gets a connection of its own, closed after it: libcurl
        // resends a request only on a reused connection that turned out dead, never on a fresh one.
        let fresh = submission.freshConnection
        if handle.freshConnection != fresh {
            handle.freshConnection = nil  // unknown until both options are in
            options.long(CURLOPT_FRESH_CONNECT, fresh ? 1 : 0)
            options.long(CURLOPT_FORBID_REUSE, fresh ? 1 : 0)
        }
        configureMethodAndBody(&options)
        options.list(CURLOPT_HTTPHEADER, headerList())

        let context = Unmanaged.passUnretained(self).toOpaque()
        options.pointer(CURLOPT_WRITEDATA, context)
        options.pointer(CURLOPT_HEADERDATA, context)

        guard options.failed == CURLE_OK else {
            return Self.refusedOption(options.failed)
        }
        handle.bypassesProxy = submission.bypassesProxy
        handle.freshConnection = fresh
        return nil
    }

    static func refusedOption(_ code: CURLcode) -> NetworkError {
        NetworkError(.invalidRequest, "libcurl refused a request option: \(describe(code))", transportCode: Int(code.rawValue))
    }

    /// Both proxy options are set whenever the choice differs from the handle's last one, so a
    /// recycled handle never keeps another destination's. A loopback destination gets
    /// `CURLOPT_PROXY ""` (no proxy, the environment's included) and `CURLOPT_NOPROXY "*"`; any other
    /// the configured proxy (or `NULL`: libcurl's environment lookup) and the `no_proxy` list.
    private func configureProxy(_ options: inout OptionSetter) {
        if submission.bypassesProxy {
            options.string(CURLOPT_PROXY, "")
            options.string(CURLOPT_NOPROXY, "*")
        } else {
            options.string(CURLOPT_PROXY, configuration.proxy)
            options.string(CURLOPT_NOPROXY, Self.noProxy)
        }
    }

    private func configureMethodAndBody(_ options: inout OptionSetter) {
        // The handle may have carried any method and body before: each case sets all of them.
        let method = submission.request.method
        if !sendsBody {
            // Drop an earlier request's body (COPYPOSTFIELDS NULL frees libcurl's copy), then set the
            // method: HTTPGET 1 also turns NOBODY and UPLOAD off; NOBODY 1 makes it HEAD.
            options.offset(CURLOPT_POSTFIELDSIZE_LARGE, -1)
            options.pointer(CURLOPT_COPYPOSTFIELDS, nil)
            options.string(CURLOPT_CUSTOMREQUEST, nil)
            options.long(method == .get ? CURLOPT_HTTPGET : CURLOPT_NOBODY, 1)
        } else {
            options.long(CURLOPT_NOBODY, 0)  // after a HEAD; the post fields below make it a POST
            let body = submission.body ?? Data()
            options.offset(CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            // COPYPOSTFIELDS copies the bytes, so the Data need not outlive this call.
            body.withUnsafeBytes { bytes in
                var empty: UInt8 = 0
                let pointer = bytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }
                withUnsafeMutablePointer(to: &empty) { fallback in
                    options.pointer(CURLOPT_COPYPOSTFIELDS, pointer ?? UnsafeMutableRawPointer(fallback))
                }
            }
            options.string(CURLOPT_CUSTOMREQUEST, method == .post ? nil : method.rawValue)
        }
    }

    /// Whether the request goes out with a body (an empty one included): all but a GET or HEAD
    /// without one.
    private var sendsBody: Bool {
        submission.body != nil || (submission.request.method != .get && submission.request.method != .head)
    }

    /// The request's header lines. The handle keeps them for the next request with the same fields,
    /// byte for byte (a token endpoint's requests carry the same ones each time), unless a field may
    /// hold a secret (`Authorization`, `Proxy-Authorization`, `Cookie`, `DPoP`): such lines belong to
    /// this transfer and are freed when it ends.
    private func headerList() -> UnsafeMutablePointer<curl_slist>? {
        let fields = submission.request.headerFields
        let sendsBody = sendsBody
        if let kept = handle.keptHeaderLines(for: fields, sendsBody: sendsBody, same: Self.sameBytes) { return kept }
        var list: UnsafeMutablePointer<curl_slist>?
        func append(_ line: String) {
            list = line.withCString { curl_slist_append(list, $0) } ?? list
        }
        var hasContentType = false
        var hasUserAgent = false
        var holdsSecret = false
        for field in fields {
            if field.name == .contentType { hasContentType = true }
            if field.name == .userAgent { hasUserAgent = true }
            if Self.mayHoldSecret(field.name) { holdsSecret = true }
            // Header values were validated by HTTPTypes (no CR/LF), so a line cannot be smuggled.
            append(field.value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(field.value)")
        }
        append("Expect:")  // no 100-continue round trip for larger bodies
        // No form default: libcurl would label any body it sends (an empty one for a DELETE too).
        if !hasContentType && sendsBody { append("Content-Type:") }
        // A header line, not CURLOPT_USERAGENT: that option would also go to a proxy in its CONNECT.
        if !hasUserAgent { append("User-Agent: \(configuration.userAgent)") }
        if holdsSecret {
            handle.keepHeaderLines(nil, fields: fields, sendsBody: sendsBody)  // and free what it kept
            ownedHeaderList = list
        } else {
            handle.keepHeaderLines(list, fields: fields, sendsBody: sendsBody)
        }
        return list
    }

    /// Whether `a` and `b` are the same fields in the same order, names and values byte for byte
    /// (`HTTPField`'s `==` compares names without case and values as Unicode-equivalent strings).
    static func sameBytes(_ a: HTTPFields, _ b: HTTPFields) -> Bool {
        a.count == b.count && a.elementsEqual(b) { x, y in sameBytes(x.name.rawName, y.name.rawName) && sameBytes(x.value, y.value) }
    }

    /// Whether two strings hold the same UTF-8 bytes: one `memcmp` for native strings (the generic
    /// `elementsEqual` walked them byte by byte).
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        let compared = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                guard let x = x.baseAddress, let y = y.baseAddress else { return true }  // both empty
                return memcmp(x, y, a.utf8.count) == 0
            }
        }
        return (compared ?? nil) ?? a.utf8.elementsEqual(b.utf8)
    }

    /// Fields whose value may be a secret: never kept on a handle past their transfer.
    static func mayHoldSecret(_ name: HTTPField.Name) -> Bool {
        name == .authorization || name == .proxyAuthorization || name == .cookie || name.canonicalName == "dpop"
    }

    // MARK: Receiving

    /// Appends body bytes; returns `false` (abort) when the cap would be passed.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= configuration.maximumResponseSize else {
            exceededCap = true
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// One response header line as libcurl delivers it, CRLF included. Split on its bytes: the
    /// name ends at the first `:`, the value starts after any spaces and tabs that follow it.
    /// Returns `false` (stop the transfer) when the response has too many fields.
    func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var end = bytes.count
        while end > 0, bytes[end - 1] == UInt8(ascii: "\r") || bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: bytes[..<end])
        if line.starts(with: Self.statusLinePrefix) {
            // A new response (1xx interim, or a proxy's) starts over.
            head.removeAll(keepingCapacity: true)
            fieldCount = 0
            return true
        }
        // A line whose name is not a token (RFC 9110 `tchar`s, what `HTTPField.Name` accepts) is
        // no field: skipped, and not counted.
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), Self.isToken(UnsafeRawBufferPointer(rebasing: line[..<colon])) else {
            return true
        }
        guard fieldCount < Self.maximumHeaderFields else {
            exceededHeaderFields = true
            return false
        }
        var valueStart = colon + 1
        while valueStart < end, line[valueStart] == UInt8(ascii: " ") || line[valueStart] == UInt8(ascii: "\t") { valueStart += 1 }
        ReceivedResponse.appendField(name: UnsafeRawBufferPointer(rebasing: line[..<colon]),
                                     value: UnsafeRawBufferPointer(rebasing: line[valueStart...]), to: &head)
        fieldCount += 1
        return true
    }

    /// Whether `bytes` is a token: one or more of RFC 9110's `tchar`.
    static func isToken(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
                UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
                UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
                true
            default:
                false
            }
        }
    }

    private static let statusLinePrefix: [UInt8] = Array("HTTP/".utf8)

    /// What the caller gets, once libcurl reported the transfer done with `code`.
    func result(code: CURLcode) -> Result<ReceivedResponse, any Error> {
        if exceededHeaderFields {
            return failure(NetworkError(
                .responseTooLarge,
                "the response has more than \(Self.maximumHeaderFields) header fields; the transfer was stopped",
                transportCode: Int(code.rawValue)
            ))
        }
        if exceededCap || code == CURLE_FILESIZE_EXCEEDED {
            return failure(NetworkError(
                .responseTooLarge,
                "the response body is larger than the \(configuration.maximumResponseSize)-byte limit; nothing past it was kept",
                transportCode: Int(code.rawValue)
            ))
        }
        guard code == CURLE_OK else {
            return failure(NetworkError(Self.errorCode(for: code), errorMessage(code), transportCode: Int(code.rawValue)))
        }
        var status = 0
        _ = loginkit_curl_easy_getinfo_long(handle.raw, CURLINFO_RESPONSE_CODE, &status)
        guard (100...999).contains(status) else {
            return failure(NetworkError(.other, "the server sent no valid HTTP status line", transportCode: Int(code.rawValue)))
        }
        return .success(ReceivedResponse(status: status, fieldCount: fieldCount, head: head, body: body))
    }

    /// What the caller gets when the total timeout passed before the transfer finished; `CurlLoop`
    /// asks only after libcurl has read what had arrived (an answer in the socket is not timed out).
    func timedOut() -> Result<ReceivedResponse, any Error> {
        let host = URLParts(submission.url)?.host ?? "the server"
        return failure(NetworkError(
            .timedOut, "request to \(host) timed out: no complete answer within \(configuration.totalTimeout)",
            transportCode: Int(CURLE_OPERATION_TIMEDOUT.rawValue)
        ))
    }

    /// `error`, saying whether any of the request was written to the connection.
    private func failure(_ error: NetworkError) -> Result<ReceivedResponse, any Error> {
        var error = error
        error.requestSent = requestSent
        return .failure(error)
    }

    /// Whether libcurl wrote any of the request to the connection (`CURLINFO_REQUEST_SIZE`, the
    /// bytes of request written, reset when a transfer starts): `false` means the server cannot
    /// have seen it.
    private var requestSent: Bool {
        var size = 0
        _ = loginkit_curl_easy_getinfo_long(handle.raw, CURLINFO_REQUEST_SIZE, &size)
        return size > 0
    }

    /// Frees the header lines this transfer owned (called once libcurl no longer points at them:
    /// the handle was detached, or is being dropped).
    func releaseResources() {
        if let ownedHeaderList { curl_slist_free_all(ownedHeaderList) }
        ownedHeaderList = nil
    }

    deinit {
        releaseResources()
    }

    // MARK: Errors

    private func errorMessage(_ code: CURLcode) -> String {
        let detail = handle.errorBuffer[0] != 0 ? String(cString: handle.errorBuffer) : Self.describe(code)
        let host = URLParts(submission.url)?.host ?? "the server"
        switch Self.errorCode(for: code) {
        case .connectFailed: return "could not connect to \(host): \(detail); check that the server is running"
        case .hostNotFound: return "could not resolve \(host): \(detail); check the URL and DNS"
        case .timedOut: return "request to \(host) timed out: \(detail)"
        case .tls:
            if code == CURLE_SSL_CERTPROBLEM, let certificate = configuration.tls.clientCertificate, let key = configuration.tls.clientKey {
                return "TLS with \(host) failed: the client certificate \(certificate) or its key \(key) could not be used: \(detail); "
                    + "check that both are PEM, that the key is not encrypted and that it belongs to the certificate"
            }
            return "TLS with \(host) failed: \(detail); check the server certificate and the CA settings"
        case .connectionLost: return "the connection to \(host) broke before the response was complete: \(detail)"
        default: return "request to \(host) failed: \(detail)"
        }
    }

    static func describe(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }

    static func errorCode(for code: CURLcode) -> NetworkError.Code {
        switch code {
        case CURLE_COULDNT_CONNECT: .connectFailed
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .hostNotFound
        case CURLE_OPERATION_TIMEDOUT: .timedOut
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED:
            .tls
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2,
            CURLE_HTTP2_STREAM, CURLE_WEIRD_SERVER_REPLY:
            .connectionLost
        case CURLE_FILESIZE_EXCEEDED: .responseTooLarge
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL: .invalidRequest
        default: .other
        }
    }

    /// For destinations that are not loopback: the usual `no_proxy` variable, plus the loopback
    /// names (loopback itself never reaches this list: see `configureProxy`).
    private static let noProxy: String = {
        let fromEnvironment = getenvString("NO_PROXY") ?? getenvString("no_proxy") ?? ""
        let loopback = "localhost,127.0.0.1,::1"
        return fromEnvironment.isEmpty ? loopback : "\(fromEnvironment),\(loopback)"
    }()
}

/// `CLOCK_MONOTONIC` in nanoseconds: what transfer deadlines are measured on.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

private func getenvString(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}

/// A response as the driver thread received it: the status, the fields as bytes, the body. The
/// caller's task makes the `HTTPResponse` (``response()``), so that the driver thread, which every
/// transfer of a client goes through, only copies bytes.
struct ReceivedResponse: Sendable {
    let status: Int
    let fieldCount: Int
    /// Each field: the name's length and the value's (`UInt32`, native byte order), then the
    /// name's bytes and the value's.
    let head: [UInt8]
    let body: Data

    static func appendField(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, to head: inout [UInt8]) {
        // A header line is at most 100 KB (libcurl's CURL_MAX_HTTP_HEADER): the lengths fit.
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: name.count)) { head.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: value.count)) { head.append(contentsOf: $0) }
        head.append(contentsOf: name)
        head.append(contentsOf: value)
    }

    /// The response head, its fields in the order received.
    func response() -> HTTPResponse {
        var fields = HTTPFields()
        fields.reserveCapacity(fieldCount)
        let commonNames = Self.commonNames
        head.withUnsafeBytes { bytes in
            var offset = 0
            while offset + 8 <= bytes.count {
                let nameLength = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
                let valueLength = Int(bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
                let nameStart = offset + 8
                let valueStart = nameStart + nameLength
                offset = valueStart + valueLength
                guard offset <= bytes.count else { break }  // cannot happen: `appendField` wrote them
                let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[nameStart..<valueStart])
                let name: HTTPField.Name
                if let common = commonNames.first(where: { $0.bytes.elementsEqual(nameBytes) }) {
                    name = common.name
                } else if let parsed = HTTPField.Name(String(decoding: nameBytes, as: UTF8.self)) {
                    name = parsed
                } else {
                    continue  // cannot happen: a token
                }
                fields.append(HTTPField(name: name, value: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[valueStart..<offset]), as: UTF8.self)))
            }
        }
        return HTTPResponse(status: .init(code: status), headerFields: fields)
    }

    /// Names servers send in most responses, spelled as they usually spell them. A name received
    /// byte for byte like one of these is that name (the same raw and canonical name
    /// `HTTPField.Name.init` would make, without its validation and lowercasing); any other is
    /// validated and lowercased.
    static let commonNames: [(bytes: [UInt8], name: HTTPField.Name)] = [
        HTTPField.Name.contentType, .contentLength, .date, .server, .connection, .cacheControl,
        .transferEncoding, .vary, .expires, .wwwAuthenticate, .location, .setCookie, .contentEncoding,
        .eTag, .lastModified, .retryAfter, .via, .age,
    ].map { (Array($0.rawName.utf8), $0) }
}

// MARK: libcurl callbacks (C function pointers; the context is an unretained `Transfer`)

// The transfer is reached without a retain and release per call (`_withUnsafeGuaranteedRef`; they
// were a third of the header callback's time): the loop's `transfers` table holds it for as long as
// libcurl can call back with its pointer (until `curl_multi_remove_handle`).

let transferWriteCallback: loginkit_curl_data_callback = { buffer, size, count, context in
    guard let context else { return 0 }
    let length = size * count
    guard length > 0, let buffer else { return length }
    let bytes = UnsafeRawBufferPointer(start: buffer, count: length)
    return Unmanaged<Transfer>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.receiveBody(bytes) } ? length : 0
}

let transferHeaderCallback: loginkit_curl_data_callback = { buffer, size, count, context in
    guard let context else { return 0 }
    let length = size * count
    guard length > 0, let buffer else { return length }
    let bytes = UnsafeRawBufferPointer(start: buffer, count: length)
    return Unmanaged<Transfer>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.receiveHeaderLine(bytes) } ? length : 0
}
