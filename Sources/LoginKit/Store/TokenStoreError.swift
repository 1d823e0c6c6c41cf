public import LoginKitHTTP

/// The tokens could not be read or saved: the store file is readable by others or not the user's
/// own, damaged, written by a newer LoginKit, sealed with a key that is missing or wrong; a disk,
/// lock, keyring or database failure.
///
/// The message names the path and says how to fix it; it never contains a token or a key.
public struct TokenStoreError: LoginKitError {
    /// What failed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case insecurePermissions, wrongOwner, corrupt, unsupportedVersion, sealedWithoutKey
            case wrongKey, invalidKey, keyUnavailable, io, noSpace, lockFailed, lockTimedOut, unavailable, conflict, outOfScope
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file or its directory can be read or written by group or others.
        public static let insecurePermissions = Code(.insecurePermissions)
        /// The file or its directory belongs to another user.
        public static let wrongOwner = Code(.wrongOwner)
        /// The file is not a readable store (truncated, not JSON, wrong shape).
        public static let corrupt = Code(.corrupt)
        /// The file was written by a newer LoginKit; it is refused, never overwritten.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// The file is sealed and no key was configured.
        public static let sealedWithoutKey = Code(.sealedWithoutKey)
        /// The sealed file does not open with the configured key (wrong key, or tampered).
        public static let wrongKey = Code(.wrongKey)
        /// The configured sealing key is not 32 bytes of base64.
        public static let invalidKey = Code(.invalidKey)
        /// The file is sealed with a key its provider no longer has (a kernel keyring emptied by a
        /// reboot, a keyring item deleted): log in again. The file reads as empty for a save, which
        /// sets it aside (`<path>.corrupt-<time>`) before writing; it is never deleted.
        public static let keyUnavailable = Code(.keyUnavailable)
        /// A system call failed (the message has the errno text).
        public static let io = Code(.io)
        /// The file system that holds the store is full, or the user's quota is spent: a save
        /// failed, or would (`AuthService` then sends no refresh: the refresh token it would retire
        /// could not be replaced on disk).
        public static let noSpace = Code(.noSpace)
        /// The lock file could not be opened or locked.
        public static let lockFailed = Code(.lockFailed)
        /// The lock stayed held by another process for longer than the store waits (the message
        /// names the holder; a stopped process holds it until it is resumed or killed).
        public static let lockTimedOut = Code(.lockTimedOut)
        /// The store's backing service (a database, a keyring holding its key) could not be reached,
        /// is locked, or did not answer in time.
        /// `AuthService` then keeps serving a still-valid token it already had.
        public static let unavailable = Code(.unavailable)
        /// A write lost a race it should not have been in: the row changed since it was read
        /// (someone wrote without the store's lock). Nothing was written; try again.
        public static let conflict = Code(.conflict)
        /// A single-profile transaction changed another profile. Nothing was written.
        public static let outOfScope = Code(.outOfScope)

        public var description: String { base.rawValue }
    }

    /// What failed, what to do, the error underneath (a database driver's error, …) and where it
    /// was thrown.
    public let details: ErrorDetails<Code>
    /// The store file (or lock or key file) concerned; for a database store, where it is (never
    /// with a password).
    public let path: String
    /// The `errno`, for `.io` and `.lockFailed`.
    public let errno: Int32?

    /// A store failure at `path`; `message` says what failed and how to fix it, never with a token
    /// or a key in it.
    public init(
        _ code: Code, path: String, _ message: String, errno: Int32? = nil, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
        self.path = path
        self.errno = errno
    }
}
