/// What every LoginKit error carries: a code to match, a message for people, the error underneath
/// and where it was thrown.
///
/// `message` is one line with control characters written as `\u{…}` escapes, whatever was
/// interpolated into it, and never holds a password, a token, a secret or a key.
public struct ErrorDetails<Code: Hashable & Sendable & CustomStringConvertible>: Sendable {
    /// What went wrong; match on it.
    public let code: Code
    /// What failed and what to do next.
    public let message: String
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// The file (`#fileID`) where the error was thrown.
    public let file: String
    /// The line where the error was thrown.
    public let line: Int

    /// The details of an error; `message` is kept to one line, its control characters escaped.
    package init(_ code: Code, _ message: String, underlying: (any Error)?, file: String, line: Int) {
        self.code = code
        self.message = escapingControlCharacters(message)  // one line, no terminal escapes, whatever was interpolated
        self.underlying = underlying
        self.file = file
        self.line = line
    }
}

/// An error LoginKit throws: `LoginError`, `LoginRequiredError`, `ServerError`, `NetworkError`,
/// `TokenVerificationError` or `TokenStoreError`, and nothing else.
///
/// Catch one of those types to tell what happened and match its `code`; catch `any LoginKitError`
/// to handle them all alike — `message` says what failed and what to do next, `description`
/// (`LoginError(invalidCredentials): …`) is the line to log. Only LoginKit's own error types
/// conform.
public protocol LoginKitError: Error, CustomStringConvertible {
    /// The type's codes: a struct whose static members name each case. New codes may be added;
    /// switch with a `default`.
    associatedtype Code: Hashable & Sendable & CustomStringConvertible
    /// The code, message, underlying error and place of this error.
    var details: ErrorDetails<Code> { get }
}

extension LoginKitError {
    /// What went wrong; match on it (`error.code == .invalidCredentials`).
    public var code: Code { details.code }
    /// What failed and what to do next: one line, never a password, a token, a secret or a key.
    public var message: String { details.message }
    /// The error underneath, when there is one.
    public var underlying: (any Error)? { details.underlying }
    /// The file (`#fileID`) where the error was thrown.
    public var file: String { details.file }
    /// The line where the error was thrown.
    public var line: Int { details.line }
    /// `TypeName(code): message`, for logs.
    public var description: String { "\(Self.self)(\(code)): \(message)" }
}
