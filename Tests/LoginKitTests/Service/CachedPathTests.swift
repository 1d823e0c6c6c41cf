import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// The cached path of a token call: `AuthService` serves the profile it served last,
/// without entering its actor, only while the store's change stamp vouches for it, no logout has
/// begun and the refresh decision says serve. Each test would be served a stale or logged-out
/// token if one of those checks were missing.
@Suite(.timeLimit(.minutes(3)))
struct CachedPathTests {
    /// Serves from the store only: a login or refresh through it is a test failure.
    struct StoredOnlyAPI: AuthAPI {
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
        func revoke(_ credentials: Credentials) async throws -> Bool { true }
    }

    static let valid = Race.profile(Race.credentials(0, issuedAt: Date(), lifetime: 3600))

    // MARK: The store's stamp

    @Test func aWriteThroughTheFileStoreChangesItsStampBeforeTheWriteReturns() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            let empty = store.changeStamp()
            #expect(store.changeStamp() == empty, "nothing changed")
            try await store.save(Self.valid, as: "default")
            let saved = store.changeStamp()
            #expect(saved != empty)
            #expect(store.changeStamp() == saved, "nothing changed")
            try await store.removeProfile(named: "default")
            #expect(store.changeStamp() != saved)
        }
    }

    @Test func anotherWritersChangeIsSeenOnceTheRecheckIntervalHasPassed() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let elsewhere = try IDTokenStore(path: path)  // another process, as far as the watch can tell
            let watch = StoreFileWatch(paths: [path], recheckInterval: 0)
            let before = watch.stamp()
            #expect(watch.stamp() == before, "a look at an unchanged file keeps the stamp")
            try await elsewhere.save(Self.valid, as: "default")
            let after = watch.stamp()
            #expect(after != before)
            try FileManager.default.removeItem(atPath: path)
            #expect(watch.stamp() != after, "a removed file is a change too")
        }
    }

    /// A look that failed (here `ENOTDIR`, not "no such file") is never trusted, even within the
    /// recheck interval: each stamp is a new one, so the caller takes the store's own path, which
    /// reports the error. The lock-free path must not serve a stamp published by a failed look.
    @Test func aFailedLookIsNeverTrustedEvenWithinTheRecheckInterval() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory + "/not-a-directory"
            #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
            let watch = StoreFileWatch(paths: [file + "/tokens.json"])  // the default 10 ms interval
            let first = watch.stamp()
            let second = watch.stamp()
            #expect(second != first)
            #expect(watch.stamp() != second)
        }
    }

    /// Between two looks a stamp is read without the lock: concurrent readers never see it go back,
    /// and the store's own write is seen by the writer as soon as it returns.
    @Test func theLockFreeStampNeverGoesBackAndSeesTheStoresOwnWrite() async throws {
        try await withTemporaryDirectory { directory in
            let watch = StoreFileWatch(paths: [directory + "/tokens.json"], recheckInterval: 1_000_000_000)
            _ = watch.stamp()  // the first look publishes a look time: later reads take the lock-free path
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var last = watch.stamp()
                        for _ in 0..<20_000 {
                            let now = watch.stamp()
                            #expect(now >= last)
                            if now < last { return }
                            last = now
                        }
                    }
                }
                group.addTask {
                    var last = watch.stamp()
                    for _ in 0..<5_000 {
                        watch.changed()
                        let now = watch.stamp()
                        #expect(now > last, "the writer's own change is seen at once")
                        if now <= last { return }
                        last = now
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    /// The epoch and logout state that token calls read under the machine's lock, without the
    /// actor, follow a logout from its start to its end.
    @Test func tokenCallsSeeALogoutFromItsStartToItsEnd() async throws {
        let api = MockAuthAPI()
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Race.t0))
        func epoch() -> UInt64 { service.machine.withLock { $0.epoch } }
        func mayHandOut(startedIn epoch: UInt64) -> Bool { service.machine.withLock { $0.mayHandOut(startedIn: epoch) } }
        #expect(epoch() == 0)
        #expect(mayHandOut(startedIn: 0))
        let logout = Task { await service.logOut() }
        let revoke = await api.nextRevoke()  // the logout has begun
        #expect(!mayHandOut(startedIn: 0), "no hand-outs once a logout has begun")
        #expect(!mayHandOut(startedIn: epoch()))
        revoke.resume(returning: ())
        _ = await logout.value
        let after = epoch()
        #expect(after != 0, "the logout ended the epoch")
        #expect(mayHandOut(startedIn: after))
        #expect(!mayHandOut(startedIn: 0), "nothing from before the logout")
        api.verify()
    }

    /// The stamp a stamped exclusive access answers is the one its own write produced (read before
    /// the lock was let go), and a transaction that changes nothing answers the current one.
    @Test(arguments: ["file", "memory"])
    func aStampedExclusiveAccessAnswersTheStampOfItsOwnWrite(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let store: any TokenStoreChangeStamp = kind == "file" ? try IDTokenStore(path: directory + "/tokens.json") : InMemoryTokenStore()
            // A file store stamps each profile on its own; the memory store answers its one stamp.
            let source = store.changeStampSource(for: "default")
            let before = source.stamp()
            let (name, written) = try await store.withExclusiveAccessStamped(to: "default") { transaction -> String in
                transaction["default"] = Self.valid
                return "wrote"
            }
            #expect(name == "wrote")
            let stamp = try #require(written)
            #expect(stamp != before, "the write changed the stamp")
            #expect(source.stamp() == stamp, "nothing changed since the write")
            let (_, unchanged) = try await store.withExclusiveAccessStamped(to: "default") { _ in }
            #expect(unchanged == stamp, "no write, the same stamp")
            try await store.save(Race.profile(Race.credentials(1, issuedAt: Date(), lifetime: 3600)), as: "default")
            #expect(source.stamp() != stamp, "a later write is not vouched for by the earlier stamp")
        }
    }

    /// A file store keeps a file per profile: a save of another profile, by this store or by
    /// another process, leaves a profile's stamp as it is (the cached path stays off the actor),
    /// while a save of the profile itself moves it.
    @Test func aSaveOfAnotherProfileLeavesAProfilesStamp() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            let elsewhere = try IDTokenStore(path: directory + "/tokens.json")  // another process, in effect
            try await store.save(Self.valid, as: "a")
            try await store.save(Self.valid, as: "b")
            let source = store.changeStampSource(for: "a")
            let steady = source.stamp()
            try await store.save(Race.profile(Race.credentials(1, issuedAt: Date(), lifetime: 3600)), as: "b")
            try await elsewhere.save(Race.profile(Race.credentials(2, issuedAt: Date(), lifetime: 3600)), as: "b")
            let watch = StoreFileWatch(paths: [store.path, store.profileFilePath(for: "a")], recheckInterval: 0)
            let looked = watch.stamp()
            try await elsewhere.save(Race.profile(Race.credentials(3, issuedAt: Date(), lifetime: 3600)), as: "b")
            #expect(watch.stamp() == looked, "another process's save of b is no change to a")
            #expect(source.stamp() == steady, "this store's save of b is no change to a")
            try await elsewhere.save(Race.profile(Race.credentials(4, issuedAt: Date(), lifetime: 3600)), as: "a")
            #expect(watch.stamp() != looked, "another process's save of a is")
            try await store.save(Race.profile(Race.credentials(5, issuedAt: Date(), lifetime: 3600)), as: "a")
            #expect(source.stamp() != steady, "and this store's own save of a")
        }
    }

    @Test func aWriteThroughTheMemoryStoreChangesItsStamp() async throws {
        let store = InMemoryTokenStore()
        let empty = store.changeStamp()
        try await store.save(Self.valid, as: "default")
        #expect(store.changeStamp() != empty)
    }

    // MARK: What the service serves

    @Test(arguments: ["file", "memory"])
    func aLogoutThroughAnotherServiceOnTheSameStoreIsSeenAtOnce(_ kind: String) async throws {
        try await withTemporaryDirectory { directory in
            let store: any TokenStore = kind == "file" ? try IDTokenStore(path: directory + "/tokens.json") : InMemoryTokenStore()
            try await store.save(Self.valid, as: "default")
            let reader = AuthService(api: StoredOnlyAPI(), store: store)
            let other = AuthService(api: StoredOnlyAPI(), store: store)
            #expect(try await reader.validAccessToken() == "access-0")
            #expect(try await reader.validAccessToken() == "access-0")  // now from the cached path
            await other.logOut()
            await #expect(throws: LoginRequiredError.self) { try await reader.validAccessToken() }
        }
    }

    @Test func aChangeThisStoreHasReadIsNeverServedStale() async throws {
        try await withTemporaryDirectory { directory in
            let mine = try IDTokenStore(path: directory + "/tokens.json")
            let other = try IDTokenStore(path: directory + "/tokens.json")  // another process, in effect
            try await mine.save(Self.valid, as: "default")
            let service = AuthService(api: StoredOnlyAPI(), store: mine)
            #expect(try await service.validAccessToken() == "access-0")
            try await other.removeProfile(named: "default")
            #expect(try await service.currentUser() == nil, "this store has read the removal")
            await #expect(throws: LoginRequiredError.self) { try await service.validAccessToken() }
        }
    }

    @Test func aLogoutOfTheServiceItselfEndsTheCachedPath() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Self.valid])
        let service = AuthService(api: StoredOnlyAPI(), store: store)
        #expect(try await service.validAccessToken() == "access-0")
        await service.logOut()
        let error = await #expect(throws: LoginRequiredError.self) { try await service.validAccessToken() }
        #expect(error?.code == .notLoggedIn)
    }

    @Test func aProfileChangedByAnotherServiceIsServedAtOnce() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Self.valid])
        let reader = AuthService(api: StoredOnlyAPI(), store: store)
        #expect(try await reader.validAccessToken() == "access-0")
        try await store.save(Race.profile(Race.credentials(1, issuedAt: Date(), lifetime: 3600)), as: "default")
        #expect(try await reader.validAccessToken() == "access-1")
    }

    @Test func aTokenThatEntersTheMandatoryWindowIsRefreshedNotServedFromTheCache() async throws {
        let clock = ManualClock(start: Race.t0)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 3600))])
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: store, clock: clock)
        #expect(try await service.validAccessToken() == "access-0")
        #expect(try await service.validAccessToken() == "access-0")
        clock.advance(by: .seconds(3600 - 30))  // inside the 60 s mandatory window
        let token = Task { try await service.validAccessToken() }
        let refresh = await api.nextRefresh()
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 3600))
        #expect(try await token.value == "access-1")
        #expect(api.refreshCallCount == 1)
    }

    @Test func aMinimumValidityTheCachedTokenLacksWaitsForTheRefresh() async throws {
        let clock = ManualClock(start: Race.t0)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 3600))])
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: store, clock: clock)
        clock.advance(by: .seconds(1200))  // 40 minutes left, outside every window
        #expect(try await service.validAccessToken() == "access-0")
        let token = Task { try await service.validAccessToken(minimumValidity: .seconds(2700)) }
        let refresh = await api.nextRefresh()
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 3600))
        #expect(try await token.value == "access-1")
    }
}

