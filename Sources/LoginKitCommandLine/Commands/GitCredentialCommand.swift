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

/// `loginkit git-credential get|store|erase`: git's credential helper (gitcredentials(7)). git runs
/// it for the hosts its configuration names (`credential.https://host.helper`), so the helper
/// answers for any host it is asked about — over https, or http to a loopback host.
struct GitCredentialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "git's credential helper: the profile's access token as the password.",
        discussion: """
            Configure it per host: git config --global credential.https://git.example.com.helper \
            '!loginkit git-credential --profile NAME'. git appends the operation and writes its \
            request (key=value lines) on stdin.

            get: answers username (--username, default oauth2), password (a valid access token, \
            refreshed first when needed, once across processes) and password_expiry_utc, and nothing \
            else — for protocol=https, or http to a loopback host; any other request, a request for \
            another username, no usable session or a refresh that fails get no answer (exit 0: git asks \
            its next helper or the user; the reason is one line on stderr). erase: when the password \
            git sends is the profile's current access token (a server refused it), refreshes now, so \
            the next get serves a new token; another password: nothing. store, and operations git may \
            add later: nothing.
            """)

    @Argument(help: "The operation git asks for: get, store or erase (any other is ignored).") var operation: String
    @Option(help: "The username git sends with the token.") var username = "oauth2"
    @Option(name: .customLong("min-validity"), help: "Seconds the token must stay valid (refresh otherwise).") var minValidity: Int = 0
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
        guard GitCredentialRequest.isSendable(username) else {
            throw ValidationError("--username must be one line without control characters")
        }
    }

    func run() async throws {
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
        guard request.allowsToken else { return }
        if let asked = request.attributes["username"], asked != username { return }  // the URL names another account
        guard let issued = try await Self.leavingFailuresToGit({
            let network = try networkOptions.clientConfiguration()
            let store = try await storeOptions.openStore().store
            return try await ProfileAccessToken.valid(
                profile: storeOptions.profileName, store: store, network: network, minimumValidity: .seconds(minValidity))
        }) else { return }
        var lines = "username=\(username)\npassword=\(issued.token)\n"
        if let seconds = issued.expiresAt.flatMap({ Self.unixSeconds($0) }) { lines += "password_expiry_utc=\(seconds)\n" }
        Terminal.writeAll(lines, to: STDOUT_FILENO)
        if let unsaved = issued.unsaved { throw ProfileCall.unsavedFailure(unsaved) }
    }

    /// `erase`: a refresh when git's password is the profile's current access token.
    private func erase(_ request: GitCredentialRequest) async throws {
        guard let password = request.attributes["password"], !password.isEmpty else { return }
        _ = try await Self.leavingFailuresToGit {
            let network = try networkOptions.clientConfiguration()
            let store = try await storeOptions.openStore().store
            return try await ProfileAccessToken.replace(password, profile: storeOptions.profileName, store: store, network: network)
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
