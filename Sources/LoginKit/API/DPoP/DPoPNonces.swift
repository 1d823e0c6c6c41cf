import HTTPTypes
import LoginKitHTTP

/// The last `DPoP-Nonce` (RFC 9449 §8, §9) each origin (`scheme://host[:port]`, lower-cased, the
/// default port left out) sent, for the next proof to that origin.
///
/// Bounded: at most ``capacity`` origins (the one remembered longest ago goes first) and nonces of
/// at most ``maximumNonceLength`` characters of RFC 9449's `NQCHAR` (printable ASCII but space, `"`
/// and `\`); anything else a server sends is ignored.
///
/// Concurrency contract: `Sendable`; every method may be called from any task at once.
package final class DPoPNonces: Sendable {
    /// The most origins remembered.
    static let capacity = 256
    /// The longest nonce remembered.
    static let maximumNonceLength = 1024

    private struct State {
        var entries: [String: (nonce: String, stored: UInt64)] = [:]
        var counter: UInt64 = 0
    }
    private let state = LockedState(State())

    /// An empty memory.
    package init() {}

    /// The nonce `url`'s origin sent last, or `nil`.
    package func nonce(for url: String) -> String? {
        guard let origin = Self.origin(of: url) else { return nil }
        return state.withLock { $0.entries[origin]?.nonce }
    }

    /// Remembers `response`'s `DPoP-Nonce` for `url`'s origin, when it has a usable one.
    package func remember(_ response: HTTPResponse, for url: String) {
        guard let nonce = Self.nonce(in: response), let origin = Self.origin(of: url) else { return }
        state.withLock { state in
            if state.entries[origin] == nil, state.entries.count >= Self.capacity,
                let oldest = state.entries.min(by: { $0.value.stored < $1.value.stored })?.key
            {
                state.entries[oldest] = nil
            }
            state.counter += 1
            state.entries[origin] = (nonce: nonce, stored: state.counter)
        }
    }

    /// `response`'s `DPoP-Nonce`, when it is one: 1 to ``maximumNonceLength`` `NQCHAR`s (RFC 9449
    /// §8.1). Two fields arrive joined by `, ` and are no nonce.
    static func nonce(in response: HTTPResponse) -> String? {
        guard let value = response.headerFields[.dpopNonce], !value.isEmpty, value.utf8.count <= maximumNonceLength,
            value.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) })
        else { return nil }
        return value
    }

    /// `scheme://host[:port]` of `url`, lower-cased (IPv6 hosts in brackets), the scheme's default
    /// port left out; `nil` for what is not an absolute http(s) URL.
    static func origin(of url: String) -> String? {
        guard let parts = URLParts(url) else { return nil }
        let host = parts.host.contains(":") ? "[\(parts.host)]" : parts.host
        let defaultPort = parts.scheme == "https" ? 443 : 80
        let port = parts.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? ""
        return "\(parts.scheme)://\(host)\(port)"
    }
}

extension HTTPField.Name {
    // Both are valid field names (RFC 9110 §5.1 tokens): the fallbacks are never taken.

    /// `DPoP`: a proof of possession (RFC 9449 §4.1).
    package static let dpop = HTTPField.Name("DPoP") ?? .accept
    /// `DPoP-Nonce`: the nonce a server wants in the next proof (RFC 9449 §8.1, §9).
    package static let dpopNonce = HTTPField.Name("DPoP-Nonce") ?? .accept
}

extension OAuth2API: AuthorizedRequestAPI {}
