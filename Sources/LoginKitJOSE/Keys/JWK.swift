internal import COpenSSL
internal import LoginKitHTTP

/// A public JSON Web Key (RFC 7517) for signature verification: RSA (`n`, `e`), EC P-256/P-384
/// (`x`, `y`) or OKP Ed25519 (`x`).
///
/// The OpenSSL key is built once, when the JWK is parsed, through OpenSSL 3's `EVP_PKEY_fromdata`,
/// and reused for every verification. Unsafe keys are refused (``TokenVerificationError/Code/unsafeKey``):
/// an RSA exponent `e` that is even, below 3 or over 256 bits (with `e` = 1 the "signature" is the
/// padded hash itself, which anyone can make), an RSA modulus that is even or outside 2048…16384
/// bits, an EC point not on its curve.
///
/// A key without `alg` is bound to the first algorithm it verifies a signature with, and serves no
/// other from then on: one RSA key cannot be played as RS256 and PS256 at once.
/// Copies of a `JWK` share the binding.
public struct JWK: Sendable {
    /// The smallest RSA modulus accepted, in bits.
    package static let minimumRSABits = 2048
    /// The largest RSA modulus accepted, in bits (what OpenSSL itself will use).
    package static let maximumRSABits = 16_384

    /// `kty`.
    package enum KeyType: String, Sendable, Hashable {
        /// An RSA key (`n`, `e`).
        case rsa = "RSA"
        /// An elliptic-curve key (`crv` P-256 or P-384, `x`, `y`).
        case ec = "EC"
        /// An octet key pair (`crv` Ed25519, `x`; RFC 8037).
        case okp = "OKP"
    }

    /// `kty`.
    package let keyType: KeyType
    /// `kid`, when present.
    public let keyID: String?
    /// `alg`, when present: the only algorithm this key may be used with.
    package let algorithm: String?
    /// `use`, when present (`sig` for signing keys).
    package let use: String?
    /// `crv` for EC and OKP keys.
    package let curve: String?
    /// The public members as JSON (`kty`, `kid`, `alg`, `use`, `n`/`e` or `crv`/`x`/`y`).
    public let json: JSONValue
    let key: EVPKey

