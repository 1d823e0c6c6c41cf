// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit

/// A short-lived command's use of one profile through an `AuthService` (`token`, `request`): the
/// service is shut down before the command prints, so that a refresh started on its behalf is saved
/// — or known to be unsaved — before the process exits.
enum ProfileCall {
    /// The attributes a login keeps from the profile it replaces, copied in the save's own
    /// transaction (`AuthService.Configuration.attributesKeptAcrossLogins`): the default's mark, and
    /// the docker registries and git hosts the profile serves. Each is taken from every other
    /// profile in the transaction that gives it to one, so what the replaced profile still holds at
    /// the save is still its own.
    static let attributesKeptAcrossLogins: Set<String> = [DefaultProfile.attribute, DockerRegistries.attribute, GitHosts.attribute]

    /// The configuration of the CLI's services: the defaults, and logins that keep
    /// ``attributesKeptAcrossLogins``.
    static var configuration: AuthService.Configuration {
        var configuration = AuthService.Configuration()
        configuration.attributesKeptAcrossLogins = attributesKeptAcrossLogins
        return configuration
    }

    /// Runs `body` with an `AuthService` for `profile` in `store` through `api`, then awaits the
    /// service's shutdown: a background refresh whose request has left (the advisory window) is
    /// awaited, so that the rotated refresh token is saved before this short-lived process exits.
    ///
    /// - Returns: what `body` returned or threw, and the refresh whose credentials could not be
    ///   saved, if any (the command prints its result, then reports it with ``unsavedFailure(_:)``).
    nonisolated(nonsending) static func run<T>(
        api: any AuthAPI, store: any TokenStore, profile: String, _ body: (AuthService) async throws -> T
    ) async -> (result: Result<T, any Error>, unsaved: TokenStoreError?) {
        let service = AuthService(api: api, store: store, profile: profile, configuration: configuration)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(service))
        } catch {
            result = .failure(error)
        }
        await service.shutdown()
        return (result, service.unsavedRefresh)
    }

    /// The failure reported (exit 1) after the output when refreshed credentials could not be saved:
    /// the session ends with this process.
    static func unsavedFailure(_ unsaved: TokenStoreError) -> CLIFailure {
        CLIFailure(
            exitCode: 1,
            "the refreshed credentials could not be saved to \(unsaved.path): \(unsaved.message); this session ends when this process exits — free space or fix permissions, then log in again",
            detail: "\(unsaved)")
    }
}
#endif
