import Foundation
import Testing

/// A Swift block of the documentation, and how `make test` checks it.
struct DocSnippet: Sendable {
    enum Check: Sendable, Equatable {
        /// Compiled by this target: the named file of `Generated/`.
        case compiled(String)
        /// A Package.swift fragment, evaluated by `swift package dump-package` (scripts/doc-snippets.py --check).
        case manifest
        /// Not checked, for the reason given.
        case skipped(String)
    }

    /// The document, relative to the repository.
    let document: String
    /// Its place among the document's Swift blocks, from 1.
    let block: Int
    let check: Check

    /// The file of `Generated/` that holds the block, when it is compiled.
    var file: String? {
        if case .compiled(let file) = check { return file }
        return nil
    }
}

/// The documentation's Swift blocks are compiled by this target: scripts/doc-snippets.py writes each
/// one into `Generated/` (`make snippets`), `make test` fails when those files and the documents
/// disagree, and `swift build --build-tests` compiles them. These tests check that what was
/// generated covers every block of every document.
@Suite(.timeLimit(.minutes(3)))
struct DocSnippetTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let root = directory.appendingPathComponent("../..").standardized

    @Test func everySwiftBlockOfEveryDocumentIsListed() throws {
        #expect(!scannedDocuments.isEmpty)
        for document in scannedDocuments {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            let blocks = text.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { $0.trimmingCharacters(in: .whitespaces) == "```swift" }.count
            let listed = generatedDocSnippets.filter { $0.document == document }.map(\.block)
            #expect(listed == (0..<blocks).map { $0 + 1 }, "\(document): run `make snippets`")
        }
        #expect(Set(generatedDocSnippets.map(\.document)).isSubset(of: scannedDocuments))
    }

    @Test func everyCompiledBlockHasItsFileAndNoFileIsLeftOver() throws {
        let generated = Self.directory.appendingPathComponent("Generated")
        let files = try FileManager.default.contentsOfDirectory(atPath: generated.path)
            .filter { $0.hasSuffix(".swift") }
        let expected = generatedDocSnippets.compactMap(\.file) + ["DocSnippetIndex.swift"]
        #expect(Set(files) == Set(expected), "run `make snippets`")
        #expect(expected.count == Set(expected).count, "one file per block")
    }

    @Test func onlyManifestFragmentsAreLeftUncompiled() {
        let compiled = generatedDocSnippets.filter { $0.file != nil }
        #expect(compiled.count >= 20, "the README's, the guides' and the DocC articles' examples")
        let skipped = generatedDocSnippets.filter {
            if case .skipped = $0.check { return true }
            return false
        }
        let names = skipped.map { "\($0.document) #\($0.block)" }
        #expect(skipped.isEmpty, "a block that is not Swift to compile is a manifest fragment: \(names)")
    }
}
