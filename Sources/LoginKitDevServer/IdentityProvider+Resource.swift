// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// The protected resource's checks (RFC 6750, RFC 9449 §7, RFC 9470): a live access token, sent as
/// `Bearer` when unbound and as `DPoP` with a proof by its key (and `ath`) when bound, then the
/// authentication the configuration asks for. HTTP lives in `ResourceEndpoint`.
extension IdentityProvider {
    /// A refusal: a status and one `WWW-Authenticate` challenge.
    struct ResourceRefusal: Error {
        let status: Int
        /// `Bearer` or `DPoP`: the scheme of the challenge. `nil` when no usable credentials came:
        /// both schemes are offered, without an error.
        let scheme: String?
        let code: String
        let description: String
        /// RFC 9470 `acr_values` the resource wants.
        var acrValues: String? = nil
        /// RFC 9470 `max_age` the resource wants.
        var maxAge: Int? = nil
        /// The nonce a `use_dpop_nonce` challenge hands out.
        var dpopNonce: String? = nil
    }

    /// Authorizes a `method` request for `path` carrying the `Authorization` header values
    /// `authorization` and the `DPoP` header values `proofs`, and that came with the TLS client
    /// `certificate` (RFC 8705 §3: a token bound to a certificate is accepted with that one only):
    /// the access token's record, or the refusal.
    func authorizeResource(
        authorization: [String], proofs: [String], method: String, path: String, certificate: PresentedCertificate? = nil
    ) throws(ResourceRefusal) -> AccessRecord {
        guard authorization.count <= 1 else {
            throw ResourceRefusal(status: 400, scheme: "Bearer", code: "invalid_request", description: "send one Authorization header")
        }
        let parts = authorization.first?.split(separator: " ", maxSplits: 1) ?? []
        let presented = parts.count == 2 ? String(parts[1].drop(while: { $0 == " " })) : ""
        guard let schemeName = parts.first?.lowercased(), ["bearer", "dpop"].contains(schemeName), !presented.isEmpty, !presented.contains(" ")
        else {
            throw ResourceRefusal(
                status: 401, scheme: nil, code: "invalid_request",
                description: "send Authorization: Bearer <access token>, or DPoP <access token> with a DPoP proof")
        }
        let scheme = schemeName == "dpop" ? "DPoP" : "Bearer"
        let configuration = self.configuration
        let now = configuration.now()
        guard let record = state.withLock({ $0.accessTokens[presented] }), record.expiresAt > now else {
            throw ResourceRefusal(status: 401, scheme: scheme, code: "invalid_token", description: "the access token is unknown, expired or revoked")
        }
        if let bound = record.x5t, bound != certificate?.thumbprint {
            let description =
                certificate == nil
                ? "the access token is bound to a TLS client certificate (cnf x5t#S256); send it over a connection that presents that certificate"
                : "the access token is bound to another TLS client certificate than the one presented"
            throw ResourceRefusal(status: 401, scheme: scheme, code: "invalid_token", description: description)
        }
        if scheme == "DPoP" {
            guard let bound = record.jkt else {
                throw ResourceRefusal(
                    status: 401, scheme: scheme, code: "invalid_token", description: "the access token is not DPoP-bound; send it as Bearer")
            }
            guard proofs.count == 1, let proof = proofs.first else {
                throw ResourceRefusal(
                    status: 401, scheme: scheme, code: "invalid_dpop_proof",
                    description: proofs.isEmpty ? "a DPoP-bound token needs a DPoP proof" : "send exactly one DPoP header")
            }
            do throws(ProofRefusal) {
                _ = try acceptProof(
                    proof, method: method, url: baseURL(presenting: certificate?.thumbprint) + path, site: .resource, accessToken: presented,
                    boundThumbprint: bound)
            } catch {
                switch error {
                case .useNonce(let nonce):
                    throw ResourceRefusal(
                        status: 401, scheme: scheme, code: "use_dpop_nonce",
                        description: "send the proof again with the nonce in the DPoP-Nonce header", dpopNonce: nonce)
                case .invalid(let why):
                    throw ResourceRefusal(status: 401, scheme: scheme, code: "invalid_dpop_proof", description: why)
                }
            }
        } else if record.jkt != nil {
            throw ResourceRefusal(
                status: 401, scheme: scheme, code: "invalid_token",
                description: "the access token is DPoP-bound: send it as Authorization: DPoP with a proof")
        }
        // Step-up (RFC 9470): the authentication the configuration asks for, or a challenge naming it.
        var acrValues: String?
        var maxAge: Int?
        var reasons: [String] = []
        if let required = configuration.resourceRequiresACR, record.acr != required {
            acrValues = required
            reasons.append("this resource requires authentication with acr \(required)")
        }
        if let limit = configuration.resourceMaxAge, record.authTime.map({ now.timeIntervalSince($0) > Double(limit) }) ?? true {
            maxAge = limit
            reasons.append("this resource requires an authentication at most \(limit) seconds old")
        }
        guard reasons.isEmpty else {
            throw ResourceRefusal(
                status: 401, scheme: scheme, code: "insufficient_user_authentication", description: reasons.joined(separator: "; "),
                acrValues: acrValues, maxAge: maxAge)
        }
        return record
    }
}
#endif
