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
    package var cacheKey: String {
        let resourcePart = Set(resources).sorted().joined(separator: " ")
        let scopePart = Set((scope ?? "").split(separator: " ").map(String.init)).sorted().joined(separator: " ")
        return "resource=\(resourcePart)\naudience=\(audience ?? "")\nscope=\(scope == nil ? "(default)" : scopePart)"
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

    /// RFC 8707 §2: each resource an absolute URI without a fragment.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration`.
    func validate() throws {
        for resource in resources {
            let scheme = resource.prefix { $0 != ":" }
            let isAbsolute =
                scheme.count < resource.count && !scheme.isEmpty && scheme.first?.isLetter == true
                && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
            guard isAbsolute, !resource.contains("#"), !resource.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } == true }) else {
                throw LoginError(
                    .invalidConfiguration, "the resource \"\(printableExcerpt(resource, limit: 200))\" is not an absolute URI without a fragment (RFC 8707 §2)")
            }
        }
        if let audience, audience.isEmpty { throw LoginError(.invalidConfiguration, "the audience is empty") }
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
