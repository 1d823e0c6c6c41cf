// loginkit-alone: LoginKit's HTTP runs in a process that links LoginKit and nothing else, so that
// its peak RSS and CPU time are LoginKit's own (the other peers run in `loginkit-bench`).
//
//   http <loginkit|loginkit-global> <seq|conc> <url> <requests> [in-flight]
import BenchCore
#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
do {
    guard arguments.count == 6 || arguments.count == 7, arguments[1] == "http", let requests = Int(arguments[5]),
        let peer = try loginKitPeer(arguments[2], url: arguments[4])
    else {
        throw BenchError("usage: loginkit-alone http <loginkit|loginkit-global> <seq|conc> <url> <requests> [in-flight]")
    }
    try await benchHTTP(peer, mode: arguments[3], requests: requests, inFlight: arguments.count == 7 ? Int(arguments[6]) ?? 64 : 64)
} catch {
    let message = Array("loginkit-alone: \(error)\n".utf8)
    _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(1)
}
