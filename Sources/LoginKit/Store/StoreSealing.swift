#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKitJOSE

/// How a file store seals its contents at rest.
public enum StoreSealing: Sendable {
    /// Plain JSON (still `0600` in a `0700` directory).
    case none
    /// Sealed with this AES-256-GCM key.
    case key(SymmetricKey)
    /// Sealed with the key in a file: 32 bytes, raw or base64. The file must be `0600` and ours.
    case keyFile(String)
    /// Sealed with the base64 key in `LOGINKIT_STORE_KEY` when it is set; plain otherwise.
    case environment

    /// The key, or `nil` for no sealing (`environment` is read for `.environment`).
    package func resolveKey(environment: [String: String]) throws(TokenStoreError) -> SymmetricKey? {
        switch self {
        case .none:
            return nil
        case .key(let key):
            return key
        case .environment:
            guard let text = environment["LOGINKIT_STORE_KEY"], !text.isEmpty else { return nil }
            return try Self.key(base64: text, origin: "LOGINKIT_STORE_KEY")
        case .keyFile(let path):
            guard let (_, bytes) = try StoreFileSystem.readFile(path) else {
                throw TokenStoreError(.invalidKey, path: path, "the store key file \(path) does not exist")
            }
            if bytes.count == 32, let key = try? SymmetricKey(bytes: bytes) { return key }
            let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            return try Self.key(base64: text, origin: path)
        }
    }

    static func key(base64 text: String, origin: String) throws(TokenStoreError) -> SymmetricKey {
        let standard = text.replacing("-", with: "+").replacing("_", with: "/")
        let padded = standard + String(repeating: "=", count: (4 - standard.count % 4) % 4)
        guard let data = Data(base64Encoded: padded), data.count == 32, let key = try? SymmetricKey(bytes: Array(data)) else {
            throw TokenStoreError(
                .invalidKey, path: origin,
                "the store key from \(origin) must be 32 random bytes in base64 (e.g. `openssl rand -base64 32`)"
            )
        }
        return key
    }
}
