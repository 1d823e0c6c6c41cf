import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API {
    /// A new DPoP key for a login, with ``Configuration/dpopAlgorithm``; `nil` when that is not set.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for an algorithm DPoP keys cannot have, or
    ///   when the provider's discovery lists `dpop_signing_alg_values_supported` without it;
    ///   `TokenVerificationError` when the key cannot be made.
    func newProofKey(_ metadata: Metadata) throws -> DPoPKey? {
        guard let algorithm = configuration.dpopAlgorithm else { return nil }
        guard DPoPKey.supportedAlgorithms.contains(algorithm) else {
            let offered = DPoPKey.supportedAlgorithms.map(\.rawValue).sorted().joined(separator: ", ")
            throw LoginError(
                .invalidConfiguration, "OAuth2API.Configuration.dpopAlgorithm is \(algorithm.rawValue); a DPoP key is one of \(offered)")
        }
        if let supported = metadata.dpopSigningAlgValuesSupported, !supported.contains(algorithm.rawValue) {
            let listed = supported.isEmpty ? "none" : printableExcerpt(supported.joined(separator: " "), limit: 200)
            throw LoginError(
                .invalidConfiguration,
                "OAuth2API.Configuration.dpopAlgorithm is \(algorithm.rawValue) but \(host) accepts DPoP proofs signed with \(listed) only (dpop_signing_alg_values_supported); choose one of those"
            )
        }
        return try DPoPKey.generate(algorithm)
    }

    /// What the proofs of a request bound to `key` are made with; `nil` without a key.
    func proofMaker(_ key: DPoPKey?) -> DPoPProofMaker? {
        key.map { DPoPProofMaker(key: $0, nonces: dpopNonces, now: now) }
    }

    /// Refuses a successful token response that issued a `DPoP` token (RFC 9449 §5) to a request
    /// that proved no key: no proof could ever be made for that token.
    ///
    /// - Throws: `ServerError` `.malformedResponse`.
    func requireProofForDPoPToken(_ json: JSONValue?, proofKey: DPoPKey?) throws {
        guard proofKey == nil, json?["token_type"]?.stringValue?.lowercased() == "dpop" else { return }
        throw ServerError(
            .malformedResponse,
            "\(host) issued a DPoP-bound token (token_type DPoP) to a request without a DPoP proof; set OAuth2API.Configuration.dpopAlgorithm to bind tokens to a key"
        )
    }
}
