// loginkit-bench: one measurement per run, printed as one JSON line. Benchmarks/run.py starts it
// once per peer and round (interleaved), so each peer's process, CPU time and peak RSS are its own.
//
//   http <loginkit|loginkit-global|ahc|urlsession> <seq|conc> <url> <requests> [in-flight]
//   save <directory> <operations>          IDTokenStore.save, the C floor, Data.write(.atomic), interleaved
//   cached <directory> <calls>             cached validIDToken() (file store, memory store) vs a bare actor call
//   store-scale <directory> <profiles> <operations>
//                                          one profile's token call, save, login and cached token in a
//                                          store of that many profiles (Store.swift)
//   store-procs <directory> <processes> <refreshes> <network-ms>
//                                          that many processes refreshing a profile each (Store.swift)
//   fleet-…                                the fleet store under load (Fleet.swift)
//   verify <loginkit|jwtkit|boringssl|openssl> <RS256|ES256> <count>
//                                          boringssl, openssl: ES256 only, the P-256 verify alone
//   storm <rounds> [dev-server executable] 10 to 100,000 concurrent validIDToken() on an expired token,
//                                          against the dev server in its own process when given
//                                          the `loginkit-dev-server` executable, else in this one;
//                                          LOGINKIT_BENCH_STORM_ONLY=1: the 1000-caller storm alone
//   prepare-cli <store path>               a profile valid for an hour, for the CLI start-up benchmark
//   dpop-proof <count>                     one DPoP proof vs OpenSSL's ES256 signing of the same-size
//                                          input, interleaved (DPoP.swift)
//   authorized <requests> <in-flight> [bearer|dpop]  AuthService.send (a bearer or DPoP-bound profile) vs a plain CurlHTTPClient.send
//                                          of the same requests, against the dev server in this process
import AsyncHTTPClient
import CBench
import Crypto
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import BenchCore
import JWTKit
@_spi(Benchmarks) import LoginKit
import LoginKitDevServer

struct AsyncHTTPClientPeer: Peer {
    let client: HTTPClient
    let url: String

    init(url: String) {
        var configuration = HTTPClient.Configuration()
        // Its default pool is 8 connections per host; compared at 64, like the others.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.url = url
    }

    func post() async throws {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(Array(requestBody))
        let response = try await client.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        guard response.status.code == 200 else { throw BenchError("HTTP \(response.status.code)") }
    }

    func shutdown() async throws { try await client.shutdown() }
}

struct URLSessionPeer: Peer {
    let session: URLSession
    let request: URLRequest

    init(url: String) throws {
        let configuration = URLSessionConfiguration.default
        configuration.httpMaximumConnectionsPerHost = 64
        session = URLSession(configuration: configuration)
        guard let target = URL(string: url) else { throw BenchError("bad URL \(url)") }
        var request = URLRequest(url: target)
        request.httpMethod = "POST"
        request.httpBody = requestBody
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        self.request = request
    }

    func post() async throws {
        let (_, response) = try await session.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BenchError("not HTTP 200") }
    }

    func shutdown() async throws { session.invalidateAndCancel() }
}

// MARK: Verification

struct BenchPayload: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
        try aud.verifyIntendedAudience(includes: "loginkit-cli")
        guard iss.value == "https://issuer.bench" else { throw BenchError("issuer") }
    }
}

/// A signed token and its public key as JWK Set JSON, made with jwt-kit (LoginKit's signing is not
/// public API): RS256 with a 2048-bit key from `openssl genpkey`, or ES256 with a P-256 key.
func signedToken(_ algorithm: JWSAlgorithm, payload: BenchPayload) async throws -> (token: String, jwks: String) {
    let signer = JWTKeyCollection()
    let jwk: String
    if algorithm == .rs256 {
        let key = try Insecure.RSA.PrivateKey(pem: try openssl(["genpkey", "-quiet", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]))
        let (modulus, exponent) = try key.publicKey.getKeyPrimitives()
        jwk = #"{"kty":"RSA","kid":"bench","alg":"RS256","use":"sig","n":"\#(base64URL(modulus))","e":"\#(base64URL(exponent))"}"#
        await signer.add(rsa: key, digestAlgorithm: .sha256, kid: "bench")
    } else {
        let key = ES256PrivateKey()
        guard let (x, y) = key.parameters else { throw BenchError("no P-256 parameters") }
        jwk = #"{"kty":"EC","kid":"bench","alg":"ES256","use":"sig","crv":"P-256","x":"\#(x)","y":"\#(y)"}"#
        await signer.add(ecdsa: key, kid: "bench")
    }
    return (try await signer.sign(payload, kid: "bench"), "{\"keys\":[\(jwk)]}")
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// What `openssl ARGUMENTS` prints.
func openssl(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw BenchError("openssl \(arguments.joined(separator: " ")) failed") }
    return String(decoding: data, as: UTF8.self)
}

