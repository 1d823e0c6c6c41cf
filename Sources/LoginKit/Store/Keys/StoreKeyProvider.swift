import LoginKitJOSE

/// Keeps the AES-256-GCM keys that file stores are sealed with: the OS keyrings LoginKit ships (the
/// Secret Service and the kernel keyring, which ``StoreSealing/automatic(_:)`` tries), or your own
/// (an HSM, a vault's transit engine) behind ``StoreSealing/provider(_:)``.
///
/// The store names the key in the sealed file's header (`provider` = ``name``, `id`), creates it
/// on the first sealed save (``store(_:id:label:)`` before the file that needs it is written), and
/// looks it up again in every later process (``key(id:)``). A key that is gone makes the file read
/// as "log in again" (`TokenStoreError` `.keyUnavailable`); the file is then set aside, not deleted.
///
/// Concurrency contract: called from the store's actor, one call at a time per store; each call
/// must return in bounded time (a keyring that does not answer is `.unavailable`, never a hang).
public protocol StoreKeyProvider: Sendable {
    /// The provider's name as written in the sealed header and shown by `loginkit status`
    /// (`secret-service`, `kernel-keyring`, or yours: letters, digits and `-`).
    var name: String { get }

    /// Whether keys can be kept here now, and what `status` says about it (the program serving
    /// the Secret Service, or why the provider cannot be used). Bounded in time; never prompts.
    func availability() async -> StoreKeyAvailability

    /// The key stored as `id`, or `nil` when there is none (never stored, or lost).
    ///
    /// - Throws: `TokenStoreError` `.unavailable` when the provider cannot answer now (locked,
    ///   unreachable, timed out): the key may well exist.
    func key(id: String) async throws -> SymmetricKey?

    /// Stores `key` as `id`, replacing one with the same id. `label` is for humans (a keyring
    /// browser shows it).
    ///
    /// - Throws: `TokenStoreError` `.unavailable` when the key could not be stored.
    func store(_ key: SymmetricKey, id: String, label: String) async throws

    /// Removes the key stored as `id`; a missing key is not an error.
    ///
    /// - Throws: `TokenStoreError` `.unavailable` when the provider cannot be reached.
    func removeKey(id: String) async throws
}

/// Whether a ``StoreKeyProvider`` can keep keys now.
public struct StoreKeyAvailability: Sendable, Hashable, CustomStringConvertible {
    /// Keys can be stored and read.
    package var isAvailable: Bool
    /// When available: who serves it (`GNOME Keyring`), or nothing; when not: why.
    package var detail: String

    /// Usable; `detail` names who serves it, if anyone should know.
    public static func available(_ detail: String = "") -> StoreKeyAvailability {
        StoreKeyAvailability(isAvailable: true, detail: detail)
    }

    /// Not usable, because of `reason`.
    public static func unavailable(_ reason: String) -> StoreKeyAvailability {
        StoreKeyAvailability(isAvailable: false, detail: reason)
    }

    public var description: String { isAvailable ? (detail.isEmpty ? "available" : "available (\(detail))") : "unavailable: \(detail)" }
}

/// How a store file is protected at rest: what `loginkit status` shows as `storage:`.
public struct StoreProtection: Sendable, Hashable, CustomStringConvertible {
    /// The kind of protection: a key provider's name, `key-file`, `env-key`, `key` (given in code)
    /// or `plaintext`.
    package var level: String
    /// Who serves the keyring (`GNOME Keyring`), what the level means (the kernel keyring's
    /// lifetime), or why the file is plain.
    package var detail: String
    /// Whether the file is plain because no keyring was usable (not by choice).
    package var isFallback: Bool

    /// A protection `level` with `detail`.
    package init(level: String, detail: String = "", isFallback: Bool = false) {
        self.level = level
        self.detail = detail
        self.isFallback = isFallback
    }

    /// Whether the file is sealed.
    public var isSealed: Bool { level != Self.plaintext }

    /// `secret-service (GNOME Keyring)`, `plaintext (no keyring usable: …)`.
    public var description: String { detail.isEmpty ? level : "\(level) (\(detail))" }

    /// Plain JSON in a `0600` file.
    package static let plaintext = "plaintext"
    /// The key from a key file.
    package static let keyFile = "key-file"
    /// The key from `LOGINKIT_STORE_KEY`.
    package static let environmentKey = "env-key"
    /// A key handed to the store in code.
    package static let givenKey = "key"
}
