// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

extension DockerCredentialCommand {
    /// `configure --registry HOST [--username U] [--remove]`: which registries a profile serves.
    struct ConfigureOperation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "configure",
            abstract: "Serve a docker registry with this profile's access token (--remove: stop).",
            discussion: """
                Records the registry in the profile's attribute docker_registries (never a secret); a \
                registry is served by one profile, so naming it here takes it from any other. --username: \
                oauth2accesstoken (default: the access token is sent as a password), <token> (docker sends \
                it as an identity token, to the registry's token service as a refresh token), or the name \
                the registry expects. The registry is kept with the profile: a new login of the profile keeps \
                it, a logout drops it.
                """)

        @Option(name: .customLong("registry"), help: ArgumentHelp("The registry: HOST[:PORT] or its URL (repeatable).", valueName: "host"))
        var registries: [String] = []
        @Option(help: "The Username docker gets (default: oauth2accesstoken; <token> for an identity token).") var username: String?
        @Flag(help: "Stop serving the registries instead.") var remove = false
        @OptionGroup var storeOptions: StoreOptions

        func validate() throws {
            guard !registries.isEmpty else { throw ValidationError("name a registry: --registry HOST") }
            for registry in registries where DockerRegistries.key(for: registry) == nil {
                throw ValidationError("--registry \(Terminal.printable(registry, limit: 200)): not a registry host or http(s) URL")
            }
            if let username, !DockerRegistries.isValidUsername(username) {
                throw ValidationError("--username must be 1 to 200 visible ASCII characters without '='")
            }
            if remove, username != nil { throw ValidationError("--username applies without --remove") }
        }

        func run() async throws {
            try await reportingFailures {
                let store = try await storeOptions.openStore().store
                let name = storeOptions.profileName
                let keys = registries.compactMap { DockerRegistries.key(for: $0) }
                let remove = self.remove
                let username = self.username
                let served = try await store.withExclusiveAccess { (transaction: inout TokenStoreTransaction) -> String? in
                    DockerRegistries.serve(keys, by: name, username: username, removing: remove, in: &transaction)
                }
                guard let served else {
                    throw CLIFailure(
                        exitCode: 3,
                        "not logged in (profile \"\(Terminal.printable(name, limit: 100))\"); "
                            + "run `loginkit login` first: the registries are kept with the profile")
                }
                let shown = keys.joined(separator: ", ")
                if remove {
                    Terminal.standardError("Profile \"\(Terminal.printable(name, limit: 100))\" no longer serves \(shown).")
                } else {
                    Terminal.standardError(
                        "Profile \"\(Terminal.printable(name, limit: 100))\" serves \(shown) (\(served)); "
                            + "map each to the helper in ~/.docker/config.json: {\"credHelpers\": {\"HOST\": \"loginkit\"}}")
                }
            }
        }
    }
}
#endif