    /// Parses one key from its JSON object.
    ///
    /// - Throws: `TokenVerificationError` with code `.malformed` naming what is wrong, `.unsafeKey`
    ///   for a key refused as unsafe (see above).
    package init(json: JSONValue) throws(TokenVerificationError) {
        guard let members = json.objectValue else { throw Self.invalid("a JWK must be a JSON object") }
        guard let ktyText = members["kty"]?.stringValue else { throw Self.invalid("the JWK has no \"kty\"") }
        guard let keyType = KeyType(rawValue: ktyText) else {
            throw Self.invalid("unsupported key type \"\(printableExcerpt(ktyText))\"; RSA, EC and OKP are supported")
        }
        func optionalString(_ name: String) throws(TokenVerificationError) -> String? {
            guard let value = members[name] else { return nil }
            guard let text = value.stringValue else { throw Self.invalid("\"\(name)\" must be a string") }
            return text
        }
        func coordinate(_ name: String) throws(TokenVerificationError) -> [UInt8] {
            guard let text = members[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw Self.invalid("\"\(name)\" must be a non-empty base64url string")
            }
            return bytes
        }
        self.keyType = keyType
        self.keyID = try optionalString("kid")
        self.algorithm = try optionalString("alg")
        self.use = try optionalString("use")
        self.curve = try optionalString("crv")
        if let privatePart = members["d"], privatePart != .null {
            throw Self.invalid("the JWK holds a private key (\"d\"); a key set must publish public keys only")
        }

        var publicMembers: [String: JSONValue] = ["kty": .string(keyType.rawValue)]
        if let keyID { publicMembers["kid"] = .string(keyID) }
        if let algorithm { publicMembers["alg"] = .string(algorithm) }
        if let use { publicMembers["use"] = .string(use) }

        switch keyType {
        case .rsa:
            let modulus = try coordinate("n")
            let exponent = try coordinate("e")
            guard modulus.first != 0, exponent.first != 0 else { throw Self.invalid("\"n\" and \"e\" must have no leading zero bytes") }
            try Self.checkRSA(modulus: modulus, exponent: exponent)
            guard let key = EVPKey.fromData(keyType: "RSA", selection: loginkit_evp_pkey_public_key, build: {
                $0.push("n", bigEndian: modulus) && $0.push("e", bigEndian: exponent)
            }) else { throw Self.invalid("OpenSSL refused the RSA key: \(openSSLErrorDescription())") }
            guard key.bits >= Self.minimumRSABits else { throw Self.refused("RSA keys under 2048 bits are refused (this one has \(key.bits))") }
            self.key = key
            publicMembers["n"] = .string(Base64URL.encode(modulus))
            publicMembers["e"] = .string(Base64URL.encode(exponent))
        case .ec:
            guard let (groupName, size) = Self.ecGroup(curve) else {
                throw Self.invalid("unsupported EC curve \"\(printableExcerpt(curve ?? "none"))\"; P-256 and P-384 are supported")
            }
            let x = try coordinate("x")
            let y = try coordinate("y")
            guard x.count == size, y.count == size else {
                throw Self.invalid("EC coordinates for \(printableExcerpt(curve ?? "")) must be exactly \(size) bytes")
            }
            guard let key = EVPKey.fromData(keyType: "EC", selection: loginkit_evp_pkey_public_key, build: {
                $0.push("group", string: groupName) && $0.push("pub", octets: [0x04] + x + y)
            }), key.passesPublicCheck() else {
                throw Self.refused("the EC point is not a valid \(printableExcerpt(curve ?? "")) public key")
            }
            self.key = key
            publicMembers["crv"] = .string(curve ?? "")
            publicMembers["x"] = .string(Base64URL.encode(x))
            publicMembers["y"] = .string(Base64URL.encode(y))
        case .okp:
            guard curve == "Ed25519" else {
                throw Self.invalid("unsupported OKP curve \"\(printableExcerpt(curve ?? "none"))\"; Ed25519 is supported")
            }
            let x = try coordinate("x")
            guard x.count == 32 else { throw Self.invalid("an Ed25519 public key is 32 bytes") }
            guard let key = EVPKey.fromData(keyType: "ED25519", selection: loginkit_evp_pkey_public_key, build: {
                $0.push("pub", octets: x)
            }) else { throw Self.invalid("OpenSSL refused the Ed25519 key: \(openSSLErrorDescription())") }
            self.key = key
            publicMembers["crv"] = .string("Ed25519")
            publicMembers["x"] = .string(Base64URL.encode(x))
        }
        self.json = .object(publicMembers)
    }