/// The expiry storm's callers make one store read between them (docs/refresh.md): calls that come
/// under the same store stamp while another call's step reads the store wait for that step, off the
/// actor, and then join the refresh it started — instead of one store read each.
@Suite(.timeLimit(.minutes(3)))
struct SharedStoreReadTests {
    /// An in-memory store that counts `profile(named:)` reads and keeps the memory store's stamps.
    final class CountingStore: TokenStoreChangeStamp {
        let base = InMemoryTokenStore()
        private let reads = LockedState(0)
        var readCount: Int { reads.withLock { $0 } }

        func changeStamp() -> UInt64 { base.changeStamp() }
        func profile(named name: String) async throws -> StoredProfile? {
            reads.withLock { $0 += 1 }
            return try await base.profile(named: name)
        }
        func profileNames() async throws -> [String] { try await base.profileNames() }
        func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
            try await base.withExclusiveAccess(body)
        }
        func withExclusiveAccessStamped<T>(
            to name: String, _ body: (inout TokenStoreTransaction) async throws -> T
        ) async throws -> (result: T, stamp: UInt64?) {
            try await base.withExclusiveAccessStamped(to: name, body)
        }
    }

    /// Refreshes once the test opens the gate, counting the refreshes.
    final class GatedRefreshAPI: AuthAPI {
        let gate = TestGate()
        var source: CredentialSource { Race.source }
        var refreshCount: Int { gate.arrivals }

        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func revoke(_ credentials: Credentials) async throws -> Bool { true }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            await gate.pass()
            return Race.credentials(1, issuedAt: Date(), lifetime: 3600)
        }
    }

    @Test func aStormOfCallersReadsTheStoreOnceNotOncePerCaller() async throws {
        let store = CountingStore()
        try await store.base.save(Race.profile(Race.credentials(0, issuedAt: Date(timeIntervalSinceNow: -7200), lifetime: 3600)), as: "default")
        let api = GatedRefreshAPI()
        let service = AuthService(api: api, store: store)
        let callers = 200
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<callers { group.addTask { try await service.validAccessToken() } }
            await api.gate.arrived()
            api.gate.open()
            var tokens = Set<String>()
            for try await token in group { tokens.insert(token) }
            #expect(tokens == ["access-1"], "every caller gets the one refreshed token")
        }
        #expect(api.refreshCount == 1)
        // One read by the step that started the refresh, a few at most by calls that raced it to
        // the actor before its read was announced; 200 without the shared read.
        #expect(store.readCount <= 5, "\(store.readCount) store reads for \(callers) callers")
    }

    /// The storm's late callers: a call that comes after the shared refresh saved is served what
    /// it saved from the cached path (remembered under the stamp the save produced), without
    /// reading the store again.
    @Test func aCallAfterTheSharedRefreshIsServedWhatItSavedWithoutReadingTheStore() async throws {
        let store = CountingStore()
        try await store.base.save(Race.profile(Race.credentials(0, issuedAt: Date(timeIntervalSinceNow: -7200), lifetime: 3600)), as: "default")
        let api = GatedRefreshAPI()
        let service = AuthService(api: api, store: store)
        let first = Task { try await service.validAccessToken() }
        await api.gate.arrived()
        api.gate.open()
        #expect(try await first.value == "access-1")
        let readsAfterRefresh = store.readCount
        #expect(try await service.validAccessToken() == "access-1")
        #expect(try await service.validCredentials().refreshToken == "refresh-1")
        #expect(store.readCount == readsAfterRefresh, "served from the cached path, not read again")
        #expect(api.refreshCount == 1)
    }

    /// A call that waited for another call's store read must not be handed what a
    /// logout and a new login put in the store meanwhile — it began before the logout.
    @Test func aCallThatWaitedForAnotherReadIsLoggedOutByALogoutMeanwhile() async throws {
        let store = GatedStore()
        try await store.base.save(Race.profile(Race.credentials(0, issuedAt: Date(), lifetime: 3600)), as: "default")
        let service = AuthService(api: NewLoginAPI(), store: store)
        let first = Task { try await service.validAccessToken() }
        await store.reads.arrived()  // the first call's step is reading (held)
        let startsBefore = store.stamps.arrivals
        let second = Task { try await service.validAccessToken() }
        await store.stamps.arrived(count: startsBefore + 1)  // the second call has begun (and joins that read)
        await service.logOut()
        _ = try await service.logIn(for: User.ID(rawValue: "bob"), with: "pw")
        store.reads.open()
        for call in [first, second] {
            let result = await call.result
            #expect(throws: LoginRequiredError.self, "began before the logout") { try result.get() }
            #expect((try? result.get()) != "access-2")
        }
        #expect(try await service.validAccessToken() == "access-2", "a call after the login gets the new login")
    }

    /// Logs in with access-2; refresh and revoke do nothing of interest.
    struct NewLoginAPI: AuthAPI {
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { Race.credentials(2, issuedAt: Date(), lifetime: 3600) }
        func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
        func revoke(_ credentials: Credentials) async throws -> Bool { true }
    }

    /// A memory store whose first `profile(named:)` read is held until the test opens `reads`, and
    /// that notes every time its stamp is asked for (a token call begins) on `stamps`.
    final class GatedStore: TokenStoreChangeStamp {
        let base = InMemoryTokenStore()
        let reads = TestGate()
        let stamps = TestGate()
        private let readCount = LockedState(0)

        func changeStamp() -> UInt64 {
            stamps.note()
            return base.changeStamp()
        }
        func profile(named name: String) async throws -> StoredProfile? {
            let first = readCount.withLock { count in
                count += 1
                return count == 1
            }
            if first { await reads.pass() }
            return try await base.profile(named: name)
        }
        func profileNames() async throws -> [String] { try await base.profileNames() }
        func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
            try await base.withExclusiveAccess(body)
        }
    }
}
