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
    var standardError = StandardError()
    print("loginkit-alone: \(error)", to: &standardError)
    exit(1)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        fputs(string, stderr)
    }
}
