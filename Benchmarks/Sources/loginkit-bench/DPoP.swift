// The DPoP measurements of loginkit-bench: one proof against OpenSSL's ES256 signing floor, and an
// authorized request (AuthService.send, DPoP-bound) against a plain one at 64 in flight.
import BenchCore
import CBench
import Foundation
import Synchronization
@_spi(Benchmarks) import LoginKit
import LoginKitDevServer

// MARK: One proof

/// `dpop-proof <count>`: one DPoP proof (ES256: the header and claims built, a random `jti`, the
/// access token's hash, the signature, base64url) against what its signature alone costs OpenSSL —
/// `EVP_DigestSignInit` and `EVP_DigestSign` of a signing input of the same size, in C, in this
/// process. Five batches of each, interleaved; the medians in µs.
func benchDPoPProof(count: Int) throws {
    let bench = try DPoPProofBench()
    let sample = try bench.proof()
    guard let lastDot = sample.utf8.lastIndex(of: UInt8(ascii: ".")) else { throw BenchError("the proof is not a compact JWS") }
    let signingInputLength = sample.utf8.distance(from: sample.utf8.startIndex, to: lastDot)
    for _ in 0..<200 { blackHole(try bench.proof()) }  // warm
    let batches = 5
    let perBatch = max(1, count / batches)
    let clock = ContinuousClock()
    var kit: [Double] = [], floor: [Double] = []
    for _ in 0..<batches {
        let elapsed = try clock.measure { for _ in 0..<perBatch { blackHole(try bench.proof()) } }
        kit.append(seconds(elapsed) / Double(perBatch) * 1e6)
        let openSSL = cbench_openssl_es256_sign_us(signingInputLength, Int32(perBatch))
        guard openSSL > 0 else { throw BenchError("OpenSSL's ES256 signing failed") }
        floor.append(openSSL)
    }
    emit(["loginkit_us": percentile(kit, 0.5), "openssl_us": percentile(floor, 0.5), "signing_input_bytes": Double(signingInputLength)])
}

// MARK: Authorized requests

/// Claims request indices for the measuring tasks.
final class RequestIndex: Sendable {
    let next = Atomic<Int>(0)
}

/// Sends through `base`, except requests for `path`: those are kept, not sent, and answered 200
/// with an empty body. What `AuthService.send` makes of a request — its `Authorization` and a
/// fresh `DPoP` proof — is thus captured, for the plain peer to send as it is.
final class CapturingTransport: HTTPTransport {
    let base: CurlHTTPClient
    let path: String
    private let captured = Mutex<[HTTPRequest]>([])

    init(base: CurlHTTPClient, path: String) {
        self.base = base
        self.path = path
    }

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        guard request.path == path else { return try await base.send(request, body: body) }
        captured.withLock { $0.append(request) }
        return (HTTPResponse(status: .ok), Data())
    }

    /// The requests kept so far, in order; forgets them.
    func take() -> [HTTPRequest] {
        captured.withLock { requests in
            defer { requests = [] }
            return requests
        }
    }
}

/// `requests` operations, `inFlight` at once (`operation(i)` for i in 0..<requests); the rate per
/// second.
func ratePerSecond(requests: Int, inFlight: Int, _ operation: @escaping @Sendable (Int) async throws -> Void) async throws -> Double {
    let index = RequestIndex()
    let clock = ContinuousClock()
    let started = clock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<inFlight {
            group.addTask {
                while true {
                    let claimed = index.next.wrappingAdd(1, ordering: .relaxed).oldValue
                    guard claimed < requests else { return }
                    try await operation(claimed)
                }
            }
        }
        try await group.waitForAll()
    }
    return Double(requests) / seconds(clock.now - started)
}

/// `authorized <requests> <in-flight>`: GET `/api/resource` of the dev server (in this process),
/// `inFlight` at once, two ways: `AuthService.send` with a DPoP-bound profile (ES256; each request
/// gets the token and a fresh proof), and a plain `CurlHTTPClient.send` of the same request with
/// its header fields made beforehand. The dev server refuses a proof it has seen (its `jti`), so
/// the plain peer cannot send one fixed proof again and again: its headers are what
/// `AuthService.send` made for each of its requests, captured unsent just before its run. Both
/// peers thus cost the server the same (a token lookup and a proof check per request); what
/// differs is LoginKit's work on the client side. Warm-up, then plain, then authorized; requests
/// per second of each.
///
/// `bearer` (the default in `make bench`'s `authorized_request_conc_vs_plain`): the same with a
/// bearer profile — the request path's own work (the token, the header), without the proof that
/// `dpop-proof` measures; `dpop`: with a DPoP-bound profile, a fresh proof per request.
func benchAuthorizedRequests(requests: Int, inFlight: Int, dpop: Bool) async throws {
    try await DevServer.withServer(configuration: .quiet) { server in
        try await CurlHTTPClient.withClient { http in
            var configuration = OAuth2API.Configuration(issuer: server.issuer, clientID: "loginkit-cli")
            if dpop { configuration.dpopAlgorithm = .es256 }
            let store = InMemoryTokenStore()
            let service = AuthService(api: OAuth2API(configuration: configuration, transport: http), store: store)
            _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
            let resource = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/api/resource")

            // The plain peer's requests: made by a service on the same profile, kept unsent.
            let capture = CapturingTransport(base: http, path: "/api/resource")
            let capturing = AuthService(api: OAuth2API(configuration: configuration, transport: capture), store: store)
            for _ in 0..<(requests + inFlight) { _ = try await capturing.send(resource) }
            let prepared = capture.take()
            let scheme = dpop ? "DPoP " : "Bearer "
            guard prepared.count == requests + inFlight, prepared.allSatisfy({ $0.headerFields[.authorization]?.hasPrefix(scheme) == true }) else {
                throw BenchError("the captured requests are not authorized with \(scheme)")
            }

            let authorized: @Sendable (Int) async throws -> Void = { _ in
                let (response, _) = try await service.send(resource)
                guard response.status.code == 200 else { throw BenchError("authorized request: HTTP \(response.status.code)") }
            }
            let plain: @Sendable (Int) async throws -> Void = { index in
                let (response, _) = try await http.send(prepared[index], body: nil)
                guard response.status.code == 200 else { throw BenchError("plain request: HTTP \(response.status.code)") }
            }
            // Warm-up: the connections open, the token cached.
            _ = try await ratePerSecond(requests: inFlight, inFlight: inFlight) { try await plain(requests + $0) }
            _ = try await ratePerSecond(requests: inFlight, inFlight: inFlight, authorized)
            let plainRate = try await ratePerSecond(requests: requests, inFlight: inFlight, plain)
            let authorizedRate = try await ratePerSecond(requests: requests, inFlight: inFlight, authorized)
            emit(["authorized_per_s": authorizedRate, "plain_per_s": plainRate, "requests": Double(requests), "in_flight": Double(inFlight)])
        }
    }
}
