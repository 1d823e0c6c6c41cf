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
    ///
    /// The split is made on the UTF-8 bytes, as libcurl makes it: a delimiter (`://`, `#`, `/`,
    /// `?`, `@`, `:`, `[`, `]`) counts wherever its byte appears, even when a combining mark follows
    /// it (which would hide it from a search by `Character`). A port is 1 to 5 ASCII digits.
    package init?(_ string: String) {
        let bytes = Array(string.utf8)
        guard !bytes.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return nil }
        guard let schemeEnd = Self.firstIndex(of: Self.schemeSeparator, in: bytes[...]) else { return nil }
        let schemeBytes = bytes[..<schemeEnd]
        let scheme: String
        if Self.equalsIgnoringASCIICase(schemeBytes, "http") {
            scheme = "http"
        } else if Self.equalsIgnoringASCIICase(schemeBytes, "https") {
            scheme = "https"
        } else {
            return nil
        }
        var rest = bytes[(schemeEnd + Self.schemeSeparator.count)...]
        if let hash = rest.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
        let authorityBytes = rest[..<authorityEnd]
        let pathBytes = rest[authorityEnd...]
        guard !authorityBytes.isEmpty, !authorityBytes.contains(UInt8(ascii: "@")) else { return nil }

        var hostBytes: ArraySlice<UInt8>
        var portBytes: ArraySlice<UInt8>?
        if authorityBytes.first == UInt8(ascii: "[") {
            guard let close = authorityBytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostBytes = authorityBytes[(authorityBytes.startIndex + 1)..<close]
            let after = authorityBytes[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                portBytes = after.dropFirst()
            }
        } else if let colon = authorityBytes.lastIndex(of: UInt8(ascii: ":")) {
            hostBytes = authorityBytes[..<colon]
            portBytes = authorityBytes[(colon + 1)...]
        } else {
            hostBytes = authorityBytes
        }
        guard !hostBytes.isEmpty else { return nil }
        var port: Int?
        if let portBytes {
            guard (1...5).contains(portBytes.count), portBytes.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            let value = portBytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(value) else { return nil }
            port = value
        }
        self.scheme = scheme
        self.authority = String(decoding: authorityBytes, as: UTF8.self)
        self.host = String(decoding: hostBytes, as: UTF8.self).lowercased()
        self.port = port
        if pathBytes.isEmpty {
            self.pathAndQuery = "/"
        } else if pathBytes.first == UInt8(ascii: "?") {
            self.pathAndQuery = "/" + String(decoding: pathBytes, as: UTF8.self)
        } else {
            self.pathAndQuery = String(decoding: pathBytes, as: UTF8.self)
        }
    }

    /// Whether the host is a loopback address or `localhost`: `127.0.0.0/8` written as four
    /// decimal octets (1 to 3 ASCII digits each, at most 255, no leading zero), `::1`, `localhost`.
    ///
    /// A leading zero is refused because libcurl and glibc read such an octet as octal, and stop
    /// treating the host as an address at an `8` or `9`: `127.0.0.08` is a name they look up in DNS,
    /// which must not get the plain-http and no-proxy treatment loopback gets.
    package var isLoopback: Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        return Self.ipv4Prefix(of: host)?.first == 127
    }

    /// Whether the host is a link-local address written as one: `169.254.0.0/16` (four decimal
    /// octets, as ``isLoopback`` reads them) or an IPv6 literal in `fe80::/10`, where cloud
    /// instance metadata services answer over plain HTTP (`169.254.169.254`, `fe80::a9fe:a9fe`).
    /// Never a name: a name is looked up in DNS, whose answer can point anywhere.
    package var isLinkLocal: Bool {
        if let prefix = Self.ipv4Prefix(of: host), prefix.first == 169, prefix.second == 254 { return true }
        // An IPv6 literal (URLParts keeps it without brackets): the first group 0xfe80...0xfebf.
        guard host.contains(":"), let first = host.split(separator: ":", omittingEmptySubsequences: false).first,
            first.utf8.count == 4, let group = UInt16(first, radix: 16)
        else { return false }
        return group & 0xffc0 == 0xfe80
    }

    /// The first two octets of `host` written as four decimal octets
    /// (each 0...255, 1 to 3 ASCII digits, no leading zero: libcurl and glibc read a leading zero as
    /// octal and stop treating the host as an address at an `8` or `9`); `nil` for anything else.
    /// Read in one pass with no array (this runs for every request).
    private static func ipv4Prefix(of host: String) -> (first: Int, second: Int)? {
        var firstOctet = -1
        var secondOctet = -1
        var dots = 0
        var value = 0
        var digits = 0
        for byte in host.utf8 {
            if digits == 1 && value == 0 && byte != UInt8(ascii: ".") { return nil }  // a leading zero
            if byte == UInt8(ascii: ".") {
                guard digits > 0, dots < 3, value <= 255 else { return nil }
                if dots == 0 { firstOctet = value } else if dots == 1 { secondOctet = value }
                dots += 1
                value = 0
                digits = 0
            } else {
                guard (0x30...0x39).contains(byte), digits < 3 else { return nil }
                value = value * 10 + Int(byte - 0x30)
                digits += 1
            }
        }
        guard digits > 0, value <= 255, dots == 3 else { return nil }
        return (firstOctet, secondOctet)
    }

    private static let schemeSeparator: [UInt8] = Array("://".utf8)

    private static func firstIndex(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    private static func equalsIgnoringASCIICase(_ bytes: ArraySlice<UInt8>, _ lowercase: String) -> Bool {
        bytes.count == lowercase.utf8.count
            && zip(bytes, lowercase.utf8).allSatisfy { byte, expected in
                (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == expected
            }
    }
}
