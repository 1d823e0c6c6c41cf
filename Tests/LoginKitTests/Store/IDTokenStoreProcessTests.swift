import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitJOSE
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
                let asides = try entriesBelow(directory, containing: ".corrupt-")
                #expect(asides.isEmpty)
                // The next save sweeps away any temp file the killed writer left.
                try await store.save(sampleProfile(0), as: "default")
                let temporaries = try entriesBelow(directory, containing: ".tmp")
                #expect(temporaries.isEmpty, "round \(round)")
                try FileManager.default.removeItem(atPath: path)
                try FileManager.default.removeItem(atPath: path + ".d")
            }
        }
    }

    /// Eight processes incrementing one counter, four through whole-store transactions and four
    /// through transactions on that profile: the two kinds exclude each other, so no update is lost.
    @Test func wholeStoreAndProfileTransactionsInEightProcessesLoseNoUpdate() async throws {
        let helper = try testHelperPath()
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let children = try (0..<8).map { index in
                try ChildProcess(helper, [index % 2 == 0 ? "increment" : "increment-profile", path, "default", "100"])
            }
            for child in children {
                #expect(await child.waitForExit() == 0)
            }
            let store = try IDTokenStore(path: path, sealing: .none)
            #expect(try await store.formatVersion() == 2)
            #expect(counter(of: try await store.profile(named: "default")) == 800)
        }
    }

    /// Processes on different profiles do not wait for each other; a whole-store transaction
    /// waits for every profile transaction under way. Helper 1 holds profile "a" (until the test
    /// sends it a line); helper 2 increments "b" and exits meanwhile — it would wait out the lock
    /// timeout and fail were "b" behind "a". A whole-store transaction started while "a" is held
    /// gets in only after helper 1's transaction committed: it sees "a" incremented.
    @Test func processesOnDifferentProfilesDoNotWait() async throws {
        let helper = try testHelperPath()
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(1), as: "a")
            try await store.save(sampleProfile(1), as: "b")

            let holder = try ChildProcess(helper, ["hold-profile", path, "a"], withInput: true)
            var holderLines = holder.lines.makeAsyncIterator()
            #expect(await holderLines.next() == "held")

            let other = try ChildProcess(helper, ["increment-profile", path, "b", "1"])
            #expect(await other.waitForExit() == 0, "a transaction on b while a is held")
            #expect(counter(of: try await store.profile(named: "b")) == 2)
            #expect(counter(of: try await store.profile(named: "a")) == 1, "a is still held")

            let events = LockedState<[String]>([])
            let waiting = TestGate()
            let whole = try ChildProcess(helper, ["hold-store", path])
            let watcher = Task {
                for await line in whole.lines {
                    events.withLock { $0.append("store: " + line) }
                    if line == "waiting" { waiting.note() }
                }
                waiting.note()  // a helper that ended without the line: the checks below say so
            }
            await waiting.arrived()
            events.withLock { $0.append("release a") }
            holder.send("go")
            #expect(await holder.waitForExit() == 0)
            events.withLock { $0.append("a exited") }
            #expect(await whole.waitForExit() == 0)
            await watcher.value

            let seen = events.withLock { $0 }
            let held = try #require(seen.firstIndex { $0.hasPrefix("store: held") }, "\(seen)")
            let released = try #require(seen.firstIndex(of: "release a"))
            #expect(released < held, "the whole-store transaction got in only after a was released: \(seen)")
            #expect(seen[held] == "store: held a=2,b=2", "it saw a's transaction committed: \(seen)")
            #expect(counter(of: try await IDTokenStore(path: path, sealing: .none).profile(named: "a")) == 2)
        }
    }

    /// The 50 profiles of a format 1 store, written at `path` (plain, or sealed with `key`); its bytes.
    private static func prepareFormatOneStore(at path: String, key: SymmetricKey? = nil) throws -> ([String: StoredProfile], Data) {
        let profiles = FormatOneStore.profiles()
        return (profiles, try FormatOneStore.write(profiles, to: path, key: key))
    }

    /// After a migration was killed: the store holds the format 1 file byte for byte (before the
    /// commit point) or format 2 (after it); every profile reads back equal either way; and the
    /// next save succeeds, ends in format 2 and leaves no temporary directory or file behind.
    private static func expectIntactAfterKill(
        path: String, original: Data, profiles: [String: StoredProfile], sealing: StoreSealing, committed: Bool?, _ comment: String
    ) async throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let store = try IDTokenStore(path: path, sealing: sealing)
        let unchanged = try Data(contentsOf: URL(fileURLWithPath: path)) == original
        if let committed {
            #expect(unchanged == !committed, "\(comment): the store's path is \(unchanged ? "the format 1 file" : "changed")")
        }
        #expect(try await store.formatVersion() == (unchanged ? 1 : 2), "\(comment)")
        try await expectProfiles(profiles, in: store, allowing: "migrated", comment)
        #expect(try entriesBelow(directory, containing: ".corrupt-").isEmpty, "\(comment)")

        try await store.save(sampleProfile(99), as: "after")
        #expect(try await store.formatVersion() == 2, "\(comment)")
        let fresh = try IDTokenStore(path: path, sealing: sealing)
        try await expectProfiles(profiles.merging(["after": sampleProfile(99)]) { $1 }, in: fresh, allowing: "migrated", comment)
        #expect(try entriesBelow(directory, containing: ".migrating-").isEmpty, "\(comment)")
        #expect(try entriesBelow(directory, containing: ".tmp").isEmpty, "\(comment)")
        #expect(try entriesBelow(directory, containing: ".corrupt-").isEmpty, "\(comment)")
    }

    /// A migration killed at each of its steps: before the marker is renamed over the store's path
    /// the format 1 file is untouched, after it the store is format 2; either way nothing is lost.
    @Test func aSIGKILLDuringMigrationLeavesTheOldOrTheNewStore() async throws {
        let helper = try testHelperPath()
        let steps = ["directory-created", "profile-written-1", "profile-written-25", "directory-renamed", "marker-written", "marker-renamed"]
        try await withTemporaryDirectory { root in
            for step in steps {
                let path = root + "/\(step)/tokens.json"
                let (profiles, original) = try Self.prepareFormatOneStore(at: path)
                let child = try ChildProcess(helper, ["migrate", path, step], withInput: true)
                var lines = child.lines.makeAsyncIterator()
                let line = await lines.next()
                #expect(line == "at \(step)", "the helper reached the step")
                child.kill()  // blocked at the step: it ends there
                #expect(await child.waitForExit() == 128 + SIGKILL, "\(step)")
                guard line == "at \(step)" else { continue }
                try await Self.expectIntactAfterKill(
                    path: path, original: original, profiles: profiles, sealing: .none, committed: step == "marker-renamed", step)
            }
        }
    }

    /// The same at random moments: a helper migrating without a pause, killed after a random number
    /// of steps (`LOGINKIT_CRASH_KILLS` rounds, 10 by default), every other round a sealed store.
    @Test func aRandomSIGKILLDuringMigration() async throws {
        let helper = try testHelperPath()
        let rounds = Int(ProcessInfo.processInfo.environment["LOGINKIT_CRASH_KILLS"] ?? "") ?? 10
        try await withTemporaryDirectory { root in
            var generator = SystemRandomNumberGenerator()
            for round in 0..<rounds {
                let path = root + "/round-\(round)/tokens.json"
                let key: SymmetricKey? = try (round % 2 == 1 ? SymmetricKey.random() : nil)
                let (profiles, original) = try Self.prepareFormatOneStore(at: path, key: key)
                // 1 directory, 50 profiles, the directory renamed, the marker written and renamed.
                let target = Int.random(in: 1...54, using: &generator)
                let environment = ["LOGINKIT_STORE_KEY": key.map { Data($0.bytes).base64EncodedString() } ?? ""]
                let child = try ChildProcess(helper, ["migrate-loop", path], environment: environment)
                var lines = child.lines.makeAsyncIterator()
                var seen: [String] = []
                while seen.count < target, let line = await lines.next() { seen.append(line) }
                child.kill()  // lands somewhere after the step last seen
                _ = await child.waitForExit()
                let comment = "round \(round), killed after \(seen.last ?? "nothing")"
                #expect(seen.count == target, "\(comment): the helper ended before")
                let sealing: StoreSealing = key.map { .key($0) } ?? .none
                // Past the commit point the store is format 2; before it, either (the helper went on).
                try await Self.expectIntactAfterKill(
                    path: path, original: original, profiles: profiles, sealing: sealing, committed: seen.contains("marker-renamed") ? true : nil, comment)
            }
        }
    }
}