    /// Parses one key from JSON text.
    public init(jsonText bytes: some Collection<UInt8>) throws(TokenVerificationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw TokenVerificationError(.malformed, "the JWK is not valid JSON: \(error)", underlying: error)
        }
        try self.init(json: value)
    }

    init(publicKey: EVPKey, keyType: KeyType, keyID: String?, algorithm: JWSAlgorithm) throws(TokenVerificationError) {
        var members: [String: JSONValue] = ["kty": .string(keyType.rawValue), "alg": .string(algorithm.rawValue), "use": .string("sig")]
        if let keyID { members["kid"] = .string(keyID) }
        switch keyType {
        case .rsa:
            guard let n = publicKey.bigNumberParameter("n"), let e = publicKey.bigNumberParameter("e") else {
                throw Self.invalid("could not read the RSA public key")
            }
            members["n"] = .string(Base64URL.encode(n))
            members["e"] = .string(Base64URL.encode(e))
        case .ec:
            guard let curve = algorithm.ecCurve,
                let x = publicKey.bigNumberParameter("qx", size: curve.coordinateSize),
                let y = publicKey.bigNumberParameter("qy", size: curve.coordinateSize)
            else { throw Self.invalid("could not read the EC public key") }
            members["crv"] = .string(curve.name)
            members["x"] = .string(Base64URL.encode(x))
            members["y"] = .string(Base64URL.encode(y))
        case .okp:
            guard let x = publicKey.rawPublicKey() else { throw Self.invalid("could not read the Ed25519 public key") }
            members["crv"] = .string("Ed25519")
            members["x"] = .string(Base64URL.encode(x))
        }
        try self.init(json: .object(members))
    }

    /// OpenSSL's group name and the coordinate size in bytes of a JWK `crv`: P-256 and P-384.
    static func ecGroup(_ curve: String?) -> (group: String, size: Int)? {
        switch curve {
        case "P-256": ("prime256v1", 32)
        case "P-384": ("secp384r1", 48)
        default: nil
        }
    }

    /// For a key without `alg`: the algorithm it first verified a signature with, the only one it
    /// serves from then on. `nil` before that, and for keys with `alg` (which bind them already).
    package var boundAlgorithm: JWSAlgorithm? {
        guard algorithm == nil else { return nil }
        return key.boundAlgorithm.withLock { $0 }
    }

    /// Whether this key may verify a signature made with `algorithm`: the key type and curve fit,
    /// the key's own `alg` (when present) is that algorithm, its `use` (when present) is `sig`, and
    /// a key without `alg` has not been bound to another algorithm yet (``boundAlgorithm``).
    package func canVerify(_ algorithm: JWSAlgorithm) -> Bool {
        guard algorithm.keyType == keyType else { return false }
        if let ownAlgorithm = self.algorithm, ownAlgorithm != algorithm.rawValue { return false }
        if let bound = boundAlgorithm, bound != algorithm { return false }
        if let use, use != "sig" { return false }
        if let required = algorithm.ecCurve, required.name != curve { return false }
        return true
    }

    /// Binds a key without `alg` to `algorithm`, once a signature verified with it. `false` when it
    /// is already bound to another algorithm (two first verifications racing: one of them wins).
    func bind(to algorithm: JWSAlgorithm) -> Bool {
        guard self.algorithm == nil else { return true }
        return key.boundAlgorithm.withLock { bound -> Bool in
            if let existing = bound { return existing == algorithm }
            bound = algorithm
            return true
        }
    }

    /// The checks OpenSSL does not make when it builds a public key (`EVP_PKEY_fromdata`), after
    /// NIST SP 800-56B §6.4.1.1 (without the primality tests): an odd modulus of 2048…16384 bits and
    /// an odd exponent with 3 ≤ e < 2^256. Checked before OpenSSL sees the numbers.
    private static func checkRSA(modulus: [UInt8], exponent: [UInt8]) throws(TokenVerificationError) {
        let bits = modulus.first.map { (modulus.count - 1) * 8 + (8 - $0.leadingZeroBitCount) } ?? 0
        guard bits >= minimumRSABits, bits <= maximumRSABits else {
            throw refused("RSA moduli of \(minimumRSABits) to \(maximumRSABits) bits are accepted (this one has \(bits))")
        }
        guard let lastModulusByte = modulus.last, lastModulusByte & 1 == 1 else {
            throw refused("the RSA modulus is even")
        }
        guard let lastExponentByte = exponent.last, lastExponentByte & 1 == 1 else {
            throw refused("the RSA exponent is even")
        }
        guard exponent.count > 1 || lastExponentByte >= 3 else {
            throw refused("the RSA exponent is 1: anyone could make a signature that verifies")
        }
        guard exponent.count <= 32 else { throw refused("the RSA exponent is longer than 256 bits") }
    }

    private static func invalid(_ message: String) -> TokenVerificationError {
        TokenVerificationError(.malformed, "invalid JWK: \(message)")
    }

    private static func refused(_ message: String) -> TokenVerificationError {
        TokenVerificationError(.unsafeKey, "unsafe JWK: \(message)")
    }
}

