import LoginKitHTTP

/// What a client-credentials request or a token exchange asks a token for: resource indicators
/// (RFC 8707 `resource`, repeatable), the `audience` parameter some providers use instead (Auth0,
/// RFC 8693), and a scope.
///
/// Tokens are cached per target: the order of resources and of scope values does not matter, and
/// repeated ones count once.
public struct TokenTarget: Sendable, Hashable, CustomStringConvertible {
    /// Absolute URIs of the resource servers the token is for (RFC 8707 §2: no fragment).
    public var resources: [String]
    /// The `audience` parameter, for providers that name the API that way.
    public var audience: String?
    /// The scope asked for; `nil` for the API's configured scope.
    public var scope: String?

    /// A target; every part is optional (the empty target is the client's default token).
    public init(resources: [String] = [], audience: String? = nil, scope: String? = nil) {
        self.resources = resources
        self.audience = audience
        self.scope = scope
    }

    /// Whether the target asks for anything beyond a scope.
    package var namesResourceOrAudience: Bool { !resources.isEmpty || audience != nil }

    /// The canonical form tokens are cached under: sorted, de-duplicated resources and scope values.
    ///
    /// Different targets never share a key (the key names a stored profile, through
    /// ``ClientCredentialsTokens/profileName(base:target:)``): a part that is empty, holds a control
    /// character, or could be read as a separator (a space in a resource) or as the default scope's
    /// marker is escaped (``keyPart(_:plain:)``); every other part is written as it is, so the keys of
    /// such targets stay those their profiles were saved under.
    package var cacheKey: String {
        let resourcePart = Set(resources.map { Self.keyPart($0, plain: !$0.isEmpty && !$0.utf8.contains(0x20)) }).sorted().joined(separator: " ")
        let audiencePart = audience.map { Self.keyPart($0, plain: !$0.isEmpty) } ?? ""
        let scopePart: String
        if let scope {
            let values = Set(scope.split(separator: " ").map { Self.keyPart(String($0), plain: true) }).sorted().joined(separator: " ")
            scopePart = values == Self.defaultScopeMarker ? Self.escapeMark + values : values
        } else {
            scopePart = Self.defaultScopeMarker
        }
        return "resource=\(resourcePart)\naudience=\(audiencePart)\nscope=\(scopePart)"
    }

    /// What ``cacheKey`` writes for the API's configured scope (a `nil` scope).
    private static let defaultScopeMarker = "(default)"
    /// What begins an escaped part: U+007F, a control character, which no part written as it is holds.
    private static let escapeMark = "\u{7F}"

    /// `value` as it is when `plain` and free of control characters; otherwise ``escapeMark``
    /// followed by `value` with `%`, space and control characters percent-encoded. The two forms
    /// never meet, and each is one-to-one, so different values never share a part.
    private static func keyPart(_ value: String, plain: Bool) -> String {
        if plain, !value.unicodeScalars.contains(where: isControl) { return value }
        let hex = Array("0123456789ABCDEF")
        var escaped = escapeMark
        for scalar in value.unicodeScalars {
            guard scalar == "%" || scalar == " " || isControl(scalar) else {
                escaped.unicodeScalars.append(scalar)
                continue
            }
            for byte in String(scalar).utf8 { escaped += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0x0F)]) }
        }
        return escaped
    }

    /// Unicode's control characters (general category Cc): U+0000–U+001F and U+007F–U+009F.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    public var description: String {
        var parts: [String] = []
        if !resources.isEmpty { parts.append("resource \(Set(resources).sorted().map { printableExcerpt($0, limit: 200) }.joined(separator: ", "))") }
        if let audience { parts.append("audience \(printableExcerpt(audience, limit: 200))") }
        if let scope { parts.append("scope \"\(printableExcerpt(scope, limit: 200))\"") }
        return parts.isEmpty ? "the default token" : parts.joined(separator: ", ")
    }

    /// The form fields: one `resource` per resource (sorted, once each), then `audience`.
    var formFields: [(String, String)] {
        Set(resources).sorted().map { ("resource", $0) } + (audience.map { [("audience", $0)] } ?? [])
    }

    /// RFC 8707 §2: each resource an absolute URI without a fragment; no control character in the
    /// audience or the scope, and no empty audience.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration`.
    func validate() throws {
        for resource in resources {
            let scheme = resource.prefix { $0 != ":" }
            let isAbsolute =
                scheme.count < resource.count && !scheme.isEmpty && scheme.first?.isLetter == true
                && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
            guard isAbsolute, !resource.contains("#"), !resource.contains(where: \.isWhitespace), !resource.unicodeScalars.contains(where: Self.isControl) else {
                throw LoginError(
                    .invalidConfiguration, "the resource \"\(printableExcerpt(resource, limit: 200))\" is not an absolute URI without a fragment (RFC 8707 §2)")
            }
        }
        if let audience {
            if audience.isEmpty { throw LoginError(.invalidConfiguration, "the audience is empty") }
            if audience.unicodeScalars.contains(where: Self.isControl) {
                throw LoginError(.invalidConfiguration, "the audience \"\(printableExcerpt(audience, limit: 200))\" holds control characters")
            }
        }
        if let scope, scope.unicodeScalars.contains(where: Self.isControl) {
            throw LoginError(.invalidConfiguration, "the scope \"\(printableExcerpt(scope, limit: 200))\" holds control characters")
        }
    }

    /// The target a client-credentials profile was stored with (its attributes).
    init(attributes: [String: String]) {
        self.init(
            resources: attributes["resource"].map { $0.split(separator: " ").map(String.init) } ?? [],
            audience: attributes["audience"], scope: attributes["scope"])
    }

    /// The attributes a profile keeps the target in (resources space-separated: URIs have no spaces).
    var attributes: [String: String] {
        var attributes: [String: String] = [:]
        if !resources.isEmpty { attributes["resource"] = Set(resources).sorted().joined(separator: " ") }
        if let audience { attributes["audience"] = audience }
        if let scope { attributes["scope"] = scope }
        return attributes
    }
}

extension ClientCredentialsAPI {
    /// Credentials for `target`. APIs without resource indicators serve the scope-only target and
    /// refuse others.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a resource or audience.
    public func clientCredentials(for target: TokenTarget) async throws -> Credentials {
        guard !target.namesResourceOrAudience else {
            throw LoginError(.invalidConfiguration, "this API cannot ask for a resource or audience; use OAuth2API")
        }
        return try await clientCredentials(scope: target.scope)
    }
}
