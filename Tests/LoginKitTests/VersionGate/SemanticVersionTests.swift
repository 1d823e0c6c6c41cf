import LoginKit
import PropertyBased
import Testing

@Suite struct SemanticVersionTests {
    func version(_ text: String) throws -> SemanticVersion { try SemanticVersion(parsing: text) }

    @Test func semVerSection11PrecedenceExamples() throws {
        // SemVer 2.0.0 §11, in ascending order.
        let ordered = [
            "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
            "1.0.0-rc.1", "1.0.0", "2.0.0", "2.1.0", "2.1.1",
        ].map { try? version($0) }
        for (lower, higher) in zip(ordered, ordered.dropFirst()) {
            let lower = try #require(lower)
            let higher = try #require(higher)
            #expect(lower < higher, "\(lower) < \(higher)")
            #expect(!(higher < lower))
        }
    }

    @Test func componentsCompareAsNumbersNotText() throws {
        #expect(try version("3.10.0") > version("3.9.0"))
        #expect(try version("3.9.10") > version("3.9.9"))
        #expect(try version("10.0") > version("9.99.99"))
    }

    @Test func shortFormsAndPrefixes() throws {
        #expect(try version("1.0") == version("1.0.0"))
        #expect(try version("1") == version("1.0.0"))
        #expect(try version("v1.2.3") == SemanticVersion(major: 1, minor: 2, patch: 3))
        #expect(try version("1.2.3+build.5") == version("1.2.3+other"))  // build metadata ignored
        #expect(try version("1.2.3-rc.1+b").description == "1.2.3-rc.1+b")
    }

    @Test(arguments: ["", "v", "1.", "1..2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "a.b.c", "1.2.x", "-1.2.3", "1.2.3-a..b", "1.2.3 ", "99999999999999999999.0.0"])
    func garbageIsATypedError(_ text: String) {
        #expect((#expect(throws: LoginError.self) { try SemanticVersion(parsing: text) })?.code == .invalidConfiguration)
        #expect(SemanticVersion(text) == nil)
    }

    @Test func codableAsAString() throws {
        let policy = VersionPolicy(title: "t", message: "m", version: try version("1.4.0"), url: nil)
        #expect(policy.version.description == "1.4.0")
    }

    static let generator = zip(
        Gen.int(in: 0...12), Gen.int(in: 0...12), Gen.int(in: 0...12),
        Gen.element(of: ["alpha", "beta", "rc", "0", "1", "2", "11", "x-y", "B"]).array(of: 0...3)
    ).map { major, minor, patch, preRelease in
        SemanticVersion(major: UInt64(major), minor: UInt64(minor), patch: UInt64(patch), preRelease: preRelease.compactMap { $0 })
    }

    @Test func parsingTheDescriptionGivesTheSameVersion() async {
        await propertyCheck(count: 300, input: Self.generator) { value in
            #expect(SemanticVersion(value.description) == value)
            #expect(SemanticVersion(value.description)?.preRelease == value.preRelease)
        }
    }

    @Test func theOrderIsTotalAndAntisymmetric() async {
        await propertyCheck(count: 300, input: Self.generator, Self.generator) { a, b in
            let relations = [a < b, b < a, a == b].filter { $0 }.count
            #expect(relations == 1, "\(a) vs \(b)")
        }
    }

    @Test func theOrderIsTransitive() async {
        await propertyCheck(count: 300, input: Self.generator, Self.generator, Self.generator) { a, b, c in
            if a < b && b < c { #expect(a < c, "\(a) < \(b) < \(c)") }
            if a == b && b == c { #expect(a == c) }
        }
    }
}
