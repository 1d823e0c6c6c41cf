#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
internal import LoginKitHTTP

/// The checks a server makes on a proof (RFC 9449 §4.3), for the dev server and the tests.
///
/// A proof passes when it is a compact JWS of at most 8 KiB with `typ` `dpop+jwt`, an allowed
/// asymmetric `alg` (never `none`, never an HMAC), and a header `jwk` that is a public key (no
/// `d`, `p`, `q`, `dp`, `dq`, `qi`, `k` or `oth`) whose signature verifies; its claims have a
/// `jti` (a non-empty string of at most 256 bytes), `htm` equal to the request's method, `htu`
/// naming the request's URL (both compared as ``DPoPKey/htu(_:)`` writes them), and a numeric
/// `iat` within `window` of now. Replayed `jti`s are the caller's to refuse.
///
/// Concurrency contract: a value type; `verify` may run concurrently from any number of tasks.
package struct DPoPProofVerifier: Sendable {
    /// What a proof that passed says.
    package struct Verified: Sendable {
        /// The RFC 7638 thumbprint of the proof's key (what a bound token's `cnf.jkt` holds).
        package let thumbprint: String
        /// The proof's `jti`, for the caller's replay check.
        package let jti: String
        /// The proof's `iat`.
        package let issuedAt: Date
        /// The proof's `nonce`, when it has one.
        package let nonce: String?
    }

    /// Why a proof was refused.
    package enum Failure: Error, Sendable, Equatable {
        /// The proof fails a check; the message says which, short, and never quotes the proof.
        case invalidProof(String)
        /// The proof lacks the server's current nonce, or carries another one (answer `use_dpop_nonce`).
        case useNonce
    }

    /// The longest proof accepted: 8 KiB.
    package static let maximumProofLength = 8 * 1024
    /// The longest `jti` accepted, in UTF-8 bytes.
    package static let maximumJTILength = 256
    /// JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
    package static let privateKeyMembers = ["d", "p", "q", "dp", "dq", "qi", "k", "oth"]

    /// The algorithms accepted.
    package let allowedAlgorithms: Set<JWSAlgorithm>
    /// The accepted distance between `iat` and now, either way.
    package let window: Duration

    /// `allowedAlgorithms` default: ES256, ES384, EdDSA, RS256, PS256. `window`: accepted |now - iat| (default 300 s).
    package init(allowedAlgorithms: Set<JWSAlgorithm> = DPoPKey.supportedAlgorithms, window: Duration = .seconds(300)) {
        self.allowedAlgorithms = allowedAlgorithms
        self.window = window
    }

    /// Checks `proof` for a request `method` `url`: well-formed JWS; typ dpop+jwt; alg allowed and
    /// asymmetric; header jwk is a public key (no "d" or other private member) that verifies the
    /// signature; jti/htm/htu/iat present; htm == method; htu == DPoPKey.htu(url); iat within window;
    /// when `expectedNonce` is non-nil the proof's nonce must equal it (missing or different →
    /// `.useNonce`); when `accessToken` is non-nil, `ath` must equal its hash (and must be present);
    /// when `boundThumbprint` is non-nil the jwk's thumbprint must equal it.
    /// jti replay is the caller's job (it gets `jti` back).
    ///
    /// Every other check comes before the nonce's: `.useNonce` means the proof is good but for its nonce.
    ///
    /// - Throws: ``Failure``.
    package func verify(
        _ proof: String, method: String, url: String, accessToken: String? = nil,
        expectedNonce: String? = nil, boundThumbprint: String? = nil, now: Date
    ) throws(Failure) -> Verified {
        let jws: CompactJWS
        do {
            jws = try CompactJWS(parsing: proof, maximumLength: Self.maximumProofLength)
        } catch {
            throw Failure.invalidProof("not a compact JWS: \(error.message)")
        }
        guard jws.tokenType?.lowercased() == "dpop+jwt" else { throw Failure.invalidProof("the header's typ is not dpop+jwt") }
        let algorithm = try allowedAlgorithm(jws.algorithmName)
        let key = try publicKey(jws.header["jwk"])
        guard jws.hasValidSignature(key: key, algorithm: algorithm) else {
            throw Failure.invalidProof("the \(algorithm) signature does not verify with the header's jwk")
        }

        guard let claims = (try? JSONValue.parse(jws.payload))?.objectValue else { throw Failure.invalidProof("the claims are not a JSON object") }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= Self.maximumJTILength else {
            throw Failure.invalidProof("jti must be a non-empty string of at most \(Self.maximumJTILength) bytes")
        }
        guard let htm = claims["htm"]?.stringValue else { throw Failure.invalidProof("htm must be a string") }
        guard let htu = claims["htu"]?.stringValue else { throw Failure.invalidProof("htu must be a string") }
        guard let issuedAt = claims["iat"]?.doubleValue, issuedAt.isFinite else { throw Failure.invalidProof("iat must be a number") }
        var nonce: String?
        if let value = claims["nonce"] {
            guard let text = value.stringValue else { throw Failure.invalidProof("nonce must be a string") }
            nonce = text
        }

        guard htm == method else { throw Failure.invalidProof("htm is not the request's method") }
        guard let requestHTU = DPoPKey.htu(url) else { throw Failure.invalidProof("the request URL is not an absolute http(s) URL") }
        guard DPoPKey.htu(htu) == requestHTU else { throw Failure.invalidProof("htu is not the request's URL") }
        let age = now.timeIntervalSince1970 - issuedAt
        guard abs(age) <= window.seconds else {
            throw Failure.invalidProof(
                age > 0
                    ? "iat is more than \(window.components.seconds) s in the past"
                    : "iat is more than \(window.components.seconds) s in the future")
        }
        if let accessToken {
            guard let ath = claims["ath"]?.stringValue, !ath.isEmpty else { throw Failure.invalidProof("ath is missing") }
            let expected: String
            do {
                expected = try DPoPKey.hashingAccessToken(accessToken)
            } catch {
                throw Failure.invalidProof("the access token could not be hashed")
            }
            guard HMACSHA256.constantTimeEqual(Array(ath.utf8), Array(expected.utf8)) else {
                throw Failure.invalidProof("ath does not match the access token")
            }
        }
        let thumbprint: String
        do {
            thumbprint = try key.thumbprint()  // throws only when OpenSSL cannot hash: the proof is then refused, never accepted unbound
        } catch {
            throw Failure.invalidProof("the jwk's thumbprint could not be computed")
        }
        if let boundThumbprint, thumbprint != boundThumbprint {
            throw Failure.invalidProof("the proof's key is not the key the token is bound to")
        }
        if let expectedNonce, nonce != expectedNonce { throw Failure.useNonce }
        return Verified(thumbprint: thumbprint, jti: jti, issuedAt: Date(timeIntervalSince1970: issuedAt), nonce: nonce)
    }

    /// The header's `alg`, when it is an allowed asymmetric algorithm.
    private func allowedAlgorithm(_ name: String) throws(Failure) -> JWSAlgorithm {
        guard let algorithm = JWSAlgorithm(rawValue: name) else {
            // No supported algorithm is `none` or an HMAC: these only name why the proof is refused.
            if name.lowercased() == "none" { throw Failure.invalidProof("unsigned proofs (alg none) are refused") }
            if name.uppercased().hasPrefix("HS") {
                throw Failure.invalidProof("HMAC proofs (\(printableExcerpt(name, limit: 16))) are refused; a proof is signed with a private key")
            }
            throw Failure.invalidProof("unsupported alg \"\(printableExcerpt(name, limit: 16))\"")
        }
        guard allowedAlgorithms.contains(algorithm) else { throw Failure.invalidProof("\(algorithm) proofs are not accepted here") }
        return algorithm
    }

    /// The header's `jwk`, when it is a usable public key.
    private func publicKey(_ value: JSONValue?) throws(Failure) -> JWK {
        guard let value, let members = value.objectValue else { throw Failure.invalidProof("the header has no jwk object") }
        if let name = Self.privateKeyMembers.first(where: { members[$0] != nil }) {
            throw Failure.invalidProof("the header's jwk holds private key material (\"\(name)\")")
        }
        do {
            return try JWK(json: value)
        } catch {
            throw Failure.invalidProof("the header's jwk is not a usable public key: \(error.message)")
        }
    }
}
