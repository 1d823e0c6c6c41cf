// The fleet store (PostgresTokenStore) under load, against a PostgreSQL cluster of the bench's own
// (Benchmarks/fleet.py starts it as `make test` does). Each command prints one JSON line.
//
//   fleet-queries <postgres-url> <issuer|->      statements per cached token call (a listening store),
//                                                per refresh, and per idle host-minute (heartbeats);
//                                                the provider is the dev server at <issuer>, or `-`:
//                                                one in this process
//   fleet-propagation <postgres-url> <hosts> <changes>
//                                                one writer and <hosts> listening stores, each on
//                                                connections of its own: from a save's start until
//                                                each store has the change's notification (p50_ms,
//                                                p99_ms) and until its AuthService serves the new
//                                                token (served_p50_ms, served_p99_ms)
//   fleet-sim <postgres-url> <hosts> <profiles> <seconds> [calls-per-second]
//                                                <hosts> stores (each its own client, at most 4
//                                                connections, as a host has) sharing <profiles>
//                                                profiles whose tokens live 60 s; token calls at a
//                                                fixed rate on random (host, profile), AuthServices
//                                                made at first use; the server's CPU, connections
//                                                per host, statements per call, latency, RSS
//
// Every host connects as a role of its own (`loginkit_fleet_bench`, made by the URL's user, a
// superuser), so that the server's counts are the hosts' alone: pg_stat_statements when the
// cluster loads it, else pg_stat_database's transactions (the output's `counter` says which).
import BenchCore
import Foundation
import Logging
import LoginKit
@_spi(Benchmarks) import LoginKitPostgres
import PostgresNIO
import Synchronization

/// Runs one of the fleet commands (`arguments`: the command and its values, or the process's
/// arguments with the executable first); `false` when the command is none of them.
func runFleetCommand(_ arguments: [String]) async throws -> Bool {
    let words = arguments.first.map { Fleet.commands.contains($0) } == true ? arguments : Array(arguments.dropFirst())
    guard let command = words.first, Fleet.commands.contains(command) else { return false }
    let values = Array(words.dropFirst())
    switch (command, values.count) {
    case ("fleet-queries", 2):
        try await Fleet.queries(url: values[0], issuer: values[1] == "-" ? nil : values[1])
    case ("fleet-propagation", 3):
        guard let hosts = Int(values[1]), let changes = Int(values[2]), hosts > 0, changes > 0 else {
            throw BenchError("fleet-propagation: hosts and changes are positive numbers")
        }
        try await Fleet.propagation(url: values[0], hosts: hosts, changes: changes)
    case ("fleet-sim", 4), ("fleet-sim", 5):
        guard let hosts = Int(values[1]), let profiles = Int(values[2]), let duration = Int(values[3]), hosts > 0, profiles > 0, duration > 1 else {
            throw BenchError("fleet-sim: hosts, profiles and seconds are positive numbers (seconds at least 2)")
        }
        let rate = values.count == 5 ? Int(values[4]) ?? 0 : 10_000
        guard rate > 0 else { throw BenchError("fleet-sim: calls-per-second is a positive number") }
        try await Fleet.simulation(url: values[0], hosts: hosts, profiles: profiles, duration: duration, rate: rate)
    default:
        throw BenchError(
            "usage: fleet-queries <postgres-url> <issuer|->; fleet-propagation <postgres-url> <hosts> <changes>; fleet-sim <postgres-url> <hosts> <profiles> <seconds> [calls-per-second]")
    }
    return true
}