/// A JSON Web Key Set (RFC 7517 §5): the `keys` of an issuer's `jwks_uri`.
///
/// Keys of unsupported types (`oct`, unknown curves), unsafe keys and keys meant for encryption are
/// skipped, not fatal, so that an issuer adding a new kind of key does not break verification with
/// the others. A document with more than 100 entries is refused whole.
public struct JWKSet: Sendable {
    /// The most entries a key set document may have: 100. Issuers publish a handful; each RSA key
    /// costs a key construction, so a huge set is refused before any key is parsed.
    package static let defaultMaximumKeyCount = 100

    /// The usable keys, in document order.
    package let keys: [JWK]
    /// How many entries were skipped as unsupported or invalid.
    package let skippedCount: Int

    /// A set of already-parsed keys.
    public init(keys: [JWK]) {
        self.keys = keys
        self.skippedCount = 0
    }

    private init(keys: [JWK], skippedCount: Int) {
        self.keys = keys
        self.skippedCount = skippedCount
    }

    /// Parses a JWKS document.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when it is not a JSON object with a `keys`
    ///   array, `.keySetTooLarge` when that array has more than 100 entries.
    public init(jsonText bytes: some Collection<UInt8>) throws(TokenVerificationError) {
        try self.init(jsonText: bytes, maximumKeyCount: Self.defaultMaximumKeyCount)
    }

    /// Parses a JWKS document of at most `maximumKeyCount` entries.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when it is not a JSON object with a `keys`
    ///   array, `.keySetTooLarge` when that array has more than `maximumKeyCount` entries.
    package init(jsonText bytes: some Collection<UInt8>, maximumKeyCount: Int) throws(TokenVerificationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw TokenVerificationError(.malformed, "the key set is not valid JSON: \(error)", underlying: error)
        }
        guard let entries = value["keys"]?.arrayValue else {
            throw TokenVerificationError(.malformed, "the key set has no \"keys\" array")
        }
        guard entries.count <= maximumKeyCount else {
            throw TokenVerificationError(
                .keySetTooLarge, "the key set has \(entries.count) keys, more than the \(maximumKeyCount) accepted; none is used"
            )
        }
        var keys: [JWK] = []
        var skipped = 0
        for entry in entries {
            if let key = try? JWK(json: entry), key.use == nil || key.use == "sig" {
                keys.append(key)
            } else {
                skipped += 1
            }
        }
        self.keys = keys
        self.skippedCount = skipped
    }

    /// This set with every key that `previous` holds identically (same JSON) taken from `previous`:
    /// a key keeps its algorithm binding (``JWK/boundAlgorithm``) and its warm OpenSSL contexts
    /// across refetches of the same document.
    func keepingKeys(of previous: JWKSet?) -> JWKSet {
        guard let previous, !previous.keys.isEmpty else { return self }
        var known: [JSONValue: JWK] = [:]
        for key in previous.keys where known[key.json] == nil { known[key.json] = key }
        return JWKSet(keys: keys.map { known[$0.json] ?? $0 }, skippedCount: skippedCount)
    }

    /// The set as a JWKS document (`{"keys":[…]}`).
    package var json: JSONValue {
        .object(["keys": .array(keys.map(\.json))])
    }

    /// The keys that may verify `algorithm` for a token whose header names `keyID`.
    ///
    /// With a `kid`, only keys with exactly that `kid`. Without one, every suitable key — the
    /// verifier accepts that only when there is exactly one.
    package func candidates(keyID: String?, algorithm: JWSAlgorithm) -> [JWK] {
        keys.filter { key in
            guard key.canVerify(algorithm) else { return false }
            guard let keyID else { return true }
            return key.keyID == keyID
        }
    }
}
