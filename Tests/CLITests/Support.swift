import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// The built `loginkit`, beside the test bundle.
func loginkitPath() throws -> String {
    let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("loginkit").path
    try #require(FileManager.default.isExecutableFile(atPath: path), "build it with `swift build --build-tests` (make test does)")
    return path
}

/// What a `loginkit` run printed and how it ended.
struct Run {
    let status: Int32
    let stdout: String
    let stderr: String
    var all: String { stdout + stderr }
}

/// Runs `loginkit` (or another `executable`) with `arguments`, feeding `input` to stdin; waits for it to exit.
func loginkit(_ arguments: [String], input: String? = nil, environment: [String: String] = [:], executable: String? = nil) async throws -> Run {
    var base = ProcessInfo.processInfo.environment
    let trust = ["LOGINKIT_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"]
    for name in ["LOGINKIT_STORE", "LOGINKIT_PROFILE", "LOGINKIT_ISSUER", "LOGINKIT_CLIENT_ID", "LOGINKIT_CLIENT_SECRET", "LOGINKIT_STORE_KEY",
                 "LOGINKIT_STORE_KEY_FILE", "LOGINKIT_STORAGE", "LOGINKIT_LOG_LEVEL", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"] + trust {
        base[name] = nil
    }
    // The machine's keyrings stay out of tests that do not ask for them (KeyringCLITests do): a
    // plain file, as `--storage plaintext`, unless the test seals with a key of its own (`auto`
    // then uses it, as the CLI did before key providers) or chooses a storage itself.
    if environment["LOGINKIT_STORE_KEY"] == nil, environment["LOGINKIT_STORE_KEY_FILE"] == nil, environment["LOGINKIT_STORAGE"] == nil {
        base["LOGINKIT_STORAGE"] = "plaintext"
    }
    let stdin = try TestPipe(), stdout = try TestPipe(), stderr = try TestPipe()
    let process = try SpawnedProcess(
        try executable ?? loginkitPath(), arguments, environment: base.merging(environment) { $1 },
        stdin: .descriptor(stdin.readEnd), stdout: .descriptor(stdout.writeEnd), stderr: .descriptor(stderr.writeEnd))
    close(stdin.readEnd)
    close(stdout.writeEnd)
    close(stderr.writeEnd)
    // Feed stdin, and read both pipes to the end (the child exits when done), then collect the status.
    stdin.writeAndClose(Data((input ?? "").utf8))
    async let out = stdout.readToEnd()
    async let err = stderr.readToEnd()
    let (outData, errData) = await (out, err)
    let status = await process.exitStatus()
    return Run(status: status, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
}

/// Starts `count` `loginkit` processes with `arguments` while holding `store`'s lock, and
/// releases it once all of them run: none of them can have changed the store before the last one
/// started. Returns the children (the caller reads them and waits for their exit).
func loginkitChildrenStartedUnderLock(
    of store: IDTokenStore, count: Int, _ arguments: [String], environment: [String: String] = ["LOGINKIT_STORAGE": "plaintext"]
) async throws -> [LoginKitTestSupport.ChildProcess] {
    let (spawned, spawnedContinuation) = AsyncStream<Void>.makeStream()
    let (held, heldContinuation) = AsyncStream<Void>.makeStream()
    async let holding: Void = store.withExclusiveAccess { _ in
        heldContinuation.yield()
        for await _ in spawned { break }
    }
    for await _ in held { break }
    let children: [LoginKitTestSupport.ChildProcess]
    do {
        children = try (0..<count).map { _ in try LoginKitTestSupport.ChildProcess(try loginkitPath(), arguments, environment: environment) }
    } catch {
        spawnedContinuation.yield()
        try await holding
        throw error
    }
    spawnedContinuation.yield()
    try await holding
    return children
}