enum Fleet {
    static let commands: Set<String> = ["fleet-queries", "fleet-propagation", "fleet-sim"]
    /// The role every simulated host connects as, and the schema of its table.
    static let role = "loginkit_fleet_bench"
    static let schema = "loginkit_fleet_bench"
    static let table = "loginkit_fleet_bench.loginkit_profiles"
    static let namespace = "fleet"
    /// Where the in-process provider's credentials come from (``FleetProvider``).
    static let source = CredentialSource(kind: .oauth2, endpoint: "https://issuer.fleet.bench", clientID: "loginkit-fleet-bench")
    static let logger = Logger(label: "loginkit.bench.fleet", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The simulation's token lifetime: AuthService refreshes from half of it before expiry.
    static let simulatedLifetime: TimeInterval = 60

    /// A profile whose access token is `token`, issued at `issuedAt`, valid for `lifetime`.
    static func profile(_ token: String, issuedAt: Date = Date(), lifetime: TimeInterval = 3600) -> StoredProfile {
        StoredProfile(
            credentials: Credentials(
                accessToken: token, refreshToken: "refresh-\(token)", tokenType: "Bearer",
                expiresAt: issuedAt.addingTimeInterval(lifetime), issuedAt: issuedAt),
            source: source, userID: "fleet", updatedAt: issuedAt)
    }

    // MARK: The server

    /// Runs `body` with a client of the URL's (superuser) role, after making the hosts' role and a
    /// fresh schema for their table, and with the counter the server offers.
    static func withAdmin<T>(
        _ url: String, isolation: isolated (any Actor)? = #isolation, _ body: (PostgresClient, FleetCounter) async throws -> T
    ) async throws -> T {
        var configuration = try PostgresTokenStore.connection(url: url)
        configuration.options.maximumConnections = 2
        configuration.options.additionalStartupParameters.append(("application_name", "fleet-bench-admin"))
        let admin = PostgresClient(configuration: configuration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self, isolation: isolation) { group in
            group.addTask { await admin.run() }
            defer { group.cancelAll() }
            let counter = try await prepare(admin)
            return try await body(admin, counter)
        }
    }

    /// The hosts' role (made once), their schema (made anew: every command starts from an empty
    /// table), and pg_stat_statements when the server loads it.
    static func prepare(_ admin: PostgresClient) async throws -> FleetCounter {
        try await admin.query(PostgresQuery(unsafeSQL: """
            DO $$BEGIN
                IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '\(role)') THEN CREATE ROLE \(role) LOGIN; END IF;
            END$$
            """))
        try await admin.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"))
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema) AUTHORIZATION \(role)"))
        do {
            try await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            _ = try await count(admin, .statements)  // fails unless the server preloads it
            return .statements
        } catch {
            return .transactions
        }
    }

    /// What the server has counted so far: the statements the hosts' role ran, or every transaction
    /// of the database.
    static func count(_ admin: PostgresClient, _ counter: FleetCounter) async throws -> Int64 {
        let query: PostgresQuery
        switch counter {
        case .statements:
            query = "SELECT coalesce(sum(calls), 0)::int8 FROM public.pg_stat_statements WHERE userid = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname::text = \(role))"
        case .transactions:
            query = "SELECT (xact_commit + xact_rollback)::int8 FROM pg_catalog.pg_stat_database WHERE datname = pg_catalog.current_database()"
        }
        var value: Int64 = 0
        for try await total in try await admin.query(query).decode(Int64.self) { value = total }
        return value
    }

    /// Waits until the server's counts include what was asked of it before: pg_stat_statements
    /// records a statement as it ends; a backend reports its transactions at most once a second,
    /// and an idle one within 10 s.
    static func settle(_ counter: FleetCounter) async throws {
        try await Task.sleep(for: counter == .statements ? Duration.milliseconds(150) : Duration.seconds(11))
    }

    /// The postmaster's process ID: the first line of postmaster.pid in the data directory, or the
    /// parent of this connection's backend.
    static func postmaster(_ admin: PostgresClient) async throws -> Int32? {
        var directory: String?
        for try await value in try await admin.query("SELECT pg_catalog.current_setting('data_directory')").decode(String.self) { directory = value }
        if let directory, let text = FleetProc.contents(of: directory + "/postmaster.pid"), let line = text.split(separator: "\n").first,
            let pid = Int32(line.trimmingCharacters(in: .whitespaces))
        {
            return pid
        }
        var backend: Int32?
        for try await value in try await admin.query("SELECT pg_catalog.pg_backend_pid()").decode(Int32.self) { backend = value }
        return backend.flatMap { FleetProc.stat($0)?.parent }
    }

    /// A table for the hosts: made once by a store of their role.
    static func migrate(url: String) async throws {
        let migrator = try FleetHost(url: url, name: "fleet-migrate", listens: false)
        try await withRunning([migrator]) { try await migrator.store.migrate() }
    }

    /// Runs `body` while every one of `hosts` runs (its client, and its listener when it listens).
    static func withRunning<T>(_ hosts: [FleetHost], isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self, isolation: isolation) { group in
            for host in hosts { group.addTask { await host.run() } }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    /// Returns once every listening host of `hosts` listens.
    static func awaitListening(_ hosts: [FleetHost]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for host in hosts where host.listens {
                group.addTask { try await host.store.benchmarkAwaitChange(after: nil, timeout: .seconds(60)) }
            }
            try await group.waitForAll()
        }
    }

