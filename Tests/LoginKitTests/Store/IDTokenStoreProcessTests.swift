import Foundation
import LoginKit
import LoginKitTestSupport
import Testing

/// Other processes: the lock across processes, and crash safety under SIGKILL.
@Suite(.timeLimit(.minutes(5)))
struct IDTokenStoreProcessTests {
    @Test func eightProcessesIncrementWithoutLosingAnUpdate() async throws {
        let helper = try testHelperPath()
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let children = try (0..<8).map { _ in try ChildProcess(helper, ["increment", path, "default", "200"]) }
            for child in children {
                #expect(await child.waitForExit() == 0)
            }
            let store = try IDTokenStore(path: path, sealing: .none)
            #expect(counter(of: try await store.profile(named: "default")) == 1600)
        }
    }

    @Test func aSIGKILLedWriterNeverLeavesATornFile() async throws {
        let helper = try testHelperPath()
        let kills = Int(ProcessInfo.processInfo.environment["LOGINKIT_CRASH_KILLS"] ?? "") ?? 20
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            var generator = SystemRandomNumberGenerator()
            for round in 0..<kills {
                let progress = directory + "/progress-\(round)"
                let child = try ChildProcess(helper, ["save-loop", path, "default", progress])
                let target = Int.random(in: 1...30, using: &generator)
                var lines = child.lines.makeAsyncIterator()
                var lastReported = 0
                while lastReported < target, let line = await lines.next() {
                    lastReported = Int(line) ?? lastReported
                }
                child.kill()  // lands somewhere inside a save
                _ = await child.waitForExit()
                // Every save the child completed, including those after the line we stopped at.
                let completed = (try? String(contentsOfFile: progress, encoding: .utf8)) ?? ""
                lastReported = completed.split(separator: "\n").last.flatMap { Int($0) } ?? lastReported

                let store = try IDTokenStore(path: path, sealing: .none)
                let saved = try #require(counter(of: try await store.profile(named: "default")), "round \(round)")
                // The file holds the last completed save, or the one in flight if its rename landed.
                #expect(saved == lastReported || saved == lastReported + 1, "round \(round): \(saved) after \(lastReported)")
                let asides = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".corrupt-") }
                #expect(asides.isEmpty)
                // The next save sweeps away any temp file the killed writer left.
                try await store.save(sampleProfile(0), as: "default")
                let temporaries = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp-") }
                #expect(temporaries.isEmpty, "round \(round)")
                try FileManager.default.removeItem(atPath: path)
            }
        }
    }
}
