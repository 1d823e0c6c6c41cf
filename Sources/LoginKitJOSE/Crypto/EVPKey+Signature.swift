internal import COpenSSL

extension JWSAlgorithm {
    /// The message digest (nil for EdDSA, which hashes internally).
    var digest: OpaquePointer? {
        switch self {
        case .rs256, .ps256, .es256: EVP_sha256()
        case .rs384, .ps384, .es384: EVP_sha384()
        case .rs512: EVP_sha512()
        case .edDSA: nil
        }
    }

    var usesPSS: Bool { self == .ps256 || self == .ps384 }
}

/// A message digest fetched once per process from the default provider.
///
/// `EVP_sha256()` and friends are legacy objects: OpenSSL 3 fetches the real implementation again on
/// every context initialised with them, which made per-verification set-up cost more than the RSA
/// arithmetic. Fetching once removes that.
///
/// Why `@unchecked Sendable` is safe: a fetched `EVP_MD` is immutable and reference counted, and
/// OpenSSL 3 documents fetched algorithm objects as shareable between threads (openssl-threads(7)).
/// These three are fetched once, never changed and never freed (one each per process).
struct FetchedDigest: @unchecked Sendable {  // safe: see the proof above
    let raw: OpaquePointer?

    static let sha256 = FetchedDigest(raw: EVP_MD_fetch(nil, "SHA2-256", nil))
    static let sha384 = FetchedDigest(raw: EVP_MD_fetch(nil, "SHA2-384", nil))
    static let sha512 = FetchedDigest(raw: EVP_MD_fetch(nil, "SHA2-512", nil))
}

extension JWSAlgorithm {
    /// The fetched digest for the pre-hashed verification path (nil for EdDSA).
    var fetchedDigest: OpaquePointer? {
        switch self {
        case .rs256, .ps256, .es256: FetchedDigest.sha256.raw
        case .rs384, .ps384, .es384: FetchedDigest.sha384.raw
        case .rs512: FetchedDigest.sha512.raw
        case .edDSA: nil
        }
    }
}

/// An `EVP_PKEY_CTX` initialised for verification with one algorithm's padding and digest.
///
/// Why `@unchecked Sendable` is safe: a context is used by one thread at a time — it lives in its
/// key's pool (`EVPKey.verifyContexts`, behind a lock) and is taken out of it for the duration of
/// one `EVP_PKEY_verify`; nothing else holds it. It keeps its own reference to the key.
final class VerifyContext: @unchecked Sendable {  // safe: see the proof above
    let raw: OpaquePointer
    /// The algorithm whose padding and digest it was set up with.
    let algorithm: JWSAlgorithm

    init(taking raw: OpaquePointer, algorithm: JWSAlgorithm) {
        self.raw = raw
        self.algorithm = algorithm
    }

    deinit {
        EVP_PKEY_CTX_free(raw)
    }
}

/// Idle verification contexts, one list per algorithm (a key usually serves one).
struct VerifyContextPool {
    private var lists: [[VerifyContext]] = Array(repeating: [], count: JWSAlgorithm.allCases.count)

    /// An idle context for `algorithm`, if there is one.
    mutating func take(_ algorithm: JWSAlgorithm) -> VerifyContext? {
        guard let context = lists[algorithm.ordinal].popLast() else { return nil }
        // A context set up for another algorithm's padding never serves this one, whatever the
        // ordinals say.
        return context.algorithm == algorithm ? context : nil
    }

    /// Keeps `context` for the next verification with `algorithm`, unless `limit` are idle already.
    mutating func give(_ context: VerifyContext, for algorithm: JWSAlgorithm, limit: Int) {
        if lists[algorithm.ordinal].count < limit { lists[algorithm.ordinal].append(context) }
    }
}

extension JWSAlgorithm {
    /// The algorithm's position in `allCases`, without a search.
    var ordinal: Int {
        switch self {
        case .rs256: 0
        case .rs384: 1
        case .rs512: 2
        case .ps256: 3
        case .ps384: 4
        case .es256: 5
        case .es384: 6
        case .edDSA: 7
        }
    }
}

extension EVPKey {
    /// How many idle verification contexts a key keeps per algorithm.
    static let verifyContextPoolLimit = 8

