import Foundation
import LoginKit
import LoginKitJOSE
import Testing

/// A profile's name as a file name in a format 2 store's directory (`p-<encoded>.json`), and back:
/// distinct names never share a file, no name escapes the directory or hides in it, and only what
/// `encode` writes decodes.
struct StoreProfileFileNameTests {
    /// What the encoding may contain: bytes a file system keeps as they are, whatever its case or
    /// Unicode handling.
    private static let fileNameBytes = Set(Array("abcdefghijklmnopqrstuvwxyz0123456789_-%ABCDEF".utf8))

    private static func expectRoundTrip(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let encoded = StoreProfileFileName.encode(name)
        #expect(StoreProfileFileName.decode(encoded) == name, "\(encoded)", sourceLocation: sourceLocation)
        #expect(encoded.utf8.allSatisfy { fileNameBytes.contains($0) }, "\(encoded)", sourceLocation: sourceLocation)
        #expect(!encoded.hasPrefix("."), sourceLocation: sourceLocation)
    }

    @Test(arguments: ["default", "work", "a", "p-00", "tenant_42", "0", "-", "_", "abcdefghijklmnopqrstuvwxyz0123456789_-"])
    func aPlainNameIsItsOwnFileName(_ name: String) {
        #expect(StoreProfileFileName.encode(name) == name)
        Self.expectRoundTrip(name)
    }

    /// Capitals are escaped: a file system that ignores case (APFS, by default) must not make
    /// `Work` and `work` one file.
    @Test func namesThatDifferInCaseOnlyGetFileNamesThatDifferInMoreThanCase() {
        let upper = StoreProfileFileName.encode("Work"), lower = StoreProfileFileName.encode("work")
        #expect(upper == "%57ork")
        #expect(lower == "work")
        #expect(upper.lowercased() != lower.lowercased())
        #expect(StoreProfileFileName.encode("WORK").lowercased() != StoreProfileFileName.encode("work").lowercased())
        for name in ["Work", "WORK", "wOrK"] { Self.expectRoundTrip(name) }
    }

    @Test func dotsAreEscapedSoNoNameIsDotDotDotOrHidden() {
        #expect(StoreProfileFileName.encode(".") == "%2E")
        #expect(StoreProfileFileName.encode("..") == "%2E%2E")
        #expect(StoreProfileFileName.encode(".hidden") == "%2Ehidden")
        #expect(StoreProfileFileName.encode("a.b") == "a%2Eb")
        for name in [".", "..", "...", ".hidden", "a.b", "p-x.json"] {
            #expect(!StoreProfileFileName.encode(name).contains("."))
            Self.expectRoundTrip(name)
        }
    }

    /// A resource target's profile (`acme#<32 hex>`, docs/workload-identity.md).
    @Test func aResourceProfileNameRoundTrips() {
        let name = "acme#0123456789abcdef0123456789abcdef"
        #expect(StoreProfileFileName.encode(name) == "acme%230123456789abcdef0123456789abcdef")
        Self.expectRoundTrip(name)
        Self.expectRoundTrip("Acme Corp#0123456789ABCDEF0123456789ABCDEF")
    }

    /// Non-ASCII bytes are escaped one by one: no file system's Unicode normalisation can merge
    /// two names (`é` precomposed and `e` + combining accent stay two files).
    @Test func nonASCIINamesAreEscapedBytewise() {
        #expect(StoreProfileFileName.encode("é") == "%C3%A9")
        let precomposed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(StoreProfileFileName.encode(precomposed) != StoreProfileFileName.encode(decomposed))
        #expect(StoreProfileFileName.decode(StoreProfileFileName.encode(decomposed))?.unicodeScalars.elementsEqual(decomposed.unicodeScalars) == true)
        for name in [precomposed, decomposed, "日本語", "Ünïcödé", "😀", "mixed é 日 😀 x", "\u{2028}", "\u{FEFF}bom"] {
            Self.expectRoundTrip(name)
        }
    }

    @Test func slashesAndNULBytesNeverReachTheFileName() {
        #expect(StoreProfileFileName.encode("a/b") == "a%2Fb")
        #expect(StoreProfileFileName.encode("/") == "%2F")
        #expect(StoreProfileFileName.encode("../../etc/passwd") == "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd")
        #expect(StoreProfileFileName.encode("a\u{0}b") == "a%00b")
        for name in ["a/b", "/", "//", "../x", "a\u{0}b", "\u{0}", "tab\there", "new\nline", "back\\slash", "space here", "%", "%41", "~x", "*?[]"] {
            let encoded = StoreProfileFileName.encode(name)
            #expect(!encoded.contains("/") && !encoded.utf8.contains(0), "\(encoded)")
            Self.expectRoundTrip(name)
        }
    }

