internal import COpenSSL

/// A 256-bit key for ``AESGCM``. `description` never shows the key.
public struct SymmetricKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key bytes (32).
    public let bytes: [UInt8]

    /// Wraps 32 key bytes.
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` for any other length.
    public init(bytes: [UInt8]) throws(TokenVerificationError) {
        guard bytes.count == 32 else { throw TokenVerificationError(.invalidKey, "an AES-256 key is 32 bytes, got \(bytes.count)") }
        self.bytes = bytes
    }

    /// A fresh random key from OpenSSL's CSPRNG.
    package static func random() throws(TokenVerificationError) -> SymmetricKey {
        try SymmetricKey(bytes: SecureRandom.bytes(32))
    }

    public var description: String { "SymmetricKey(256 bits, redacted)" }
    public var debugDescription: String { description }
    /// Mirrors (`dump`, debuggers' summaries) show no key bytes either.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// AES-256-GCM authenticated encryption over OpenSSL's EVP interface.
///
/// A sealed box is `nonce (12 bytes) || ciphertext || tag (16 bytes)`; every seal draws a fresh
/// random 96-bit nonce. `open` returns the plaintext only when the tag verifies: a wrong key or any
/// changed byte (of the box or of the associated data) throws ``TokenVerificationError/Code/authenticationFailed``.
package enum AESGCM {
    /// Nonce length: 12 bytes.
    package static let nonceSize = 12
    /// Tag length: 16 bytes.
    package static let tagSize = 16

    /// Encrypts and authenticates `plaintext`, binding `associatedData` (authenticated, not encrypted).
    package static func seal(_ plaintext: [UInt8], key: SymmetricKey, associatedData: [UInt8] = []) throws(TokenVerificationError) -> [UInt8] {
        let nonce = try SecureRandom.bytes(nonceSize)
        guard let context = EVP_CIPHER_CTX_new() else { throw EVPKey.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            loginkit_evp_cipher_ctx_set_gcm_ivlen(context, Int32(nonceSize)) == 1,
            EVP_EncryptInit_ex(context, nil, nil, key.bytes, nonce) == 1
        else { throw EVPKey.failure("starting AES-256-GCM") }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_EncryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw EVPKey.failure("authenticating associated data")
            }
        }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: Int32 = 0
        if !plaintext.isEmpty {
            guard EVP_EncryptUpdate(context, &ciphertext, &written, plaintext, Int32(plaintext.count)) == 1 else {
                throw EVPKey.failure("encrypting")
            }
        }
        let finalWritten = ciphertext.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var final: Int32 = 0
            guard let base = buffer.baseAddress,
                EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1
            else { return -1 }
            return final
        }
        guard finalWritten >= 0 else { throw EVPKey.failure("finishing encryption") }
        ciphertext.removeSubrange(Int(written + finalWritten)...)
        var tag = [UInt8](repeating: 0, count: tagSize)
        guard loginkit_evp_cipher_ctx_get_gcm_tag(context, Int32(tagSize), &tag) == 1 else {
            throw EVPKey.failure("reading the GCM tag")
        }
        return nonce + ciphertext + tag
    }

    /// Authenticates and decrypts a sealed box made by ``seal(_:key:associatedData:)``.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when the box is shorter than nonce + tag,
    ///   `.authenticationFailed` for a wrong key or any altered byte.
    package static func open(_ sealed: [UInt8], key: SymmetricKey, associatedData: [UInt8] = []) throws(TokenVerificationError) -> [UInt8] {
        guard sealed.count >= nonceSize + tagSize else {
            throw TokenVerificationError(.malformed, "a sealed box is at least \(nonceSize + tagSize) bytes, got \(sealed.count)")
        }
        let nonce = Array(sealed[..<nonceSize])
        let ciphertext = Array(sealed[nonceSize..<(sealed.count - tagSize)])
        var tag = Array(sealed[(sealed.count - tagSize)...])
        guard let context = EVP_CIPHER_CTX_new() else { throw EVPKey.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            loginkit_evp_cipher_ctx_set_gcm_ivlen(context, Int32(nonceSize)) == 1,
            EVP_DecryptInit_ex(context, nil, nil, key.bytes, nonce) == 1
        else { throw EVPKey.failure("starting AES-256-GCM") }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_DecryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw EVPKey.failure("authenticating associated data")
            }
        }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            guard EVP_DecryptUpdate(context, &plaintext, &written, ciphertext, Int32(ciphertext.count)) == 1 else {
                throw EVPKey.failure("decrypting")
            }
        }
        guard loginkit_evp_cipher_ctx_set_gcm_tag(context, Int32(tagSize), &tag) == 1 else {
            throw EVPKey.failure("setting the GCM tag")
        }
        let finalWritten = plaintext.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var final: Int32 = 0
            guard let base = buffer.baseAddress,
                EVP_DecryptFinal_ex(context, base + Int(written), &final) > 0
            else { return -1 }
            return final
        }
        ERR_clear_error()
        guard finalWritten >= 0 else {
            // Wipe what was decrypted before the tag check failed; none of it is returned.
            for index in plaintext.indices { plaintext[index] = 0 }
            throw TokenVerificationError(.authenticationFailed, "the sealed data does not authenticate: wrong key, or it was altered")
        }
        plaintext.removeSubrange(Int(written + finalWritten)...)
        return plaintext
    }
}

/// Cryptographically secure random bytes from OpenSSL (`RAND_bytes`).
package enum SecureRandom {
    /// `count` random bytes.
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL's generator fails (it is never ignored).
    package static func bytes(_ count: Int) throws(TokenVerificationError) -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            throw TokenVerificationError(.cryptoFailure, "RAND_bytes failed: \(openSSLErrorDescription())")
        }
        return bytes
    }
}
