import LoginKitHTTP
import Testing

/// The package's single-flight and waiter-list primitives, which the service, the key set, the
/// metadata loader, the version gate, the lock and the mocks share.
@Suite(.timeLimit(.minutes(3)))
struct ConcurrencyPrimitiveTests {
    /// Holds an operation until the test releases it.
    final class Gate: Sendable {
        private let flight = Flight<Int>()
        private let arrivals = Flight<Void>()
        func pass() async throws -> Int {
            arrivals.finish(with: .success(()))
            return try await flight.wait()
        }
        func arrived() async throws { try await arrivals.wait() }
        func open(_ value: Int) { flight.finish(with: .success(value)) }
        func fail() { flight.finish(with: .failure(Failure())) }
    }
    struct Failure: Error {}

    /// Counts the values destroyed.
    final class Tracked: Sendable {
        let destroyed: LockedState<Int>
        init(_ destroyed: LockedState<Int>) { self.destroyed = destroyed }
        deinit { destroyed.withLock { $0 += 1 } }
    }

    /// `LockedState` is one allocation shared by its copies: every copy locks the same mutex and
    /// sees the same value, and the value is destroyed once, when the last copy goes.
    @Test func lockedStateCopiesShareOneValueDestroyedOnce() async {
        let destroyed = LockedState(0)
        do {
            let state = LockedState((count: 0, tracked: Tracked(destroyed)))
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    let copy = state
                    group.addTask {
                        for _ in 0..<10_000 { copy.withLock { $0.count += 1 } }
                    }
                }
            }
            // Unlocked increments from 8 tasks would lose some: the lock is one lock.
            #expect(state.withLock { $0.count } == 80_000)
            state.withLock { $0.tracked = Tracked(destroyed) }  // the replaced value goes at once
            #expect(destroyed.withLock { $0 } == 1)
        }
        #expect(destroyed.withLock { $0 } == 2, "the value in the lock is destroyed with its last copy")
    }

    @Test func concurrentCallersShareOneRun() async throws {
        let flights = SingleFlight<String, Int>()
        let gate = Gate()
        let runs = LockedState(0)
        let callers = (0..<50).map { _ in
            Task {
                try await flights.run("k") {
                    runs.withLock { $0 += 1 }
                    return try await gate.pass()
                }
            }
        }
        try await gate.arrived()
        gate.open(7)
        for caller in callers { #expect(try await caller.value == 7) }
        #expect(runs.withLock { $0 } == 1)
    }

    @Test func aFinishedFlightNeverClobbersANewerOne() async throws {
        // The shape of MetadataLoader's old bug: A and B share a failing fetch; when it fails, C
        // starts a new one; B's late bookkeeping must not drop C's, or D starts a third.
        let flights = SingleFlight<String, Int>()
        let first = Gate()
        let starts = LockedState(0)
        let a = Task { try await flights.run("k") { starts.withLock { $0 += 1 }; return try await first.pass() } }
        let b = Task { try await flights.run("k") { starts.withLock { $0 += 1 }; return try await first.pass() } }
        try await first.arrived()
        first.fail()
        #expect(await (try? a.value) == nil)
        #expect(await (try? b.value) == nil)
        let second = Gate()
        let c = Task { try await flights.run("k") { starts.withLock { $0 += 1 }; return try await second.pass() } }
        try await second.arrived()
        let d = Task { try await flights.run("k") { starts.withLock { $0 += 1 }; return -1 } }
        second.open(2)
        #expect(try await c.value == 2)
        #expect(try await d.value == 2)  // joined C's flight
        #expect(starts.withLock { $0 } == 2)
    }

    @Test func aCancelledWaiterLeavesAndTheOperationGoesOn() async throws {
        let flights = SingleFlight<String, Int>()
        let gate = Gate()
        let waiter = Task { try await flights.run("k") { try await gate.pass() } }
        let other = Task { try await flights.run("k") { -1 } }
        try await gate.arrived()
        waiter.cancel()
        #expect(await (try? waiter.value) == nil)
        #expect(flights.isRunning("k"))
        gate.open(3)
        #expect(try await other.value == 3)
    }

    @Test func aFlightHandsItsOutcomeToLateWaiters() async throws {
        let flight = Flight<Int>()
        flight.finish(with: .success(1))
        flight.finish(with: .success(2))  // only the first counts
        #expect(try await flight.wait() == 1)
    }

    @Test func aTaskCancelledBeforeItWaitsThrowsAtOnce() async throws {
        let flight = Flight<Int>()
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await flight.wait()
        }
        #expect(await (try? waiter.value) == nil)
        #expect(flight.isFinished == false)
    }

    /// `wait()` runs on its caller's executor (here the main actor): a waiter cancelled there stops
    /// waiting at once, and the other waiter on the same actor still gets the outcome.
    @MainActor @Test func waitersOnAnActorAreCancelledAloneAndTheOthersGetTheOutcome() async throws {
        let flight = Flight<Int>()
        let arrived = Flight<Void>()
        let cancelled = Task { @MainActor in
            arrived.finish(with: .success(()))
            return try await flight.wait()
        }
        let other = Task { @MainActor in try await flight.wait() }
        try await arrived.wait()
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(!flight.isFinished)
        flight.finish(with: .success(1))
        #expect(try await other.value == 1)
    }

    @Test func theTaskOwnerAwaitsItsTasksAndStartsNothingAfterShutdown() async throws {
        let owner = TaskOwner()
        let gate = Gate()
        let finished = LockedState(false)
        owner.spawn {
            _ = try? await gate.pass()
            finished.withLock { $0 = true }
        }
        try await gate.arrived()
        async let shutdown: Void = owner.shutdown(cancelling: false)
        gate.open(0)
        await shutdown
        #expect(finished.withLock { $0 })
        #expect(owner.spawn {} == nil)
    }
}
