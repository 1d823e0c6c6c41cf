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
