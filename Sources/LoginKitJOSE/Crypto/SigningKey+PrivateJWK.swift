internal import COpenSSL

extension SigningKey {
    /// The private key as a JWK (RFC 7517; RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2), what
    /// ``init(jwk:algorithm:keyID:)`` reads back: `kty`, `alg`, `kid` when known, and
    /// `crv`, `x`, `y`, `d` (EC, each coordinate and `d` the curve's size), `n`, `e`, `d`, `p`, `q`,
    /// `dp`, `dq`, `qi` (RSA, minimal big-endian) or `crv`, `x`, `d` (Ed25519).
    ///
    /// The result holds the private key: keep it sealed, never log or print it.
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL cannot export the key.
    package func privateJWK() throws(TokenVerificationError) -> JSONValue {
        var members: [String: JSONValue] = ["kty": .string(algorithm.keyType.rawValue), "alg": .string(algorithm.rawValue)]
        if let keyID { members["kid"] = .string(keyID) }
        func put(_ name: String, _ bytes: [UInt8]?) throws(TokenVerificationError) {
            guard let bytes, !bytes.isEmpty else {
                ERR_clear_error()
                throw TokenVerificationError(.cryptoFailure, "OpenSSL could not export the key's \"\(name)\"")
            }
            members[name] = .string(Base64URL.encode(bytes))
        }
        switch algorithm.keyType {
        case .rsa:
            let names = [
                ("n", "n"), ("e", "e"), ("d", "d"), ("p", "rsa-factor1"), ("q", "rsa-factor2"), ("dp", "rsa-exponent1"),
                ("dq", "rsa-exponent2"), ("qi", "rsa-coefficient1"),
            ]
            for (name, parameter) in names { try put(name, key.privateBigNumberParameter(parameter)) }
        case .ec:
            guard let curve = algorithm.ecCurve else { throw TokenVerificationError(.invalidKey, "\(algorithm) names no EC curve") }
            members["crv"] = .string(curve.name)
            try put("x", key.bigNumberParameter("qx", size: curve.coordinateSize))
            try put("y", key.bigNumberParameter("qy", size: curve.coordinateSize))
            try put("d", key.privateBigNumberParameter("priv", size: curve.coordinateSize))
        case .okp:
            members["crv"] = .string("Ed25519")
            try put("x", key.rawPublicKey())
            try put("d", key.rawPrivateKey())
        }
        return .object(members)
    }
}

extension EVPKey {
    /// A private big-endian integer parameter (`d`, `priv`, `rsa-factor1`, …), left-padded to `size`
    /// when given; OpenSSL's copy is cleared before it is freed.
    func privateBigNumberParameter(_ name: String, size: Int? = nil) -> [UInt8]? {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(raw, name, &number) == 1, let number else { return nil }
        defer { BN_clear_free(number) }
        let length = size ?? Int((BN_num_bits(number) + 7) / 8)
        var bytes = [UInt8](repeating: 0, count: max(length, 1))
        guard BN_bn2binpad(number, &bytes, Int32(bytes.count)) == Int32(bytes.count) else { return nil }
        return bytes
    }

    /// The raw private key of an Ed25519 key (32 bytes).
    func rawPrivateKey() -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_raw_private_key(raw, nil, &length) == 1 else { return nil }
        var bytes = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_raw_private_key(raw, &bytes, &length) == 1 else { return nil }
        return Array(bytes.prefix(length))
    }
}
