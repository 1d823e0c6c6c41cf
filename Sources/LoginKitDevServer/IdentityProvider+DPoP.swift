// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// DPoP (RFC 9449) as an authorization and resource server checks it: each proof through
/// `DPoPProofVerifier` (the §4.3 checks), then its `jti` against the proofs already accepted in
/// the window (§11.1), and the server's nonce where the configuration requires one (§8, §9).
extension IdentityProvider {
    /// The algorithms proofs may use, as discovery lists them.
    static let dpopAlgorithms: [JWSAlgorithm] = [.es256, .es384, .edDSA, .rs256, .ps256]
    /// How far a proof's `iat` may be from now.
    static let dpopProofWindow: Duration = .seconds(300)
    /// The most proof `jti`s remembered at once; beyond, proofs are refused until older ones leave the window.
    static let maximumProofIDs = 250_000
    /// The `acr` of a sign-in with a password.
    static let passwordACR = "urn:loginkit:acr:password"
    /// The `acr` of a multi-factor sign-in (granted when asked for: the dev server has no second factor).
    static let mfaACR = "urn:loginkit:acr:mfa"
    /// The `acr` values the provider grants, as discovery lists them.
    static let supportedACRValues = [passwordACR, mfaACR]
    static let tokenPath = "/oauth/token"
    static let resourcePath = "/api/resource"

    /// Where a proof is presented: each place has its own nonce switch.
    enum ProofSite {
        /// The token and PAR endpoints (`dpopNonceAtTokenEndpoint`).
        case authorizationServer
        /// `/api/resource` (`dpopNonceAtResource`).
        case resource
    }

    /// Why a proof was refused: it lacks the current nonce (which is given), or it is invalid.
    enum ProofRefusal: Error {
        case useNonce(String)
        case invalid(String)
    }

    /// The current nonce when `site` requires one, else `nil` (what `DPoP-Nonce` says).
    func dpopNonce(at site: ProofSite) -> String? {
        state.withLock { state in
            let required =
                switch site {
                case .authorizationServer: state.configuration.dpopNonceAtTokenEndpoint
                case .resource: state.configuration.dpopNonceAtResource
                }
            return required ? state.dpopNonce : nil
        }
    }

    /// Replaces the nonce: from now on proofs must carry the new one (the old one is refused).
    @discardableResult
    func rotateDPoPNonce() -> String {
        let nonce = Self.randomToken(bytes: 16)
        state.withLock { $0.dpopNonce = nonce }
        return nonce
    }

    /// Makes every access token issued so far expired; returns how many were live.
    @discardableResult
    func expireAccessTokens() -> Int {
        let now = configuration.now()
        return state.withLock { state in
            var expired = 0
            state.accessTokens.modifyAll { record in
                guard record.expiresAt > now else { return }
                record.expiresAt = now
                expired += 1
            }
            return expired
        }
    }

    /// Accepts `proof` for a `method` request to `url`: the verifier's checks (with `accessToken`'s
    /// `ath` and the `boundThumbprint` when given, and the nonce when `site` requires one), then a
    /// `jti` not seen in the window. Counts accepted proofs and nonce challenges.
    func acceptProof(
        _ proof: String, method: String, url: String, site: ProofSite, accessToken: String? = nil, boundThumbprint: String? = nil
    ) throws(ProofRefusal) -> DPoPProofVerifier.Verified {
        let now = configuration.now()
        let expectedNonce = dpopNonce(at: site)
        let verified: DPoPProofVerifier.Verified
        do throws(DPoPProofVerifier.Failure) {
            verified = try dpopVerifier.verify(
                proof, method: method, url: url, accessToken: accessToken, expectedNonce: expectedNonce,
                boundThumbprint: boundThumbprint, now: now)
        } catch {
            switch error {
            case .useNonce:
                monitor.count(.dpopNonceChallenge)
                throw ProofRefusal.useNonce(expectedNonce ?? state.withLock { $0.dpopNonce })
            case .invalidProof(let why):
                throw ProofRefusal.invalid(why)
            }
        }
        let refusal = state.withLock { state -> String? in
            let full = state.proofIDs.count >= Self.maximumProofIDs
            state.proofIDs.sweep(now: now, force: full)
            if let seen = state.proofIDs[verified.jti], seen.expiresAt > now {
                return "this proof was already used (its jti is not new)"
            }
            guard state.proofIDs.count < Self.maximumProofIDs else {
                return "too many proofs in the last \(Self.dpopProofWindow.wholeSeconds) seconds; try again later"
            }
            let until = verified.issuedAt.addingTimeInterval(Double(Self.dpopProofWindow.wholeSeconds + 1))
            state.proofIDs.insert(ProofUse(expiresAt: until), for: verified.jti, now: now)
            return nil
        }
        if let refusal { throw ProofRefusal.invalid(refusal) }
        monitor.count(.dpopProofAccepted)
        return verified
    }

    /// The `DPoP` headers of a request to the token endpoint or the PAR endpoint (`path`) checked:
    /// the thumbprint of the proof's key, or `nil` when there is no proof or DPoP is disabled. Two
    /// headers are refused; so is none at the token endpoint (`enforcesPolicy`) when the policy
    /// requires a proof. A request that came with a TLS client certificate was sent to the mutual
    /// TLS proxy: its proof names that URL (``baseURL(presenting:)``).
    func tokenRequestProof(_ proofs: [String], path: String, enforcesPolicy: Bool) throws(OAuthError) -> String? {
        let policy = configuration.dpop
        guard policy != .disabled else { return nil }
        guard proofs.count <= 1 else {
            throw OAuthError(status: 400, code: "invalid_dpop_proof", description: "send exactly one DPoP header")
        }
        guard let proof = proofs.first else {
            if enforcesPolicy, policy == .required {
                throw OAuthError(
                    status: 400, code: "invalid_dpop_proof", description: "this provider requires a DPoP proof (RFC 9449) with every token request")
            }
            return nil
        }
        do throws(ProofRefusal) {
            let url = baseURL(presenting: Self.requestCertificateThumbprint) + path
            return try acceptProof(proof, method: "POST", url: url, site: .authorizationServer).thumbprint
        } catch {
            switch error {
            case .useNonce(let nonce):
                throw OAuthError(
                    status: 400, code: "use_dpop_nonce", description: "send the proof again with the nonce in the DPoP-Nonce header",
                    dpopNonce: nonce)
            case .invalid(let why):
                throw OAuthError(status: 400, code: "invalid_dpop_proof", description: why)
            }
        }
    }
}
#endif
