// The file store's measurements of loginkit-bench: a durable save against its C floor, the cached
// token, the cost of one profile's token call, save and login as the store grows to 10,000
// profiles, and processes refreshing different profiles at the same time.
//
//   store-scale <directory> <profiles> <operations>
//   store-procs <directory> <processes> <refreshes> <network-ms>
//   store-proc-child <store path> <profile> <refreshes> <network-ms>   (started by store-procs)
import BenchCore
import CBench
import Foundation
import LoginKit

// MARK: Profiles

/// Where every bench profile says it came from; `BenchAPI` reports the same source.
let benchSource = CredentialSource(kind: .oauth2, endpoint: "https://issuer.bench", clientID: "loginkit-cli")

/// How long the scaling stores' tokens stay valid: far beyond a bench run, so that no token call
/// (the CLI's included) refreshes.
let scalingValidity: TimeInterval = 7 * 86_400

func sampleProfile(_ counter: Int, validFor seconds: TimeInterval = 3600) -> StoredProfile {
    StoredProfile(
        credentials: Credentials(
            idToken: IDToken(rawValue: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln-\(counter)"), accessToken: "access-\(counter)",
            refreshToken: "refresh-\(counter)", expiresAt: Date().addingTimeInterval(seconds), idTokenExpiresAt: Date().addingTimeInterval(seconds)),
        source: benchSource,
        userID: "248289761001", updatedAt: Date())
}

/// The name of a scaling store's profile `index`: `p-00000`, `p-00001`, …
func scalingProfileName(_ index: Int) -> String {
    let digits = String(index)
    return "p-" + String(repeating: "0", count: max(0, 5 - digits.count)) + digits
}

// MARK: Save, cached token

func benchSave(directory: String, operations: Int) async throws {
    let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
    try await store.save(sampleProfile(0), as: "default")
    // The C floor writes what one save writes: the profile's own file in the directory layout
    // (`<path>.d/p-<name>.json`), the whole store file in the single-file one.
    let profileFile = directory + "/tokens.json.d/p-default.json"
    let written = FileManager.default.fileExists(atPath: profileFile) ? profileFile : directory + "/tokens.json"
    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: written)))
    let foundationURL = URL(fileURLWithPath: directory + "/foundation.json")
    let clock = ContinuousClock()
    var kit: [Double] = [], floor: [Double] = [], foundation: [Double] = []
    for round in 1...operations {
        kit.append(seconds(try await clock.measure { try await store.save(sampleProfile(round), as: "default") }))
        floor.append(seconds(clock.measure { _ = cbench_durable_write(bytes, bytes.count, directory) }))
        foundation.append(seconds(try clock.measure { try Data(bytes).write(to: foundationURL, options: .atomic) }))
    }
    emit(["loginkit_us": percentile(kit, 0.5) * 1e6, "c_us": percentile(floor, 0.5) * 1e6, "foundation_atomic_us": percentile(foundation, 0.5) * 1e6, "bytes": Double(bytes.count)])
}

actor Bare {
    let value = "token"
    func get() -> String { value }
}

/// An API that is never called: the cached path must not reach it.
struct UnusedAPI: AuthAPI {
    var source: CredentialSource { CredentialSource(kind: .oauth2, endpoint: "https://issuer.bench") }
    func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw BenchError("unexpected login") }
    func refresh(_ credentials: Credentials) async throws -> Credentials { throw BenchError("unexpected refresh") }
    func revoke(_ credentials: Credentials) async throws -> Bool { true }
}

/// An API whose login answers at once with `credentials`; it never refreshes.
struct BenchAPI: AuthAPI {
    let credentials: Credentials
    var source: CredentialSource { benchSource }
    func logIn(for id: User.ID, with password: String) async throws -> Credentials { credentials }
    func refresh(_ credentials: Credentials) async throws -> Credentials { throw BenchError("unexpected refresh") }
    func revoke(_ credentials: Credentials) async throws -> Bool { true }
}