/// Keeps `value` alive so that the optimizer cannot drop the work that made it.
@inline(never) func blackHole<T>(_ value: T) {}

func benchVerify(peer: String, algorithm name: String, count: Int) async throws {
    guard let algorithm = JWSAlgorithm(rawValue: name), algorithm == .rs256 || algorithm == .es256 else { throw BenchError("RS256 or ES256") }
    let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    let payload = BenchPayload(
        iss: "https://issuer.bench", sub: "248289761001", aud: "loginkit-cli",
        exp: .init(value: now.addingTimeInterval(3600)), iat: .init(value: now))
    let (token, jwks) = try await signedToken(algorithm, payload: payload)
    let verify: () async throws -> Void
    var extra: [String: Double] = [:]
    switch peer {
    case "loginkit":
        let verifier = IDTokenVerifier(configuration: .init(issuer: "https://issuer.bench", audience: "loginkit-cli"), keys: StaticJWKS(try JWKSet(jsonText: Array(jwks.utf8))))
        verify = { _ = try await verifier.verify(token) }
    case "jwtkit":
        let keys = JWTKeyCollection()
        try await keys.add(jwksJSON: jwks)
        verify = { _ = try await keys.verify(token, as: BenchPayload.self) }
    case "boringssl":
        // What jwt-kit's ES256 verification costs without jwt-kit: swift-crypto's (BoringSSL's) P-256
        // verify of a SHA-256 digest computed once, as `openssl speed` times OpenSSL's. The cost
        // does not depend on the key, so the key and signature are made here.
        guard algorithm == .es256 else { throw BenchError("boringssl: ES256 only") }
        let signingInput = Data(token.utf8.prefix(upTo: token.utf8.lastIndex(of: UInt8(ascii: ".")) ?? token.utf8.endIndex))
        let key = P256.Signing.PrivateKey()
        let digest = SHA256.hash(data: signingInput)
        let signature = try key.signature(for: digest)
        let publicKey = key.publicKey
        verify = { guard publicKey.isValidSignature(signature, for: digest) else { throw BenchError("signature") } }
        // The one step of a JWS verification that every verifier adds to the bare verify: hashing
        // the signing input (header.payload).
        let hashing = ContinuousClock().measure { for _ in 0..<count { blackHole(SHA256.hash(data: signingInput)) } }
        extra["sha256_signing_input_us"] = seconds(hashing) / Double(count) * 1e6
    case "openssl":
        // OpenSSL's P-256 verify alone, in this process (a C loop; `openssl speed` runs the same in
        // its own): what LoginKit's ES256 verification adds to it is LoginKit's own work.
        guard algorithm == .es256 else { throw BenchError("openssl: ES256 only") }
        let microseconds = cbench_openssl_p256_verify_us(Int32(count))
        guard microseconds > 0 else { throw BenchError("OpenSSL's P-256 verify failed") }
        emit(["verifies_per_s": 1e6 / microseconds, "us_per_verify": microseconds])
        return
    default:
        throw BenchError("unknown peer \(peer)")
    }
    for _ in 0..<200 { try await verify() }  // warm: keys parsed and cached
    let allocationsBefore = cbench_malloc_count()
    let clock = ContinuousClock()
    let elapsed = try await clock.measure { for _ in 0..<count { try await verify() } }
    let allocations = cbench_malloc_count()
    emit([
        "verifies_per_s": Double(count) / seconds(elapsed), "us_per_verify": seconds(elapsed) / Double(count) * 1e6,
        "allocs_per_verify": allocationsBefore < 0 ? .nan : Double(allocations - allocationsBefore) / Double(count),
    ].merging(extra) { first, _ in first })
}

// MARK: Expiry storm

