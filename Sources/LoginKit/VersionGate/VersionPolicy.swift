/// A minimum-version policy: below `version`, logins and refreshes stop and the user is told to
/// upgrade. JSON with snake_case keys: `{"title": …, "message": …, "version": "1.4.0", "url": …}`.
public struct VersionPolicy: Sendable, Hashable, Codable {
    /// The dialog's title.
    public var title: String
    /// What to tell the user.
    public var message: String
    /// The minimum version allowed.
    public var version: SemanticVersion
    /// Where to get the upgrade.
    public var url: String?

    /// A policy requiring at least `version`, with the title and message shown to users below it.
    public init(title: String, message: String, version: SemanticVersion, url: String? = nil) {
        self.title = title
        self.message = message
        self.version = version
        self.url = url
    }
}

/// This client is older than the policy's minimum: log in and refresh are refused until it is upgraded.
public struct UpgradeRequiredError: Error, Sendable, CustomStringConvertible {
    /// The policy in force.
    public let policy: VersionPolicy
    /// This client's version.
    public let currentVersion: SemanticVersion
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// The refusal of a client at `currentVersion`, below `policy`'s minimum.
    public init(
        policy: VersionPolicy, currentVersion: SemanticVersion, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.policy = policy
        self.currentVersion = currentVersion
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String {
        "UpgradeRequiredError: version \(currentVersion) is below the minimum \(policy.version)\(policy.url.map { "; get it at \($0)" } ?? "")"
    }
}
