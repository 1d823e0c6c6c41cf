// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// `loginkit logout`: revokes at the provider (unless `--no-revoke`), deletes the profile, and says
/// in one line what happened at the provider — a deleted profile whose refresh token stays valid
/// there is not a finished logout.
struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Revoke the tokens and delete the profile.",
        discussion: """
            Says in one line on stderr what happened at the provider; with --json, prints profile, \
            revocation (revoked, nothing, unsupported, skipped, failed or timed_out), detail and deleted \
            on stdout instead. A profile that does not exist: nothing to log out, exit 0. A revocation \
            that failed or timed out: the profile is deleted here all the same, exit 8. A store that \
            cannot be changed: the profile stays, exit 1.
            """
    )

    /// The exit code of a logout whose revocation failed or timed out: the profile is deleted here,
    /// its refresh token may stay valid at the provider until it expires.
    static let revocationFailedExitCode: Int32 = 8

    @Flag(name: .customLong("no-revoke"), help: "Delete the profile without revoking at the provider.") var noRevoke = false
    @Flag(help: "Print the result as JSON on stdout.") var json = false
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    /// What happened at the provider.
    enum Revocation {
        /// The provider revoked the tokens.
        case revoked
        /// The profile does not exist: nothing was deleted or revoked.
        case nothing
        /// The provider offers no revocation.
        case unsupported
        /// `--no-revoke`.
        case skipped
        /// The revocation failed; the reason holds no secret.
        case failed(reason: String)
        /// The provider did not answer in time.
        case timedOut

        init(_ revocation: LogoutResult.Revocation) {
            switch revocation {
            case .revoked: self = .revoked
            case .nothingToRevoke: self = .nothing
            case .unsupported: self = .unsupported
            case .failed(let reason): self = .failed(reason: reason)
            case .timedOut: self = .timedOut
            }
        }

        /// Its name in `--json`.
        var name: String {
            switch self {
            case .revoked: "revoked"
            case .nothing: "nothing"
            case .unsupported: "unsupported"
            case .skipped: "skipped"
            case .failed: "failed"
            case .timedOut: "timed_out"
            }
        }

        /// Whether the profile was deleted (it existed).
        var deleted: Bool {
            if case .nothing = self { return false }
            return true
        }

        /// Whether the tokens may still work at the provider although the user asked to revoke them.
        var isFailure: Bool {
            switch self {
            case .failed, .timedOut: true
            case .revoked, .nothing, .unsupported, .skipped: false
            }
        }
    }

    func run() async throws {
        try await reportingFailures {
            let clientConfiguration = try networkOptions.clientConfiguration()
            let opened = try await storeOptions.openStore()
            let name = storeOptions.profileName
            let revocation = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                try await Self.logOut(profile: name, from: opened, noRevoke: noRevoke, transport: client)
            }
            try Self.report(revocation, profile: name, json: json)
        }
    }

    /// Deletes profile `name` from `opened`, revoking first unless `noRevoke` (`logout`, and
    /// `profiles rm`).
    ///
    /// - Throws: `CLIFailure` exit 1 naming the store when the profile could not be read or removed
    ///   (it then stays); what building its API throws.
    static func logOut(profile name: String, from opened: CommandLineStore, noRevoke: Bool, transport: CurlHTTPClient) async throws -> Revocation {
        let stored: StoredProfile?
        do {
            stored = try await opened.store.profile(named: name)
        } catch {
            throw CLIFailure(error)
        }
        guard let stored else { return .nothing }
        if noRevoke {
            do {
                try await opened.store.removeProfile(named: name)
            } catch {
                throw Self.notRemoved(name, store: opened.location, because: CLIFailure(error).message, detail: "\(error)")
            }
            return .skipped
        }
        // Revoked over a connection that presents the certificate the profile's login recorded.
        let result = try await ClientCertificateOptions.withClient(transport, presentingCertificateIn: stored.attributes) { transport in
            let api = try APIFactory.api(
                for: stored.source, attributes: stored.attributes, from: opened.store, transport: transport, clientSecret: APIFactory.environmentSecret)
            let service = AuthService(api: api, store: opened.store, profile: name)
            let result = await service.logOut()
            await service.shutdown()
            return result
        }
        guard result.profileRemoved else {
            let reason: String
            if let storeError = result.storeError {
                reason = storeError.message
            } else if case .failed(let text) = result.revocation {
                reason = text
            } else {
                reason = "the store could not be changed"
            }
            throw Self.notRemoved(name, store: opened.location, because: reason, detail: "\(result)")
        }
        return Revocation(result.revocation)
    }

    /// Exit 1: the profile is still in the store.
    private static func notRemoved(_ name: String, store location: String, because reason: String, detail: String) -> CLIFailure {
        CLIFailure(
            exitCode: 1,
            "the profile \"\(Terminal.printable(name, limit: 100))\" could not be removed from the store \(Terminal.printable(location, limit: 500)) "
                + "(\(Terminal.printable(reason, limit: 500))); it is still there",
            detail: detail)
    }

    /// One line on stderr, or with `json` the JSON on stdout, for the logout of profile `profile`;
    /// a failed or timed-out revocation ends in exit 8.
    static func report(_ revocation: Revocation, profile: String, json: Bool) throws {
        let name = "\"\(Terminal.printable(profile, limit: 100))\""
        let line: String
        switch revocation {
        case .revoked:
            line = "Logged out of \(name); the provider revoked the tokens."
        case .nothing:
            line = "Nothing to log out: profile \(name) does not exist."
        case .unsupported:
            line = "Logged out of \(name) here; no revocation is known for the provider (an OpenID Connect provider with one "
                + "not in its discovery: log in with --revocation-endpoint), so the tokens stay valid there until they expire."
        case .skipped:
            line = "Logged out of \(name) here; nothing was revoked at the provider (--no-revoke): its tokens stay valid there until they expire."
        case .failed(let reason):
            line = "logged out of \(name) here, but the revocation at the provider failed (\(Terminal.printable(reason, limit: 500))): "
                + "the refresh token may stay valid there until it expires"
        case .timedOut:
            line = "logged out of \(name) here, but the provider did not answer the revocation in time: "
                + "the refresh token may stay valid there until it expires"
        }
        if json {
            var detail: String?
            if case .failed(let reason) = revocation { detail = reason }
            JSONOutput.print([
                "profile": .text(profile), "revocation": .text(revocation.name),
                "detail": .textOrNull(detail), "deleted": .flag(revocation.deleted),
            ])
        }
        if revocation.isFailure {
            throw CLIFailure(exitCode: Self.revocationFailedExitCode, line)
        }
        if !json { Terminal.standardError(line) }
    }
}
#endif
