/// A cryptographic operation failed: sealing, opening, key generation, signing, randomness.
///
/// `open` of tampered data or with the wrong key is always ``Code/authenticationFailed``: no
/// plaintext is ever returned for data that does not authenticate.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// What failed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case authenticationFailed, malformed, invalidKey, randomFailed, operationFailed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The data or its associated data was altered, or the key is wrong.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// The sealed data is too short or otherwise not a sealed box.
        public static let malformed = Code(.malformed)
        /// The key has the wrong size or type for the operation.
        public static let invalidKey = Code(.invalidKey)
        /// The random number generator failed.
        public static let randomFailed = Code(.randomFailed)
        /// OpenSSL reported a failure (the message has its reason).
        public static let operationFailed = Code(.operationFailed)

        public var description: String { base.rawValue }
    }

    /// What failed.
    public let code: Code
    /// A readable sentence.
    public let message: String
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A cryptographic failure; `message` names the operation and OpenSSL's reason, never key material.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String { "CryptoError(\(code)): \(message)" }
}