    /// The profile `name` made expired, as if its token had run out.
    static func expire(_ store: PostgresTokenStore, _ name: String) async throws {
        try await store.withExclusiveAccess(to: name) { transaction in
            guard var profile = transaction[name] else { throw BenchError("the profile \(name) is gone") }
            profile.credentials.expiresAt = Date().addingTimeInterval(-5)
            profile.credentials.idTokenExpiresAt = Date().addingTimeInterval(-5)
            profile.updatedAt = Date().addingTimeInterval(-3605)
            transaction[name] = profile
        }
    }

    static func printJSON(_ fields: [String: FleetValue]) {
        FileHandle.standardOutput.write(Data((FleetValue.object(fields).json + "\n").utf8))
    }

    // MARK: fleet-queries

    static func queries(url: String, issuer: String?) async throws {
        try await withAdmin(url) { admin, counter in
            try await migrate(url: url)
            // No heartbeat while token calls are counted: the idle host is measured on its own below.
            let host = try FleetHost(url: url, name: "fleet-queries", listens: true, heartbeat: .seconds(3600))
            var results = try await withRunning([host]) { () async throws -> [String: FleetValue] in
                try await host.store.benchmarkAwaitChange(after: nil, timeout: .seconds(60))
                if let issuer {
                    return try await CurlHTTPClient.withClient { http in
                        let api = OAuth2API(configuration: .init(issuer: issuer, clientID: "loginkit-cli"), transport: http)
                        let service = AuthService(api: api, store: host.store)
                        _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                        return try await tokenCalls(service, store: host.store, admin: admin, counter: counter)
                    }
                }
                try await host.store.save(profile("access-0"), as: "default")
                let service = AuthService(api: FleetProvider(lifetime: 3600), store: host.store)
                return try await tokenCalls(service, store: host.store, admin: admin, counter: counter)
            }
            results["provider"] = .text(issuer == nil ? "in-process" : "dev server")
            results["counter"] = .text(counter.description)
            for (key, value) in try await idleHost(url: url, admin: admin, counter: counter) { results[key] = value }
            printJSON(results)
        }
    }

    /// Statements per cached token call and per refresh, for `service` on a listening `store`.
    static func tokenCalls(_ service: AuthService, store: PostgresTokenStore, admin: PostgresClient, counter: FleetCounter) async throws -> [String: FleetValue] {
        let clock = ContinuousClock()
        // The login's own notification has come; the service and the store's memory hold the profile.
        try await Task.sleep(for: .milliseconds(300))
        for _ in 0..<3 { _ = try await service.validAccessToken() }
        try await settle(counter)
        let calls = 100_000
        let before = try await count(admin, counter)
        let started = clock.now
        for _ in 0..<calls { _ = try await service.validAccessToken() }
        let elapsed = clock.now - started
        try await settle(counter)
        let after = try await count(admin, counter)

        var inCall: [Double] = [], afterCall: [Double] = [], total: [Double] = [], refreshTimes: [Double] = []
        for _ in 0..<3 {
            let old = try await service.validAccessToken()
            try await expire(store, service.profileName)
            try await Task.sleep(for: .milliseconds(300))  // its notification has come
            try await settle(counter)
            let c0 = try await count(admin, counter)
            let begin = clock.now
            let new = try await service.validAccessToken()  // reads the expired profile, refreshes under the lock
            refreshTimes.append(seconds(clock.now - begin))
            guard new != old else { throw BenchError("fleet-queries: the expired token was not refreshed") }
            try await settle(counter)
            let c1 = try await count(admin, counter)
            // The refresh's own notification drops the store's memory of the row: one read more,
            // then calls are served from memory again.
            try await Task.sleep(for: .milliseconds(300))
            for _ in 0..<3 { _ = try await service.validAccessToken() }
            try await settle(counter)
            let c2 = try await count(admin, counter)
            inCall.append(Double(c1 - c0))
            afterCall.append(Double(c2 - c1))
            total.append(Double(c2 - c0))
        }
        return [
            "queries_per_cached_token": .number(Double(after - before) / Double(calls)),
            "cached_token_calls": .number(Double(calls)),
            "cached_token_ns": .number(seconds(elapsed) / Double(calls) * 1e9),
            "queries_per_refresh": .number(percentile(total, 0.5)),
            "queries_in_refresh_call": .number(percentile(inCall, 0.5)),
            "queries_after_refresh": .number(percentile(afterCall, 0.5)),
            "refresh_ms": .number(percentile(refreshTimes, 0.5) * 1e3),
        ]
    }