func expire(_ store: some TokenStore) async throws {
    try await store.withExclusiveAccess(to: "default") { transaction in
        guard var profile = transaction["default"] else { return }
        profile.credentials.expiresAt = Date().addingTimeInterval(-5)
        profile.credentials.idTokenExpiresAt = Date().addingTimeInterval(-5)
        profile.updatedAt = Date().addingTimeInterval(-3605)
        transaction["default"] = profile
    }
}

/// An event tasks wait for, opened once.
/// What the storm's floors wait on: opened once, after the refresh's time.
protocol StormGate: Sendable {
    func wait() async throws
    func open()
}

final class Gate: StormGate {
    private let waiters = Mutex<[CheckedContinuation<Void, Never>]?>([])

    func wait() async {
        await withCheckedContinuation { continuation in
            let opened = waiters.withLock { waiters -> Bool in
                guard waiters != nil else { return true }
                waiters?.append(continuation)
                return false
            }
            if opened { continuation.resume() }
        }
    }

    func open() {
        for continuation in waiters.withLock({ waiters in defer { waiters = nil }; return waiters ?? [] }) { continuation.resume() }
    }
}

/// `Gate` for waiters that honour cancellation, as LoginKit's must (a cancelled caller stops waiting
/// at once, the others wait on): each wait installs a cancellation handler and is queued under a
/// ticket that the handler can remove. The least such a waiter costs.
final class CancellableGate: StormGate {
    private struct State {
        var waiters: [(ticket: UInt64, continuation: CheckedContinuation<Void, any Error>)]? = []
        var cancelled: Set<UInt64> = []
    }
    private let state = Mutex(State())
    private let tickets = Atomic<UInt64>(0)

