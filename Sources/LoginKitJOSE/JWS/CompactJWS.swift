#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A compact-serialised JWS (`header.payload.signature`, RFC 7515 §7.1), parsed but not verified.
///
/// Parsing is strict and bounded: at most ``defaultMaximumLength`` characters (checked before any
/// decoding), exactly three parts, strict base64url, a strictly valid JSON header object with a
/// string `alg`, and no `crit` extensions (none are understood, so RFC 7515 §4.1.11 requires refusal).
package struct CompactJWS: Sendable {
    /// The longest token accepted by default: 64 KiB. ID tokens are a few KiB.
    package static let defaultMaximumLength = 64 * 1024

    /// The protected header.
    package let header: [String: JSONValue]
    /// The header's `alg`, as written.
    package let algorithmName: String
    /// The header's `kid`, when present.
    package let keyID: String?
    /// The decoded payload bytes.
    package let payload: [UInt8]
    /// The decoded signature bytes.
    package let signature: [UInt8]
    /// The header's `typ`, when it is a string.
    package let tokenType: String?
    /// The token as parsed; its first `signingInputLength` bytes are the signing input.
    private let text: String
    private let signingInputLength: Int

    /// Parses `token`.
    ///
    /// - Throws: `TokenVerificationError` `.malformed`.
    package init(parsing token: some StringProtocol, maximumLength: Int = defaultMaximumLength) throws(TokenVerificationError) {
        var text = String(token)
        // `withUTF8` rethrows untyped errors, so the parts travel out as a `Result`.
        let (headerBytes, payload, signature, signingInputLength) = try text.withUTF8 { utf8 in
            Result { () throws(TokenVerificationError) in try Self.split(utf8, maximumLength: maximumLength) }
        }.get()
        let headerValue: JSONValue
        do {
            headerValue = try JSONValue.parse(headerBytes)
        } catch {
            throw TokenVerificationError(.malformed, "the header is not valid JSON: \(error)", underlying: error)
        }
        guard let header = headerValue.objectValue else {
            throw TokenVerificationError(.malformed, "the header is not a JSON object")
        }
        guard let algorithmName = header["alg"]?.stringValue else {
            throw TokenVerificationError(.malformed, "the header has no string \"alg\"")
        }
        var keyID: String?
        if let kid = header["kid"] {
            guard let text = kid.stringValue else { throw TokenVerificationError(.malformed, "the header's \"kid\" is not a string") }
            keyID = text
        }
        if header["crit"] != nil {
            throw TokenVerificationError(.malformed, "the header lists critical extensions (\"crit\"), none of which are supported")
        }
        self.header = header
        self.algorithmName = algorithmName
        self.keyID = keyID
        self.tokenType = header["typ"]?.stringValue
        self.payload = payload
        self.signature = signature
        self.text = text
        self.signingInputLength = signingInputLength
    }

    /// The bytes that were signed: ASCII `base64url(header) "." base64url(payload)`.
    package var signingInput: [UInt8] { withSigningInput { Array($0) } }

    /// Calls `body` with the signing input, read in place from the token.
    func withSigningInput<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        var text = text  // a native String: `withUTF8` reads its storage, it copies nothing
        let length = signingInputLength
        return text.withUTF8 { body(UnsafeBufferPointer(rebasing: $0[..<length])) }
    }

    /// The three decoded parts and the signing input's length, from the token's UTF-8 bytes.
    private static func split(
        _ utf8: UnsafeBufferPointer<UInt8>, maximumLength: Int
    ) throws(TokenVerificationError) -> (header: [UInt8], payload: [UInt8], signature: [UInt8], signingInputLength: Int) {
        guard utf8.count <= maximumLength else {
            throw TokenVerificationError(.malformed, "the token is longer than \(maximumLength) bytes")
        }
        func dot(after start: Int) -> Int? {
            guard start < utf8.count, let base = utf8.baseAddress, let found = memchr(base + start, Int32(UInt8(ascii: ".")), utf8.count - start) else {
                return nil
            }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        guard let first = dot(after: 0), let second = dot(after: first + 1), dot(after: second + 1) == nil else {
            let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).count
            throw TokenVerificationError(.malformed, "a compact JWS has exactly three dot-separated parts, this has \(parts)")
        }
        guard let headerBytes = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[..<first])), !headerBytes.isEmpty else {
            throw TokenVerificationError(.malformed, "the header is not valid base64url")
        }
        guard let payload = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[(first + 1)..<second])) else {
            throw TokenVerificationError(.malformed, "the payload is not valid base64url")
        }
        guard let signature = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[(second + 1)...])) else {
            throw TokenVerificationError(.malformed, "the signature is not valid base64url")
        }
        return (headerBytes, payload, signature, second)
    }

    /// Signs `payload` with `key` and returns the compact serialisation. The header gets `alg`,
    /// `kid` and any `extraHeader` members (`typ`, …).
    package static func sign(
        payload: [UInt8], with key: SigningKey, extraHeader: [String: JSONValue] = [:]
    ) throws(TokenVerificationError) -> String {
        var header = extraHeader
        header["alg"] = .string(key.algorithm.rawValue)
        if let keyID = key.keyID { header["kid"] = .string(keyID) }
        let signingInput = Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Checks the signature with `key` for `algorithm`; `false` when it does not verify or the key
    /// does not fit the algorithm.
    ///
    /// A key without `alg` that verifies is bound to `algorithm` from then on (``JWK/boundAlgorithm``):
    /// a later check with another algorithm under the same key is `false`.
    package func hasValidSignature(key: JWK, algorithm: JWSAlgorithm) -> Bool {
        guard key.canVerify(algorithm) else { return false }
        guard withSigningInput({ key.key.verify(signature: signature, over: $0, algorithm: algorithm) }) else { return false }
        return key.bind(to: algorithm)
    }

}
