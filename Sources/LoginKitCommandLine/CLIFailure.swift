// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// A failure the CLI reports as one line on stderr and an exit code from the contract.
package struct CLIFailure: Error {
    package let exitCode: Int32
    package let message: String
    package let detail: String?

    /// The exit code when a resource server asks for a stronger or more recent sign-in (RFC 9470
    /// `insufficient_user_authentication`): log in again with what it asked for.
    package static let stepUpRequiredExitCode: Int32 = 10
    /// The exit code of `request` when the server answered with an HTTP status of 400 or more (the
    /// body is still printed), as `curl --fail` exits.
    package static let httpErrorExitCode: Int32 = 22

    package init(exitCode: Int32, _ message: String, detail: String? = nil) {
        self.exitCode = exitCode
        self.message = message
        self.detail = detail
    }

    /// The contract's exit code and a one-line message for any error LoginKit throws.
    init(_ error: any Error) {
        switch error {
        case let failure as CLIFailure:
            self = failure
        case let error as LoginRequiredError where error.code == .stepUpRequired:
            self = .stepUpRequired(error)
        case let error as LoginRequiredError:
            self.init(exitCode: 3, error.message + ([.noIDToken, .noAccessToken].contains(error.code) ? "" : "; run `loginkit login`"), detail: "\(error)")
        case let error as LoginError where error.code == .invalidScope:
            // The configuration asked for what the provider does not offer: not the user's credentials.
            self.init(exitCode: 2, error.message + "; choose the scope with --scope", detail: "\(error)")
        case let error as LoginError where error.isProviderRejection:
            self.init(exitCode: 4, error.message, detail: "\(error)")
        case let error as LoginError where error.isForgedResponse:
            // A response that is not this login's (state, iss): a forgery or a mix-up, as a bad token is.
            self.init(exitCode: 7, "the sign-in response was refused: \(error.message)", detail: "\(error)")
        case let error as LoginError where error.code == .upgradeRequired:
            var text = error.message
            if let policy = error.upgradePolicy {
                text = "\(policy.title): \(policy.message)"
                if let url = policy.url { text += " Upgrade: \(url)" }
            }
            self.init(exitCode: 6, text, detail: "\(error)")
        case let error as LoginError where error.code == .invalidConfiguration || error.code == .verifierRequired:
            self.init(exitCode: 2, Self.namingFlags(error.message), detail: "\(error)")
        case let error as LoginError where error.code == .loginInProgress:
            self.init(exitCode: 1, "a login is already in progress", detail: "\(error)")
        case let error as LoginError:
            // A browser login that failed on this side: nobody signed in in time, nothing to listen
            // on, no browser, a pasted address that is not the redirect.
            self.init(exitCode: 1, error.message, detail: "\(error)")
        case let error as NetworkError where error.code == .invalidRequest && error.transportCode == nil:
            // Refused before anything was sent, for what this side was given: a TLS client key
            // others can read, a certificate or key file that is not there. Exit 1, as for
            // --private-key; nothing about the network.
            self.init(exitCode: 1, error.message, detail: "\(error)")
        case let error as NetworkError:
            self.init(exitCode: 5, error.message, detail: "\(error)")
        case let error as ServerError:
            self.init(exitCode: 5, Self.namingFlags(error.message), detail: "\(error)")
        case let error as TokenVerificationError where [.invalidKey, .authenticationFailed, .cryptoFailure].contains(error.code):
            // A key that cannot sign or seal, or OpenSSL failing: no token was found wrong.
            self.init(exitCode: 1, "failed: \(error.message)", detail: "\(error)")
        case let error as TokenVerificationError where error.code == .keySetUnavailable || error.code == .keySetTooLarge:
            // The issuer's keys could not be fetched or used: the network or the provider failed;
            // nothing was found wrong with the token itself.
            self.init(exitCode: 5, error.message, detail: "\(error)\(error.underlying.map { " (\($0))" } ?? "")")
        case let error as TokenVerificationError:
            self.init(exitCode: 7, "token verification failed: \(error.message)", detail: "\(error)")
        case let error as TokenStoreError where error.code == .keyUnavailable:
            // A login required, like a missing profile: the key is gone, the file is set aside.
            self.init(exitCode: 3, error.message, detail: "\(error)")
        case let error as TokenStoreError:
            self.init(exitCode: 1, error.message, detail: "\(error)")
        default:
            self.init(exitCode: 1, "failed: \(type(of: error))", detail: "\(error)")
        }
    }

    /// The library names its settings (`OAuth2API.Configuration.endpoints.token`); the CLI user sets
    /// them with flags. Longer names first: the type prefix goes before the short names are mapped.
    static func namingFlags(_ message: String) -> String {
        let flags = [
            ("OAuth2API.Configuration.usesDiscovery is false", "--no-discovery is set"),
            ("OAuth2API.Configuration.issuer", "--issuer"), ("JSONLoginAPI.Configuration.loginURL", "--login-url"),
            ("OAuth2API.Configuration.pushesAuthorizationRequests is false; set it to nil or true", "--par never is given; use --par auto or --par always"),
            ("OAuth2API.Configuration.pushesAuthorizationRequests = true needs; set it to nil", "--par always needs; use --par auto"),
            ("set OAuth2API.Configuration.pushesAuthorizationRequests = false to sign in without pushing", "use --par never to sign in without pushing"),
            ("OAuth2API.Configuration.pushesAuthorizationRequests", "--par"), ("OAuth2API.Configuration.dpopAlgorithm", "--dpop-alg"),
            ("OAuth2API.Configuration.", ""),
            ("endpoints.authorization", "--authorization-endpoint"), ("endpoints.token", "--token-endpoint"),
            ("endpoints.deviceAuthorization", "--device-authorization-endpoint"), ("endpoints.revocation", "--revocation-endpoint"),
            ("endpoints.jwks", "--jwks-uri"), ("endpoints.userinfo", "--userinfo-endpoint"),
        ]
        return flags.reduce(message) { text, pair in text.replacing(pair.0, with: pair.1) }
    }

    package static func usage(_ message: String) -> CLIFailure {
        CLIFailure(exitCode: 2, message)
    }

    /// A resource server's step-up challenge (exit 10): what it asked for (`acr_values`, `max_age`;
    /// the server chose them, so they are escaped and quoted for the shell) and the login to run,
    /// `loginkit login` followed by `loginArguments` (the provider and profile, when known) and the
    /// flags that ask for it.
    static func stepUpRequired(_ error: LoginRequiredError, loginArguments: [String] = []) -> CLIFailure {
        var asked: [String] = []
        var flags: [String] = []
        if let acrValues = error.acrValues {
            let shown = Terminal.printable(acrValues, limit: 300)
            asked.append("acr_values \"\(shown)\"")
            // Only a value of printable ASCII, whole, is offered as a command to paste: anything
            // else the server chose (combining marks, look-alikes, a value cut short) is named, not quoted.
            let pastable = acrValues.utf8.count <= 300 && acrValues.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
            flags += ["--acr-values", pastable ? Terminal.shellWord(acrValues) : "VALUES"]
        }
        if let maxAge = error.maxAge {
            asked.append("max_age \(maxAge)")
            flags += ["--max-age", String(maxAge)]
        }
        let what = asked.isEmpty ? "" : " (\(asked.joined(separator: ", ")))"
        let command = (["loginkit", "login"] + loginArguments + flags).joined(separator: " ")
        return CLIFailure(
            exitCode: stepUpRequiredExitCode,
            "the resource server asks for a stronger or more recent sign-in\(what); sign in again with `\(command)`",
            detail: "\(error)")
    }

    /// One line on stderr (two with `--verbose`), control characters escaped: messages quote what
    /// providers and tokens sent.
    func report() {
        Terminal.standardError("loginkit: \(Terminal.printable(message, limit: 1000))")
        if Terminal.verbose, let detail { Terminal.standardError("  detail: \(Terminal.printable(detail, limit: 2000))") }
    }
}

/// Runs `body`, turning every error into a `CLIFailure`.
func reportingFailures<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let failure as CLIFailure {
        throw failure
    } catch {
        throw CLIFailure(error)
    }
}
#endif
