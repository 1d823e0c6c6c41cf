// What every benchmark executable shares: the output, the statistics, and the HTTP measuring
// loop with LoginKit's peer. It links LoginKit alone, so that `loginkit-alone` (LoginKit's HTTP
// runs) is a process with nothing else in it: its peak RSS is LoginKit's (docs/benchmarks.md).
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoginKit
import Synchronization

/// The token endpoint's request body: a refresh grant of a realistic size.
public let requestBody = Data(#"{"grant_type":"refresh_token","refresh_token":"rt-0123456789abcdef0123456789abcdef","client_id":"loginkit-cli"}"#.utf8)

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public func emit(_ values: [String: Double]) {
    let fields = values.keys.sorted().map { "\"\($0)\": \(values[$0].map { $0.isFinite ? "\($0)" : "null" } ?? "null")" }
    print("{" + fields.joined(separator: ", ") + "}")
}

public func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

public func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

public func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

// MARK: HTTP

/// One POST, as each peer does it; returns when the whole body has arrived.
public protocol Peer: Sendable {
    func post() async throws
    func shutdown() async throws
    /// The task executor the measuring tasks prefer (nil: the global concurrent executor).
    var preferredExecutor: (any TaskExecutor)? { get }
}

extension Peer {
    public var preferredExecutor: (any TaskExecutor)? { nil }
}

/// `CurlHTTPClient`; with `onDriverThread`, the measuring tasks prefer the client's driver thread as
/// their executor (its documented zero-hop path), otherwise they run on the global executor.
public struct LoginKitPeer: Peer {
    let client: CurlHTTPClient
    let request: HTTPRequest
    let onDriverThread: Bool

    public var preferredExecutor: (any TaskExecutor)? { onDriverThread ? client.taskExecutor : nil }

    public init(url: String, onDriverThread: Bool) throws {
        self.onDriverThread = onDriverThread
        client = try CurlHTTPClient()
        // "scheme://authority/path": the bench's own nginx URL.
        guard let schemeEnd = url.firstRange(of: "://") else { throw BenchError("bad URL \(url)") }
        let rest = url[schemeEnd.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        request = HTTPRequest(
            method: .post, scheme: String(url[..<schemeEnd.lowerBound]), authority: String(rest[..<slash]),
            path: slash == rest.endIndex ? "/" : String(rest[slash...]), headerFields: [.contentType: "application/json"])
    }

    public func post() async throws {
        let (response, _) = try await client.send(request, body: requestBody)
        guard response.status.code == 200 else { throw BenchError("HTTP \(response.status.code)") }
    }

    public func shutdown() async throws { await client.shutdown() }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

/// LoginKit's peer by name: `loginkit` (the measuring tasks on the client's driver thread) or
/// `loginkit-global` (on the global executor); `nil` for any other name.
public func loginKitPeer(_ name: String, url: String) throws -> (any Peer)? {
    switch name {
    case "loginkit": try LoginKitPeer(url: url, onDriverThread: true)
    case "loginkit-global": try LoginKitPeer(url: url, onDriverThread: false)
    default: nil
    }
}

/// `requests` POSTs to `url` through `peer`, one at a time (`seq`) or `inFlight` at once; prints
/// the rate, latencies and CPU time as one JSON line.
public func benchHTTP(_ peer: any Peer, mode: String, requests: Int, inFlight: Int) async throws {
    let workers = mode == "seq" ? 1 : inFlight
    // Warm up: open the connections.
    try await withTaskExecutorPreference(peer.preferredExecutor) {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers { group.addTask { try await peer.post() } }
            try await group.waitForAll()
        }
    }
    let next = Counter()
    let clock = ContinuousClock()
    let cpuBefore = cpuSeconds()
    let started = clock.now
    let latencies = try await withTaskExecutorPreference(peer.preferredExecutor) {
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var mine: [Double] = []
                    while next.value.wrappingAdd(1, ordering: .relaxed).oldValue < requests {
                        let begin = clock.now
                        try await peer.post()
                        mine.append(seconds(clock.now - begin))
                    }
                    return mine
                }
            }
            var all: [Double] = []
            for try await part in group { all += part }
            return all
        }
    }
    let elapsed = seconds(clock.now - started)
    let cpu = cpuSeconds() - cpuBefore
    try await peer.shutdown()
    emit([
        "requests": Double(latencies.count), "seconds": elapsed, "p50_us": percentile(latencies, 0.5) * 1e6,
        "p99_us": percentile(latencies, 0.99) * 1e6, "cpu_s_per_10k": cpu / Double(latencies.count) * 10_000,
    ])
}
