import Foundation
@testable import LoginKit
import LoginKitJOSE
import Testing

/// The store file is written by `JSONEncoder` from the types `StoreFormat.decode` reads it into: one
/// schema, checked here by round trips, by the documented shape and by the keys each type writes.
struct StoreFormatTests {
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

    /// The top-level members of a written file.
    private static func members(of file: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(file)) as? [String: Any])
    }

    @Test(arguments: samples)
    func aPlainFileReadsBackAsTheProfilesWritten(_ profiles: [String: StoredProfile]) throws {
        for chosenPlaintext in [false, true] {
            let file = try StoreFormat.encode(profiles, path: "test", key: nil, chosenPlaintext: chosenPlaintext)
            #expect(file.last == 0x0A)
            #expect(file.dropLast().last != 0x0A)
            #expect(try StoreFormat.decode(file, path: "test", key: nil) == profiles)
            let members = try Self.members(of: file)
            let documentKeys: Set<String> = chosenPlaintext ? ["format", "profiles", "storage", "version"] : ["format", "profiles", "version"]
            #expect(Set(members.keys) == documentKeys)
            #expect(members["storage"] as? String == (chosenPlaintext ? "plaintext" : nil))
        }
    }

    @Test(arguments: samples)
    func aSealedFileReadsBackWithItsKeyOnly(_ profiles: [String: StoredProfile]) throws {
        let key = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let file = try StoreFormat.encode(profiles, path: "test", key: key)
        #expect(file.last == 0x0A)
        #expect(try StoreFormat.decode(file, path: "test", key: key) == profiles)
        let other = try SymmetricKey(bytes: [UInt8](repeating: 8, count: 32))
        #expect(throws: TokenStoreError.self) { try StoreFormat.decode(file, path: "test", key: other) }
    }

    /// The plain file as docs/storage.md shows it: sorted keys, pretty printed, dates as seconds
    /// since 1970 (a whole number without a fraction), absent optionals left out, one final newline.
    @Test func thePlainFileHasTheDocumentedShape() throws {
        let profile = StoredProfile(
            credentials: Credentials(refreshToken: "r", expiresAt: Date(timeIntervalSince1970: 1_800_000_300.5)),
            source: CredentialSource(kind: .oauth2, endpoint: "https://id.example.com", clientID: "cli"),
            userID: "u1", attributes: ["grant": "password"], updatedAt: Date(timeIntervalSince1970: 1_800_000_000))
        let file = try StoreFormat.encode(["default": profile], path: "test", key: nil)
        let expected = #"""
            {
              "format" : "loginkit.tokens",
              "profiles" : {
                "default" : {
                  "attributes" : {
                    "grant" : "password"
                  },
                  "credentials" : {
                    "expires_at" : 1800000300.5,
                    "refresh_token" : "r"
                  },
                  "source" : {
                    "client_id" : "cli",
                    "endpoint" : "https:\/\/id.example.com",
                    "kind" : "oauth2"
                  },
                  "updated_at" : 1800000000,
                  "user_id" : "u1"
                }
              },
              "version" : 1
            }
            """#
        #expect(String(decoding: file, as: UTF8.self) == expected + "\n")
    }

    /// `{"format", "version", "sealed": {"alg", "key"?, "box"}}`: the key is named only when it
    /// comes from a provider, and no token is in the clear.
    @Test func theSealedFileHasTheDocumentedShape() throws {
        let key = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let profiles = ["default": Self.fullProfile()]
        let providerKey = StoreKeyReference(provider: "secret-service", id: "0123456789abcdef0123456789abcdef")
        for reference in [nil, providerKey] {
            let file = try StoreFormat.encode(profiles, path: "test", key: key, reference: reference)
            let members = try Self.members(of: file)
            #expect(Set(members.keys) == ["format", "sealed", "version"])
            #expect(members["format"] as? String == "loginkit.tokens")
            #expect(try StoreFormat.header(file, path: "test").version == 1)
            let sealed = try #require(members["sealed"] as? [String: Any])
            let sealedKeys: Set<String> = reference == nil ? ["alg", "box"] : ["alg", "box", "key"]
            #expect(Set(sealed.keys) == sealedKeys)
            #expect(sealed["alg"] as? String == "A256GCM")
            let box = try #require(sealed["box"] as? String)
            #expect(Base64URL.decode(box) != nil)
            if let reference {
                let keyMembers = try #require(sealed["key"] as? [String: Any])
                #expect(Set(keyMembers.keys) == ["id", "provider"])
                #expect(keyMembers["id"] as? String == reference.id)
                #expect(keyMembers["provider"] as? String == reference.provider)
            }
            #expect(try StoreFormat.header(file, path: "test").sealed?.key == reference)
            let text = String(decoding: file, as: UTF8.self)
            #expect(!text.contains("refresh") && !text.contains("access") && !text.contains("profiles"))
        }
    }

    /// The keys each stored type writes, as docs/storage.md lists them (the full sample sets every
    /// field, so a field added to a stored type and not to the sample fails here).
    @Test func theFullSampleWritesEveryDocumentedKey() throws {
        let encoded = try JSONSerialization.jsonObject(with: try StoreFormat.encoder().encode(Self.fullProfile())) as? [String: Any]
        let profile = try #require(encoded)
        #expect(Set(profile.keys) == ["attributes", "credentials", "source", "updated_at", "user_id"])
        #expect(Set(try #require(profile["credentials"] as? [String: Any]).keys) == [
            "access_token", "expires_at", "id_token", "id_token_expires_at", "issued_at", "issuer", "refresh_token", "scope", "token_type",
        ])
        #expect(Set(try #require(profile["source"] as? [String: Any]).keys) == ["client_id", "endpoint", "kind", "pool_id", "region", "scope"])
    }

    /// A date taken from the clock (not built from seconds since 1970) reads back as the same seconds.
    @Test func aClockDateReadsBackAsTheSameSeconds() throws {
        var profile = Self.minimalProfile()
        profile.updatedAt = Date(timeIntervalSinceReferenceDate: 7.6e8 + 0.123456789)
        let file = try StoreFormat.encode(["default": profile], path: "test", key: nil)
        let read = try #require(try StoreFormat.decode(file, path: "test", key: nil)["default"])
        #expect(read.updatedAt.timeIntervalSince1970 == profile.updatedAt.timeIntervalSince1970)
    }

    @Test(arguments: [Double.infinity, -Double.infinity, Double.nan])
    func aDateJSONCannotCarryIsRefusedNotWritten(_ seconds: Double) throws {
        var profile = Self.fullProfile()
        profile.credentials.expiresAt = Date(timeIntervalSince1970: seconds)
        let key = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        for key in [nil, key] {
            let error = try #require(throws: TokenStoreError.self) { try StoreFormat.encode(["default": profile], path: "test", key: key) }
            #expect(error.code == .io)
            #expect(error.message.contains("a date is not a finite number"))
        }
    }

    /// The store's own encoder writes the bytes `JSONEncoder` (the reference, `StoreFormat.encoder()`)
    /// makes from the same Codable types, for every document the store writes: one schema, two
    /// encoders, the same bytes.
    @Test(arguments: samples)
    func theStoresEncoderWritesJSONEncodersBytes(_ profiles: [String: StoredProfile]) throws {
        let reference = StoreFormat.encoder()
        for document in [
            StoreFormat.PlainDocument(storage: nil, profiles: profiles), StoreFormat.PlainDocument(storage: "plaintext", profiles: profiles),
        ] {
            #expect(try StoreFileEncoder.encode(document) == Array(try reference.encode(document)))
        }
        let contents = StoreFormat.SealedContents(profiles: profiles)
        #expect(try StoreFileEncoder.encode(contents) == Array(try reference.encode(contents)))
        for key in [nil, StoreKeyReference(provider: "secret-service", id: "loginkit-\"a/b\"")] {
            let sealed = StoreFormat.SealedDocument(sealed: .init(alg: "A256GCM", key: key, box: "AAAA-_bb"))
            #expect(try StoreFileEncoder.encode(sealed) == Array(try reference.encode(sealed)))
        }
    }
}
