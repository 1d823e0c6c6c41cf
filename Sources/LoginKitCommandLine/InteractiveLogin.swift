// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// The logins a person takes part in, shared by `login` and `token --login`: the browser login
/// (URL and prompts on stderr, a pasted redirect read from stdin), the device flow, and `auto`.
enum InteractiveLogin {
    /// The browser login through `service`, with `options`' flags, asking for `scope` (`nil`: the
    /// API's). The URL is always printed on stderr; when no browser opens, a redirect URL pasted on
    /// stdin completes the login (the loopback receiver keeps listening meanwhile). When no browser
    /// opens and stdin is at its end, the login ends at once (``pasteImpossible``) rather than
    /// waiting out its timeout for a paste that cannot come.
    static func browser(
        service: AuthService, options: BrowserOptions, scope: String?, launcher: (any BrowserLauncher)? = nil
    ) async throws -> User {
        let configuration = try options.configuration(scope: scope)
        return try await service.logInWithBrowser(
            configuration, launcher: launcher ?? options.launcher,
            onEvent: { event in Self.show(event) },
            pastedRedirect: { _ in
                guard let line = try await StandardInputLines.shared.next() else { throw Self.pasteImpossible }
                return line
            }
        )
    }

    /// No browser was opened and standard input has ended: the browser login fails now (exit 1).
    static var pasteImpossible: LoginError {
        LoginError(
            .browserUnavailable,
            "no browser was opened and standard input is at its end, so no address can be pasted; "
                + "set $BROWSER, or run the login where its standard input can take the pasted address")
    }

    /// The device flow through `service`: the verification URI and the user code on stderr.
    static func device(service: AuthService, scope: String?) async throws -> User {
        try await service.logInWithDevice(scope: scope) { authorization in
            // Both come from the provider: escaped, so that they cannot forge lines or drive the terminal.
            Terminal.standardError("To sign in, open \(Terminal.printable(authorization.verificationURIComplete ?? authorization.verificationURI, limit: 2048))")
            Terminal.standardError("and enter the code: \(Terminal.printable(authorization.userCode, limit: 64))")
        }
    }

    /// The browser login when a browser can be opened, else the device flow when `api` offers one,
    /// else the browser login with a pasted redirect.
    static func auto(service: AuthService, api: OAuth2API?, options: BrowserOptions, scope: String?) async throws -> User {
        let offersDevice = (try? await api?.metadata())?.deviceAuthorizationEndpoint != nil
        guard offersDevice else { return try await browser(service: service, options: options, scope: scope) }
        let environment = ProcessInfo.processInfo.environment
        let browserVariable = environment["BROWSER"].map { !$0.allSatisfy(\.isWhitespace) } ?? false
        if options.noBrowser {
            return try await device(service: service, scope: scope)
        }
        if !browserVariable, let reason = SystemBrowserLauncher.noDisplayReason(environment) {
            Terminal.standardError("No browser can be opened here (\(reason)); signing in with a device code instead.")
            return try await device(service: service, scope: scope)
        }
        do {
            return try await browser(
                service: service, options: options, scope: scope, launcher: DeviceFallbackLauncher(base: options.launcher))
        } catch let fallback as DeviceFallbackLauncher.NoBrowser {
            Terminal.standardError(
                "No browser could be opened (\(Terminal.printable(fallback.reason, limit: 500))); signing in with a device code instead.")
            return try await device(service: service, scope: scope)
        }
    }

    /// Shows a browser login's progress on stderr. The URL comes from the provider's discovery
    /// document: escaped like everything a provider chose.
    static func show(_ event: BrowserLoginEvent) {
        switch event {
        case .waitingForBrowser(let url, _):
            Terminal.standardError("If the browser does not open, visit: \(Terminal.printable(url, limit: 16_384))")
        case .browserUnavailable(_, let reason):
            Terminal.standardError("No browser was opened (\(Terminal.printable(reason, limit: 500))).")
            Terminal.standardError(
                "Open the address above in a browser, sign in, then paste here the whole address the browser ends on and press Enter:")
        case .pastedRedirectRejected(let reason):
            Terminal.standardError("loginkit: \(Terminal.printable(reason, limit: 500)); paste it again:")
        case .foreignResponseRefused:
            Terminal.standardError(
                "loginkit: refused a sign-in response that does not carry this login's state (another sign-in's, or forged by another program or a web page); still waiting for yours")
        case .exchangingCode:
            break
        }
    }

    /// The OAuth2API to log in through: `configuration` asking for `scope` when one is given, else
    /// for the scope `OAuth2API` chooses from what the provider's discovery advertises (fetched
    /// here, so that its failures come before any prompt).
    ///
    /// - Throws: what discovery throws (`ServerError`, `NetworkError`).
    static func api(_ configuration: OAuth2API.Configuration, scope: String?, transport: any HTTPTransport) async throws -> OAuth2API {
        var configuration = configuration
        configuration.scope = scope
        let api = OAuth2API(configuration: configuration, transport: transport)
        if scope == nil { _ = try await api.requestedScope() }
        return api
    }
}

/// For `--login auto`: opens the browser as `base` does, and when none can be opened ends the
/// browser login with ``NoBrowser`` (instead of waiting for a paste), so the device flow runs.
struct DeviceFallbackLauncher: BrowserLauncher {
    /// No browser could be opened: use the device flow.
    struct NoBrowser: Error {
        let reason: String
    }

    let base: any BrowserLauncher

    func open(_ url: String) async throws {
        do {
            try await base.open(url)
        } catch let error as LoginError where error.code == .browserUnavailable {
            throw NoBrowser(reason: error.message)
        }
    }
}
#endif
