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

/// Runs `loginkit` with `arguments`, feeding `input` to stdin; waits for it to exit.
func loginkit(_ arguments: [String], input: String? = nil, environment: [String: String] = [:]) async throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try loginkitPath())
    process.arguments = arguments
    var base = ProcessInfo.processInfo.environment
    for name in ["LOGINKIT_STORE", "LOGINKIT_PROFILE", "LOGINKIT_ISSUER", "LOGINKIT_CLIENT_ID", "LOGINKIT_CLIENT_SECRET", "LOGINKIT_STORE_KEY"] {
        base[name] = nil
    }
    process.environment = base.merging(environment) { $1 }
    let stdout = Pipe(), stderr = Pipe(), stdin = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = stdin
    let (exited, continuation) = AsyncStream<Int32>.makeStream()
    process.terminationHandler = { continuation.yield($0.terminationStatus); continuation.finish() }
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    // Read both pipes to the end (the child exits when done), then collect the status.
    async let out = onDedicatedThread { stdout.fileHandleForReading.readDataToEndOfFile() }
    async let err = onDedicatedThread { stderr.fileHandleForReading.readDataToEndOfFile() }
    let (outData, errData) = await (out, err)
    var status: Int32 = -1
    for await code in exited { status = code }
    return Run(status: status, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
}
