import Synchronization

/// The tickets of every ``WaiterList`` in the process (unique, so one list never sees one twice).
private let waiterTickets = Atomic<UInt64>(0)

/// Tasks suspended until a value is handed to them: the package's one cancellable waiter list.
///
/// It lives inside the state a ``LockedState`` guards, so that deciding to wait and being queued
/// happen under the same lock as handing out values (no lost wake-up). Suspend with
/// ``LockedState/suspend(_:)``; a waiter whose task is cancelled leaves the list and throws
/// `CancellationError`, whether the cancellation comes before or after it was queued.
package struct WaiterList<Value: Sendable, Tag: Sendable>: Sendable {
    package typealias Continuation = CheckedContinuation<Value, any Error>
    package typealias Ticket = UInt64

    private var entries: [(ticket: Ticket, tag: Tag, continuation: Continuation)] = []
    /// Tickets cancelled before they were queued (or after they were resumed: see `forget`).
    private var cancelledEarly: Set<Ticket> = []

    package init() {}

    /// How many tasks are waiting.
    package var count: Int { entries.count }
    /// Whether no task is waiting.
    package var isEmpty: Bool { entries.isEmpty }
    /// The tags of the waiting tasks, oldest first.
    package var tags: [Tag] { entries.map(\.tag) }

    /// A ticket no other waiter in the process holds: taken without the list's lock, so that a
    /// storm of waiters takes that lock once each to queue, not three times.
    static func makeTicket() -> Ticket {
        waiterTickets.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Queues `continuation`; `false` when its ticket was cancelled first (the caller resumes it).
    mutating func enqueue(_ ticket: Ticket, tag: Tag, _ continuation: Continuation) -> Bool {
        if cancelledEarly.remove(ticket) != nil { return false }
        entries.append((ticket, tag, continuation))
        return true
    }

    /// Removes `ticket`'s waiter for its cancellation handler; remembers the ticket when it is not
    /// queued yet, so that a late queueing fails at once.
    mutating func cancel(_ ticket: Ticket) -> Continuation? {
        if let index = entries.firstIndex(where: { $0.ticket == ticket }) {
            return entries.remove(at: index).continuation
        }
        cancelledEarly.insert(ticket)
        return nil
    }

    /// Drops what a cancellation that came after the waiter was resumed left behind.
    mutating func forget(_ ticket: Ticket) {
        cancelledEarly.remove(ticket)
    }

    /// The oldest waiter, removed from the list.
    package mutating func removeFirst() -> Continuation? {
        entries.isEmpty ? nil : entries.removeFirst().continuation
    }

    /// Every waiter whose tag matches, removed from the list, oldest first.
    package mutating func removeAll(where matches: (Tag) -> Bool) -> [(tag: Tag, continuation: Continuation)] {
        var taken: [(tag: Tag, continuation: Continuation)] = []
        entries.removeAll { entry in
            guard matches(entry.tag) else { return false }
            taken.append((entry.tag, entry.continuation))
            return true
        }
        return taken
    }

    /// Every waiter, removed from the list, oldest first.
    package mutating func removeAll() -> [Continuation] {
        defer { entries.removeAll() }
        return entries.map(\.continuation)
    }
}

/// What a task about to wait decides under the lock: return at once, or be queued with a tag.
package enum WaitDecision<Value: Sendable, Tag: Sendable> {
    case resume(Result<Value, any Error>)
    case enqueue(Tag)
}

/// State that holds a ``WaiterList``.
package protocol WaiterHolding {
    associatedtype WaitValue: Sendable
    associatedtype WaitTag: Sendable
    var waiters: WaiterList<WaitValue, WaitTag> { get set }
}

extension LockedState where Value: WaiterHolding & Sendable {
    /// Suspends the calling task until a value is handed to it through the state's waiter list.
    ///
    /// `decide` runs under the lock: it returns `.resume` to return at once, or `.enqueue(tag)` to
    /// wait. Cancelling the task removes the waiter and throws `CancellationError`; nothing else
    /// is disturbed (the others keep waiting).
    package nonisolated(nonsending) func suspend(
        _ decide: (inout Value) -> WaitDecision<Value.WaitValue, Value.WaitTag>
    ) async throws -> Value.WaitValue {
        let ticket = WaiterList<Value.WaitValue, Value.WaitTag>.makeTicket()
        // Only a cancellation can leave the ticket behind, and a cancelled task stays cancelled:
        // when it is not cancelled after the handler has ended, there is nothing to forget.
        defer { if Task.isCancelled { withLock { $0.waiters.forget(ticket) } } }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Value.WaiterContinuation) in
                let immediate = withLock { state -> Result<Value.WaitValue, any Error>? in
                    switch decide(&state) {
                    case .resume(let result):
                        return result
                    case .enqueue(let tag):
                        return state.waiters.enqueue(ticket, tag: tag, continuation) ? nil : .failure(CancellationError())
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            withLock { $0.waiters.cancel(ticket) }?.resume(throwing: CancellationError())
        }
    }
}

extension WaiterHolding {
    package typealias WaiterContinuation = CheckedContinuation<WaitValue, any Error>
}
