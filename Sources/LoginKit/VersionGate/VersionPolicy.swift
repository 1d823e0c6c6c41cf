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

    /// A `VersionPolicy` from its parts; see each property for what it means.
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

    /// A `UpgradeRequiredError` from its parts; see each property for what it means.
    public init(policy: VersionPolicy, currentVersion: SemanticVersion) {
        self.policy = policy
        self.currentVersion = currentVersion
    }

    public var description: String {
        "UpgradeRequiredError: version \(currentVersion) is below the minimum \(policy.version)\(policy.url.map { "; get it at \($0)" } ?? "")"
    }
}
