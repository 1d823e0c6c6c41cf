// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKitHTTP

/// One request of git's credential-helper protocol (gitcredentials(7), git-credential(1)): the
/// `key=value` lines git writes to a helper's standard input, up to an empty line or the end of
/// input — `protocol`, `host`, `path`, `username`, `password`, `wwwauth[]`, `capability[]`, and
/// whatever later versions of git add (kept, never acted on).
struct GitCredentialRequest: Sendable, Equatable {
    /// The most lines a request may hold.
    static let maximumLines = 256

    /// Single-valued attributes by key; a later line replaces an earlier one, as git reads them.
    private(set) var attributes: [String: String] = [:]
    /// Multi-valued attributes (`key[]=value`) by key without the brackets, in order; an empty value
    /// clears the list, as git reads it.
    private(set) var lists: [String: [String]] = [:]

    /// Parses `bytes`: lines ending in `\n` (a `\r` before it is dropped), up to the first empty line.
    ///
    /// - Throws: `CLIFailure` exit 2 for more than ``maximumLines`` lines, a line without `=` or with
    ///   an empty key, a NUL byte, or bytes that are not UTF-8.
    init(parsing bytes: [UInt8]) throws(CLIFailure) {
        guard !bytes.contains(0) else { throw CLIFailure.usage("git's credential request holds a NUL byte") }
        var lineCount = 0
        for rawLine in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let line = rawLine.last == UInt8(ascii: "\r") ? rawLine.dropLast() : rawLine
            if line.isEmpty { break }
            lineCount += 1
            guard lineCount <= Self.maximumLines else {
                throw CLIFailure.usage("git's credential request has more than \(Self.maximumLines) lines")
            }
            guard let text = String(validating: line, as: UTF8.self) else {
                throw CLIFailure.usage("git's credential request is not UTF-8")
            }
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw CLIFailure.usage("git's credential request has a line that is not key=value: \(Terminal.printable(text, limit: 100))")
            }
            let key = String(text[..<equals])
            let value = String(text[text.index(after: equals)...])
            if key.hasSuffix("[]") {
                let name = String(key.dropLast(2))
                if value.isEmpty { lists[name] = [] } else { lists[name, default: []].append(value) }
            } else {
                attributes[key] = value
            }
        }
    }

    /// The host the request names, as ``GitHosts`` keys it (lower-cased, the port kept); `nil`
    /// without one, or for one that names no host.
    var hostKey: String? {
        attributes["host"].flatMap { GitHosts.key(for: $0) }
    }

    /// Whether an access token may go where this request points, whichever host it is: `https`, or
    /// `http` only to a loopback host (`127.0.0.0/8`, `::1`, `localhost`) — never in clear text over
    /// a network. Another protocol, or no host: no. Whether a profile serves the host is
    /// ``GitHosts``' answer.
    var allowsToken: Bool {
        guard let host = attributes["host"], !host.isEmpty else { return false }
        switch attributes["protocol"]?.lowercased() {
        case "https": return URLParts("https://" + host + "/") != nil
        case "http": return URLParts("http://" + host + "/")?.isLoopback ?? false
        default: return false
        }
    }

    /// Whether `value` can be sent as a value of the protocol: one line, no control characters.
    static func isSendable(_ value: String) -> Bool {
        !value.isEmpty && !value.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}
#endif
