internal import COpenSSL

/// A public JSON Web Key (RFC 7517) for signature verification: RSA (`n`, `e`), EC P-256/P-384
/// (`x`, `y`) or OKP Ed25519 (`x`).
///
/// The OpenSSL key is built once, when the JWK is parsed, through OpenSSL 3's `EVP_PKEY_fromdata`,
/// and reused for every verification. RSA keys under 2048 bits and EC points not on their curve
/// are refused.
public struct JWK: Sendable {
    /// `kty`.
    public enum KeyType: String, Sendable, Hashable {
        case rsa = "RSA", ec = "EC", okp = "OKP"
    }

    /// `kty`.
    public let keyType: KeyType
    /// `kid`, when present.
    public let keyID: String?
    /// `alg`, when present: the only algorithm this key may be used with.
    public let algorithm: String?
    /// `use`, when present (`sig` for signing keys).
    public let use: String?
    /// `crv` for EC and OKP keys.
    public let curve: String?
    /// The public members as JSON (`kty`, `kid`, `alg`, `use`, `n`/`e` or `crv`/`x`/`y`).
    public let json: JSONValue
    let key: EVPKey

    /// Parses one key from its JSON object.
    ///
    /// - Throws: `TokenVerificationError` with code `.malformed` naming what is wrong.
    public init(json: JSONValue) throws(TokenVerificationError) {
        guard let members = json.objectValue else { throw Self.invalid("a JWK must be a JSON object") }
        guard let ktyText = members["kty"]?.stringValue else { throw Self.invalid("the JWK has no \"kty\"") }
        guard let keyType = KeyType(rawValue: ktyText) else {
            throw Self.invalid("unsupported key type \"\(ktyText)\"; RSA, EC and OKP are supported")
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
            guard let key = EVPKey.fromData(keyType: "RSA", selection: loginkit_evp_pkey_public_key, build: {
                $0.push("n", bigEndian: modulus) && $0.push("e", bigEndian: exponent)
            }) else { throw Self.invalid("OpenSSL refused the RSA key: \(openSSLErrorDescription())") }
            guard key.bits >= 2048 else { throw Self.invalid("RSA keys under 2048 bits are refused (this one has \(key.bits))") }
            self.key = key
            publicMembers["n"] = .string(Base64URL.encode(modulus))
            publicMembers["e"] = .string(Base64URL.encode(exponent))
        case .ec:
            let (groupName, size): (String, Int)
            switch curve {
            case "P-256": (groupName, size) = ("prime256v1", 32)
            case "P-384": (groupName, size) = ("secp384r1", 48)
            default: throw Self.invalid("unsupported EC curve \"\(curve ?? "none")\"; P-256 and P-384 are supported")
            }
            let x = try coordinate("x")
            let y = try coordinate("y")
            guard x.count == size, y.count == size else {
                throw Self.invalid("EC coordinates for \(curve ?? "") must be exactly \(size) bytes")
            }
            guard let key = EVPKey.fromData(keyType: "EC", selection: loginkit_evp_pkey_public_key, build: {
                $0.push("group", string: groupName) && $0.push("pub", octets: [0x04] + x + y)
            }), key.passesPublicCheck() else {
                throw Self.invalid("the EC point is not a valid \(curve ?? "") public key")
            }
            self.key = key
            publicMembers["crv"] = .string(curve ?? "")
            publicMembers["x"] = .string(Base64URL.encode(x))
            publicMembers["y"] = .string(Base64URL.encode(y))
        case .okp:
            guard curve == "Ed25519" else {
                throw Self.invalid("unsupported OKP curve \"\(curve ?? "none")\"; Ed25519 is supported")
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

    /// Whether this key may verify a signature made with `algorithm`: the key type and curve fit,
    /// and the key's own `alg` (when present) is that algorithm, and its `use` (when present) is `sig`.
    public func canVerify(_ algorithm: JWSAlgorithm) -> Bool {
        guard algorithm.keyType == keyType else { return false }
        if let ownAlgorithm = self.algorithm, ownAlgorithm != algorithm.rawValue { return false }
        if let use, use != "sig" { return false }
        if let required = algorithm.ecCurve, required.name != curve { return false }
        return true
    }

    private static func invalid(_ message: String) -> TokenVerificationError {
        TokenVerificationError(.malformed, "invalid JWK: \(message)")
    }
}

/// A JSON Web Key Set (RFC 7517 §5): the `keys` of an issuer's `jwks_uri`.
///
/// Keys of unsupported types (`oct`, unknown curves) and keys meant for encryption are skipped, not
/// fatal, so that an issuer adding a new kind of key does not break verification with the others.
public struct JWKSet: Sendable {
    /// The usable keys, in document order.
    public let keys: [JWK]
    /// How many entries were skipped as unsupported or invalid.
    public let skippedCount: Int

    /// A set of already-parsed keys.
    public init(keys: [JWK]) {
        self.keys = keys
        self.skippedCount = 0
    }

    /// Parses a JWKS document.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when it is not a JSON object with a `keys` array.
    public init(jsonText bytes: some Collection<UInt8>) throws(TokenVerificationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw TokenVerificationError(.malformed, "the key set is not valid JSON: \(error)", underlying: error)
        }
        guard let entries = value["keys"]?.arrayValue else {
            throw TokenVerificationError(.malformed, "the key set has no \"keys\" array")
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

    /// The set as a JWKS document (`{"keys":[…]}`).
    public var json: JSONValue {
        .object(["keys": .array(keys.map(\.json))])
    }

    /// The keys that may verify `algorithm` for a token whose header names `keyID`.
    ///
    /// With a `kid`, only keys with exactly that `kid`. Without one, every suitable key — the
    /// verifier accepts that only when there is exactly one.
    public func candidates(keyID: String?, algorithm: JWSAlgorithm) -> [JWK] {
        keys.filter { key in
            guard key.canVerify(algorithm) else { return false }
            guard let keyID else { return true }
            return key.keyID == keyID
        }
    }
}
