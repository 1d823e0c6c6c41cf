// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit
import LoginKitHTTP

/// The docker registries a profile serves through `docker-credential-loginkit`, with the Username
/// each gets, kept in the profile's attribute `docker_registries`: `HOST=USERNAME` entries separated
/// by spaces, sorted by host (`ghcr.example=oauth2accesstoken registry.example:5000=<token>`). A
/// registry is served by one profile at most. Never a secret.
struct DockerRegistries: Sendable, Equatable {
    /// The profile attribute.
    static let attribute = "docker_registries"
    /// The Username that says the Secret is an OAuth access token used as a password (Google's
    /// registries require exactly this name; registries that check only the token ignore it).
    static let accessTokenUsername = "oauth2accesstoken"

    /// Username by registry key (``key(for:)``).
    var entries: [String: String] = [:]

    init(entries: [String: String] = [:]) {
        self.entries = entries
    }

    /// The registries an attribute value names; entries that do not parse are skipped.
    init(attribute value: String?) {
        for entry in (value ?? "").split(separator: " ") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard let key = parts.first.flatMap({ Self.key(for: String($0)) }) else { continue }
            let username = parts.count == 2 ? String(parts[1]) : Self.accessTokenUsername
            entries[key] = Self.isValidUsername(username) ? username : Self.accessTokenUsername
        }
    }

    /// The attribute value; `nil` when no registry is left (the attribute is then removed).
    var attributeValue: String? {
        guard !entries.isEmpty else { return nil }
        return entries.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// The registry a docker server URL names — its host and port, lower-cased, without scheme,
    /// path or trailing slash: `https://Registry.Example:5000/v2/` and `registry.example:5000` are
    /// both `registry.example:5000`, `https://index.docker.io/v1/` is `index.docker.io`. `nil` for
    /// what names no host (or has user info).
    static func key(for serverURL: String) -> String? {
        var text = Substring(serverURL)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        let trimmed = String(text)
        guard !trimmed.isEmpty, let parts = URLParts(trimmed.firstRange(of: "://") != nil ? trimmed : "https://" + trimmed) else { return nil }
        let host = parts.host.contains(":") ? "[\(parts.host)]" : parts.host
        return parts.port.map { "\(host):\($0)" } ?? host
    }

    /// Whether `username` can be kept in the attribute and sent as docker's Username: 1 to 200
    /// visible ASCII characters, no `=`.
    static func isValidUsername(_ username: String) -> Bool {
        (1...200).contains(username.utf8.count) && username.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "=") }
    }

    /// Every registry of every profile in `store`, by key, with the profile serving it and its
    /// Username; when two profiles name one registry (the attribute was edited by hand), the first
    /// by name serves it.
    static func all(in store: any TokenStore) async throws -> [String: (profile: String, username: String)] {
        var served: [String: (profile: String, username: String)] = [:]
        for name in try await store.profileNames() {
            guard let profile = try await store.profile(named: name) else { continue }
            for (key, username) in DockerRegistries(attribute: profile.attributes[attribute]).entries where served[key] == nil {
                served[key] = (name, username)
            }
        }
        return served
    }

    /// After a login into `name` (which replaced its attributes): the registries `previous` — the
    /// profile before the login — served are served by it again, each unless another profile has
    /// taken it meanwhile.
    ///
    /// - Throws: what the store throws.
    static func keep(from previous: StoredProfile?, for name: String, in store: any TokenStore) async throws {
        let kept = DockerRegistries(attribute: previous?.attributes[attribute])
        guard !kept.entries.isEmpty else { return }
        try await store.withExclusiveAccess { (transaction: inout TokenStoreTransaction) in
            guard var profile = transaction[name] else { return }
            var served = DockerRegistries(attribute: profile.attributes[attribute])
            let taken = Set(
                transaction.profiles.filter { $0.key != name }.flatMap { DockerRegistries(attribute: $0.value.attributes[attribute]).entries.keys })
            for (key, username) in kept.entries where !taken.contains(key) && served.entries[key] == nil {
                served.entries[key] = username
            }
            guard profile.attributes[attribute] != served.attributeValue else { return }
            profile.attributes[attribute] = served.attributeValue
            transaction[name] = profile
        }
    }
}
#endif
