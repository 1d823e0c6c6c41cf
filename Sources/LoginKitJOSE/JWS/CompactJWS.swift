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
    /// The bytes that were signed: ASCII `base64url(header) "." base64url(payload)`.
    package let signingInput: [UInt8]

    /// Parses `token`.
    ///
    /// - Throws: `TokenVerificationError` `.malformed`.
    package init(parsing token: some StringProtocol, maximumLength: Int = defaultMaximumLength) throws(TokenVerificationError) {
        var text = String(token)
        // `withUTF8` rethrows untyped errors, so the parts travel out as a `Result`.
        let (headerBytes, payload, signature, signingInput) = try text.withUTF8 { utf8 in
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
        self.payload = payload
        self.signature = signature
        self.signingInput = signingInput
    }

    /// The three decoded parts and the signing input, from the token's UTF-8 bytes.
    private static func split(
        _ utf8: UnsafeBufferPointer<UInt8>, maximumLength: Int
    ) throws(TokenVerificationError) -> (header: [UInt8], payload: [UInt8], signature: [UInt8], signingInput: [UInt8]) {
        guard utf8.count <= maximumLength else {
            throw TokenVerificationError(.malformed, "the token is longer than \(maximumLength) bytes")
        }
        var dots = (first: -1, second: -1)
        var dotCount = 0
        for index in utf8.indices where utf8[index] == UInt8(ascii: ".") {
            dotCount += 1
            if dotCount == 1 { dots.first = index } else if dotCount == 2 { dots.second = index } else { break }
        }
        guard dotCount == 2 else {
            let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).count
            throw TokenVerificationError(.malformed, "a compact JWS has exactly three dot-separated parts, this has \(parts)")
        }
        guard let headerBytes = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[..<dots.first])), !headerBytes.isEmpty else {
            throw TokenVerificationError(.malformed, "the header is not valid base64url")
        }
        guard let payload = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[(dots.first + 1)..<dots.second])) else {
            throw TokenVerificationError(.malformed, "the payload is not valid base64url")
        }
        guard let signature = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: utf8[(dots.second + 1)...])) else {
            throw TokenVerificationError(.malformed, "the signature is not valid base64url")
        }
        return (headerBytes, payload, signature, Array(utf8[..<dots.second]))
    }

    /// Signs `payload` with `key` and returns the compact serialisation. The header gets `alg`,
    /// `kid` and any `extraHeader` members (`typ`, …).
    package static func sign(
        payload: [UInt8], with key: SigningKey, extraHeader: [String: JSONValue] = [:]
    ) throws(CryptoError) -> String {
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
        guard key.key.verify(signature: signature, over: signingInput, algorithm: algorithm) else { return false }
        return key.bind(to: algorithm)
    }

    /// The header's `typ`, when it is a string.
    package var tokenType: String? { header["typ"]?.stringValue }
}