    /// Statements of a listening host that nobody asks for a token: its heartbeats. Measured with a
    /// 1 s heartbeat over 5 of them, and given per minute at the default heartbeat.
    static func idleHost(url: String, admin: PostgresClient, counter: FleetCounter) async throws -> [String: FleetValue] {
        let clock = ContinuousClock()
        let interval = Duration.seconds(1)
        let idle = try FleetHost(url: url, name: "fleet-idle", listens: true, heartbeat: interval)
        let perHeartbeat = try await withRunning([idle]) { () async throws -> Double in
            try await idle.store.benchmarkAwaitChange(after: nil, timeout: .seconds(60))
            let listening = clock.now
            // Half-way between two heartbeats, so that the window holds exactly five of them.
            try await clock.sleep(until: listening + interval / 2)
            let c0 = try await count(admin, counter)
            let from = clock.now
            try await clock.sleep(until: from + interval * 5)
            let c1 = try await count(admin, counter)
            let heartbeats = seconds(clock.now - from) / seconds(interval)
            return Double(c1 - c0) / heartbeats.rounded()
        }
        let defaultHeartbeat = seconds(PostgresTokenStore.Configuration().listenerHeartbeat)
        return [
            "queries_per_heartbeat": .number(perHeartbeat),
            "heartbeat_s": .number(defaultHeartbeat),
            "queries_per_host_minute_idle": .number(perHeartbeat * 60 / defaultHeartbeat),
        ]
    }

    // MARK: fleet-propagation

