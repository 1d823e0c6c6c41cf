import LoginKitHTTP

/// The configuration cannot work as given: a value in the wrong format (a Cognito region that is not
/// an AWS region), or a safety requirement left unmet (ID tokens that nothing would verify). Nothing
/// was sent; retrying will not help. Fix the configuration named in `message`.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidValue, verifierRequired, unsupported
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A value is missing or not in the format it must have (a URL that is not absolute http(s),
        /// a region that would otherwise end up in a host name, a table name that would end up in SQL).
        public static let invalidValue = Code(.invalidValue)
        /// ID tokens would be accepted without verification: no verifier is configured and the
        /// configuration does not explicitly opt out of verifying.
        public static let verifierRequired = Code(.verifierRequired)
        /// The configured API cannot do what was asked (a device login with an API that has no
        /// device flow, a browser login with one that has no authorization endpoint).
        public static let unsupported = Code(.unsupported)

        public var description: String { base.rawValue }
    }

    /// What is wrong.
    public let code: Code
    /// Which setting is wrong and how to fix it; never a secret.
    public let message: String
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A configuration error; `message` names the setting (`OAuth2API.Configuration.issuer`) and is
    /// kept to one line with control characters escaped, whatever was interpolated into it.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = escapingControlCharacters(message)  // one line, no terminal escapes, whatever was interpolated
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String { "ConfigurationError(\(code)): \(message)" }
}
