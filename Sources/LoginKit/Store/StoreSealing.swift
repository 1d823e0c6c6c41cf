#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

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
    /// Sealed with a key that `provider` keeps (created on the first sealed save). When the
    /// provider is unavailable, saves fail with `.unavailable`: there is no plaintext fallback.
    case provider(any StoreKeyProvider)
    /// The first that works of: an explicit key (`LOGINKIT_STORE_KEY`, `LOGINKIT_STORE_KEY_FILE`),
    /// the Secret Service, the kernel keyring, then plain `0600` JSON as a reported fallback
    /// (``AutomaticSealing``). The CLI's default (`--storage auto`).
    case automatic(AutomaticSealing)

    /// The key, or `nil` for no sealing (`environment` is read for `.environment`).
    package func resolveKey(environment: [String: String]) throws(TokenStoreError) -> SymmetricKey? {
        switch self {
        case .none, .provider:
            return nil
        case .key(let key):
            return key
        case .automatic(let automatic):
            guard automatic.usesExplicitKey else { return nil }
            if let path = environment["LOGINKIT_STORE_KEY_FILE"], !path.isEmpty {
                return try StoreSealing.keyFile(path).resolveKey(environment: environment)
            }
            return try StoreSealing.environment.resolveKey(environment: environment)
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

    /// The `storage:` level of the explicit key (`key`, `key-file`, `env-key`), or `nil`.
    func explicitLevel(environment: [String: String]) -> String? {
        switch self {
        case .key: return StoreProtection.givenKey
        case .keyFile: return StoreProtection.keyFile
        case .environment: return StoreProtection.environmentKey
        case .automatic:
            if let path = environment["LOGINKIT_STORE_KEY_FILE"], !path.isEmpty { return StoreProtection.keyFile }
            return StoreProtection.environmentKey
        case .none, .provider: return nil
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

/// How ``StoreSealing/automatic(_:)`` chooses (docs/storage.md, "Key providers").
public struct AutomaticSealing: Sendable {
    /// The providers tried in order for a new key: the Secret Service, then the kernel keyring.
    public var providers: [any StoreKeyProvider]
    /// Whether `LOGINKIT_STORE_KEY` / `LOGINKIT_STORE_KEY_FILE`, when set, come first. Default `true`.
    public var usesExplicitKey: Bool
    /// Whether saves fall back to plain `0600` JSON when no provider is usable (reported through
    /// ``onPlaintextFallback`` and ``IDTokenStore/protection()``); when `false` they fail with
    /// `.unavailable`. Default `true`.
    public var allowsPlaintextFallback: Bool
    /// Called once per store, the first time a save falls back to plaintext, with why (no secret).
    public var onPlaintextFallback: (@Sendable (StoreProtection) -> Void)?

    /// The standard chain: explicit key, Secret Service (2 s at most), kernel keyring, plaintext.
    public init(
        providers: [any StoreKeyProvider]? = nil,
        usesExplicitKey: Bool = true,
        allowsPlaintextFallback: Bool = true,
        onPlaintextFallback: (@Sendable (StoreProtection) -> Void)? = nil
    ) {
        self.providers = providers ?? [SecretServiceKeyProvider(), KernelKeyringKeyProvider()]
        self.usesExplicitKey = usesExplicitKey
        self.allowsPlaintextFallback = allowsPlaintextFallback
        self.onPlaintextFallback = onPlaintextFallback
    }

    /// The standard chain with the process environment.
    package static var standard: AutomaticSealing { AutomaticSealing() }
}