    static func propagation(url: String, hosts count: Int, changes: Int) async throws {
        try await withAdmin(url) { _, _ in
            try await migrate(url: url)
            let name = "fleet"
            let writer = try FleetHost(url: url, name: "fleet-writer", listens: false)
            let listeners = try (0..<count).map { try FleetHost(url: url, name: "fleet-host-\($0)", listens: true) }
            let provider = FleetProvider(lifetime: 3600)
            let services = listeners.map { AuthService(api: provider, store: $0.store, profile: name) }
            let clock = ContinuousClock()
            var notified: [Double] = [], served: [Double] = [], saves: [Double] = []
            try await withRunning([writer] + listeners) {
                try await writer.store.save(profile("access-0"), as: name)
                try await awaitListening(listeners)
                // Every service reads the profile once; then both it and its store hold it.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for service in services {
                        group.addTask {
                            guard try await service.validAccessToken() == "access-0" else { throw BenchError("fleet-propagation: a host read another token") }
                        }
                    }
                    try await group.waitForAll()
                }
                try await Task.sleep(for: .milliseconds(200))
                for round in 1...changes {
                    let expected = "access-\(round)"
                    let generations = listeners.map(\.store.benchmarkChangeGeneration)
                    var start = clock.now
                    var saved = clock.now
                    let arrivals = try await withThrowingTaskGroup(of: (ContinuousClock.Instant, ContinuousClock.Instant).self) { group in
                        for (index, host) in listeners.enumerated() {
                            let service = services[index]
                            let generation = generations[index]
                            group.addTask {
                                try await host.store.benchmarkAwaitChange(after: generation, timeout: .seconds(60))
                                let arrived = clock.now
                                // The generation also moves when the listener reconnects: then the
                                // change is still to come.
                                while try await service.validAccessToken() != expected {
                                    try await host.store.benchmarkAwaitChange(after: host.store.benchmarkChangeGeneration, timeout: .seconds(60))
                                }
                                return (arrived, clock.now)
                            }
                        }
                        // The waiters have looked at their stores before the save starts.
                        try await Task.sleep(for: .milliseconds(50))
                        start = clock.now
                        try await writer.store.save(profile(expected), as: name)
                        saved = clock.now
                        var all: [(ContinuousClock.Instant, ContinuousClock.Instant)] = []
                        for try await arrival in group { all.append(arrival) }
                        return all
                    }
                    saves.append(seconds(saved - start))
                    for (arrived, done) in arrivals {
                        notified.append(seconds(arrived - start))
                        served.append(seconds(done - start))
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            printJSON([
                "hosts": .number(Double(count)),
                "changes": .number(Double(changes)),
                "samples": .number(Double(notified.count)),
                "p50_ms": .number(percentile(notified, 0.5) * 1e3),
                "p99_ms": .number(percentile(notified, 0.99) * 1e3),
                "max_ms": .number((notified.max() ?? .nan) * 1e3),
                "served_p50_ms": .number(percentile(served, 0.5) * 1e3),
                "served_p99_ms": .number(percentile(served, 0.99) * 1e3),
                "save_ms": .number(percentile(saves, 0.5) * 1e3),
                "save_p99_ms": .number(percentile(saves, 0.99) * 1e3),
            ])
        }
    }

    // MARK: fleet-sim

    static func simulation(url: String, hosts count: Int, profiles: Int, duration: Int, rate: Int) async throws {
        try await withAdmin(url) { admin, counter in
            try await migrate(url: url)
            try await seed(url: url, profiles: profiles)
            let hosts = try (0..<count).map { try FleetHost(url: url, name: "fleet-host-\($0)", listens: true) }
            let provider = FleetProvider(lifetime: simulatedLifetime)
            let services = hosts.map { FleetLazyServices(store: $0.store, api: provider, profiles: profiles) }
            let serverProcess = try await postmaster(admin)
            try await withRunning(hosts) {
                try await awaitListening(hosts)
                let clock = ContinuousClock()
                let workers = 32
                let interval = Duration.seconds(1) / rate
                let start = clock.now + .milliseconds(500)
                let middle = start + Duration.seconds(duration) / 2
                let end = start + Duration.seconds(duration)
                let refreshesBefore = provider.refreshes.load(ordering: .relaxed)
                var results: [FleetWorkerResult] = []
                var observation: FleetObservation?
                try await withThrowingTaskGroup(of: FleetSimPart.self) { group in
                    for worker in 0..<workers {
                        group.addTask {
                            .worker(await Fleet.simulatedCalls(worker, of: workers, services: services, profiles: profiles, interval: interval, start: start, middle: middle, end: end))
                        }
                    }
                    group.addTask {
                        .observer(try await Fleet.observe(admin: admin, counter: counter, postmaster: serverProcess, start: start, middle: middle, end: end))
                    }
                    for try await part in group {
                        switch part {
                        case .worker(let result): results.append(result)
                        case .observer(let observed): observation = observed
                        }
                    }
                }
                guard let observation else { throw BenchError("fleet-sim: no observation") }
                printJSON(report(
                    results, observation, counter: counter, hosts: count, profiles: profiles, duration: duration, rate: rate,
                    refreshes: provider.refreshes.load(ordering: .relaxed) - refreshesBefore,
                    services: services.reduce(0) { $0 + $1.count }))
            }
        }
    }

    /// `profiles` profiles whose tokens were issued up to half a lifetime ago: they come into
    /// AuthService's refresh window one after another, evenly over the first half lifetime.
    static func seed(url: String, profiles: Int) async throws {
        let seeder = try FleetHost(url: url, name: "fleet-seed", listens: false)
        try await withRunning([seeder]) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                let writers = 4
                for writer in 0..<writers {
                    group.addTask {
                        var random = FleetRandom(seed: 0xF1EE7 &+ UInt64(writer))
                        for index in stride(from: writer, to: profiles, by: writers) {
                            let age = Double.random(in: 0..<(Fleet.simulatedLifetime / 2), using: &random)
                            let issued = Date().addingTimeInterval(-age)
                            try await seeder.store.save(Fleet.profile("access-seed-\(index)", issuedAt: issued, lifetime: Fleet.simulatedLifetime), as: "p\(index)")
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    /// One worker's share of the fixed rate: call `n` of the run (this worker's are `index`,
    /// `index + workers`, …) is due `n × interval` after `start`; a worker behind schedule calls at
    /// once. Latency is measured from the call's start; how late it started, beside it.
    static func simulatedCalls(
        _ index: Int, of workers: Int, services: [FleetLazyServices], profiles: Int, interval: Duration,
        start: ContinuousClock.Instant, middle: ContinuousClock.Instant, end: ContinuousClock.Instant
    ) async -> FleetWorkerResult {
        let clock = ContinuousClock()
        var random = FleetRandom(seed: 0x5EED &+ UInt64(index))
        var result = FleetWorkerResult()
        var call = index
        while !Task.isCancelled {
            let due = start + interval * call
            guard due < end else { break }
            if due > clock.now { try? await clock.sleep(until: due, tolerance: .microseconds(500)) }
            let host = services[Int.random(in: 0..<services.count, using: &random)]
            let service = host.service(Int.random(in: 0..<profiles, using: &random))
            let begin = clock.now
            do {
                _ = try await service.validAccessToken()
            } catch {
                result.errors += 1
            }
            let latency = seconds(clock.now - begin)
            result.latencies.append(latency)
            result.lateness.append(max(0, seconds(begin - due)))
            if due >= middle { result.steadyLatencies.append(latency) }
            call += workers
        }
        return result
    }

    /// The server's counts, CPU time and connections at the run's start, middle and end.
    static func observe(
        admin: PostgresClient, counter: FleetCounter, postmaster: Int32?,
        start: ContinuousClock.Instant, middle: ContinuousClock.Instant, end: ContinuousClock.Instant
    ) async throws -> FleetObservation {
        let clock = ContinuousClock()
        var connections: [FleetConnections] = []
        try await clock.sleep(until: start)
        let first = try await snapshot(admin, counter, postmaster)
        try await sampleConnections(admin, until: middle, into: &connections)
        let second = try await snapshot(admin, counter, postmaster)
        try await sampleConnections(admin, until: end, into: &connections)
        let third = try await snapshot(admin, counter, postmaster)
        return FleetObservation(start: first, middle: second, end: third, connections: connections)
    }

    static func snapshot(_ admin: PostgresClient, _ counter: FleetCounter, _ postmaster: Int32?) async throws -> FleetSnapshot {
        let statements = try await count(admin, counter)
        return FleetSnapshot(
            time: ContinuousClock().now, statements: statements,
            serverCPU: postmaster.map { FleetProc.serverCPUSeconds(postmaster: $0) } ?? .nan, benchCPU: cpuSeconds())
    }

    /// The hosts' connections (by application name), every 2 s until `deadline`.
    static func sampleConnections(_ admin: PostgresClient, until deadline: ContinuousClock.Instant, into samples: inout [FleetConnections]) async throws {
        let clock = ContinuousClock()
        while clock.now + .seconds(2) < deadline {
            try await clock.sleep(until: clock.now + .seconds(2))
            let query: PostgresQuery = """
                SELECT coalesce(sum(n), 0)::int8, coalesce(max(n), 0)::int8, count(*)::int8 FROM (
                    SELECT count(*) AS n FROM pg_catalog.pg_stat_activity
                    WHERE usename::text = \(role) AND application_name LIKE 'fleet-host-%' GROUP BY application_name) AS per_host
                """
            for try await (total, largest, hosts) in try await admin.query(query).decode((Int64, Int64, Int64).self) {
                samples.append(FleetConnections(total: total, largest: largest, hosts: hosts))
            }
        }
        try await clock.sleep(until: deadline)
    }

    static func report(
        _ results: [FleetWorkerResult], _ observed: FleetObservation, counter: FleetCounter, hosts: Int, profiles: Int, duration: Int, rate: Int,
        refreshes: Int, services: Int
    ) -> [String: FleetValue] {
        let all = results.flatMap(\.latencies)
        let steady = results.flatMap(\.steadyLatencies)
        let lateness = results.flatMap(\.lateness)
        let (start, middle, end) = (observed.start, observed.middle, observed.end)
        let steadySpan = seconds(end.time - middle.time)
        let wholeSpan = seconds(end.time - start.time)
        let samples = observed.connections
        let perHost = samples.isEmpty ? Double.nan : samples.map { Double($0.total) / Double(hosts) }.reduce(0, +) / Double(samples.count)
        var fields: [String: FleetValue] = [:]
        fields["hosts"] = .number(Double(hosts))
        fields["profiles"] = .number(Double(profiles))
        fields["seconds"] = .number(Double(duration))
        fields["calls_per_s_target"] = .number(Double(rate))
        fields["calls_per_s"] = .number(Double(all.count) / Double(duration))
        fields["calls"] = .number(Double(all.count))
        fields["errors"] = .number(Double(results.reduce(0) { $0 + $1.errors }))
        fields["token_lifetime_s"] = .number(simulatedLifetime)
        fields["refreshes"] = .number(Double(refreshes))
        fields["auth_services"] = .number(Double(services))
        fields["counter"] = .text(counter.description)
        // The second half: the hosts have read most profiles once by then.
        fields["statements_per_token_call"] = .number(Double(end.statements - middle.statements) / Double(max(1, steady.count)))
        fields["statements_per_token_call_whole_run"] = .number(Double(end.statements - start.statements) / Double(max(1, all.count)))
        fields["statements_per_s"] = .number(Double(end.statements - middle.statements) / steadySpan)
        fields["server_cpu_seconds"] = .number(end.serverCPU - middle.serverCPU)
        // Percent of one core (two cores: at most 200).
        fields["server_cpu_percent"] = .number((end.serverCPU - middle.serverCPU) / steadySpan * 100)
        fields["server_cpu_percent_whole_run"] = .number((end.serverCPU - start.serverCPU) / wholeSpan * 100)
        fields["bench_cpu_percent"] = .number((end.benchCPU - middle.benchCPU) / steadySpan * 100)
        fields["connections_per_host"] = .number(perHost)
        fields["connections_per_host_max"] = .number(Double(samples.map(\.largest).max() ?? 0))
        fields["connections_max"] = .number(Double(samples.map(\.total).max() ?? 0))
        fields["hosts_connected_min"] = .number(Double(samples.map(\.hosts).min() ?? 0))
        fields["token_p50_ms"] = .number(percentile(steady, 0.5) * 1e3)
        fields["token_p99_ms"] = .number(percentile(steady, 0.99) * 1e3)
        fields["token_p99_ms_whole_run"] = .number(percentile(all, 0.99) * 1e3)
        fields["token_max_ms"] = .number((all.max() ?? .nan) * 1e3)
        fields["lateness_p99_ms"] = .number(percentile(lateness, 0.99) * 1e3)
        fields["rss_mb"] = .number(FleetProc.peakResidentMegabytes())
        if hosts < 100 || profiles < 1000 {
            fields["note"] = .text("scaled down from 100 hosts x 1,000 profiles: \(hosts) x \(profiles)")
        }
        return fields
    }
}

/// What the server counts for ``Fleet/count(_:_:)``.
enum FleetCounter: Sendable, CustomStringConvertible {
    /// pg_stat_statements: the statements of the hosts' role.
    case statements
    /// pg_stat_database: every transaction of the database (reported up to 10 s late; approximate).
    case transactions

    var description: String {
        switch self {
        case .statements: "pg_stat_statements: statements of the hosts' role"
        case .transactions: "pg_stat_database: transactions of the whole database (approximate: pg_stat_statements is not loaded)"
        }
    }
}

/// One simulated host: a client of its own (its connections named after it in pg_stat_activity,
/// as the hosts' role), and a store on it.
final class FleetHost: Sendable {
    let client: PostgresClient
    let store: PostgresTokenStore
    /// Whether the store's listener runs (reads from memory between change notifications).
    let listens: Bool

    init(url: String, name: String, listens: Bool, heartbeat: Duration? = nil) throws {
        var connection = try PostgresTokenStore.connection(url: url)
        connection.username = Fleet.role
        connection.options.additionalStartupParameters.append(("application_name", name))
        client = PostgresClient(configuration: connection, backgroundLogger: Fleet.logger)
        var configuration = PostgresTokenStore.Configuration()
        configuration.table = Fleet.table
        configuration.namespace = Fleet.namespace
        configuration.sealing = .none
        if let heartbeat { configuration.listenerHeartbeat = heartbeat }
        store = try PostgresTokenStore(client: client, configuration: configuration)
        self.listens = listens
    }

    /// Runs the client, and the store's listener when it listens, until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            if listens { group.addTask { await self.store.run() } }
        }
    }
}

/// The fleet's identity provider, in this process: a refresh answers at once with new tokens valid
/// for `lifetime`; refreshes are counted.
final class FleetProvider: AuthAPI {
    let lifetime: TimeInterval
    let refreshes = Atomic<Int>(0)

    init(lifetime: TimeInterval) {
        self.lifetime = lifetime
    }

    var source: CredentialSource { Fleet.source }

    func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        throw BenchError("the fleet's provider has no password login")
    }

    func refresh(_ credentials: Credentials) async throws -> Credentials {
        let number = refreshes.wrappingAdd(1, ordering: .relaxed).newValue
        let now = Date()
        return Credentials(
            accessToken: "access-refreshed-\(number)", refreshToken: "refresh-refreshed-\(number)", tokenType: "Bearer",
            expiresAt: now.addingTimeInterval(lifetime), issuedAt: now)
    }

    func revoke(_ credentials: Credentials) async throws -> Bool { true }
}

/// One host's AuthServices, one per profile, each made at its first token call.
final class FleetLazyServices: Sendable {
    let store: PostgresTokenStore
    let api: FleetProvider
    private let services: Mutex<[AuthService?]>

    init(store: PostgresTokenStore, api: FleetProvider, profiles: Int) {
        self.store = store
        self.api = api
        services = Mutex([AuthService?](repeating: nil, count: profiles))
    }

    func service(_ profile: Int) -> AuthService {
        services.withLock { services in
            if let existing = services[profile] { return existing }
            let made = AuthService(api: api, store: store, profile: "p\(profile)")
            services[profile] = made
            return made
        }
    }

    var count: Int { services.withLock { list in list.reduce(0) { $0 + ($1 == nil ? 0 : 1) } } }
}

struct FleetWorkerResult: Sendable {
    /// Seconds per token call, every call.
    var latencies: [Double] = []
    /// Those due in the run's second half.
    var steadyLatencies: [Double] = []
    /// Seconds each call started after it was due.
    var lateness: [Double] = []
    var errors = 0
}

struct FleetSnapshot: Sendable {
    var time: ContinuousClock.Instant
    var statements: Int64
    /// CPU seconds of the postmaster and its children (NaN when its process is not found).
    var serverCPU: Double
    /// CPU seconds of this process.
    var benchCPU: Double
}

struct FleetConnections: Sendable {
    /// The hosts' connections, all together.
    var total: Int64
    /// The most connections one host held.
    var largest: Int64
    /// The hosts with a connection.
    var hosts: Int64
}

struct FleetObservation: Sendable {
    var start: FleetSnapshot
    var middle: FleetSnapshot
    var end: FleetSnapshot
    var connections: [FleetConnections]
}

enum FleetSimPart: Sendable {
    case worker(FleetWorkerResult)
    case observer(FleetObservation)
}

/// SplitMix64: the simulation's calls and ages, the same on every run.
struct FleetRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// A JSON value of the commands' output.
indirect enum FleetValue {
    case number(Double)
    case text(String)
    case object([String: FleetValue])

    var json: String {
        switch self {
        case .number(let value):
            return value.isFinite ? "\(value)" : "null"
        case .text(let text):
            var escaped = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": escaped += "\\\""
                case "\\": escaped += "\\\\"
                case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
                default: escaped.unicodeScalars.append(scalar)
                }
            }
            return "\"" + escaped + "\""
        case .object(let fields):
            return "{" + fields.sorted { $0.key < $1.key }.map { "\(FleetValue.text($0.key).json): \($0.value.json)" }.joined(separator: ", ") + "}"
        }
    }
}

