// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// `--dpop`, `--dpop-alg`, `--par`: sender-constrained tokens (DPoP, RFC 9449) and pushed
/// authorization requests (RFC 9126), for an OpenID Connect provider. Shared by `login` and
/// `token --login`. The key pair lives in the credentials, sealed with the store; the profile
/// records only its algorithm (``EndpointAttributes``), so that a later login makes a key alike.
struct DPoPOptions: ParsableArguments {
    /// `--dpop-alg`'s values: the asymmetric algorithms a DPoP key may have.
    enum Algorithm: String, CaseIterable, ExpressibleByArgument {
        case es256 = "ES256"
        case es384 = "ES384"
        case edDSA = "EdDSA"
        case rs256 = "RS256"
        case ps256 = "PS256"

        var library: JWSAlgorithm {
            switch self {
            case .es256: .es256
            case .es384: .es384
            case .edDSA: .edDSA
            case .rs256: .rs256
            case .ps256: .ps256
            }
        }
    }

    /// `--par`'s values.
    enum PushedRequests: String, CaseIterable, ExpressibleByArgument {
        /// When the provider advertises an endpoint (and always when it requires it).
        case auto
        /// Always; a provider without an endpoint is an error.
        case always
        /// Never; a provider that requires it is an error.
        case never

        /// `OAuth2API.Configuration.pushesAuthorizationRequests` for this choice.
        var library: Bool? {
            switch self {
            case .auto: nil
            case .always: true
            case .never: false
            }
        }
    }

    @Flag(help: "Bind the tokens to a key pair of this profile's own (DPoP, RFC 9449): ES256 unless --dpop-alg names another.")
    var dpop = false
    @Option(name: .customLong("dpop-alg"), help: "The DPoP key's algorithm: ES256, ES384, EdDSA, RS256 or PS256 (implies --dpop).")
    var dpopAlgorithm: Algorithm?
    @Option(
        help: ArgumentHelp(
            "Pushed authorization requests (RFC 9126): auto (when the provider advertises them, and always when it requires them; the default), always, or never.",
            valueName: "auto|always|never"))
    var par: PushedRequests?

    /// The flags given, for "applies to … only" messages.
    var given: [String] {
        [("--dpop", dpop), ("--dpop-alg", dpopAlgorithm != nil), ("--par", par != nil)].filter(\.1).map(\.0)
    }

    /// The DPoP key's algorithm asked for: `--dpop-alg`, else ES256 with `--dpop`; `nil` for neither.
    var algorithm: JWSAlgorithm? {
        dpopAlgorithm?.library ?? (dpop ? .es256 : nil)
    }

    /// Sets what was given (each wins over what `configuration` had, e.g. from the profile).
    func apply(to configuration: inout OAuth2API.Configuration) {
        if let algorithm { configuration.dpopAlgorithm = algorithm }
        if let par { configuration.pushesAuthorizationRequests = par.library }
    }
}
#endif