/// ns per cached `validIDToken()` of `service`: `calls` calls after one to warm, the median of three.
func cachedTokenNanoseconds(_ service: AuthService, calls: Int) async throws -> Double {
    let clock = ContinuousClock()
    var batches: [Double] = []
    _ = try await service.validIDToken()  // warm
    for _ in 0..<3 {
        let elapsed = try await clock.measure { for _ in 0..<calls { _ = try await service.validIDToken() } }
        batches.append(seconds(elapsed) / Double(calls) * 1e9)
    }
    return percentile(batches, 0.5)
}

func benchCached(directory: String, calls: Int) async throws {
    let fileStore = try IDTokenStore(path: directory + "/cached.json", sealing: .none)
    try await fileStore.save(sampleProfile(1, validFor: 86_400), as: "default")
    let memoryStore = InMemoryTokenStore(profiles: ["default": sampleProfile(1, validFor: 86_400)])
    let fileService = AuthService(api: UnusedAPI(), store: fileStore)
    let memoryService = AuthService(api: UnusedAPI(), store: memoryStore)
    let bare = Bare()
    let clock = ContinuousClock()
    func perCall(_ body: () async throws -> Void) async throws -> Double {
        try await body()  // warm
        let elapsed = try await clock.measure { for _ in 0..<calls { try await body() } }
        return seconds(elapsed) / Double(calls) * 1e9
    }
    var file: [Double] = [], memory: [Double] = [], actor: [Double] = []
    for _ in 0..<3 {
        file.append(try await perCall { _ = try await fileService.validIDToken() })
        memory.append(try await perCall { _ = try await memoryService.validIDToken() })
        actor.append(try await perCall { _ = await bare.get() })
    }
    emit(["file_store_ns": percentile(file, 0.5), "memory_store_ns": percentile(memory, 0.5), "bare_actor_ns": percentile(actor, 0.5)])
}

/// A store holding a profile valid for an hour, whose issuer is not running: `loginkit token`
/// must answer from the store alone.
func prepareCLI(path: String) async throws {
    let store = try IDTokenStore(path: path, sealing: .none)
    try await store.save(sampleProfile(1), as: "default")
}

// MARK: Many profiles

/// A store file in format version 1 (docs/storage.md), the single file every profile lived in:
/// `{"format": "loginkit.tokens", "version": 1, "profiles": {…}}`, dates as seconds since 1970.
struct VersionOneStoreFile: Encodable {
    var format = "loginkit.tokens"
    var version = 1
    var profiles: [String: StoredProfile]
}

/// Writes `<path>` as a version-1 store file holding profiles `p-00000` … `p-<count - 1>`, each
/// with a token valid for `scalingValidity` (0600, as the store requires).
func writeVersionOneStore(path: String, profiles count: Int) throws {
    var profiles: [String: StoredProfile] = [:]
    profiles.reserveCapacity(count)
    for index in 0..<count {
        profiles[scalingProfileName(index)] = sampleProfile(index, validFor: scalingValidity)
    }
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .secondsSince1970
    var contents = try encoder.encode(VersionOneStoreFile(profiles: profiles))
    contents.append(UInt8(ascii: "\n"))
    guard FileManager.default.createFile(atPath: path, contents: contents, attributes: [.posixPermissions: 0o600]) else {
        throw BenchError("could not write \(path)")
    }
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
}

