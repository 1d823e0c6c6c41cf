internal import COpenSSL
internal import LoginKitHTTP

/// Owns an OpenSSL `EVP_PKEY` (public or private).
///
/// Why `@unchecked Sendable` is safe here: the key is fully built before this object exists and never
/// changed afterwards; OpenSSL 3 documents `EVP_PKEY` as safe to share between threads for
/// read-only use; every sign/verify either makes its own context or takes one out of
/// `verifyContexts` (under its lock) for the length of one call; the only mutable state,
/// `verifyContexts` and `boundAlgorithm`, lives behind locks. The pointer never leaves this module.
final class EVPKey: @unchecked Sendable {  // safe: see the proof above
    let raw: OpaquePointer
    /// Idle verification contexts, per algorithm (see `verify(signature:over:algorithm:)`).
    let verifyContexts = LockedState(VerifyContextPool())
    /// For a public key parsed from a JWK without `alg`: the algorithm it first verified a
    /// signature with, the only one it serves from then on (see `JWK.bind(to:)`).
    let boundAlgorithm = LockedState<JWSAlgorithm?>(nil)

    init(taking raw: OpaquePointer) {
        self.raw = raw
    }

    deinit {
        EVP_PKEY_free(raw)
    }

    var bits: Int { Int(EVP_PKEY_get_bits(raw)) }

    /// Builds a key from OSSL_PARAMs: `keyType` is "RSA", "EC" or "ED25519".
    static func fromData(keyType: String, selection: Int32, build: (ParamBuilder) -> Bool) -> EVPKey? {
        guard let builder = ParamBuilder() else { return nil }
        guard build(builder), let params = OSSL_PARAM_BLD_to_param(builder.raw) else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, keyType, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { return nil }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata(context, &key, selection, params) == 1, let key else { return nil }
        return EVPKey(taking: key)
    }

    /// Whether the public key passes OpenSSL's checks (an EC point on its curve, …).
    func passesPublicCheck() -> Bool {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, raw, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        return EVP_PKEY_public_check(context) == 1
    }

    /// A big-endian integer parameter (`n`, `e`, `qx`, `qy`), left-padded to `size` when given.
    func bigNumberParameter(_ name: String, size: Int? = nil) -> [UInt8]? {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(raw, name, &number) == 1, let number else { return nil }
        defer { BN_free(number) }
        let length = size ?? Int((BN_num_bits(number) + 7) / 8)
        var bytes = [UInt8](repeating: 0, count: max(length, 1))
        guard BN_bn2binpad(number, &bytes, Int32(bytes.count)) == Int32(bytes.count) else { return nil }
        return bytes
    }

    /// The raw public key of an Ed25519 key.
    func rawPublicKey() -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_raw_public_key(raw, nil, &length) == 1 else { return nil }
        var bytes = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_raw_public_key(raw, &bytes, &length) == 1 else { return nil }
        return Array(bytes.prefix(length))
    }
}

/// An `OSSL_PARAM_BLD` plus copies of everything pushed onto it: OpenSSL keeps pointers to the
/// names, strings and BIGNUMs until `OSSL_PARAM_BLD_to_param`, so they must outlive the builder's use.
/// Used on one thread, inside `EVPKey.fromData`.
final class ParamBuilder {
    let raw: OpaquePointer
    private var numbers: [OpaquePointer] = []
    private var buffers: [UnsafeMutableRawPointer] = []

    init?() {
        guard let raw = OSSL_PARAM_BLD_new() else { return nil }
        self.raw = raw
    }

    deinit {
        OSSL_PARAM_BLD_free(raw)
        for number in numbers { BN_free(number) }
        for buffer in buffers { buffer.deallocate() }
    }

    private func copy(_ bytes: [UInt8]) -> UnsafeMutableRawPointer {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
        buffer.copyMemory(from: bytes, byteCount: bytes.count)
        buffer.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
        buffers.append(buffer)
        return buffer
    }

    private func name(_ key: String) -> UnsafePointer<CChar> {
        UnsafePointer(copy(Array(key.utf8)).assumingMemoryBound(to: CChar.self))
    }

    /// A big-endian unsigned integer.
    func push(_ key: String, bigEndian bytes: [UInt8]) -> Bool {
        guard let number = BN_bin2bn(bytes, Int32(bytes.count), nil) else { return false }
        numbers.append(number)
        return OSSL_PARAM_BLD_push_BN(raw, name(key), number) == 1
    }

    /// A UTF-8 string.
    func push(_ key: String, string: String) -> Bool {
        let bytes = Array(string.utf8)
        let value = copy(bytes).assumingMemoryBound(to: CChar.self)
        return OSSL_PARAM_BLD_push_utf8_string(raw, name(key), value, bytes.count) == 1
    }

    /// An octet string.
    func push(_ key: String, octets bytes: [UInt8]) -> Bool {
        let value = copy(bytes)
        return OSSL_PARAM_BLD_push_octet_string(raw, name(key), value, bytes.count) == 1
    }
}

/// Drains OpenSSL's error queue into one readable line.
func openSSLErrorDescription() -> String {
    var reasons: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return reasons.isEmpty ? "no OpenSSL error recorded" : reasons.joined(separator: "; ")
}