/// What /proc says about the server's processes and this one.
enum FleetProc {
    /// A /proc file's text, read with read(2): Foundation reads as many bytes as stat(2) reports,
    /// 0 for /proc's files.
    static func contents(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `pid`'s parent, its own CPU ticks (user + system) and those of its children that ended.
    static func stat(_ pid: Int32) -> (parent: Int32, own: Int64, children: Int64)? {
        guard let text = contents(of: "/proc/\(pid)/stat"), let command = text.lastIndex(of: ")") else { return nil }
        // After the command: state, ppid, … utime, stime, cutime, cstime (fields 14 to 17 of proc(5)).
        let fields = text[text.index(after: command)...].split(separator: " ")
        guard fields.count > 14, let parent = Int32(fields[1]), let user = Int64(fields[11]), let system = Int64(fields[12]),
            let childrenUser = Int64(fields[13]), let childrenSystem = Int64(fields[14])
        else { return nil }
        return (parent, user + system, childrenUser + childrenSystem)
    }

    /// CPU seconds of the postmaster, of its children that ended, and of those that run now.
    static func serverCPUSeconds(postmaster: Int32) -> Double {
        guard let main = stat(postmaster) else { return .nan }
        var ticks = main.own + main.children
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), pid != postmaster, let process = stat(pid), process.parent == postmaster else { continue }
            ticks += process.own
        }
        let perSecond = sysconf(CInt(_SC_CLK_TCK))
        return Double(ticks) / Double(perSecond > 0 ? perSecond : 100)
    }

    /// This process's peak resident memory (`VmHWM`), in MB.
    static func peakResidentMegabytes() -> Double {
        guard let text = contents(of: "/proc/self/status") else { return .nan }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kilobytes = line.dropFirst("VmHWM:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Double($0) }
            return (kilobytes ?? .nan) / 1024
        }
        return .nan
    }
}
