@testable import LoginKit
import LoginKitHTTP
import Testing

/// The package's single-flight and waiter-list primitives, which the service, the key set, the
/// metadata loader, the version gate, `AsyncLock` and the mocks share, and `AsyncLock` itself.
@Suite(.timeLimit(.minutes(3)))
struct ConcurrencyPrimitiveTests {
    /// Tasks that take an `AsyncLock` once each, in rounds, never strand a waiter: a lock that
    /// decided to wait in one critical section and joined the queue in a second let a release fall
    /// between the two, and the last waiter of its round then waited on a free lock for ever. A
    /// stranded waiter hangs the round: the time limit ends the test (the wait is cancellable).
    @Test(.timeLimit(.minutes(1))) func aLockHandedBackAndForthNeverStrandsAWaiter() async throws {
        let lock = AsyncLock()
        let counter = LockedState(0)
        // 5,000 rounds take 0.04 s alone; inside the whole suite each round waits for the
        // cooperative pool every other test shares, and 20,000 rounds took 45-83 s there, against
        // the one-minute limit.
        let (tasks, rounds) = (3, 5_000)
        for _ in 0..<rounds {
            try await withThrowingTaskGroup(of: Void.self) { workers in
                for _ in 0..<tasks {
                    workers.addTask { try await lock.withLock { counter.withLock { $0 += 1 } } }
                }
                try await workers.waitForAll()
            }
        }
        #expect(counter.withLock { $0 } == tasks * rounds)
    }

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
        // A and B share a failing fetch; when it fails, C starts a new one; B's late bookkeeping
        // must not drop C's, or D starts a third.
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

    /// A main-actor task that calls `withLock` on a held lock is queued before the main actor runs
    /// anything else (`withLock` runs on its caller's executor up to the wait), so a task that has
    /// signalled `queued` just before is in the lock's list once the test goes on.
    @MainActor private static func queuedTask(
        on lock: AsyncLock, _ body: @escaping @Sendable () -> Void
    ) async throws -> Task<Void, any Error> {
        let queued = Flight<Void>()
        let task = Task { @MainActor in
            queued.finish(with: .success(()))
            try await lock.withLock { body() }
        }
        try await queued.wait()
        return task
    }

    /// Releasing hands the lock to the oldest waiter: waiters run in the order they came, and a task
    /// that arrives while the lock passes from one to the next queues behind them.
    @MainActor @Test func theLockGoesToItsWaitersInTheOrderTheyCame() async throws {
        let lock = AsyncLock()
        let holder = Gate()
        let order = LockedState<[Int]>([])
        let first = Task { @MainActor in try await lock.withLock { _ = try await holder.pass() } }
        try await holder.arrived()
        var waiters: [Task<Void, any Error>] = []
        for index in 0..<5 {
            let waiter = try await Self.queuedTask(on: lock) { order.withLock { $0.append(index) } }
            waiters.append(waiter)
        }
        holder.open(0)
        let late = Task { @MainActor in try await lock.withLock { order.withLock { $0.append(99) } } }
        try await first.value
        for waiter in waiters { try await waiter.value }
        try await late.value
        #expect(order.withLock { $0 } == [0, 1, 2, 3, 4, 99])
    }

    /// A waiter cancelled while queued throws `CancellationError` and never runs its body; the lock
    /// goes to the waiter behind it.
    @MainActor @Test func aWaiterCancelledWhileQueuedThrowsAndNeverHoldsTheLock() async throws {
        let lock = AsyncLock()
        let holder = Gate()
        let entered = LockedState<[String]>([])
        let first = Task { @MainActor in try await lock.withLock { _ = try await holder.pass() } }
        try await holder.arrived()
        let cancelled = try await Self.queuedTask(on: lock) { entered.withLock { $0.append("cancelled") } }
        let next = try await Self.queuedTask(on: lock) { entered.withLock { $0.append("next") } }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        holder.open(0)
        try await first.value
        try await next.value
        #expect(entered.withLock { $0 } == ["next"])
    }

    /// A task cancelled before it would wait for a held lock throws at once and is never queued.
    @Test func aTaskCancelledBeforeItWaitsForTheLockThrowsAtOnce() async throws {
        let lock = AsyncLock()
        let holder = Gate()
        let first = Task { try await lock.withLock { _ = try await holder.pass() } }
        try await holder.arrived()
        let entered = LockedState(false)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await lock.withLock { entered.withLock { $0 = true } }
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        holder.open(0)
        try await first.value
        #expect(!entered.withLock { $0 })
        try await lock.withLock {}  // released by its holder, not kept by the cancelled task
    }

    /// A cancellation racing the release that would hand the lock to the waiter: either the waiter
    /// throws `CancellationError` without running its body, or it was handed the lock first and runs
    /// it. Neither leaves the lock held.
    @MainActor @Test func aCancellationRacingTheReleaseLosesNeitherTheLockNorTheWaiter() async throws {
        for _ in 0..<200 {
            let lock = AsyncLock()
            let holder = Gate()
            let ran = LockedState(false)
            let first = Task { @MainActor in try await lock.withLock { _ = try await holder.pass() } }
            try await holder.arrived()
            let waiter = try await Self.queuedTask(on: lock) { ran.withLock { $0 = true } }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { holder.open(0) }
                group.addTask { waiter.cancel() }
            }
            try await first.value
            switch await waiter.result {
            case .success:
                #expect(ran.withLock { $0 })
            case .failure(let error):
                #expect(error is CancellationError)
                #expect(!ran.withLock { $0 })
            }
            try await lock.withLock {}
        }
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
