internal import COpenSSL
internal import LoginKitHTTP

/// A private key that signs JWS: RS256 … RS512, PS256/PS384, ES256/ES384, EdDSA.
///
/// Applications load one from a PEM file or a private JWK to authenticate a confidential client
/// with `private_key_jwt` (RFC 7523 §2.2, OpenID Connect Core §9); the dev identity provider and
/// the tests generate theirs. The key is checked when it is loaded: RSA keys need at least 2048
/// bits, EC keys must be on P-256 or P-384, the public half must match the private one, and the
/// algorithm must fit the key (RS*/PS* need RSA, ES256 P-256, ES384 P-384, EdDSA Ed25519).
///
/// `description` names the algorithm and key ID only; the private key is never printed, and no
/// error message quotes it.
public struct SigningKey: Sendable, CustomStringConvertible {
    /// The algorithm this key signs with.
    package let algorithm: JWSAlgorithm
    /// The `kid` put in the headers it signs and in its public JWK, when known.
    package let keyID: String?
    let key: EVPKey

    init(algorithm: JWSAlgorithm, keyID: String?, key: EVPKey) {
        self.algorithm = algorithm
        self.keyID = keyID
        self.key = key
    }

    /// A key from PEM text: PKCS#8 (`BEGIN PRIVATE KEY`), PKCS#1 (`BEGIN RSA PRIVATE KEY`) or SEC 1
    /// (`BEGIN EC PRIVATE KEY`). Encrypted PEM is refused (decrypt it first: `openssl pkey`).
    ///
    /// - Parameters:
    ///   - algorithm: what to sign with; default RS256 for RSA, ES256/ES384 by the EC curve, EdDSA
    ///     for Ed25519.
    ///   - keyID: the `kid` the provider registered the key under, when it wants one.
    /// - Throws: `TokenVerificationError` `.invalidKey`, saying what is wrong and never quoting the key.
    public init(pem: some StringProtocol, algorithm: JWSAlgorithm? = nil, keyID: String? = nil) throws(TokenVerificationError) {
        let bytes = Array(String(pem).utf8)
        guard bytes.count <= 64 * 1024 else { throw TokenVerificationError(.invalidKey, "the PEM text is longer than 64 KiB; it is not one private key") }
        guard bytes.count < Int(Int32.max), let raw = loginkit_read_private_key_pem(bytes, Int32(bytes.count)) else {
            ERR_clear_error()
            let encrypted = String(decoding: bytes, as: UTF8.self).contains("ENCRYPTED")
            throw TokenVerificationError(
                .invalidKey,
                encrypted
                    ? "the PEM private key is encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)"
                    : "no PEM private key found (expected BEGIN PRIVATE KEY, BEGIN RSA PRIVATE KEY or BEGIN EC PRIVATE KEY)")
        }
        try self.init(checking: EVPKey(taking: raw), algorithm: algorithm, keyID: keyID)
    }

