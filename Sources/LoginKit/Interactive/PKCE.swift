import LoginKitHTTP
import LoginKitJOSE

/// Proof Key for Code Exchange (RFC 7636) with the `S256` method: a secret verifier and its
/// challenge. `plain` is never used.
///
/// The challenge goes into the authorization request; the verifier only to the token endpoint, so a
/// code intercepted on its way back (another app on the loopback port, a logged URL) is useless.
/// `description` never shows the verifier.
package struct PKCE: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The code verifier: 43 to 128 characters of `A-Z a-z 0-9 - . _ ~` (RFC 7636 §4.1).
    package let verifier: String
    /// `BASE64URL(SHA256(ASCII(verifier)))` (RFC 7636 §4.2).
    package let challenge: String
    /// The challenge method: always `S256`.
    package var method: String { "S256" }

    /// A fresh verifier: 32 bytes from OpenSSL's CSPRNG, base64url-encoded (43 characters), as
    /// RFC 7636 §4.1 recommends. Call once per login attempt; never reuse one.
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when the random generator or the digest fails.
    package static func generate() throws -> PKCE {
        try PKCE(verifier: Base64URL.encode(SecureRandom.bytes(32)))
    }

    /// The challenge for a given `verifier`.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when `verifier` is not 43 to 128 unreserved
    ///   characters; `TokenVerificationError` `.cryptoFailure` when the digest fails.
    package init(verifier: String) throws {
        guard Self.isValidVerifier(verifier) else {
            throw LoginError(
                .invalidConfiguration,
                "a PKCE code verifier is 43 to 128 characters of A-Z, a-z, 0-9, \"-\", \".\", \"_\", \"~\" (RFC 7636 §4.1)"
            )
        }
        self.verifier = verifier
        self.challenge = Base64URL.encode(try MessageDigest.sha256(Array(verifier.utf8)))
    }

    /// Whether `text` has a code verifier's length and alphabet.
    package static func isValidVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count) && text.utf8.allSatisfy(isUnreserved)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    package var description: String { "PKCE(S256, verifier redacted)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `bytes` random bytes from OpenSSL's CSPRNG, base64url-encoded: a `state` or a `nonce`.
func randomURLSafeToken(bytes: Int = 32) throws -> String {
    Base64URL.encode(try SecureRandom.bytes(bytes))
}

/// Whether `a` equals `b`, in time that depends on their lengths only (a `state` compared with what
/// an attacker sent leaks nothing through timing).
func constantTimeEquals(_ a: String, _ b: String) -> Bool {
    let left = Array(a.utf8)
    let right = Array(b.utf8)
    guard left.count == right.count else { return false }
    var difference: UInt8 = 0
    for index in left.indices { difference |= left[index] ^ right[index] }
    return difference == 0
}
