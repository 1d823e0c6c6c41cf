import Foundation
@testable import LoginKit
import LoginKitJOSE
import Testing

/// The store's hand-written JSON (`StoreJSONWriter`) is the document `JSONEncoder` makes from the
/// `Codable` types: byte for byte, and decoded back to equal profiles. A field added to a stored
/// type but not to the writer fails here, as long as the full samples below set it.
struct StoreJSONWriterTests {
    /// Every field of every stored type set, with strings that need escaping and dates with and
    /// without a fraction.
    static func fullProfile(_ suffix: String = "") -> StoredProfile {
        let credentials = Credentials(
            idToken: IDToken(rawValue: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln\(suffix)"),
            accessToken: "access/\"quoted\"\\back\(suffix)", refreshToken: "refresh\n\t\u{01}\u{1F}é€😀",
            tokenType: "Bearer", expiresAt: Date(timeIntervalSince1970: 1_764_000_000.25), scope: "openid profile/email",
            issuer: "https://id.example.com/realms/a", idTokenExpiresAt: Date(timeIntervalSince1970: 1_764_000_000),
            issuedAt: Date(timeIntervalSince1970: 1_763_996_400.123456)
        )
        return StoredProfile(
            credentials: credentials,
            source: CredentialSource(
                kind: .cognito, endpoint: "https://cognito-idp.eu-west-1.amazonaws.com/", clientID: "client \(suffix)",
                poolID: "eu-west-1_abc", region: "eu-west-1", scope: "aws.cognito.signin.user.admin"),
            userID: "user-\(suffix)",
            attributes: [
                "grant": "client_credentials", "resource": "https://api.example.com/", "ä": "ß", "": "empty key",
                "a\u{30A}": "not normalised", "b": "after it in UTF-8", "line\u{2028}separator": "\u{7F}",
            ],
            updatedAt: Date(timeIntervalSince1970: 1_763_996_401.5)
        )
    }

    static func minimalProfile() -> StoredProfile {
        StoredProfile(
            credentials: Credentials(),
            source: CredentialSource(kind: .oauth2, endpoint: "http://127.0.0.1:8080"),
            updatedAt: Date(timeIntervalSince1970: 0))
    }

    static func farFutureProfile() -> StoredProfile {
        var profile = minimalProfile()
        profile.updatedAt = Date(timeIntervalSince1970: 1e15)
        profile.credentials.expiresAt = Date(timeIntervalSince1970: 1e16)
        profile.credentials.issuedAt = Date(timeIntervalSince1970: -1.5)
        profile.credentials.idTokenExpiresAt = Date(timeIntervalSince1970: .leastNonzeroMagnitude)
        return profile
    }

    static let samples: [[String: StoredProfile]] = [
        ["far": farFutureProfile()],
        ["default": fullProfile()],
        ["default": fullProfile("1"), "work": fullProfile("2"), "b": minimalProfile(), "a \"quoted\" name": fullProfile("3")],
        ["only-required": minimalProfile()],
        [:],
    ]

    @Test(arguments: samples)
    func thePlainDocumentIsWhatJSONEncoderWrites(_ profiles: [String: StoredProfile]) throws {
        for storage in [nil, "plaintext"] as [String?] {
            let written = try StoreJSONWriter.plainDocument(storage: storage, profiles: profiles)
            let encoded = Array(try StoreFormat.encoder().encode(StoreFormat.PlainDocument(storage: storage, profiles: profiles)))
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
            #expect(try StoreFormat.decode(written + [0x0A], path: "test", key: nil) == profiles)
        }
    }

    @Test(arguments: samples)
    func theSealedContentsAreWhatJSONEncoderWrites(_ profiles: [String: StoredProfile]) throws {
        let written = try StoreJSONWriter.sealedContents(profiles: profiles)
        let encoded = Array(try StoreFormat.encoder().encode(StoreFormat.SealedContents(profiles: profiles)))
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
    }

    @Test func theSealedDocumentIsWhatJSONEncoderWritesAndOpens() throws {
        for reference in [nil, StoreKeyReference(provider: "secret-service", id: "0123456789abcdef0123456789abcdef")] {
            let written = StoreJSONWriter.sealedDocument(alg: "A256GCM", key: reference, box: "AAAA-_bb")
            let encoded = Array(try StoreFormat.encoder().encode(StoreFormat.SealedDocument(sealed: .init(alg: "A256GCM", key: reference, box: "AAAA-_bb"))))
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
        }
        let key = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let profiles = Self.samples[1]
        let file = try StoreFormat.encode(profiles, path: "test", key: key)
        #expect(try StoreFormat.decode(file, path: "test", key: key) == profiles)
    }

    /// The full sample sets every field: a field added to a stored type and not to the sample fails here.
    @Test func theFullSampleSetsEveryFieldJSONEncoderWrites() throws {
        let encoded = try JSONSerialization.jsonObject(with: try StoreFormat.encoder().encode(Self.fullProfile())) as? [String: Any]
        let profile = try #require(encoded)
        #expect(Set(profile.keys) == ["attributes", "credentials", "source", "updated_at", "user_id"])
        #expect(Set(try #require(profile["credentials"] as? [String: Any]).keys) == [
            "access_token", "expires_at", "id_token", "id_token_expires_at", "issued_at", "issuer", "refresh_token", "scope", "token_type",
        ])
        #expect(Set(try #require(profile["source"] as? [String: Any]).keys) == ["client_id", "endpoint", "kind", "pool_id", "region", "scope"])
    }

    /// A date taken from the clock (not built from seconds since 1970) is written as exactly the
    /// seconds JSONEncoder writes for it, and reads back to those seconds.
    @Test func aClockDateIsWrittenAsJSONEncoderWritesIt() throws {
        var profile = Self.minimalProfile()
        profile.updatedAt = Date(timeIntervalSinceReferenceDate: 7.6e8 + 0.123456789)
        let written = try StoreJSONWriter.plainDocument(storage: nil, profiles: ["default": profile])
        let encoded = Array(try StoreFormat.encoder().encode(StoreFormat.PlainDocument(profiles: ["default": profile])))
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
        let read = try #require(try StoreFormat.decode(written, path: "test", key: nil)["default"])
        #expect(read.updatedAt.timeIntervalSince1970 == profile.updatedAt.timeIntervalSince1970)
    }

    @Test func aDateJSONCannotCarryIsRefusedNotWritten() throws {
        var profile = Self.fullProfile()
        profile.updatedAt = Date(timeIntervalSince1970: .infinity)
        let error = try #require(throws: TokenStoreError.self) { try StoreFormat.encode(["default": profile], path: "test", key: nil) }
        #expect(error.code == .io)
    }
}
