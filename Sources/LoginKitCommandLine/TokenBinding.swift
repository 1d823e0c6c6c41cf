// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit

/// What a profile's tokens are bound to, as `status` and `demo` show it: the DPoP key (RFC 9449)
/// the credentials hold — its algorithm and thumbprint, never the key — and the `cnf.jkt` the
/// access token names. The access token is the resource server's: its payload is read without
/// verification, only to show that member; nothing else of it is shown.
struct TokenBinding {
    /// Whether the provider bound the tokens to the key (`token_type` DPoP and a key held).
    let isDPoP: Bool
    /// The key's algorithm, when the credentials hold a key.
    let algorithm: JWSAlgorithm?
    /// The key's RFC 7638 thumbprint, when the credentials hold a key.
    let keyThumbprint: String?
    /// The access token's `cnf.jkt`, when it is a JWT that has one (as the token says: unverified).
    let confirmedThumbprint: String?

    init(_ credentials: Credentials) {
        isDPoP = credentials.isDPoPBound
        algorithm = credentials.proofKey?.algorithm
        keyThumbprint = credentials.proofKey?.thumbprint
        confirmedThumbprint = credentials.accessToken.flatMap(Self.confirmationThumbprint(ofAccessToken:))
    }

    /// `cnf.jkt` from the payload of `accessToken` when it is a JWS compact serialization whose
    /// payload is a JSON object with a string `cnf.jkt`; `nil` otherwise (an opaque token). The
    /// signature is not checked: the value is only displayed.
    static func confirmationThumbprint(ofAccessToken accessToken: String) -> String? {
        guard let jws = try? CompactJWS(parsing: accessToken), let payload = try? JSONValue.parse(jws.payload) else { return nil }
        return payload["cnf"]?["jkt"]?.stringValue
    }

    /// Whether the access token's `cnf.jkt` names the key held; `nil` when either is missing.
    var matches: Bool? {
        guard let keyThumbprint, let confirmedThumbprint else { return nil }
        return keyThumbprint == confirmedThumbprint
    }

    /// `status`'s `binding:` value: `DPoP (ES256), jkt <thumbprint>`, or `bearer` (saying so when a
    /// key was sent but the provider issued a bearer token).
    var summary: String {
        if isDPoP, let algorithm, let keyThumbprint { return "DPoP (\(algorithm.rawValue)), jkt \(keyThumbprint)" }
        if let algorithm, let keyThumbprint {
            return "bearer (the provider did not bind the tokens to this profile's DPoP key, \(algorithm.rawValue), jkt \(keyThumbprint))"
        }
        return "bearer"
    }

    /// `status`'s `cnf.jkt:` value, escaped (the token chose it), and whether it names the key held;
    /// `nil` when the access token names none.
    var confirmationSummary: String? {
        guard let confirmedThumbprint else { return nil }
        let shown = Terminal.printable(confirmedThumbprint, limit: 100)
        switch matches {
        case true?: return "\(shown) (matches the key)"
        case false?: return "\(shown) (does not match the key's jkt)"
        case nil: return "\(shown) (this profile holds no DPoP key)"
        }
    }
}
#endif