    /// A key from a private JWK (RFC 7517, RFC 7518 §6.2.2/§6.3.2, RFC 8037): RSA with `n`, `e`,
    /// `d`, `p`, `q`, `dp`, `dq`, `qi`; EC with `crv`, `x`, `y`, `d`; OKP Ed25519 with `x`, `d`.
    ///
    /// - Parameters:
    ///   - algorithm: what to sign with; default the JWK's `alg`, else as for PEM.
    ///   - keyID: the `kid`; default the JWK's.
    /// - Throws: `TokenVerificationError` `.invalidKey`.
    public init(jwk: JSONValue, algorithm: JWSAlgorithm? = nil, keyID: String? = nil) throws(TokenVerificationError) {
        guard let members = jwk.objectValue else { throw TokenVerificationError(.invalidKey, "a JWK must be a JSON object") }
        func text(_ name: String) throws(TokenVerificationError) -> String? {
            guard let value = members[name] else { return nil }
            guard let text = value.stringValue else { throw TokenVerificationError(.invalidKey, "the JWK's \"\(name)\" must be a string") }
            return text
        }
        func bytes(_ name: String) throws(TokenVerificationError) -> [UInt8] {
            guard let text = members[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw TokenVerificationError(.invalidKey, "the JWK's \"\(name)\" must be a non-empty base64url string")
            }
            return bytes
        }
        guard members["d"] != nil else { throw TokenVerificationError(.invalidKey, "the JWK has no private part (\"d\"); a signing key needs one") }
        var chosen = algorithm
        if chosen == nil, let name = try text("alg") {
            guard let named = JWSAlgorithm(rawValue: name) else {
                throw TokenVerificationError(.invalidKey, "the JWK's \"alg\" \"\(printableExcerpt(name))\" is not a supported signature algorithm")
            }
            chosen = named
        }
        if let use = try text("use"), use != "sig" { throw TokenVerificationError(.invalidKey, "the JWK's \"use\" is \"\(printableExcerpt(use))\", not \"sig\"") }
        let built: EVPKey?
        switch try text("kty") {
        case "RSA":
            var parts: [[UInt8]] = []
            for name in ["n", "e", "d", "p", "q", "dp", "dq", "qi"] { parts.append(try bytes(name)) }
            let names = ["n", "e", "d", "rsa-factor1", "rsa-factor2", "rsa-exponent1", "rsa-exponent2", "rsa-coefficient1"]
            built = EVPKey.fromData(keyType: "RSA", selection: loginkit_evp_pkey_keypair) { builder in
                zip(names, parts).allSatisfy { builder.push($0, bigEndian: $1) }
            }
        case "EC":
            let curve = try text("crv")
            guard let (group, size) = JWK.ecGroup(curve) else {
                throw TokenVerificationError(.invalidKey, "unsupported EC curve \"\(printableExcerpt(curve ?? "none"))\"; P-256 and P-384 are supported")
            }
            let (x, y, d) = try (bytes("x"), bytes("y"), bytes("d"))
            guard x.count == size, y.count == size, d.count == size else {
                throw TokenVerificationError(.invalidKey, "the JWK's \"x\", \"y\" and \"d\" for \(curve ?? "") must be exactly \(size) bytes")
            }
            built = EVPKey.fromData(keyType: "EC", selection: loginkit_evp_pkey_keypair) { builder in
                builder.push("group", string: group) && builder.push("pub", octets: [0x04] + x + y) && builder.push("priv", bigEndian: d)
            }
        case "OKP":
            guard try text("crv") == "Ed25519" else { throw TokenVerificationError(.invalidKey, "only the OKP curve Ed25519 is supported") }
            let (x, d) = try (bytes("x"), bytes("d"))
            guard x.count == 32, d.count == 32 else { throw TokenVerificationError(.invalidKey, "an Ed25519 JWK's \"x\" and \"d\" are 32 bytes each") }
            built = EVPKey.fromData(keyType: "ED25519", selection: loginkit_evp_pkey_keypair) { builder in
                builder.push("pub", octets: x) && builder.push("priv", octets: d)
            }
        case let other:
            throw TokenVerificationError(.invalidKey, "unsupported key type \"\(printableExcerpt(other ?? "none"))\"; RSA, EC and OKP are supported")
        }
        guard let built else {
            ERR_clear_error()
            throw TokenVerificationError(.invalidKey, "OpenSSL refused the JWK's key parameters")
        }
        let givenKeyID = try text("kid")
        try self.init(checking: built, algorithm: chosen, keyID: keyID ?? givenKeyID)
    }