/// `store-scale`: the cost of one profile's work in a store of `count` profiles at
/// `<directory>/tokens.json`. A store that is not there yet is written as a version-1 single file
/// and migrated by its first save, timed (`migration_ms`); an existing one is reused, so that a
/// run prepares each size once. Then, each over `operations` random profiles (after one to warm):
/// `token_cold_us`, a new `IDTokenStore` and one profile read, as a process start does;
/// `save_us`, a save through a warm store; `login_us`, a login through a new `AuthService` on that
/// store whose API answers at once; and `cached_ns`, a cached `validIDToken()`.
func benchStoreScale(directory: String, profiles count: Int, operations: Int) async throws {
    guard count >= 1, operations >= 1 else { throw BenchError("store-scale: at least one profile and one operation") }
    let path = directory + "/tokens.json"
    let clock = ContinuousClock()
    var results: [String: Double] = ["profiles": Double(count), "operations": Double(operations)]
    func randomName() -> String { scalingProfileName(Int.random(in: 0..<count)) }
    if !FileManager.default.fileExists(atPath: path) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try writeVersionOneStore(path: path, profiles: count)
        let store = try IDTokenStore(path: path, sealing: .none)
        let name = randomName()
        let profile = sampleProfile(count, validFor: scalingValidity)
        results["migration_ms"] = seconds(try await clock.measure { try await store.save(profile, as: name) }) * 1e3
    }

    var cold: [Double] = []
    for _ in 0...operations {
        let name = randomName()
        let elapsed = try await clock.measure {
            let store = try IDTokenStore(path: path, sealing: .none)
            guard try await store.profile(named: name) != nil else { throw BenchError("the store at \(path) has no profile \(name)") }
        }
        cold.append(seconds(elapsed))
    }
    cold.removeFirst()

    // A save and a login on one profile (the same one each time, as at one profile: what the
    // store's size costs), and on random ones (what a working set of cold files adds besides).
    let store = try IDTokenStore(path: path, sealing: .none)
    let one = scalingProfileName(count / 2)
    func measureSaves(_ name: () -> String) async throws -> [Double] {
        var times: [Double] = []
        for round in 0...operations {
            let profile = sampleProfile(round, validFor: scalingValidity)
            let name = name()
            times.append(seconds(try await clock.measure { try await store.save(profile, as: name) }))
        }
        return Array(times.dropFirst())
    }
    func measureLogins(_ name: () -> String) async throws -> [Double] {
        var times: [Double] = []
        for round in 0...operations {
            let service = AuthService(api: BenchAPI(credentials: sampleProfile(round, validFor: scalingValidity).credentials), store: store, profile: name())
            times.append(seconds(try await clock.measure { _ = try await service.logIn(for: User.ID(rawValue: "bench"), with: "bench") }))
            await service.shutdown()
        }
        return Array(times.dropFirst())
    }
    let saves = try await measureSaves { one }
    let logins = try await measureLogins { one }
    let randomSaves = try await measureSaves(randomName)
    let randomLogins = try await measureLogins(randomName)
    results["save_random_us"] = percentile(randomSaves, 0.5) * 1e6
    results["login_random_us"] = percentile(randomLogins, 0.5) * 1e6

    let cachedService = AuthService(api: BenchAPI(credentials: sampleProfile(0, validFor: scalingValidity).credentials), store: store, profile: randomName())
    results["cached_ns"] = try await cachedTokenNanoseconds(cachedService, calls: max(10_000, operations * 500))
    await cachedService.shutdown()

    results["token_cold_us"] = percentile(cold, 0.5) * 1e6
    results["save_us"] = percentile(saves, 0.5) * 1e6
    results["login_us"] = percentile(logins, 0.5) * 1e6
    results["token_cold_p90_us"] = percentile(cold, 0.9) * 1e6
    results["save_p90_us"] = percentile(saves, 0.9) * 1e6
    results["login_p90_us"] = percentile(logins, 0.9) * 1e6
    emit(results)
}

// MARK: Processes on different profiles

