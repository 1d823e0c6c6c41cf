// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit
import LoginKitHTTP

/// The hosts a profile serves through a credential helper — docker's registries
/// (``DockerRegistries``), git's hosts (``GitHosts``) — with the username each gets, kept in one
/// attribute of the profile: `HOST=USERNAME` entries separated by spaces, sorted by host
/// (`git.example=oauth2 registry.example:5000=<token>`). A host is served by one profile at most:
/// ``serve(_:by:username:removing:in:)`` takes it from every other in the transaction that gives it.
/// A login keeps the attribute (`ProfileCall.attributesKeptAcrossLogins`). Never a secret.
protocol ServedHosts: Sendable, Equatable {
    /// The profile attribute.
    static var attribute: String { get }
    /// The username of an entry that names none, or one that is not valid.
    static var defaultUsername: String { get }
    /// Username by host key (``key(for:)``).
    var entries: [String: String] { get set }

    init(entries: [String: String])
}

extension ServedHosts {
    /// The hosts an attribute value names; entries that do not parse are skipped.
    init(attribute value: String?) {
        var entries: [String: String] = [:]
        for entry in (value ?? "").split(separator: " ") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard let key = parts.first.flatMap({ Self.key(for: String($0)) }) else { continue }
            let username = parts.count == 2 ? String(parts[1]) : Self.defaultUsername
            entries[key] = Self.isValidUsername(username) ? username : Self.defaultUsername
        }
        self.init(entries: entries)
    }

    /// The attribute value; `nil` when no host is left (the attribute is then removed).
    var attributeValue: String? {
        guard !entries.isEmpty else { return nil }
        return entries.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// The host a URL or `HOST[:PORT]` names — its host and port, lower-cased, without scheme,
    /// path or trailing slash: `https://Registry.Example:5000/v2/` and `registry.example:5000` are
    /// both `registry.example:5000`, `https://index.docker.io/v1/` is `index.docker.io`; a port is
    /// kept as written (`git.example:443` is not `git.example`). `nil` for what names no host (or
    /// has user info).
    static func key(for serverURL: String) -> String? {
        var text = Substring(serverURL)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        let trimmed = String(text)
        guard !trimmed.isEmpty, let parts = URLParts(trimmed.firstRange(of: "://") != nil ? trimmed : "https://" + trimmed) else { return nil }
        let host = parts.host.contains(":") ? "[\(parts.host)]" : parts.host
        return parts.port.map { "\(host):\($0)" } ?? host
    }

    /// Whether `username` can be kept in the attribute: 1 to 200 visible ASCII characters, no `=`.
    static func isValidUsername(_ username: String) -> Bool {
        (1...200).contains(username.utf8.count) && username.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "=") }
    }

    /// Every host of every profile in `store`, by key, with the profile serving it and its
    /// username; when two profiles name one host (the attribute was edited by hand), the first by
    /// name serves it.
    ///
    /// - Throws: what reading the store throws.
    static func all(in store: any TokenStore) async throws -> [String: (profile: String, username: String)] {
        var served: [String: (profile: String, username: String)] = [:]
        for name in try await DefaultProfile.profileNames(carrying: attribute, in: store) {
            guard let profile = try await store.profile(named: name) else { continue }
            for (key, username) in Self(attribute: profile.attributes[attribute]).entries where served[key] == nil {
                served[key] = (name, username)
            }
        }
        return served
    }

    /// In `transaction` (the whole store): profile `name` serves the hosts `keys` — with `username`,
    /// else the username it had for each, else ``defaultUsername`` — and no other profile does; with
    /// `removing`, nobody serves them any longer.
    ///
    /// - Returns: the attribute value `name` holds afterwards (`""` for none); `nil`, and nothing
    ///   changed, when there is no profile `name`.
    static func serve(_ keys: [String], by name: String, username: String?, removing: Bool, in transaction: inout TokenStoreTransaction) -> String? {
        guard let own = transaction[name] else { return nil }
        let previous = Self(attribute: own.attributes[attribute])
        for (profileName, profile) in transaction.profiles {
            var hosts = Self(attribute: profile.attributes[attribute])
            for key in keys {
                if profileName == name, !removing {
                    hosts.entries[key] = username ?? previous.entries[key] ?? defaultUsername
                } else {
                    hosts.entries[key] = nil
                }
            }
            guard profile.attributes[attribute] != hosts.attributeValue else { continue }
            var changed = profile
            changed.attributes[attribute] = hosts.attributeValue
            transaction[profileName] = changed
        }
        return transaction[name].flatMap { $0.attributes[attribute] } ?? ""
    }
}
#endif
