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

extension EVPKey {
    /// Verifies a JWS signature over `input` (the ASCII `header.payload`).
    /// ECDSA signatures arrive as JOSE's raw `r || s` and are converted to DER for OpenSSL.
    func verify(signature: [UInt8], over input: [UInt8], algorithm: JWSAlgorithm) -> Bool {
        var signatureForOpenSSL = signature
        if let curve = algorithm.ecCurve {
            guard signature.count == 2 * curve.coordinateSize,
                let der = Self.derSignature(fromRaw: signature, coordinateSize: curve.coordinateSize)
            else { return false }
            signatureForOpenSSL = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestVerifyInit(context, &keyContext, algorithm.digest, nil, raw) == 1 else {
            ERR_clear_error()
            return false
        }
        if algorithm.usesPSS {
            guard let keyContext,
                EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else {
                ERR_clear_error()
                return false
            }
        }
        let result = EVP_DigestVerify(context, signatureForOpenSSL, signatureForOpenSSL.count, input, input.count)
        ERR_clear_error()
        return result == 1
    }

    /// Signs `input`; ECDSA signatures are returned in JOSE's raw `r || s` form.
    func sign(_ input: [UInt8], algorithm: JWSAlgorithm) throws(CryptoError) -> [UInt8] {
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

    static func derSignature(fromRaw raw: [UInt8], coordinateSize: Int) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        guard let r = BN_bin2bn(raw, Int32(coordinateSize), nil) else { return nil }
        guard let s = raw.withUnsafeBufferPointer({ buffer in
            BN_bin2bn(buffer.baseAddress.map { $0 + coordinateSize }, Int32(coordinateSize), nil)
        }) else {
            BN_free(r)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
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

    static func failure(_ step: String) -> CryptoError {
        CryptoError(.operationFailed, "\(step) failed: \(openSSLErrorDescription())")
    }
}