    /// A key from private JWK text; see ``init(jwk:algorithm:keyID:)``.
    public init(jwkText: some Collection<UInt8>, algorithm: JWSAlgorithm? = nil, keyID: String? = nil) throws(TokenVerificationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(jwkText)
        } catch {
            throw TokenVerificationError(.invalidKey, "the JWK is not valid JSON")
        }
        try self.init(jwk: value, algorithm: algorithm, keyID: keyID)
    }

    /// Checks a loaded key (type, size, curve, consistency) and the algorithm against it.
    private init(checking key: EVPKey, algorithm: JWSAlgorithm?, keyID: String?) throws(TokenVerificationError) {
        let keyType: JWK.KeyType
        var curve: String?
        if EVP_PKEY_is_a(key.raw, "RSA") == 1 {
            keyType = .rsa
            guard key.bits >= JWK.minimumRSABits, key.bits <= JWK.maximumRSABits else {
                throw TokenVerificationError(.invalidKey, "RSA keys need 2048 to 16384 bits; this one has \(key.bits)")
            }
        } else if EVP_PKEY_is_a(key.raw, "EC") == 1 {
            keyType = .ec
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key.raw, &name, name.count, &length) == 1 else {
                throw TokenVerificationError(.invalidKey, "the EC key names no curve")
            }
            switch String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) {
            case "prime256v1", "P-256", "secp256r1": curve = "P-256"
            case "secp384r1", "P-384": curve = "P-384"
            case let other: throw TokenVerificationError(.invalidKey, "unsupported EC curve \(printableExcerpt(other)); P-256 and P-384 are supported")
            }
        } else if EVP_PKEY_is_a(key.raw, "ED25519") == 1 {
            keyType = .okp
        } else {
            throw TokenVerificationError(.invalidKey, "unsupported key type; RSA, EC (P-256, P-384) and Ed25519 are supported")
        }
        let algorithm =
            algorithm
            ?? {
                switch keyType {
                case .rsa: .rs256
                case .ec: curve == "P-384" ? .es384 : .es256
                case .okp: .edDSA
                }
            }()
        guard algorithm.keyType == keyType, algorithm.ecCurve?.name == curve else {
            throw TokenVerificationError(.invalidKey, "a \(curve ?? keyType.rawValue) key cannot sign \(algorithm)")
        }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key.raw, nil) else { throw EVPKey.failure("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_pairwise_check(context) == 1 else {
            ERR_clear_error()
            throw TokenVerificationError(.invalidKey, "the key's public and private parts do not belong together")
        }
        self.init(algorithm: algorithm, keyID: keyID, key: key)
    }

    /// Generates a fresh key: RSA 2048 bits for RS*/PS*, P-256/P-384 for ES256/ES384, Ed25519 for EdDSA.
    ///
    /// - Throws: `TokenVerificationError` when OpenSSL fails.
    package static func generate(_ algorithm: JWSAlgorithm, keyID: String?, rsaBits: Int = 2048) throws(TokenVerificationError) -> SigningKey {
        let name: String
        switch algorithm.keyType {
        case .rsa: name = "RSA"
        case .ec: name = "EC"
        case .okp: name = "ED25519"
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, name, nil) else { throw EVPKey.failure("creating a key context") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw EVPKey.failure("EVP_PKEY_keygen_init") }
        switch algorithm.keyType {
        case .rsa:
            guard rsaBits >= 2048, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(rsaBits)) == 1 else {
                throw TokenVerificationError(.invalidKey, "RSA keys must have at least 2048 bits")
            }
        case .ec:
            let group = algorithm == .es256 ? "P-256" : "P-384"
            guard EVP_PKEY_CTX_set_group_name(context, group) == 1 else { throw EVPKey.failure("setting the EC curve") }
        case .okp:
            break
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw EVPKey.failure("EVP_PKEY_generate") }
        return SigningKey(algorithm: algorithm, keyID: keyID, key: EVPKey(taking: key))
    }

    /// The public half as a JWK (with `kid` when known, `alg` and `use: sig`): what the provider
    /// registers for the client (a JWKS document or its `jwks_uri`).
    ///
    /// - Throws: `TokenVerificationError` when OpenSSL cannot export the public key.
    public func publicJWK() throws(TokenVerificationError) -> JWK {
        try JWK(publicKey: key, keyType: algorithm.keyType, keyID: keyID, algorithm: algorithm)
    }

    /// The same private key signing with `algorithm`, which must fit it (RS256 ↔ PS256, …).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` when `algorithm` needs another key type or curve.
    package func signing(with algorithm: JWSAlgorithm, keyID: String? = nil) throws(TokenVerificationError) -> SigningKey {
        guard algorithm.keyType == self.algorithm.keyType, algorithm.ecCurve?.name == self.algorithm.ecCurve?.name else {
            throw TokenVerificationError(.invalidKey, "a \(self.algorithm) key cannot sign \(algorithm)")
        }
        return SigningKey(algorithm: algorithm, keyID: keyID ?? self.keyID, key: key)
    }

    /// Signs `input` and returns the JWS signature bytes (raw `r || s` for ECDSA).
    package func sign(_ input: [UInt8]) throws(TokenVerificationError) -> [UInt8] {
        try key.sign(input, algorithm: algorithm)
    }

    public var description: String { "SigningKey(\(algorithm)\(keyID.map { ", kid: \(printableExcerpt($0))" } ?? ""))" }
}