    func wait() async throws {
        let ticket = tickets.wrappingAdd(1, ordering: .relaxed).oldValue
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let result = state.withLock { state -> Result<Void, any Error>? in
                    guard state.waiters != nil else { return .success(()) }
                    if state.cancelled.remove(ticket) != nil { return .failure(CancellationError()) }
                    state.waiters?.append((ticket, continuation))
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters?.firstIndex(where: { $0.ticket == ticket }) else {
                    if state.waiters != nil { state.cancelled.insert(ticket) }
                    return nil
                }
                return state.waiters?.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    func open() {
        let waiters = state.withLock { state in defer { state.waiters = nil }; return state.waiters ?? [] }
        for waiter in waiters { waiter.continuation.resume() }
    }
}

/// The identity provider a storm runs against: the dev server in its own process (as in
/// production and `loginkit demo`, where the provider is not in the caller's process), or in the
/// bench's process, where its request handlers queue on the same two pool threads as the storm's
/// 1000 callers.
enum StormProvider {
    case ownProcess(executable: String)
    case sameProcess
}

/// `loginkit-dev-server serve` in a child process, stopped when its standard input closes.
final class DevServerProcess {
    let process = Process()
    let input = Pipe()
    let issuer: URL

    init(executable: String) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["serve", "--quiet", "--exit-on-stdin-eof"]
        // The allocation counter preloaded into the bench counts this process's allocations only.
        process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "LD_PRELOAD" }
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        // The one line it prints once it listens: `issuer: URL`.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")), line.count < 4096 {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("issuer: "), let issuer = URL(string: String(text.dropFirst("issuer: ".count))) else {
            process.terminate()
            throw BenchError("the dev server printed \(text.debugDescription), not its issuer")
        }
        self.issuer = issuer
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

func benchStorm(rounds: Int, provider: StormProvider) async throws {
    switch provider {
    case .sameProcess:
        try await DevServer.withServer { server in
            let counter = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/test/requests?path=/oauth/token")
            try await benchStorm(rounds: rounds, issuer: server.issuer) { http in try await tokenRequestCount(at: counter, through: http) }
        }
    case .ownProcess(let executable):
        let server = try DevServerProcess(executable: executable)
        defer { server.stop() }
        guard let scheme = server.issuer.scheme, let host = server.issuer.host, let port = server.issuer.port else {
            throw BenchError("the dev server's issuer \(server.issuer) has no scheme, host or port")
        }
        let counter = HTTPRequest(method: .get, scheme: scheme, authority: "\(host):\(port)", path: "/test/requests?path=/oauth/token")
        try await benchStorm(rounds: rounds, issuer: server.issuer.absoluteString) { http in try await tokenRequestCount(at: counter, through: http) }
    }
}

/// The token requests the dev server has seen, from its `/test/requests` endpoint (`counter`):
/// asked over HTTP whether the server runs in this process or in its own.
func tokenRequestCount(at counter: HTTPRequest, through http: CurlHTTPClient) async throws -> Int {
    let (response, body) = try await http.send(counter, body: nil)
    guard response.status.code == 200, let count = Int(String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw BenchError("the dev server's request count is unreadable")
    }
    return count
}

/// The storm against `issuer`; `tokenRequests` counts the token requests the provider has seen.
func benchStorm(rounds: Int, issuer: String, tokenRequests: @escaping (CurlHTTPClient) async throws -> Int) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("loginkit-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await CurlHTTPClient.withClient { http in
        let api = OAuth2API(configuration: .init(issuer: issuer, clientID: "loginkit-cli"), transport: http)
        let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
        var configuration = AuthService.Configuration()
        configuration.logger.logLevel = .warning
        let service = AuthService(api: api, store: store, configuration: configuration)
        _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
        let clock = ContinuousClock()
        // One uncontended refresh (after a warm-up one), several times.
        var single: [Double] = []
        for _ in 0..<(rounds * 3 + 1) {
            try await expire(store)
            single.append(seconds(try await clock.measure { _ = try await service.validIDToken() }))
        }
        single.removeFirst()
        var results: [String: Double] = ["single_ms": percentile(single, 0.5) * 1e3]
        // LOGINKIT_BENCH_STORM_ONLY=1: LoginKit's 1000-caller storms only, no floors (for `perf`).
        let stormOnly = ProcessInfo.processInfo.environment["LOGINKIT_BENCH_STORM_ONLY"] != nil
        for size in stormOnly ? [1000] : [10, 100, 1000, 10_000, 100_000] {
            var requests: [Int] = [], p50: [Double] = [], p99: [Double] = [], allocations: [Double] = [], cpu: [Double] = []
            var memory: [Double] = []
            for _ in 0..<rounds {
                try await expire(store)
                let requestsBefore = try await tokenRequests(http)
                let allocationsBefore = cbench_malloc_count()
                let cpuBefore = cpuSeconds()
                // The peak resident memory during the storm over the resident memory before it:
                // what the waiting callers (their tasks, their waits) hold at once.
                let residentBefore = PeakResidentMemory.reset()
                let start = clock.now
                let latencies = try await withThrowingTaskGroup(of: Double.self) { group in
                    for _ in 0..<size {
                        group.addTask {
                            _ = try await service.validIDToken()
                            return seconds(clock.now - start)
                        }
                    }
                    var all: [Double] = []
                    for try await latency in group { all.append(latency) }
                    return all
                }
                cpu.append((cpuSeconds() - cpuBefore) / Double(size))
                allocations.append(Double(cbench_malloc_count() - allocationsBefore) / Double(size))
                if let before = residentBefore, let peak = PeakResidentMemory.peak() {
                    memory.append(Double(max(0, peak - before)) / Double(size))
                }
                requests.append(try await tokenRequests(http) - requestsBefore)
                p50.append(percentile(latencies, 0.5))
                p99.append(percentile(latencies, 0.99))
            }
            results["requests_\(size)"] = Double(requests.max() ?? -1)
            results["p50_ms_\(size)"] = percentile(p50, 0.5) * 1e3
            results["p99_ms_\(size)"] = percentile(p99, 0.5) * 1e3
            // Every allocation in the process during the storm (the refresh's own included), per
            // caller; NaN without Benchmarks/C/malloc_count.c preloaded.
            // This process's CPU time (user and system, the refresh's share included) per caller.
            results["cpu_us_per_caller_\(size)"] = percentile(cpu, 0.5) * 1e6
            results["allocs_per_caller_\(size)"] = cbench_malloc_count() < 0 ? .nan : percentile(allocations, 0.5)
            // Bytes of resident memory per waiting caller at the storm's peak; NaN where the kernel
            // cannot reset the peak (/proc/self/clear_refs).
            results["memory_bytes_per_caller_\(size)"] = memory.isEmpty ? .nan : percentile(memory, 0.5)
        }
        // The floor: 1000 bare tasks started together, each waiting for one shared event that
        // fires after the median refresh time (a sleep, so it costs the two cores nothing) —
        // what any "1000 callers, one refresh" costs here before LoginKit does anything. Then the
        // same with waits that honour cancellation (`CancellableGate`), as LoginKit's waiters must.
        // Then the same cancellable waiters with the event fired by the refresh's own work instead
        // of a sleep — the store read, and under the store's lock the provider's refresh (HTTP, the
        // ID token's verification) and the durable save, on the transport's executor as
        // `AuthService` runs it — so that the refresh shares the two cores with the 1000 waiters
        // and the provider, as it must in a storm here: the least any kit pays on this machine.
        let refresh = Duration.microseconds(Int(percentile(single, 0.5) * 1e6))
        let sleeping: @Sendable () async throws -> Void = { try? await clock.sleep(for: refresh) }
        let refreshing: @Sendable () async throws -> Void = {
            try await withTaskExecutorPreference(http.driverExecutor) {
                guard try await store.profile(named: "default") != nil else { throw BenchError("the storm's profile is gone") }
                try await store.withExclusiveAccess(to: "default") { transaction in
                    guard var profile = transaction["default"] else { throw BenchError("the storm's profile is gone") }
                    profile.credentials = try await api.refresh(profile.credentials)
                    profile.updatedAt = Date()
                    transaction["default"] = profile
                }
            }
        }
        let floors: [(name: String, makeGate: () -> any StormGate, opener: @Sendable () async throws -> Void)] = [
            ("floor", { Gate() }, sleeping),
            ("cancellable_floor", { CancellableGate() }, sleeping),
            ("refresh_floor", { CancellableGate() }, refreshing),
        ]
        for (name, makeGate, opener) in stormOnly ? [] : floors {
            var p99: [Double] = [], p50: [Double] = [], cpu: [Double] = [], allocations: [Double] = []
            // The refresh's own work, uncontended (after a warm-up), for this floor's ratio.
            var alone: [Double] = []
            for _ in 0..<(name == "refresh_floor" ? rounds + 1 : 0) {
                alone.append(seconds(try await clock.measure { try await opener() }))
            }
            for _ in 0..<rounds {
                let gate = makeGate()
                let allocationsBefore = cbench_malloc_count()
                let cpuBefore = cpuSeconds()
                let latencies = try await floorLatencies(waiters: 1000, gate: gate, opener: opener)
                cpu.append((cpuSeconds() - cpuBefore) / 1000)
                allocations.append(Double(cbench_malloc_count() - allocationsBefore) / 1000)
                p99.append(percentile(latencies, 0.99))
                p50.append(percentile(latencies, 0.5))
            }
            results["\(name)_p99_ms_1000"] = percentile(p99, 0.5) * 1e3
            results["\(name)_p50_ms_1000"] = percentile(p50, 0.5) * 1e3
            results["\(name)_cpu_us_per_task"] = percentile(cpu, 0.5) * 1e6
            results["\(name)_allocs_per_task"] = cbench_malloc_count() < 0 ? .nan : percentile(allocations, 0.5)
            if !alone.isEmpty {
                alone.removeFirst()
                results["\(name)_alone_ms"] = percentile(alone, 0.5) * 1e3
            }
        }
        // The cancellable floor at 10,000 waiters: 10,000 bare tasks, each waiting (cancellably)
        // for one event that fires after the refresh time — the harness's and the runtime's own
        // share of the 10,000-caller storm, before LoginKit does anything.
        if !stormOnly {
            var p99: [Double] = []
            for _ in 0..<rounds {
                p99.append(percentile(try await floorLatencies(waiters: 10_000, gate: CancellableGate(), opener: sleeping), 0.99))
            }
            results["cancellable_floor_p99_ms_10000"] = percentile(p99, 0.5) * 1e3
        }
        emit(results)
    }
}