    /// Every one-byte name: exactly `[a-z0-9_-]` is kept, everything else is `%HH`.
    @Test func everyASCIIByteIsKeptOrEscaped() {
        for byte in UInt8(0)..<128 {
            let name = String(decoding: [byte], as: UTF8.self)
            let kept = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            let hex = String(byte, radix: 16, uppercase: true)
            let expected = kept ? name : "%" + (hex.count == 1 ? "0" + hex : hex)
            #expect(StoreProfileFileName.encode(name) == expected, "byte \(byte)")
            Self.expectRoundTrip(name)
        }
    }

    /// A name whose encoding is longer than 200 bytes is the SHA-256 of its bytes (a file name stops
    /// at 255 bytes); such a file name names no profile by itself (`decode` is nil: the file says
    /// whose it is).
    @Test func aLongNameIsHashedAndDecodesToNothing() throws {
        let name = String(repeating: "long-name-", count: 30)  // 300 bytes
        let encoded = StoreProfileFileName.encode(name)
        let digest = try MessageDigest.sha256(Array(name.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(encoded.hasPrefix("~"))
        #expect(encoded.utf8.count == 65)
        #expect(encoded.dropFirst().lowercased() == digest)
        #expect(StoreProfileFileName.decode(encoded) == nil)
        #expect(StoreProfileFileName.encode(name) == encoded, "the same name, the same file")
        #expect(StoreProfileFileName.encode(name + "x") != encoded)
        #expect(StoreProfileFileName.encode(String(repeating: "long-name-", count: 29) + "long-namE-") != encoded)
    }

    /// The bound is on the encoding, not on the name: 200 kept bytes stay readable, 201 are hashed;
    /// 33 `É` (198 bytes encoded) stay, 34 (204) are hashed.
    @Test func theLimitIsTwoHundredBytesOfEncoding() {
        let longest = String(repeating: "a", count: 200)
        #expect(StoreProfileFileName.encode(longest) == longest)
        Self.expectRoundTrip(longest)
        #expect(StoreProfileFileName.encode(longest + "a").hasPrefix("~"))
        let escaped = String(repeating: "É", count: 33)
        #expect(StoreProfileFileName.encode(escaped).utf8.count == 198)
        Self.expectRoundTrip(escaped)
        let hashed = StoreProfileFileName.encode(escaped + "É")
        #expect(hashed.hasPrefix("~") && hashed.utf8.count == 65)
        #expect(StoreProfileFileName.decode(hashed) == nil)
    }

    /// Only what `encode` writes decodes: lowercase hex, a stray or short `%`, an escaped byte that
    /// would have been kept, a byte that would have been escaped, and bytes that are no UTF-8 are
    /// refused, so that two file names never decode to one profile.
    @Test(arguments: [
        "%2e", "%c3%a9", "%", "a%", "%4", "%4G", "%zz", "%%", "%61", "%2D", "%5F", "%30", "Work", "A", ".", "a.b", "a b", "a/b",
        "%FF", "%C3", "%C3%28", "%80", "%ED%A0%80", "~", "~abc", "~" + String(repeating: "0", count: 64), "é",
    ])
    func whatEncodeNeverWritesDoesNotDecode(_ encoded: String) {
        #expect(StoreProfileFileName.decode(encoded) == nil, "\(encoded)")
    }

    /// Many generated names: each round trips, and no two share a file name.
    @Test func generatedNamesRoundTripAndNeverCollide() {
        let alphabet: [String] = ["a", "Z", "0", "-", "_", ".", "/", "%", "#", " ", "é", "日", "😀", "\u{0}", "~", "A", "e\u{301}"]
        var seen: [String: String] = [:]
        var generator = SplitMix(seed: 44)
        for length in 1...12 {
            for _ in 0..<200 {
                let name = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }.joined()
                let encoded = StoreProfileFileName.encode(name)
                if let other = seen[encoded] { #expect(other == name, "\(other) and \(name) share \(encoded)") }
                seen[encoded] = name
                #expect(StoreProfileFileName.decode(encoded) == name)
            }
        }
    }
}

/// A small deterministic generator (SplitMix64): the same names on every run.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
