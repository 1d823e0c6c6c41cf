/// A logged-in user, from the ID token's standard claims (or the login ID when there is none).
public struct User: Identifiable, Sendable, Hashable {
    /// A user's stable identifier: the `sub` claim, or the login ID.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        /// The identifier as the provider wrote it.
        public let rawValue: String
        /// Wraps an identifier as the provider wrote it; nothing is normalised.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
    }

    /// `sub`, or the ID used to log in.
    public let id: ID
    /// `preferred_username`.
    public var preferredUsername: String?
    /// `nickname`.
    public var nickname: String?
    /// `birthdate` as the provider wrote it (`YYYY-MM-DD`, or `0000-MM-DD` when the year is withheld).
    public var birthdate: String?

    /// A user with `id` and whichever profile claims are known.
    public init(id: ID, preferredUsername: String? = nil, nickname: String? = nil, birthdate: String? = nil) {
        self.id = id
        self.preferredUsername = preferredUsername
        self.nickname = nickname
        self.birthdate = birthdate
    }

    /// The user described by `credentials`' ID token; `fallbackID` when there is none.
    package init(credentials: Credentials, fallbackID: ID) {
        guard let claims = try? credentials.idToken?.unverifiedClaims() else {
            self.init(id: fallbackID)
            return
        }
        self.init(
            id: claims.subject.map(ID.init(rawValue:)) ?? fallbackID,
            preferredUsername: claims["preferred_username"]?.stringValue,
            nickname: claims["nickname"]?.stringValue,
            birthdate: claims["birthdate"]?.stringValue
        )
    }

    /// The user a stored profile belongs to: `id` is the ID the profile was logged in as (its
    /// `userID`: the ID token's `sub` at login, else the login ID, else the client ID); the names
    /// come from the current ID token.
    package init(profile: StoredProfile) {
        let id = ID(rawValue: profile.userID ?? profile.source.clientID ?? "")
        var user = User(credentials: profile.credentials, fallbackID: id)
        user = User(id: id, preferredUsername: user.preferredUsername, nickname: user.nickname, birthdate: user.birthdate)
        self = user
    }
}