/// A `store-proc-child` of this executable, spoken to line by line through its standard input and
/// output (its standard error is this process's).
final class StoreChild {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var received = Data()

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// The child's next line, without its newline.
    ///
    /// - Throws: `BenchError` when the child closed its output first.
    func readLine() throws -> String {
        while true {
            if let newline = received.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: received[received.startIndex..<newline], as: UTF8.self)
                received = Data(received[received.index(after: newline)...])
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchError("a store-proc-child ended before it answered") }
            received.append(chunk)
        }
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Waits for the child to exit.
    ///
    /// - Throws: `BenchError` when it failed.
    func finish() throws {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("a store-proc-child failed (exit \(process.terminationStatus))") }
    }

    /// Ends the child if it still runs (after a failure elsewhere).
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// `store-procs`: `processes` children of this executable, each refreshing its own profile of the
/// store at `<directory>/tokens.json` `refreshes` times — under the profile's exclusive access, a
/// read, `networkMilliseconds` of simulated round trip to the provider, a write — all started at
/// once. `wall_ms` is the first start to the last end over all children (`CLOCK_MONOTONIC`). The
/// store is made with 16 profiles (or one per child, if more) when it is not there yet.
/// `executable` is this executable's path as it was started (`argv[0]`).
func benchStoreProcesses(executable: String, directory: String, processes: Int, refreshes: Int, networkMilliseconds: Int) async throws {
    guard processes >= 1, refreshes >= 1, networkMilliseconds >= 0 else { throw BenchError("store-procs: at least one process and one refresh") }
    let path = directory + "/tokens.json"
    let names = (0..<max(processes, 16)).map(scalingProfileName)
    if !FileManager.default.fileExists(atPath: path) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = try IDTokenStore(path: path, sealing: .none)
        for (index, name) in names.enumerated() { try await store.save(sampleProfile(index, validFor: scalingValidity), as: name) }
    }
    guard !executable.isEmpty else { throw BenchError("store-procs: no path to this executable") }
    let absolute = executable.hasPrefix("/") ? executable : FileManager.default.currentDirectoryPath + "/" + executable
    var children: [StoreChild] = []
    do {
        for index in 0..<processes {
            children.append(
                try StoreChild(executable: absolute, arguments: ["store-proc-child", path, names[index], String(refreshes), String(networkMilliseconds)]))
        }
        for child in children {
            let line = try child.readLine()
            guard line == "ready" else { throw BenchError("a store-proc-child said \(line.debugDescription), not ready") }
        }
        for child in children { child.send("go") }
        var starts: [UInt64] = [], ends: [UInt64] = []
        for child in children {
            let fields = try child.readLine().split(separator: " ")
            guard fields.count == 3, fields[0] == "done", let start = UInt64(fields[1]), let end = UInt64(fields[2]), end >= start else {
                throw BenchError("a store-proc-child's result is unreadable")
            }
            starts.append(start)
            ends.append(end)
            try child.finish()
        }
        guard let first = starts.min(), let last = ends.max() else { throw BenchError("store-procs: no results") }
        let wall = Double(last - first) / 1e6
        emit([
            "processes": Double(processes), "refreshes": Double(refreshes), "network_ms": Double(networkMilliseconds),
            "wall_ms": wall, "ms_per_refresh": wall / Double(refreshes),
        ])
    } catch {
        for child in children { child.stop() }
        throw error
    }
}

/// `store-proc-child`: opens the store, reads its profile, prints `ready`, waits for a line `go`,
/// then refreshes its profile `refreshes` times (see `benchStoreProcesses`) and prints
/// `done <start ns> <end ns>` (`CLOCK_MONOTONIC`).
func storeProcessChild(path: String, profile name: String, refreshes: Int, networkMilliseconds: Int) async throws {
    let store = try IDTokenStore(path: path, sealing: .none)
    guard try await store.profile(named: name) != nil else { throw BenchError("the store at \(path) has no profile \(name)") }
    writeLine("ready")
    guard let line = readLine(), line == "go" else { throw BenchError("store-proc-child: expected go") }
    let start = cbench_monotonic_ns()
    for round in 0..<refreshes {
        try await store.withExclusiveAccess(to: name) { transaction in
            guard var profile = transaction[name] else { throw BenchError("the store's profile \(name) is gone") }
            if networkMilliseconds > 0 { try await Task.sleep(for: .milliseconds(networkMilliseconds)) }
            profile.credentials = sampleProfile(round, validFor: scalingValidity).credentials
            profile.updatedAt = Date()
            transaction[name] = profile
        }
    }
    let end = cbench_monotonic_ns()
    writeLine("done \(start) \(end)")
}

/// Writes `line` and a newline to standard output at once (unbuffered: the parent waits for it).
func writeLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
