import LoginKitHTTP

/// An address the redirect receiver may listen on: an IP address (or `localhost`, taken as
/// `127.0.0.1`) and a port, `0` for any free one. As kubelogin's `--listen-address`: given several,
/// the receiver takes the first it can bind.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The IP address, without brackets (`127.0.0.1`, `::1`), or `localhost`.
    package var host: String
    /// The port; `0` lets the system pick a free one.
    package var port: Int

    /// `127.0.0.1`, any free port: the default.
    package static let loopback = ListenAddress()

    /// Listen on `host` (an IP address or `localhost`) at `port`, 0 for any free one.
    public init(host: String = "127.0.0.1", port: Int = 0) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`: `127.0.0.1:8000`, `[::1]:8000`, `localhost:0`. `nil` for anything else
    /// (no port, a port outside 0…65535, an empty host).
    package init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            guard !host.contains(":") else { return nil }  // IPv6 needs brackets
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII),
            let port = Int(portText), (0...65535).contains(port)
        else { return nil }
        self.init(host: String(host), port: port)
    }

    /// Whether the host is a loopback address (`127.0.0.0/8`, `::1`, `localhost`).
    package var isLoopback: Bool {
        URLParts("http://\(bracketedHost)/")?.isLoopback ?? false
    }

    var bracketedHost: String { host.contains(":") ? "[\(host)]" : host }

    public var description: String { "\(bracketedHost):\(port)" }
}
