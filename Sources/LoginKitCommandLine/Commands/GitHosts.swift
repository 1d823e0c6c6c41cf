// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI

/// The git hosts a profile answers `loginkit git-credential get` for, with the username git gets
/// for each, kept in the profile's attribute `git_hosts` (`git.example=oauth2
/// git.example:8443=alice`) and set with `loginkit git-credential configure --host HOST[:PORT]`. A
/// host is compared as git names it in its request — lower-cased, the port kept — and answered for
/// by one profile at most (``ServedHosts``).
struct GitHosts: ServedHosts {
    /// The profile attribute.
    static let attribute = "git_hosts"
    /// The username git gets unless `configure --username` named another.
    static let defaultUsername = "oauth2"

    /// Username by host key (``ServedHosts/key(for:)``).
    var entries: [String: String] = [:]

    init(entries: [String: String] = [:]) {
        self.entries = entries
    }
}
#endif
