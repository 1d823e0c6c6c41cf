import Foundation
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
    public let process: SpawnedProcess
    public let lines: AsyncStream<String>
    /// The test's end of the child's stdin (a socket) when started `withInput`; closed when this
    /// object goes, so the child then reads EOF.
    private let input: Int32?

    /// Starts `executable`; with `withInput` its stdin stays open for ``send(_:)`` (else it is `/dev/null`).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], withInput: Bool = false) throws {
        let output = try TestPipe()
        defer { close(output.writeEnd) }
        // A socket, not a pipe: a write to a child that is gone fails with EPIPE (MSG_NOSIGNAL)
        // instead of raising SIGPIPE in the test process.
        var ends: [Int32] = [-1, -1]
        if withInput {
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                close(output.readEnd)
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
        defer { if withInput { close(ends[1]) } }
        do {
            process = try SpawnedProcess(
                executable, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                stdin: withInput ? .descriptor(ends[1]) : .null, stdout: .descriptor(output.writeEnd))
        } catch {
            if withInput { close(ends[0]) }
            close(output.readEnd)
            throw error
        }
        input = withInput ? ends[0] : nil
        let (lines, continuation) = AsyncStream<String>.makeStream()
        self.lines = lines
        readLines(from: output.readEnd) { continuation.yield($0) } atEnd: { continuation.finish() }
    }

    deinit {
        if let input { close(input) }
    }

    /// Writes `line` and a newline to the child's stdin (started `withInput`; otherwise nothing
    /// happens). A child that has gone is no error: the bytes are dropped.
    public func send(_ line: String) {
        guard let input else { return }
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(input, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Waits for the process to end and returns its exit code (or 128 + the signal that ended it).
    public func waitForExit() async -> Int32 {
        await process.exitStatus()
    }

    /// Kills the process with SIGKILL (unless it has already ended and been reaped).
    public func kill() {
        process.kill(.SIGKILL)
    }
}

/// Runs `executable` to its end; its exit status and what it printed on stdout (stderr is the test's).
public func runCapturing(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
    let output = try TestPipe()
    let process: SpawnedProcess
    do {
        process = try SpawnedProcess(executable, arguments, stdout: .descriptor(output.writeEnd))
    } catch {
        close(output.readEnd)
        close(output.writeEnd)
        throw error
    }
    close(output.writeEnd)
    let data = await output.readToEnd()
    return (await process.exitStatus(), String(decoding: data, as: UTF8.self))
}

/// Runs `executable` to its end with stdout and stderr discarded; its exit status.
public func run(_ executable: String, _ arguments: [String]) async -> Int32 {
    guard let process = try? SpawnedProcess(executable, arguments, stdout: .null, stderr: .null) else { return -1 }
    return await process.exitStatus()
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
        profile.credentials.issuedAt = profile.updatedAt
        transaction[name] = profile
    }
}

/// A free loopback port: bound on 127.0.0.1 and released (a server the test starts binds it right
/// after). Taken below the kernel's ephemeral range when it can be: a port from that range may be
/// handed to another test's outgoing connection or port-0 listener before the server binds it
/// ("Address already in use" in a loaded `make test`); below it, only another explicit bind of the
/// same random port could, one chance in ~20 000.
public func freeLoopbackPort() throws -> Int {
    let ephemeralLow = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
    if ephemeralLow > 12_000 {
        for _ in 0..<200 {  // bounded: almost every port down there is free
            let candidate = Int.random(in: 10_000..<ephemeralLow)
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(socket) }
            if bindToLoopback(socket, port: candidate, listen: false) != nil { return candidate }
        }
    }
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    return try #require(bindToLoopback(socket, listen: false))
}

/// Binds the TCP socket `descriptor` to `port` on 127.0.0.1, an ephemeral one by default (and
/// listens with a backlog of 16 when `listen`); the port, or `nil` when a call failed.
public func bindToLoopback(_ descriptor: Int32, port: Int = 0, listen: Bool) -> Int? {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && (!listen || Glibc.listen(descriptor, 16) == 0)
                && getsockname(descriptor, $0, &length) == 0
        }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}

/// Writes an executable script. The file is opened with `O_CLOEXEC`: a child another test spawns
/// meanwhile must not inherit it open for writing, or executing the script fails with `ETXTBSY`
/// ("Text file busy") for as long as that child lives (seen under AddressSanitizer's load).
public func writeExecutable(_ text: String, to path: String) throws {
    try writeInPlace(text, to: path, mode: 0o755)
}

/// Writes `text` to `path` in place — the same inode when the file exists, truncated first — and
/// sets its mode to `mode` whatever the umask. Opened with `O_CLOEXEC` (see ``writeExecutable(_:to:)``).
public func writeInPlace(_ text: String, to path: String, mode: UInt32) throws {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
    guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(descriptor) }
    let failure = writeAll(Array(text.utf8), to: descriptor)
    guard failure == 0 else { throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO) }
    guard fchmod(descriptor, mode_t(mode)) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
