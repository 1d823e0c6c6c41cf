// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoginKit

/// `loginkit git-credential get|store|erase`: git's credential helper (gitcredentials(7)) — and
/// `configure`, which names the hosts a profile serves (``GitHosts``). The helper answers only for
/// a host a profile serves, over https, or http to a loopback host: git runs it for whatever hosts
/// its configuration names (a `credential.helper` without a host: every one), and in the work tree
/// of whatever repository it works in.
struct GitCredentialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "git's credential helper: a profile's access token as the password, for the hosts it serves.",
        discussion: """
            Name each host: loginkit git-credential configure --host git.example.com [--profile NAME] \
            [--username U] (--remove: no longer; a host is served by one profile, so naming it here \
            takes it from any other). Then set the helper for that host only: git config --global \
            credential.https://git.example.com.helper '!loginkit git-credential'. git appends the \
            operation and writes its request (key=value lines) on stdin.

            get: for a host a profile serves — the profile of --profile when it serves the host, else \
            the one that does (never one chosen by $LOGINKIT_PROFILE, a .loginkit file or the default) \
            — over https, or http to a loopback host, answers username (--username, else the host's, \
            default oauth2), password (a valid access token, refreshed first when needed, once across \
            processes) and password_expiry_utc, and nothing else. A host no profile serves, any other \
            request, a request for another username, no usable session or a refresh that fails get no \
            answer (exit 0: git asks its next helper or the user; the reason, if any, is one line on \
            stderr). erase: when the password git sends is the current access token of the profile \
            serving the host (a server refused it), refreshes now, so the next get serves a new token; \
            another password: nothing. store, and operations git may add later: nothing.
            """)

    /// The operation that names hosts (not one of git's).
    static let configureOperation = "configure"

    @Argument(help: "The operation: get, store or erase (git's; any other is ignored), or configure.") var operation: String
    @Option(help: "The username git sends with the token (default: the host's, from configure; else oauth2).") var username: String?
    @Option(name: .customLong("host"), help: ArgumentHelp("configure: a host git names, HOST[:PORT] (repeatable).", valueName: "host"))
    var hosts: [String] = []
    @Flag(help: "configure: stop serving the hosts instead.") var remove = false
    @Option(name: .customLong("min-validity"), help: "Seconds the token must stay valid (refresh otherwise).") var minValidity: Int = 0
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
        guard operation == Self.configureOperation else {
            guard hosts.isEmpty, !remove else { throw ValidationError("--host and --remove apply to configure only") }
            if let username, !GitCredentialRequest.isSendable(username) {
                throw ValidationError("--username must be one line without control characters")
            }
            return
        }
        guard !hosts.isEmpty else { throw ValidationError("name a host: loginkit git-credential configure --host HOST[:PORT]") }
        for host in hosts where GitHosts.key(for: host) == nil {
            throw ValidationError("--host \(Terminal.printable(host, limit: 200)): not a host, HOST:PORT or http(s) URL")
        }
        if let username, !GitHosts.isValidUsername(username) {
            throw ValidationError("--username must be 1 to 200 visible ASCII characters without '='")
        }
        if remove, username != nil { throw ValidationError("--username applies without --remove") }
    }

    func run() async throws {
        if operation == Self.configureOperation {
            try await configure()
            return
        }
        let input = try await BoundedInput.readRequest(untilBlankLine: true)
        let request = try GitCredentialRequest(parsing: input)
        switch operation {
        case "get": try await answer(request)
        case "erase": try await erase(request)
        default: return  // `store` (the profile keeps the token), and operations of later git versions
        }
    }

    /// `get`: the three lines, or nothing.
    private func answer(_ request: GitCredentialRequest) async throws {
        guard request.allowsToken, let host = request.hostKey else { return }
        guard let found = try await Self.leavingFailuresToGit({ try await servingProfile(for: host) }), let served = found else { return }
        let username = self.username ?? served.username
        if let asked = request.attributes["username"], asked != username { return }  // the URL names another account
        guard let issued = try await Self.leavingFailuresToGit({
            let network = try networkOptions.clientConfiguration()
            return try await ProfileAccessToken.valid(
                profile: served.name, store: served.store, network: network, minimumValidity: .seconds(minValidity))
        }) else { return }
        var lines = "username=\(username)\npassword=\(issued.token)\n"
        if let seconds = issued.expiresAt.flatMap({ Self.unixSeconds($0) }) { lines += "password_expiry_utc=\(seconds)\n" }
        Terminal.writeAll(lines, to: STDOUT_FILENO)
        if let unsaved = issued.unsaved { throw ProfileCall.unsavedFailure(unsaved) }
    }

    /// `erase`: a refresh when git's password is the current access token of the profile serving
    /// the host.
    private func erase(_ request: GitCredentialRequest) async throws {
        guard let password = request.attributes["password"], !password.isEmpty, let host = request.hostKey else { return }
        _ = try await Self.leavingFailuresToGit {
            guard let served = try await servingProfile(for: host) else { return false }
            let network = try networkOptions.clientConfiguration()
            return try await ProfileAccessToken.replace(password, profile: served.name, store: served.store, network: network)
        }
    }

    /// The profile that answers git for a host.
    private struct ServingProfile {
        let name: String
        /// The username configured for the host.
        let username: String
        /// The store holding the profile.
        let store: any TokenStore
    }

    /// The profile that answers for `host` (a ``GitHosts`` key) in the store the options open:
    /// `--profile`'s when it serves the host (else a line on stderr saying how to make it), without
    /// `--profile` the profile that serves it — never one chosen by `LOGINKIT_PROFILE`, a
    /// `.loginkit` file (git runs the helper in the work tree of whatever repository it clones) or
    /// the store's default. `nil` when none does.
    ///
    /// - Throws: `CLIFailure` exit 3 when `--profile` names no profile; what opening or reading the
    ///   store throws.
    private func servingProfile(for host: String) async throws -> ServingProfile? {
        let store = try await storeOptions.openStore(choosingProfile: false).store
        guard let name = storeOptions.profile else {
            return try await GitHosts.all(in: store)[host].map { ServingProfile(name: $0.profile, username: $0.username, store: store) }
        }
        let shown = Terminal.printable(name, limit: 100)
        guard let stored = try await store.profile(named: name) else {
            throw CLIFailure(exitCode: 3, "not logged in (profile \"\(shown)\"); run `loginkit login`")
        }
        guard let username = GitHosts(attribute: stored.attributes[GitHosts.attribute]).entries[host] else {
            Terminal.standardError(
                "loginkit: profile \"\(shown)\" does not serve the git host \(host); "
                    + "if it should, run `loginkit git-credential configure --host \(host) --profile \(Terminal.shellWord(name))`")
            return nil
        }
        return ServingProfile(name: name, username: username, store: store)
    }

    /// `configure --host HOST [--username U] [--remove]`: which git hosts the profile serves.
    private func configure() async throws {
        try await reportingFailures {
            let store = try await storeOptions.openStore().store
            let name = storeOptions.profileName
            let keys = hosts.compactMap { GitHosts.key(for: $0) }
            let remove = self.remove
            let username = self.username
            let served = try await store.withExclusiveAccess { (transaction: inout TokenStoreTransaction) -> String? in
                GitHosts.serve(keys, by: name, username: username, removing: remove, in: &transaction)
            }
            let shown = Terminal.printable(name, limit: 100)
            guard let served else {
                throw CLIFailure(
                    exitCode: 3, "not logged in (profile \"\(shown)\"); run `loginkit login` first: the git hosts are kept with the profile")
            }
            let listed = keys.joined(separator: ", ")
            if remove {
                Terminal.standardError("Profile \"\(shown)\" no longer serves \(listed) to git.")
            } else {
                Terminal.standardError(
                    "Profile \"\(shown)\" serves \(listed) to git (\(served)); "
                        + "set the helper for each host only: git config --global credential.https://HOST.helper '!loginkit git-credential'")
            }
        }
    }

    /// Runs `body`. A failure that means this helper has nothing to offer — no usable session
    /// (exit 3), credentials the provider refused (4), a provider that cannot be reached or failed
    /// (5) — is said in one line on stderr and gives `nil`: the helper then answers nothing and exits
    /// 0, and git goes on to its next helper or the user. Other failures are thrown (their exit code).
    private static func leavingFailuresToGit<T>(_ body: () async throws -> T) async throws -> T? {
        do {
            return try await body()
        } catch {
            let failure = CLIFailure(error)
            guard [3, 4, 5].contains(failure.exitCode) else { throw failure }
            failure.report()
            return nil
        }
    }

    /// `date` in whole seconds since 1970, as `password_expiry_utc` takes it; `nil` for a date no
    /// provider means (beyond the year 30 000 either way).
    static func unixSeconds(_ date: Date) -> Int64? {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite, abs(seconds) < 9e11 else { return nil }
        return Int64(seconds)
    }
}
#endif
