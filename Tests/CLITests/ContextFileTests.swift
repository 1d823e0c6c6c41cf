#if CLI
import Foundation
import LoginKitCommandLine
import LoginKitTestSupport
import Testing

/// The `.loginkit` search through a directory group or others can write (as `/tmp` is): what
/// anyone there could have put in it is skipped without a failure and the search ends there; the
/// user's own file there is refused; such a directory without a `.loginkit` is passed.
struct ContextFileTests {
    /// `outer` (the user's own, `0700`, naming `outer`) holding `shared` (`1777`).
    private static func withSharedDirectory(_ body: (_ outer: String, _ shared: String) throws -> Void) async throws {
        try await withTemporaryDirectory { root in
            let outer = URL(fileURLWithPath: root).resolvingSymlinksInPath().path + "/outer"
            try FileManager.default.createDirectory(atPath: outer + "/shared", withIntermediateDirectories: true)
            #expect(chmod(outer, 0o700) == 0 && chmod(outer + "/shared", 0o1777) == 0)
            try Self.write("profile = \"outer\"\n", to: outer + "/.loginkit", mode: 0o600)
            try body(outer, outer + "/shared")
        }
    }

    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        #expect(chmod(path, mode) == 0)
    }

    /// Another user's `.loginkit` in a shared directory (here: the test user's file, searched for
    /// another uid) chooses nothing and fails nothing; the search does not reach the file above.
    @Test func anotherUsersFileInASharedDirectoryIsSkippedAndTheSearchEndsThere() async throws {
        try await Self.withSharedDirectory { _, shared in
            try Self.write("profile = \"planted\"\n", to: shared + "/.loginkit", mode: 0o644)
            let other: UInt32 = geteuid() == 0 ? 4242 : geteuid() + 1
            #expect(try ContextFile.nearestProfile(from: shared, uid: other) == nil)
            // The same, unreadable to everybody.
            #expect(chmod(shared + "/.loginkit", 0) == 0)
            #expect(try ContextFile.nearestProfile(from: shared, uid: other) == nil)
            // The user's own file there is refused, with the chmod that makes the directory theirs.
            #expect(chmod(shared + "/.loginkit", 0o600) == 0)
            let refusal = #expect(throws: CLIFailure.self) { try ContextFile.nearestProfile(from: shared) }
            #expect(refusal?.exitCode == 2)
            #expect(refusal?.message.contains("chmod go-w \(shared)") == true, "\(refusal?.message ?? "")")
        }
    }

    /// A FIFO, a directory or a symbolic link named `.loginkit` in a shared directory is skipped,
    /// without blocking on the FIFO, and the search ends there.
    @Test func anEntryThatIsNoRegularFileInASharedDirectoryIsSkippedAndTheSearchEndsThere() async throws {
        try await Self.withSharedDirectory { outer, shared in
            let entry = shared + "/.loginkit"
            #expect(mkfifo(entry, 0o600) == 0)
            #expect(try ContextFile.nearestProfile(from: shared) == nil)
            try FileManager.default.removeItem(atPath: entry)
            try FileManager.default.createDirectory(atPath: entry, withIntermediateDirectories: false)
            #expect(try ContextFile.nearestProfile(from: shared) == nil)
            try FileManager.default.removeItem(atPath: entry)
            try FileManager.default.createSymbolicLink(atPath: entry, withDestinationPath: outer + "/.loginkit")
            #expect(try ContextFile.nearestProfile(from: shared) == nil)
        }
    }

    /// A shared directory with no `.loginkit` is passed: the file above it decides.
    @Test func aSharedDirectoryWithoutAFileIsPassed() async throws {
        try await Self.withSharedDirectory { outer, shared in
            let found = try ContextFile.nearestProfile(from: shared)
            #expect(found?.name == "outer")
            #expect(found?.path == outer + "/.loginkit")
        }
    }
}
#endif