/// A floor's storm: `waiters` bare tasks each waiting on `gate`, which `opener`'s end opens; each
/// waiter's latency from the start, in seconds.
func floorLatencies(waiters: Int, gate: any StormGate, opener: @escaping @Sendable () async throws -> Void) async throws -> [Double] {
    let clock = ContinuousClock()
    let start = clock.now
    return try await withThrowingTaskGroup(of: Double.self) { group in
        group.addTask {
            defer { gate.open() }
            try await opener()
            return -1
        }
        for _ in 0..<waiters {
            group.addTask {
                try await gate.wait()
                return seconds(clock.now - start)
            }
        }
        var all: [Double] = []
        for try await latency in group where latency >= 0 { all.append(latency) }
        return all
    }
}

// MARK: Main

let arguments = CommandLine.arguments
do {
    switch (arguments.count > 1 ? arguments[1] : "", arguments.count) {
    case ("http", 6), ("http", 7):
        guard let requests = Int(arguments[5]) else { throw BenchError("requests") }
        let url = arguments[4]
        let peer: any Peer
        switch arguments[2] {
        case "ahc": peer = AsyncHTTPClientPeer(url: url)
        case "urlsession": peer = try URLSessionPeer(url: url)
        default:
            guard let loginKit = try loginKitPeer(arguments[2], url: url) else { throw BenchError("unknown peer \(arguments[2])") }
            peer = loginKit
        }
        try await benchHTTP(peer, mode: arguments[3], requests: requests, inFlight: arguments.count == 7 ? Int(arguments[6]) ?? 64 : 64)
    case ("save", 4):
        try await benchSave(directory: arguments[2], operations: Int(arguments[3]) ?? 300)
    case ("cached", 4):
        try await benchCached(directory: arguments[2], calls: Int(arguments[3]) ?? 100_000)
    case ("verify", 5):
        try await benchVerify(peer: arguments[2], algorithm: arguments[3], count: Int(arguments[4]) ?? 5000)
    case ("storm", 3):
        try await benchStorm(rounds: Int(arguments[2]) ?? 3, provider: .sameProcess)
    case ("storm", 4):
        try await benchStorm(rounds: Int(arguments[2]) ?? 3, provider: .ownProcess(executable: arguments[3]))
    case ("prepare-cli", 3):
        try await prepareCLI(path: arguments[2])
    case ("dpop-proof", 3):
        try benchDPoPProof(count: Int(arguments[2]) ?? 5000)
    case ("authorized", 4), ("authorized", 5):
        let mode = arguments.count == 5 ? arguments[4] : "bearer"
        guard mode == "bearer" || mode == "dpop" else { throw BenchError("authorized: the mode is bearer or dpop") }
        try await benchAuthorizedRequests(requests: Int(arguments[2]) ?? 20000, inFlight: Int(arguments[3]) ?? 64, dpop: mode == "dpop")
    case ("store-scale", 5):
        guard let profiles = Int(arguments[3]), let operations = Int(arguments[4]) else { throw BenchError("store-scale: profiles and operations are numbers") }
        try await benchStoreScale(directory: arguments[2], profiles: profiles, operations: operations)
    case ("store-procs", 6):
        guard let processes = Int(arguments[3]), let refreshes = Int(arguments[4]), let network = Int(arguments[5]) else {
            throw BenchError("store-procs: processes, refreshes and network-ms are numbers")
        }
        try await benchStoreProcesses(executable: arguments[0], directory: arguments[2], processes: processes, refreshes: refreshes, networkMilliseconds: network)
    case ("store-proc-child", 6):
        guard let refreshes = Int(arguments[4]), let network = Int(arguments[5]) else { throw BenchError("store-proc-child: refreshes and network-ms are numbers") }
        try await storeProcessChild(path: arguments[2], profile: arguments[3], refreshes: refreshes, networkMilliseconds: network)
    default:
        guard try await runFleetCommand(arguments) else {
            throw BenchError("usage: see the comment at the top of Benchmarks/Sources/loginkit-bench/main.swift")
        }
    }
} catch {
    FileHandle.standardError.write(Data("loginkit-bench: \(error)\n".utf8))
    exit(1)
}

/// The process's peak resident memory (`VmHWM`), reset through `/proc/self/clear_refs` (writing `5`
/// sets the peak to the current resident size, Linux 4.0+).
enum PeakResidentMemory {
    /// Resets the peak; returns the resident size now in bytes, `nil` when the kernel refuses.
    static func reset() -> Int? {
        // open(2) and write(2) themselves: Foundation's FileHandle does not write to this file.
        let descriptor = open("/proc/self/clear_refs", O_WRONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard write(descriptor, "5", 1) == 1 else { return nil }
        return status("VmRSS:")
    }

    /// The peak resident size since the last reset, in bytes.
    static func peak() -> Int? { status("VmHWM:") }

    private static func status(_ field: String) -> Int? {
        guard let text = FleetProc.contents(of: "/proc/self/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field) {
            // `VmHWM:\t    7972 kB`: a tab, then spaces.
            let kilobytes = line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }
}
