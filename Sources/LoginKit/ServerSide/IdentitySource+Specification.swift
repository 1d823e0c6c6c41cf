import LoginKitHTTP

extension IdentitySource {
    /// `file`, `exec`, `url`, `github-actions` or `env`: what `loginkit status` shows.
    package var kindName: String {
        switch self {
        case .file: "file"
        case .program: "exec"
        case .url: "url"
        case .gitHubActions: "github-actions"
        case .environment: "env"
        }
    }

    /// The source as messages and `status` name it: `file:/path`, `exec:/path/prog`,
    /// `url:https://host/path` (a query shown as `?...`: it may hold a key), `github-actions[:AUDIENCE]`,
    /// `env:VAR`. Never a header value nor a token; printable ASCII, cut to a readable length.
    package var displayName: String {
        switch self {
        case .file(let path):
            return "file:" + printableExcerpt(path, limit: 200)
        case .program(let path, _, _):
            return "exec:" + printableExcerpt(path, limit: 200)
        case .url(let url, _, _):
            guard let parts = URLParts(url) else { return "url:(not an absolute http(s) URL)" }
            let pieces = parts.pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let path = pieces.first.map { String($0) } ?? "/"
            return "url:" + printableExcerpt(parts.scheme + "://" + parts.authority + path, limit: 200) + (pieces.count > 1 ? "?..." : "")
        case .gitHubActions(let audience):
            guard let audience, !audience.isEmpty else { return "github-actions" }
            return "github-actions:" + printableExcerpt(audience, limit: 200)
        case .environment(let name):
            return "env:" + printableExcerpt(name, limit: 200)
        }
    }

    /// The specification `init(specification:headers:field:timeout:)` parses back into this source
    /// (`kindName:value`), as profiles record it. A program's arguments and timeout and a URL's
    /// headers and field are not part of it: they are recorded beside it.
    package var specification: String {
        switch self {
        case .file(let path): "file:" + path
        case .program(let path, _, _): "exec:" + path
        case .url(let url, _, _): "url:" + url
        case .gitHubActions(let audience): audience.map { $0.isEmpty ? "github-actions" : "github-actions:" + $0 } ?? "github-actions"
        case .environment(let name): "env:" + name
        }
    }

    /// The accepted forms, for messages.
    private static let acceptedForms = "file:PATH, exec:PROGRAM, url:URL, github-actions, github-actions:AUDIENCE or env:VAR"

    /// Parses the command line's SOURCE: `file:PATH`, `exec:PROGRAM` (the rest of the string is the
    /// program's path or name, without arguments), `url:URL` (an absolute http(s) URL, sent with
    /// `headers` and read at `field`), `github-actions` or `github-actions:AUDIENCE`, `env:VAR`.
    /// `timeout` bounds an `exec:` program.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` naming the accepted forms, for an unknown
    ///   kind, an empty value, a URL that is no absolute http(s) URL, headers or a field given to
    ///   another kind than `url:`, or a timeout that is not above zero. The message never repeats a
    ///   specification that is no `kind:value` (it may be a token pasted by mistake).
    package init(specification: String, headers: [String: String] = [:], field: String? = nil, timeout: Duration = .seconds(30)) throws {
        let kind: String
        let value: String?
        if let colon = specification.firstIndex(of: ":") {
            kind = String(specification[..<colon])
            value = String(specification[specification.index(after: colon)...])
        } else {
            kind = specification
            value = nil
        }
        let source: IdentitySource
        switch (kind, value) {
        case ("file", let path?) where !path.isEmpty:
            source = .file(path)
        case ("exec", let path?) where !path.isEmpty:
            source = .program(path, timeout: timeout)
        case ("url", let url?) where URLParts(url) != nil:
            source = .url(url, headers: headers, field: field)
        case ("url", _?):
            throw LoginError(
                .invalidConfiguration, "the identity source url: needs an absolute http(s) URL without user info after \"url:\"")
        case ("github-actions", nil):
            source = .gitHubActions()
        case ("github-actions", let audience?) where !audience.isEmpty:
            source = .gitHubActions(audience: audience)
        case ("env", let name?) where !name.isEmpty && !name.contains("=") && !name.utf8.contains(0):
            source = .environment(name)
        case ("file", _), ("exec", _), ("url", _), ("github-actions", _), ("env", _):
            throw LoginError(.invalidConfiguration, "the identity source \(kind): has no usable value; use \(Self.acceptedForms)")
        default:
            // Only a short lowercase kind is repeated: anything else may be a token pasted by mistake.
            let named = value != nil && kind.count <= 20 && kind.allSatisfy { "abcdefghijklmnopqrstuvwxyz-".contains($0) }
            let what = named ? "\"" + kind + ":\" is no kind of identity source" : "that is no identity source"
            throw LoginError(.invalidConfiguration, what + "; use " + Self.acceptedForms)
        }
        if case .url = source {
            if let field, field.isEmpty || field.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
                throw LoginError(.invalidConfiguration, "the field of a url: identity source is a dot-separated path such as access_token or data.token")
            }
        } else if !headers.isEmpty || field != nil {
            throw LoginError(.invalidConfiguration, "headers and a field apply to url: identity sources only, not to \(kind):")
        }
        if case .program = source, timeout <= .zero {
            throw LoginError(.invalidConfiguration, "the timeout of an exec: identity source must be above zero")
        }
        self = source
    }
}
