// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A credential helper's request on standard input (git's `key=value` lines, docker's server URL or
/// JSON), read whole and bounded: a request is a few lines, so input beyond ``limit`` bytes is a
/// usage error, never a buffer that grows with what the other side sends.
enum BoundedInput {
    /// The most a request may hold: 64 KiB.
    static let limit = 64 * 1024

    /// The bytes of standard input up to its end — or, with `untilBlankLine`, up to the first empty
    /// line (git's request ends there; the empty line and what follows are not returned, and input
    /// is not read beyond the chunk that held it). Read on a thread of its own: a pipe or a terminal
    /// blocks for as long as its writer takes.
    ///
    /// - Throws: `CLIFailure`: exit 2 for more than ``limit`` bytes, exit 1 when reading fails.
    static func readRequest(untilBlankLine: Bool, from descriptor: Int32 = STDIN_FILENO) async throws -> [UInt8] {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], CLIFailure>, Never>) in
            runOnThreadOfItsOwn {
                continuation.resume(returning: readBlocking(untilBlankLine: untilBlankLine, from: descriptor))
            }
        }
        return try result.get()
    }

    private static func readBlocking(untilBlankLine: Bool, from descriptor: Int32) -> Result<[UInt8], CLIFailure> {
        let tooLarge = CLIFailure.usage("the request on standard input is larger than \(limit / 1024) KiB")
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if untilBlankLine, let end = requestEnd(in: bytes) {
                return end <= limit ? .success(Array(bytes[..<end])) : .failure(tooLarge)
            }
            if bytes.count > limit { return .failure(tooLarge) }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes.append(contentsOf: buffer[..<count])
            } else if count == 0 {
                return .success(bytes)
            } else if errno != EINTR {
                return .failure(CLIFailure(exitCode: 1, "cannot read standard input: \(String(cString: strerror(errno)))"))
            }
        }
    }

    /// Where the content before the first empty line (`\n` or `\r\n` alone) ends in `bytes`; `nil`
    /// while there is none.
    static func requestEnd(in bytes: [UInt8]) -> Int? {
        var lineStart = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") {
            let length = index - lineStart
            if length == 0 || (length == 1 && bytes[lineStart] == UInt8(ascii: "\r")) { return lineStart }
            lineStart = index + 1
        }
        return nil
    }
}
#endif
