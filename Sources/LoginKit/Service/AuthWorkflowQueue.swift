/// Runs interactive steps (a device-code prompt, an explanation before a password prompt, a
/// multi-step workflow) strictly one after another, in the order they were added, so that two
/// features that need the user at once never interleave their prompts.
///
/// Each step re-checks, when its turn comes, whether it is still needed (another step may have
/// logged the user in meanwhile); if not, it is skipped and `run` returns `nil`.
public final class AuthWorkflowQueue: Sendable {
    private let lock = AsyncLock()

    /// An empty queue; share one between every feature that may prompt the user.
    public init() {}

    /// Waits for the step's turn, then runs `perform` if `isNeeded` still says so.
    ///
    /// - Returns: `perform`'s result, or `nil` when the step was no longer needed.
    /// - Throws: what `perform` throws; `CancellationError` when cancelled while waiting.
    public func run<T: Sendable>(
        isNeeded: @Sendable () async -> Bool = { true },
        perform: @Sendable () async throws -> T
    ) async throws -> T? {
        try await lock.withLock {
            guard await isNeeded() else { return nil }
            return try await perform()
        }
    }
}
