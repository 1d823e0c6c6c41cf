/// A JWS signature algorithm (RFC 7518 §3, RFC 8037).
///
/// Only asymmetric algorithms exist here: a verifier holding a public key must never accept an
/// HMAC (`HS256`…) token, and `none` is no algorithm at all; both are refused when a header
/// names them (``TokenVerificationError/Code/algorithmNotAllowed``).
public enum JWSAlgorithm: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256 and MGF1 with SHA-256.
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384 and MGF1 with SHA-384.
    case ps384 = "PS384"
    /// ECDSA with P-256 and SHA-256.
    case es256 = "ES256"
    /// ECDSA with P-384 and SHA-384.
    case es384 = "ES384"
    /// EdDSA with Ed25519 (RFC 8037).
    case edDSA = "EdDSA"

    public var description: String { rawValue }

    /// The key type a key must have to be used with this algorithm.
    package var keyType: JWK.KeyType {
        switch self {
        case .rs256, .rs384, .rs512, .ps256, .ps384: .rsa
        case .es256, .es384: .ec
        case .edDSA: .okp
        }
    }

    /// For ECDSA: the curve this algorithm requires and the size of one coordinate in bytes.
    var ecCurve: (name: String, coordinateSize: Int)? {
        switch self {
        case .es256: ("P-256", 32)
        case .es384: ("P-384", 48)
        default: nil
        }
    }

    /// The algorithms OpenID providers use; the default allow-list of `IDTokenVerifier`.
    package static let standard: Set<JWSAlgorithm> = Set(allCases)
}
