// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// The browser login's flags, shared by `login` and `token --login browser|auto`.
struct BrowserOptions: ParsableArguments {
    @Flag(name: .customLong("no-browser"), help: "Do not open a browser: print the URL and read the redirect URL pasted on standard input.")
    var noBrowser = false
    @Option(
        name: .customLong("listen-address"),
        help: ArgumentHelp(
            "Where the redirect receiver may listen, tried in order (repeatable; default 127.0.0.1 on a free port).",
            valueName: "host:port")
    )
    var listenAddresses: [String] = []
    @Option(name: .customLong("redirect-uri"), help: "The redirect URI to send (default http://127.0.0.1:PORT/callback).")
    var redirectURI: String?
    @Option(help: ArgumentHelp("How long to wait for the browser sign-in (default 180).", valueName: "seconds"))
    var timeout: Int?
    @Option(name: .customLong("login-hint"), help: "The account the provider should preselect (login_hint).")
    var loginHint: String?
    @Option(help: "What the provider should ask for (prompt): login, consent, select_account or none.")
    var prompt: String?
    @Option(name: .customLong("acr-values"), help: "The authentication context classes to ask for (acr_values).")
    var acrValues: String?
    @Option(
        name: .customLong("max-age"),
        help: ArgumentHelp("The longest time since the user last signed in that the provider may accept (max_age).", valueName: "seconds"))
    var maxAge: Int?
    @Option(
        name: .customLong("extra-param"),
        help: ArgumentHelp("One more authorization parameter (repeatable), e.g. access_type=offline.", valueName: "key=value")
    )
    var extraParams: [String] = []

    /// Seconds to wait for the sign-in when `--timeout` is not given.
    static let defaultTimeout = 180

    func validate() throws {
        for text in listenAddresses where ListenAddress(text) == nil {
            throw ValidationError("--listen-address \(text): expected HOST:PORT, such as 127.0.0.1:8000 or [::1]:0")
        }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be a positive number of seconds") }
        if let maxAge, maxAge < 0 { throw ValidationError("--max-age must be zero or more seconds") }
        _ = try extraParameters()
    }

    /// The flags given, for "applies to the browser login only" messages.
    var given: [String] {
        var flags: [String] = []
        if noBrowser { flags.append("--no-browser") }
        if !listenAddresses.isEmpty { flags.append("--listen-address") }
        if redirectURI != nil { flags.append("--redirect-uri") }
        if timeout != nil { flags.append("--timeout") }
        if loginHint != nil { flags.append("--login-hint") }
        if prompt != nil { flags.append("--prompt") }
        if acrValues != nil { flags.append("--acr-values") }
        if maxAge != nil { flags.append("--max-age") }
        if !extraParams.isEmpty { flags.append("--extra-param") }
        return flags
    }

    /// `--extra-param` values split at their first `=`.
    func extraParameters() throws -> [(name: String, value: String)] {
        try extraParams.map { text -> (name: String, value: String) in
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw ValidationError("--extra-param \(text): expected KEY=VALUE, such as access_type=offline")
            }
            return (name: String(text[..<equals]), value: String(text[text.index(after: equals)...]))
        }
    }

    /// The login's configuration, asking for `scope` (`nil`: the API's configured scope).
    func configuration(scope: String?) throws -> BrowserLogin.Configuration {
        var configuration = BrowserLogin.Configuration()
        configuration.authorization = AuthorizationOptions(
            scope: scope, loginHint: loginHint, prompt: prompt, acrValues: acrValues, maxAge: maxAge, extraParameters: try extraParameters())
        configuration.listenAddresses = listenAddresses.compactMap { ListenAddress($0) }
        configuration.redirectURI = redirectURI
        configuration.timeout = .seconds(timeout ?? Self.defaultTimeout)
        return configuration
    }

    /// `NoBrowserLauncher` with `--no-browser`, else `$BROWSER` or `xdg-open`.
    var launcher: any BrowserLauncher {
        if noBrowser { return NoBrowserLauncher() }
        return SystemBrowserLauncher()
    }
}
#endif
