#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes the store file's JSON directly into bytes: the same document `JSONEncoder` (sorted keys,
/// pretty printed, dates as seconds since 1970) makes from the `Codable` types, in about a tenth of
/// the time. A durable save spent ~40 µs of its ~60 µs of user-space time in `JSONEncoder`
/// (docs/benchmarks.md); reading stays with `JSONDecoder`, and `StoreFormat.encoder()` remains
/// the reference the tests compare with.
///
/// The schema is written out here, so a field added to `StoredProfile`, `Credentials`,
/// `CredentialSource` or `StoreKeyReference` must be added here too: `StoreJSONWriterTests`
/// compares this writer with `JSONEncoder` for fully populated values and fails on any difference.
struct StoreJSONWriter {
    /// A date that JSON cannot carry (not finite).
    struct NonFiniteDate: Error {}

    private(set) var bytes: [UInt8] = []
    private var depth = 0
    /// Whether the object being written has no member yet.
    private var isFirstMember = true

    init() {
        bytes.reserveCapacity(1024)
    }

    // MARK: The store's documents

    static func plainDocument(storage: String?, profiles: [String: StoredProfile]) throws(NonFiniteDate) -> [UInt8] {
        var writer = StoreJSONWriter()
        try writer.object { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in
            writer.member("format", string: StoreFormat.formatName)
            try writer.member("profiles") { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in try writer.profiles(profiles) }
            if let storage { writer.member("storage", string: storage) }
            writer.member("version", integer: StoreFormat.currentVersion)
        }
        return writer.bytes
    }

    static func sealedContents(profiles: [String: StoredProfile]) throws(NonFiniteDate) -> [UInt8] {
        var writer = StoreJSONWriter()
        try writer.object { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in
            try writer.member("profiles") { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in try writer.profiles(profiles) }
        }
        return writer.bytes
    }

    static func sealedDocument(alg: String, key: StoreKeyReference?, box: String) -> [UInt8] {
        var writer = StoreJSONWriter()
        writer.object { writer in
            writer.member("format", string: StoreFormat.formatName)
            writer.member("sealed") { writer in
                writer.object { writer in
                    writer.member("alg", string: alg)
                    writer.member("box", string: box)
                    if let key {
                        writer.member("key") { writer in
                            writer.object { writer in
                                writer.member("id", string: key.id)
                                writer.member("provider", string: key.provider)
                            }
                        }
                    }
                }
            }
            writer.member("version", integer: StoreFormat.currentVersion)
        }
        return writer.bytes
    }

    // MARK: The types (members in sorted key order, optionals left out when nil)

    private mutating func profiles(_ profiles: [String: StoredProfile]) throws(NonFiniteDate) {
        try object { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in
            for name in Self.sorted(profiles.keys) {
                guard let profile = profiles[name] else { continue }
                try writer.member(name) { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in try writer.profile(profile) }
            }
        }
    }

    private mutating func profile(_ profile: StoredProfile) throws(NonFiniteDate) {
        try object { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in
            writer.member("attributes") { writer in
                writer.object { writer in
                    for name in Self.sorted(profile.attributes.keys) {
                        if let value = profile.attributes[name] { writer.member(name, string: value) }
                    }
                }
            }
            try writer.member("credentials") { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in try writer.credentials(profile.credentials) }
            writer.member("source") { writer in writer.source(profile.source) }
            try writer.member("updated_at", date: profile.updatedAt)
            if let userID = profile.userID { writer.member("user_id", string: userID) }
        }
    }

    private mutating func credentials(_ credentials: Credentials) throws(NonFiniteDate) {
        try object { (writer: inout StoreJSONWriter) throws(NonFiniteDate) in
            if let value = credentials.accessToken { writer.member("access_token", string: value) }
            if let value = credentials.expiresAt { try writer.member("expires_at", date: value) }
            if let value = credentials.idToken { writer.member("id_token", string: value.rawValue) }
            if let value = credentials.idTokenExpiresAt { try writer.member("id_token_expires_at", date: value) }
            if let value = credentials.issuedAt { try writer.member("issued_at", date: value) }
            if let value = credentials.issuer { writer.member("issuer", string: value) }
            if let value = credentials.refreshToken { writer.member("refresh_token", string: value) }
            if let value = credentials.scope { writer.member("scope", string: value) }
            if let value = credentials.tokenType { writer.member("token_type", string: value) }
        }
    }

    private mutating func source(_ source: CredentialSource) {
        object { writer in
            if let value = source.clientID { writer.member("client_id", string: value) }
            writer.member("endpoint", string: source.endpoint)
            writer.member("kind", string: source.kind.rawValue)
            if let value = source.poolID { writer.member("pool_id", string: value) }
            if let value = source.region { writer.member("region", string: value) }
            if let value = source.scope { writer.member("scope", string: value) }
        }
    }

    // MARK: JSON, pretty printed as JSONEncoder does ("key" : value, two spaces per level)

    private mutating func object<E: Error>(_ members: (inout StoreJSONWriter) throws(E) -> Void) throws(E) {
        bytes.append(UInt8(ascii: "{"))
        depth += 1
        isFirstMember = true
        try members(&self)
        depth -= 1
        if isFirstMember { bytes.append(UInt8(ascii: "\n")) }  // empty: "{", an empty line, "}"
        newline()
        bytes.append(UInt8(ascii: "}"))
        isFirstMember = false
    }

    private mutating func member<E: Error>(_ key: String, value: (inout StoreJSONWriter) throws(E) -> Void) throws(E) {
        if !isFirstMember { bytes.append(UInt8(ascii: ",")) }
        isFirstMember = false
        newline()
        string(key)
        bytes.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: " ")])
        try value(&self)
    }

    private mutating func member(_ key: String, string value: String) {
        member(key) { writer in writer.string(value) }
    }

    private mutating func member(_ key: String, integer value: Int) {
        member(key) { writer in writer.bytes.append(contentsOf: String(value).utf8) }
    }

    /// Seconds since 1970 as JSONEncoder's `.secondsSince1970` writes them: Swift's shortest
    /// round-tripping decimal, without the `.0` of a whole number.
    private mutating func member(_ key: String, date: Date) throws(NonFiniteDate) {
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite else { throw NonFiniteDate() }
        member(key) { writer in
            let text = seconds.description  // shortest round-tripping: "1764000000.25", "1e+16"
            writer.bytes.append(contentsOf: text.hasSuffix(".0") ? text.utf8.dropLast(2) : text.utf8[...])
        }
    }

    /// Keys in JSONEncoder's `.sortedKeys` order on Linux: by their UTF-8 bytes (`String`'s `<`
    /// would compare them normalised).
    private static func sorted(_ keys: some Collection<String>) -> [String] {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private mutating func newline() {
        bytes.append(UInt8(ascii: "\n"))
        for _ in 0..<depth { bytes.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: " ")]) }
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`… or `\u00XX`, `/` as
    /// `\/` (as JSONEncoder does), everything else as its UTF-8.
    private mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "/"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "/")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
