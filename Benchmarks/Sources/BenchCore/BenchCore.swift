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
    percentile(sorted: values.sorted(), fraction)
}

/// The value at `fraction` of `sorted` (ascending); NaN when it is empty.
func percentile(sorted: some RandomAccessCollection<Double>, _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[sorted.index(sorted.startIndex, offsetBy: min(sorted.count - 1, Int(Double(sorted.count) * fraction)))]
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
    // One buffer for every latency, allocated once and sorted in place, as the C peers do
    // (`calloc` and `qsort`): per-worker arrays grown by doubling, merged and copied to sort, held
    // 3–5 MB more at 200,000 requests, which the peak RSS counted as the client's.
    let latencies = LatencySlots(count: requests)
    defer { latencies.deallocate() }
    let cpuBefore = cpuSeconds()
    let started = clock.now
    try await withTaskExecutorPreference(peer.preferredExecutor) {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    while true {
                        let index = next.value.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard index < requests else { return }
                        let begin = clock.now
                        try await peer.post()
                        latencies.record(seconds(clock.now - begin), at: index)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
    let elapsed = seconds(clock.now - started)
    let cpu = cpuSeconds() - cpuBefore
    try await peer.shutdown()
    let (p50, p99) = latencies.sortedPercentiles(0.5, 0.99)
    emit([
        "requests": Double(requests), "seconds": elapsed, "p50_us": p50 * 1e6,
        "p99_us": p99 * 1e6, "cpu_s_per_10k": cpu / Double(requests) * 10_000,
    ])
}

/// The latencies of one HTTP run, one slot per request.
///
/// Why `@unchecked Sendable` is safe here: each slot is written by exactly one worker — the one
/// that claimed its index from the shared atomic counter — and the slots are read (sorted) only
/// after the task group has joined every worker, which orders all the writes before the reads.
struct LatencySlots: @unchecked Sendable {  // safe: see the proof above
    private let slots: UnsafeMutableBufferPointer<Double>

    init(count: Int) {
        slots = .allocate(capacity: max(count, 1))
        slots.initialize(repeating: 0)
    }

    func record(_ latency: Double, at index: Int) {
        slots[index] = latency
    }

    /// Sorts the slots in place and reads two percentiles.
    func sortedPercentiles(_ first: Double, _ second: Double) -> (Double, Double) {
        var memory = slots  // the same memory: sorting it sorts the slots
        memory.sort()
        return (percentile(sorted: slots, first), percentile(sorted: slots, second))
    }

    func deallocate() {
        slots.deallocate()
    }
}