    /// Verifies a JWS signature over `input` (the ASCII `header.payload`).
    /// ECDSA signatures arrive as JOSE's raw `r || s` and are converted to DER for OpenSSL.
    ///
    /// RSA and ECDSA hash `input` with a fetched digest and verify the hash with a pooled context
    /// (`EVP_PKEY_verify`): no per-call method fetches and, once warm, no context set-up. EdDSA,
    /// which hashes internally, takes the one-shot `EVP_DigestVerify` path.
    func verify(signature: [UInt8], over input: UnsafeBufferPointer<UInt8>, algorithm: JWSAlgorithm) -> Bool {
        guard let digest = algorithm.fetchedDigest else {
            return verifyOneShot(signature: signature, over: input, algorithm: algorithm)
        }
        guard let curve = algorithm.ecCurve else {
            return signature.withUnsafeBufferPointer { verifyHash(of: input, signature: $0, digest: digest, algorithm: algorithm) }
        }
        guard signature.count == 2 * curve.coordinateSize else { return false }
        // The DER form is built on the stack: no allocation per verification.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.derSignatureCapacity(coordinateSize: curve.coordinateSize)) { der in
            guard let length = Self.writeDERSignature(fromRaw: signature, coordinateSize: curve.coordinateSize, into: der) else {
                return false
            }
            return verifyHash(of: input, signature: UnsafeBufferPointer(rebasing: der[..<length]), digest: digest, algorithm: algorithm)
        }
    }

    /// Hashes `input` with `digest` and verifies `signature` (in OpenSSL's form) over the hash with a
    /// pooled context.
    private func verifyHash(of input: UnsafeBufferPointer<UInt8>, signature: UnsafeBufferPointer<UInt8>, digest: OpaquePointer, algorithm: JWSAlgorithm) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(EVP_MAX_MD_SIZE)) { hash -> Bool in
            var hashLength: UInt32 = 0
            guard EVP_Digest(input.baseAddress, input.count, hash.baseAddress, &hashLength, digest, nil) == 1 else {
                ERR_clear_error()
                return false
            }
            guard let context = takeVerifyContext(algorithm: algorithm, digest: digest) else { return false }
            let result = EVP_PKEY_verify(context.raw, signature.baseAddress, signature.count, hash.baseAddress, Int(hashLength))
            if result != 1 { ERR_clear_error() }
            returnVerifyContext(context, algorithm: algorithm)
            return result == 1
        }
    }

    private func takeVerifyContext(algorithm: JWSAlgorithm, digest: OpaquePointer) -> VerifyContext? {
        if let pooled = verifyContexts.withLock({ $0.take(algorithm) }) { return pooled }
        guard let raw = EVP_PKEY_CTX_new_from_pkey(nil, self.raw, nil) else {
            ERR_clear_error()
            return nil
        }
        let context = VerifyContext(taking: raw, algorithm: algorithm)
        guard EVP_PKEY_verify_init(raw) == 1, EVP_PKEY_CTX_set_signature_md(raw, digest) == 1 else {
            ERR_clear_error()
            return nil
        }
        if algorithm.usesPSS {
            guard EVP_PKEY_CTX_set_rsa_padding(raw, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(raw, RSA_PSS_SALTLEN_DIGEST) == 1
            else {
                ERR_clear_error()
                return nil
            }
        } else if algorithm.ecCurve == nil {
            guard EVP_PKEY_CTX_set_rsa_padding(raw, RSA_PKCS1_PADDING) == 1 else {
                ERR_clear_error()
                return nil
            }
        }
        return context
    }

    private func returnVerifyContext(_ context: VerifyContext, algorithm: JWSAlgorithm) {
        verifyContexts.withLock { $0.give(context, for: algorithm, limit: Self.verifyContextPoolLimit) }
    }

    /// `EVP_DigestVerify` in one call (EdDSA: the message itself is signed, not a hash).
    private func verifyOneShot(signature: [UInt8], over input: UnsafeBufferPointer<UInt8>, algorithm: JWSAlgorithm) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, algorithm.digest, nil, raw) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = EVP_DigestVerify(context, signature, signature.count, input.baseAddress, input.count)
        ERR_clear_error()
        return result == 1
    }

    /// Signs `input`; ECDSA signatures are returned in JOSE's raw `r || s` form.
    func sign(_ input: [UInt8], algorithm: JWSAlgorithm) throws(TokenVerificationError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw Self.failure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestSignInit(context, &keyContext, algorithm.digest, nil, raw) == 1 else {
            throw Self.failure("EVP_DigestSignInit")
        }
        if algorithm.usesPSS {
            guard let keyContext,
                EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else { throw Self.failure("setting RSA-PSS padding") }
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, input, input.count) == 1 else { throw Self.failure("EVP_DigestSign") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, input, input.count) == 1 else {
            throw Self.failure("EVP_DigestSign")
        }
        signature.removeSubrange(length...)
        if let curve = algorithm.ecCurve {
            guard let raw = Self.rawSignature(fromDER: signature, coordinateSize: curve.coordinateSize) else {
                throw Self.failure("converting the ECDSA signature")
            }
            return raw
        }
        return signature
    }

    /// The most bytes ``writeDERSignature(fromRaw:coordinateSize:into:)`` writes: a SEQUENCE of two
    /// INTEGERs, each with a tag, a one-byte length and perhaps a zero pad; the SEQUENCE's length may
    /// take two bytes.
    static func derSignatureCapacity(coordinateSize: Int) -> Int { 2 * coordinateSize + 9 }

    /// Writes JOSE's raw `r || s` as the DER `ECDSA-Sig-Value` OpenSSL verifies (two INTEGERs in a
    /// SEQUENCE), built directly: minimal positive integers, the long-form length when needed. Writes
    /// to `output` (at least ``derSignatureCapacity(coordinateSize:)`` bytes) and answers the length;
    /// nil for a raw signature of the wrong size or a coordinate longer than P-521's (66 bytes).
    static func writeDERSignature(fromRaw raw: [UInt8], coordinateSize: Int, into output: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        guard raw.count == 2 * coordinateSize, coordinateSize > 0, coordinateSize <= 66,
            output.count >= derSignatureCapacity(coordinateSize: coordinateSize)
        else { return nil }
        /// The INTEGER for `raw[range]`, written at `position`; its end.
        func integer(_ range: Range<Int>, at position: Int) -> Int {
            var first = range.lowerBound
            while first < range.upperBound - 1, raw[first] == 0 { first += 1 }  // minimal: at least one byte
            let needsPad = raw[first] & 0x80 != 0  // positive: a set high bit needs a zero before it
            let length = range.upperBound - first + (needsPad ? 1 : 0)
            var cursor = position
            output[cursor] = 0x02
            output[cursor + 1] = UInt8(length)
            cursor += 2
            if needsPad {
                output[cursor] = 0
                cursor += 1
            }
            for index in first..<range.upperBound {
                output[cursor] = raw[index]
                cursor += 1
            }
            return cursor
        }
        // The body is written after a two-byte SEQUENCE header and moved up one byte when its length
        // fits the short form.
        let bodyStart = 3
        let bodyEnd = integer(coordinateSize..<(2 * coordinateSize), at: integer(0..<coordinateSize, at: bodyStart))
        let bodyLength = bodyEnd - bodyStart
        output[0] = 0x30
        if bodyLength < 0x80 {
            output[1] = UInt8(bodyLength)
            for index in 0..<bodyLength { output[2 + index] = output[bodyStart + index] }
            return 2 + bodyLength
        }
        output[1] = 0x81
        output[2] = UInt8(bodyLength)
        return bodyStart + bodyLength
    }

    static func rawSignature(fromDER der: [UInt8], coordinateSize: Int) -> [UInt8]? {
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { return nil }
        defer { ECDSA_SIG_free(signature) }
        guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature) else { return nil }
        var raw = [UInt8](repeating: 0, count: 2 * coordinateSize)
        let ok = raw.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return BN_bn2binpad(r, base, Int32(coordinateSize)) == Int32(coordinateSize)
                && BN_bn2binpad(s, base + coordinateSize, Int32(coordinateSize)) == Int32(coordinateSize)
        }
        return ok ? raw : nil
    }

    static func failure(_ step: String) -> TokenVerificationError {
        TokenVerificationError(.cryptoFailure, "\(step) failed: \(openSSLErrorDescription())")
    }
}
