#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
internal import LoginKitHTTP

/// A DPoP key pair (RFC 9449): ES256 by default; ES384, EdDSA, RS256, PS256 on request.
///
/// It signs the proofs that bind a token to it (``proof(method:url:nonce:accessToken:now:)``);
/// ``thumbprint`` is what a bound token's `cnf.jkt` holds. It encodes (`Codable`) as its private
/// JWK, so it is stored with the credentials it belongs to and sealed with them.
///
/// `description` names the algorithm and thumbprint only; no mirror shows the private key.
package struct DPoPKey: Sendable, Hashable, Codable, CustomStringConvertible, CustomReflectable {
    /// The algorithms a DPoP key signs with: ES256, ES384, EdDSA, RS256, PS256.
    package static let supportedAlgorithms: Set<JWSAlgorithm> = [.es256, .es384, .edDSA, .rs256, .ps256]

    /// The private key that signs the proofs (it has no `kid`).
    package let signingKey: SigningKey
    /// The public JWK put in proofs: only the required public members (kty, crv, x, y / kty, n, e / kty, crv, x).
    package let publicJWK: JSONValue
    /// RFC 7638 SHA-256 JWK thumbprint, base64url without padding (what `cnf.jkt` holds).
    package let thumbprint: String
    /// base64url of the protected header every proof of this key has: `alg`, `jwk`, `typ`.
    private let encodedHeader: String

    /// The algorithm the proofs are signed with.
    package var algorithm: JWSAlgorithm { signingKey.algorithm }

    /// Takes `key` (without its `kid`) once its algorithm is one DPoP allows.
    private init(checking key: SigningKey) throws(TokenVerificationError) {
        guard Self.supportedAlgorithms.contains(key.algorithm) else { throw Self.unsupported(key.algorithm.rawValue) }
        let signingKey = SigningKey(algorithm: key.algorithm, keyID: nil, key: key.key)
        let jwk = try signingKey.publicJWK()
        let publicJWK = jwk.requiredMembers
        let header: JSONValue = .object(["typ": .string("dpop+jwt"), "alg": .string(key.algorithm.rawValue), "jwk": publicJWK])
        self.signingKey = signingKey
        self.publicJWK = publicJWK
        self.thumbprint = try jwk.thumbprint()  // throws only when OpenSSL cannot hash (.cryptoFailure): no key without its thumbprint
        self.encodedHeader = Base64URL.encode(Array(header.serialized.utf8))
    }

    /// A fresh key: P-256 (ES256), P-384 (ES384), Ed25519 (EdDSA), or 2048-bit RSA (RS256, PS256).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` for another algorithm, `.cryptoFailure`
    ///   when OpenSSL fails.
    package static func generate(_ algorithm: JWSAlgorithm = .es256) throws(TokenVerificationError) -> DPoPKey {
        guard supportedAlgorithms.contains(algorithm) else { throw unsupported(algorithm.rawValue) }
        return try DPoPKey(checking: SigningKey.generate(algorithm, keyID: nil))
    }

    /// From its private JWK (what `privateJWK()` wrote; `alg` member names the algorithm).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` when the JWK names no supported algorithm
    ///   or is not a consistent private key of that algorithm; the message never quotes the key.
    package init(privateJWK: JSONValue) throws(TokenVerificationError) {
        guard let name = privateJWK["alg"]?.stringValue else {
            throw TokenVerificationError(.invalidKey, "a DPoP key's JWK names its algorithm (\"alg\"); this one does not")
        }
        guard let algorithm = JWSAlgorithm(rawValue: name), Self.supportedAlgorithms.contains(algorithm) else {
            throw Self.unsupported(name)
        }
        try self.init(checking: SigningKey(jwk: privateJWK, algorithm: algorithm, keyID: nil))
    }

    /// The private JWK: kty, crv/x/y/d (EC), n/e/d/p/q/dp/dq/qi (RSA), crv/x/d (OKP), plus "alg".
    /// It holds the private key: keep it sealed, never log or print it.
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL cannot export the key.
    package func privateJWK() throws(TokenVerificationError) -> JSONValue {
        try signingKey.privateJWK()
    }

    /// A proof (compact JWS): header {typ: "dpop+jwt", alg, jwk: publicJWK}; claims {jti: 16 random
    /// bytes base64url, htm: method, htu: DPoPKey.htu(url), iat: seconds, nonce?, ath?}. `ath` is
    /// base64url(SHA-256(ASCII accessToken)) when `accessToken` is given.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when `method` is not an HTTP method name or
    ///   `url` not an absolute http(s) URL, `.cryptoFailure` when OpenSSL fails.
    package func proof(method: String, url: String, nonce: String?, accessToken: String?, now: Date) throws(TokenVerificationError) -> String {
        guard Self.isMethodName(method) else {
            throw TokenVerificationError(.malformed, "a DPoP proof needs an HTTP method name (a token, RFC 9110 §9.1)")
        }
        guard let htu = Self.htu(url) else {
            throw TokenVerificationError(.malformed, "a DPoP proof needs an absolute http or https URL")
        }
        let seconds = now.timeIntervalSince1970
        guard seconds.isFinite, abs(seconds) < 1e15 else {
            throw TokenVerificationError(.malformed, "the time given for the DPoP proof is out of range")
        }
        // The claims as JSON bytes written directly (no dictionary, no sorting: a proof is made per
        // request, `make bench` compares it with OpenSSL's signing alone), then the compact JWS in
        // one buffer.
        var payload: [UInt8] = []
        payload.reserveCapacity(160 + htu.utf8.count + (nonce?.utf8.count ?? 0))
        payload += #"{"jti":""#.utf8
        payload += Base64URL.encode(try SecureRandom.bytes(16)).utf8
        payload += #"","htm":"#.utf8
        Self.appendJSONString(method, to: &payload)
        payload += #","htu":"#.utf8
        Self.appendJSONString(htu, to: &payload)
        payload += #","iat":"#.utf8
        payload += String(Int64(seconds.rounded(.down))).utf8
        if let nonce {
            payload += #","nonce":"#.utf8
            Self.appendJSONString(nonce, to: &payload)
        }
        if let accessToken {
            payload += #","ath":""#.utf8
            payload += try Self.hashingAccessToken(accessToken).utf8
            payload.append(UInt8(ascii: "\""))
        }
        payload.append(UInt8(ascii: "}"))
        var signingInput = Array(encodedHeader.utf8)
        signingInput.append(UInt8(ascii: "."))
        signingInput += Base64URL.encode(payload).utf8
        let signature = try signingKey.sign(signingInput)
        signingInput.append(UInt8(ascii: "."))
        signingInput += Base64URL.encode(signature).utf8
        return String(decoding: signingInput, as: UTF8.self)
    }

    /// `text` as a JSON string (RFC 8259 §7): quoted, with `"`, `\` and control characters escaped.
    static func appendJSONString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output += Array(#"\u00"#.utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// RFC 9449 §4.3 htu: the URL without query and fragment, scheme and host lower-cased, default port
    /// (80 for http, 443 for https) removed, dot segments removed from the path (RFC 3986 §5.2.4, as
    /// libcurl removes them from the path it sends: `/a/../b` is `/b`), empty path → "/". `nil` when
    /// `url` is not absolute http(s).
    ///
    /// Percent-encoding is left as written, and a percent-encoded dot (`%2E`) is no dot segment; an
    /// IPv6 host keeps its brackets. A URL with user info, whitespace or a bad port is `nil`
    /// (``URLParts``).
    package static func htu(_ url: String) -> String? {
        guard let parts = URLParts(url) else { return nil }
        let pathAndQuery = Array(parts.pathAndQuery.utf8)
        let pathEnd = pathAndQuery.firstIndex(of: UInt8(ascii: "?")) ?? pathAndQuery.endIndex
        let path = removingDotSegments(pathAndQuery[..<pathEnd])
        var result = parts.scheme + "://"
        result += parts.host.utf8.contains(UInt8(ascii: ":")) ? "[" + parts.host + "]" : parts.host
        if let port = parts.port, port != (parts.scheme == "https" ? 443 : 80) { result += ":" + String(port) }
        return result + (path.isEmpty ? "/" : path)
    }

    /// RFC 3986 §5.2.4 remove_dot_segments of `path`'s UTF-8 bytes: only the literal segments `.`
    /// and `..` are dots, a percent-encoded one (`%2E`) is kept as written.
    static func removingDotSegments(_ path: ArraySlice<UInt8>) -> String {
        let slash = UInt8(ascii: "/")
        guard path.contains(UInt8(ascii: ".")) else { return String(decoding: path, as: UTF8.self) }
        var input = path
        var output: [UInt8] = []
        /// Drops the last segment of `output` and the `/` before it (rule C).
        func dropLastOutputSegment() {
            if let last = output.lastIndex(of: slash) {
                output.removeSubrange(last...)
            } else {
                output.removeAll()
            }
        }
        while !input.isEmpty {
            if input.starts(with: "../".utf8) {  // A
                input = input.dropFirst(3)
            } else if input.starts(with: "./".utf8) {  // A
                input = input.dropFirst(2)
            } else if input.starts(with: "/./".utf8) {  // B: "/./rest" becomes "/rest"
                input = input.dropFirst(2)
            } else if input.elementsEqual("/.".utf8) {  // B
                input = [slash]
            } else if input.starts(with: "/../".utf8) {  // C: "/../rest" becomes "/rest"
                input = input.dropFirst(3)
                dropLastOutputSegment()
            } else if input.elementsEqual("/..".utf8) {  // C
                input = [slash]
                dropLastOutputSegment()
            } else if input.elementsEqual(".".utf8) || input.elementsEqual("..".utf8) {  // D
                input = []
            } else {  // E: the first segment, with its leading "/", moves to the output
                let searchStart = input.first == slash ? input.index(after: input.startIndex) : input.startIndex
                let end = input[searchStart...].firstIndex(of: slash) ?? input.endIndex
                output.append(contentsOf: input[..<end])
                input = input[end...]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// base64url(SHA-256(token)), the `ath` value.
    ///
    /// Empty only if OpenSSL cannot hash, which no verifier accepts as an `ath`.
    package static func accessTokenHash(_ token: String) -> String {
        (try? hashingAccessToken(token)) ?? ""
    }

    /// base64url(SHA-256(token)).
    static func hashingAccessToken(_ token: String) throws(TokenVerificationError) -> String {
        Base64URL.encode(try MessageDigest.sha256(Array(token.utf8)))
    }

    /// Whether `method` is an RFC 9110 method name: 1 to 64 `tchar`s.
    private static func isMethodName(_ method: String) -> Bool {
        guard !method.isEmpty, method.utf8.count <= 64 else { return false }
        return method.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    private static func unsupported(_ name: String) -> TokenVerificationError {
        TokenVerificationError(
            .invalidKey, "a DPoP key signs with ES256, ES384, EdDSA, RS256 or PS256, not \"\(printableExcerpt(name, limit: 16))\"")
    }

    // MARK: Hashable, Codable, descriptions

    /// Equal when they are the same key pair used with the same algorithm.
    package static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool {
        lhs.thumbprint == rhs.thumbprint && lhs.algorithm == rhs.algorithm
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(thumbprint)
        hasher.combine(algorithm)
    }

    /// A member name of the private JWK, as a coding key.
    private struct MemberName: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }

        init(stringValue: String) {
            self.stringValue = stringValue
        }

        init?(intValue: Int) {
            return nil
        }
    }

    /// The most members a stored key's JWK may have: RSA's ten, with room to spare.
    private static let maximumMemberCount = 16

    /// Encodes the private JWK, an object of strings.
    package func encode(to encoder: any Encoder) throws {
        let members = try privateJWK().objectValue ?? [:]
        var container = encoder.container(keyedBy: MemberName.self)
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            guard let text = value.stringValue else { continue }
            try container.encode(text, forKey: MemberName(stringValue: name))
        }
    }

    /// Decodes a private JWK (an object of strings) through ``init(privateJWK:)``.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: MemberName.self)
        let names = container.allKeys
        guard names.count <= Self.maximumMemberCount else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a DPoP key's JWK has at most \(Self.maximumMemberCount) members"))
        }
        var members: [String: JSONValue] = [:]
        for name in names {
            members[name.stringValue] = .string(try container.decode(String.self, forKey: name))
        }
        let key: DPoPKey
        do {
            key = try DPoPKey(privateJWK: .object(members))
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message, underlyingError: error))
        }
        self = key
    }

    package var description: String { "DPoPKey(\(algorithm), jkt: \(thumbprint))" }

    /// No children: `dump` and debuggers show the description, never the private key.
    package var customMirror: Mirror { Mirror(self, children: [:]) }
}
