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
import CBench
@_spi(Benchmarks) import LoginKit
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

    public var preferredExecutor: (any TaskExecutor)? { onDriverThread ? client.driverExecutor : nil }

    public init(url: String, onDriverThread: Bool) throws {
        self.onDriverThread = onDriverThread
        client = try CurlHTTPClient()
        // "scheme://authority/path": the bench's own nginx URL. Split with `firstIndex(of:)`, not
        // `firstRange(of:)`, which brings `_StringProcessing`'s code into the process whose peak RSS
        // is LoginKit's (docs/benchmarks.md, 2026-11-26 afternoon).
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { throw BenchError("bad URL \(url)") }
        let rest = url[url.index(colon, offsetBy: 3)...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        request = HTTPRequest(
            method: .post, scheme: String(url[..<colon]), authority: String(rest[..<slash]),
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
    // One buffer for every latency, allocated once, its percentiles selected in place, as the C
    // peers do (`calloc`, then a selection): per-worker arrays grown by doubling, merged and copied
    // to sort, held 3–5 MB more at 200,000 requests, which the peak RSS counted as the client's.
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
    let (p50, p99) = latencies.percentiles(0.5, 0.99)
    // Printed by C (`printf`), as the C peers print: a `Dictionary`, sorted keys and Swift's number
    // formatting brought more of the standard library's code into the process whose peak RSS is
    // LoginKit's (docs/benchmarks.md, 2026-11-26 afternoon). Every Swift peer runs this same loop.
    cbench_emit_http(Double(requests), elapsed, p50 * 1e6, p99 * 1e6, cpu / Double(requests) * 10_000)
}

/// The latencies of one HTTP run, one slot per request.
///
/// Why `@unchecked Sendable` is safe here: each slot is written by exactly one worker — the one
/// that claimed its index from the shared atomic counter — and the slots are read (selected) only
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

    /// Two percentiles (`first` ≤ `second`), selected in place: no copy and no scratch buffer.
    /// (`sort()`, a merge sort, allocated one, which the peak RSS counted as the client's: 0.57 MB
    /// at 200,000 requests; docs/benchmarks.md, 2026-11-26 afternoon.) The slots end up partly
    /// ordered.
    func percentiles(_ first: Double, _ second: Double) -> (Double, Double) {
        guard !slots.isEmpty else { return (.nan, .nan) }
        func rank(_ fraction: Double) -> Int { min(slots.count - 1, Int(Double(slots.count) * fraction)) }
        let low = rank(first), high = rank(second)
        select(low, in: 0..<slots.count)
        select(high, in: low..<slots.count)  // everything from `low` on is ≥ the `low`th
        return (slots[low], slots[high])
    }

    /// Puts the value of rank `k` at index `k`, with no larger value before it and no smaller one
    /// after it, within `range` (Hoare's selection; the middle element as the pivot).
    private func select(_ k: Int, in range: Range<Int>) {
        var lower = range.lowerBound, upper = range.upperBound - 1
        while lower < upper {
            let pivot = slots[lower + (upper - lower) / 2]
            var i = lower, j = upper
            while i <= j {
                while slots[i] < pivot { i += 1 }
                while slots[j] > pivot { j -= 1 }
                if i <= j {
                    slots.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if k <= j { upper = j } else if k >= i { lower = i } else { return }
        }
    }

    func deallocate() {
        slots.deallocate()
    }
}
