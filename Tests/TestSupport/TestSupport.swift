public import Foundation
public import LoginKit
import Testing

/// A fresh directory under the system temp dir, removed after `body`.
public func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("loginkit-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

/// The built `loginkit-test-helper`, beside the test bundle.
public func testHelperPath() throws -> String {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let helper = directory.appendingPathComponent("loginkit-test-helper").path
    try #require(FileManager.default.isExecutableFile(atPath: helper), "build it with `swift build --build-tests` (make test does)")
    return helper
}

/// A running child process whose stdout lines arrive on `lines`.
public final class ChildProcess: Sendable {
    public let process: Process
    public let lines: AsyncStream<String>
    private let exited: AsyncStream<Int32>

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        let (lines, lineContinuation) = AsyncStream<String>.makeStream()
        let buffer = LineBuffer()
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                lineContinuation.finish()
                return
            }
            for line in buffer.append(data) { lineContinuation.yield(line) }
        }
        let (exited, exitContinuation) = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { process in
            exitContinuation.yield(process.terminationStatus)
            exitContinuation.finish()
        }
        try process.run()
        self.process = process
        self.lines = lines
        self.exited = exited
    }

    /// Waits for the process to end and returns its exit status (or signal number).
    public func waitForExit() async -> Int32 {
        for await status in exited { return status }
        return process.terminationStatus
    }
}

/// Splits a byte stream into lines; used from one readability handler at a time.
final class LineBuffer: @unchecked Sendable {
    // Safety: Foundation calls a FileHandle's readabilityHandler serially, and only that handler
    // touches `pending`.
    private var pending = Data()

    func append(_ data: Data) -> [String] {
        pending.append(data)
        var lines: [String] = []
        while let newline = pending.firstIndex(of: 0x0A) {
            lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
            pending.removeSubrange(pending.startIndex...newline)
        }
        return lines
    }
}

/// The error an async call threw, or nil.
public func thrown<T>(_ operation: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await operation()
        return nil
    } catch {
        return error
    }
}

/// Runs blocking work (a pipe read to EOF, waiting for a process) on its own thread, never on the
/// cooperative pool, whose few threads the servers under test need.
public func onDedicatedThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// Rewrites the stored profile as if its login had happened an hour ago: both expiries just passed.
public func expireStoredCredentials(in store: some TokenStore, profile name: String = "default") async throws {
    try await store.withExclusiveAccess { transaction in
        guard var profile = transaction[name] else { return }
        profile.credentials.expiresAt = Date().addingTimeInterval(-5)
        profile.credentials.idTokenExpiresAt = Date().addingTimeInterval(-5)
        profile.updatedAt = Date().addingTimeInterval(-3605)
        transaction[name] = profile
    }
}
