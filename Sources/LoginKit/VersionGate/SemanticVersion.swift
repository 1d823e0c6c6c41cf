/// A version number compared by SemVer 2.0.0 precedence: `3.10.0 > 3.9.0`, `1.0 == 1.0.0`,
/// `1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-beta < 1.0.0`, numeric identifiers numerically, build metadata
/// ignored.
///
/// Parses `1`, `1.2`, `1.2.3`, an optional leading `v`, `-pre.release` and `+build.metadata`.
/// Anything else is a `LoginError` (`.invalidConfiguration`), never a silent 0.0.0.
public struct SemanticVersion: Sendable, Hashable, Comparable, Codable, LosslessStringConvertible {
    /// `MAJOR`.
    package let major: UInt64
    /// `MINOR` (0 when not written).
    package let minor: UInt64
    /// `PATCH` (0 when not written).
    package let patch: UInt64
    /// Pre-release identifiers (`alpha`, `1` in `-alpha.1`).
    package let preRelease: [String]
    /// Build metadata identifiers; ignored by comparison and equality.
    package let buildMetadata: [String]

    /// A version from its numbers and identifiers, unchecked; ``init(parsing:)`` checks a string.
    public init(major: UInt64, minor: UInt64 = 0, patch: UInt64 = 0, preRelease: [String] = [], buildMetadata: [String] = []) {
        self.major = major
        self.minor = minor
        self.patch = patch
        self.preRelease = preRelease
        self.buildMetadata = buildMetadata
    }

    /// Parses `text`.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration`, its message quoting `text` and saying why it
    ///   is not a version.
    public init(parsing text: String) throws(LoginError) {
        func fail(_ reason: String) -> LoginError {
            LoginError(.invalidConfiguration, "\"\(text)\" is not a semantic version: \(reason)")
        }
        var rest = Substring(text)
        if rest.hasPrefix("v") || rest.hasPrefix("V") { rest = rest.dropFirst() }
        var build: [String] = []
        if let plus = rest.firstIndex(of: "+") {
            build = rest[rest.index(after: plus)...].split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            rest = rest[..<plus]
            guard build.allSatisfy(Self.isValidIdentifier) else { throw fail("invalid build metadata") }
        }
        var pre: [String] = []
        if let dash = rest.firstIndex(of: "-") {
            pre = rest[rest.index(after: dash)...].split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            rest = rest[..<dash]
            guard pre.allSatisfy(Self.isValidIdentifier) else { throw fail("invalid pre-release") }
            guard pre.allSatisfy({ !Self.isNumeric($0) || $0 == "0" || !$0.hasPrefix("0") }) else {
                throw fail("numeric pre-release identifiers must not have leading zeros")
            }
        }
        let core = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(core.count) else { throw fail("expected 1 to 3 dot-separated numbers") }
        var numbers: [UInt64] = []
        for part in core {
            guard Self.isNumeric(part), part == "0" || !part.hasPrefix("0") else {
                throw fail("\"\(part)\" is not a number without leading zeros")
            }
            guard let value = UInt64(part) else { throw fail("\"\(part)\" is too large") }
            numbers.append(value)
        }
        self.init(
            major: numbers[0], minor: numbers.count > 1 ? numbers[1] : 0, patch: numbers.count > 2 ? numbers[2] : 0,
            preRelease: pre, buildMetadata: build
        )
    }

    /// `LosslessStringConvertible`: `nil` for anything that does not parse.
    public init?(_ description: String) {
        guard let parsed = try? SemanticVersion(parsing: description) else { return nil }
        self = parsed
    }

    private static func isNumeric(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private static func isValidIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "-")
        }
    }

    /// `MAJOR.MINOR.PATCH[-pre][+build]`.
    public var description: String {
        var text = "\(major).\(minor).\(patch)"
        if !preRelease.isEmpty { text += "-" + preRelease.joined(separator: ".") }
        if !buildMetadata.isEmpty { text += "+" + buildMetadata.joined(separator: ".") }
        return text
    }

    public static func == (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        lhs.major == rhs.major && lhs.minor == rhs.minor && lhs.patch == rhs.patch && lhs.preRelease == rhs.preRelease
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(major)
        hasher.combine(minor)
        hasher.combine(patch)
        hasher.combine(preRelease)
    }

    public static func < (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        if (lhs.major, lhs.minor, lhs.patch) != (rhs.major, rhs.minor, rhs.patch) {
            return (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }
        switch (lhs.preRelease.isEmpty, rhs.preRelease.isEmpty) {
        case (true, true), (true, false): return false  // a release is above its pre-releases
        case (false, true): return true
        case (false, false): break
        }
        for (left, right) in zip(lhs.preRelease, rhs.preRelease) where left != right {
            switch (UInt64(left), UInt64(right)) {
            case let (l?, r?): return l < r
            case (.some, nil): return true  // numeric identifiers are below alphanumeric ones
            case (nil, .some): return false
            case (nil, nil): return left < right  // ASCII order
            }
        }
        return lhs.preRelease.count < rhs.preRelease.count
    }

    /// Decodes a version from a string such as `1.4.0`; throws `DecodingError.dataCorrupted` when
    /// it is not a semantic version.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            self = try SemanticVersion(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
