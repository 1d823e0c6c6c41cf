import Foundation
@_spi(Fuzzing) import LoginKit
import Testing

/// Every input in the committed fuzz corpora (Fuzz/Corpus/<target>/: starting inputs and every
/// finding) replayed through the fuzzers' entry points: no input that crashed a fuzzer may crash.
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus").standardized

    static let entries: [String: @Sendable (UnsafeRawBufferPointer) -> Bool] = [
        "fuzz-jws": FuzzEntries.jws, "fuzz-jwks": FuzzEntries.jwks, "fuzz-token-response": FuzzEntries.tokenResponse,
        "fuzz-store-file": FuzzEntries.storeFile, "fuzz-semver": FuzzEntries.semanticVersion, "fuzz-cli-config": FuzzEntries.cliConfiguration,
        "fuzz-signing-key": FuzzEntries.signingKey,
    ]

    @Test(arguments: entries.keys.sorted())
    func corpusReplaysWithoutAFinding(target: String) throws {
        let directory = Self.corpus.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(files.count >= 3, "\(target) has a seed corpus")
        let entry = try #require(Self.entries[target])
        for file in files {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            #expect(data.withUnsafeBytes { entry($0) }, "\(target)/\(file)")
        }
    }
}
