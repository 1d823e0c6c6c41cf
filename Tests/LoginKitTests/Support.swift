import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// A profile whose `counter` attribute is `counter`.
func sampleProfile(_ counter: Int = 1, refreshToken: String = "refresh-secret") -> StoredProfile {
    StoredProfile(
        credentials: Credentials(
            idToken: IDToken(rawValue: "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"), accessToken: "access-secret-\(counter)",
            refreshToken: refreshToken, tokenType: "Bearer", expiresAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(counter)),
            scope: "openid", issuer: "https://issuer.test"
        ),
        source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "cli"),
        userID: "user-1",
        attributes: ["counter": "\(counter)"],
        updatedAt: Date(timeIntervalSince1970: 1_800_000_000)
    )
}

/// The counter a profile holds.
func counter(of profile: StoredProfile?) -> Int? {
    profile.flatMap { Int($0.attributes["counter"] ?? "") }
}

/// File mode bits of `path`.
func mode(of path: String) throws -> Int {
    try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
}

extension LockedState<Int> {
    /// Adds one to the count and returns it: the number of the call that counted (from 1).
    func increment() -> Int {
        withLock { count -> Int in
            count += 1
            return count
        }
    }
}
