/// The parts of an absolute http(s) URL LoginKit needs, split without Foundation's URL so that the
/// rules are ours and the same on every platform.
package struct URLParts: Sendable, Hashable {
    /// `http` or `https`, lowercased.
    package let scheme: String
    /// `host[:port]` exactly as written (IPv6 hosts keep their brackets).
    package let authority: String
    /// The host without brackets or port, lowercased.
    package let host: String
    /// The port, when the URL names one.
    package let port: Int?
    /// The path and query, `/` when the URL has none. A fragment is dropped.
    package let pathAndQuery: String

    /// Splits `string`; `nil` when it is not an absolute http(s) URL with a host, has user info
    /// (credentials never travel in URLs), a bad port, or whitespace/control characters.
    package init?(_ string: String) {
        guard !string.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return nil }
        guard let schemeEnd = string.firstRange(of: "://") else { return nil }
        let scheme = string[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        var rest = string[schemeEnd.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = String(rest[..<authorityEnd])
        var pathAndQuery = String(rest[authorityEnd...])
        if pathAndQuery.isEmpty { pathAndQuery = "/" } else if pathAndQuery.hasPrefix("?") { pathAndQuery = "/" + pathAndQuery }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }

        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority[...]
        }
        guard !host.isEmpty else { return nil }
        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII),
                let value = Int(portText), (1...65535).contains(value)
            else { return nil }
            port = value
        }
        self.scheme = scheme
        self.authority = authority
        self.host = host.lowercased()
        self.port = port
        self.pathAndQuery = pathAndQuery
    }

    /// Whether the host is a loopback address or `localhost`: `127.0.0.0/8`, `::1`, `localhost`.
    package var isLoopback: Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { octet in
            !octet.isEmpty && octet.count <= 3 && octet.allSatisfy(\.isASCII) && (Int(octet).map { $0 <= 255 } ?? false)
        }
    }
}
