// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI

/// The docker registries a profile serves through `docker-credential-loginkit`, with the Username
/// each gets, kept in the profile's attribute `docker_registries`
/// (`ghcr.example=oauth2accesstoken registry.example:5000=<token>`). A registry is served by one
/// profile at most (``ServedHosts``).
struct DockerRegistries: ServedHosts {
    /// The profile attribute.
    static let attribute = "docker_registries"
    /// The Username that says the Secret is an OAuth access token used as a password (Google's
    /// registries require exactly this name; registries that check only the token ignore it).
    static let accessTokenUsername = "oauth2accesstoken"
    /// The Username of a registry configured without one: ``accessTokenUsername``.
    static var defaultUsername: String { accessTokenUsername }

    /// Username by registry key (``ServedHosts/key(for:)``).
    var entries: [String: String] = [:]

    init(entries: [String: String] = [:]) {
        self.entries = entries
    }
}
#endif
