internal import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A request on its way from a caller's task to the driver thread.
struct Submission: Sendable {
    let id: UInt64
    let url: String
    /// The destination is loopback (`127.0.0.0/8`, `::1`, `localhost`): never through a proxy.
    let bypassesProxy: Bool
    let request: HTTPRequest
    let body: Data?
    /// The request carries a one-time credential: it goes on a connection of its own, closed after
    /// it (`CURLOPT_FRESH_CONNECT`, `CURLOPT_FORBID_REUSE`), so that libcurl never resends it.
    let freshConnection: Bool
    let continuation: Completion
}

/// Where a request's outcome goes: published in its `Exchange` under its lock, then the caller's
/// task is resumed and reads it from there. The lock is the happens-before edge ThreadSanitizer
/// can see between the driver thread building the response and the caller reading it (the Swift
/// runtime does not annotate a continuation resumed before its task has suspended, and TSan then
/// reported the response's fields as a race).
struct Completion: Sendable {
    let exchange: LockedState<Exchange>
    let continuation: CheckedContinuation<Void, Never>

    func resume(with result: Result<ReceivedResponse, any Error>) {
        exchange.withLock { $0.outcome = result }
        continuation.resume()
    }

    func resume(throwing error: any Error) {
        resume(with: .failure(error))
    }
}

/// Work for the driver thread, applied in the order it was enqueued.
enum DriverCommand: Sendable {
    /// A transfer its caller has configured, to add to the multi handle.
    case add(Transfer)
    case cancel(UInt64)
}

/// Owns the `CURLM` handle.
///
/// Why `@unchecked Sendable` is safe here: the handle is used by the driver thread only, except for
/// `curl_multi_wakeup`, which libcurl documents as callable from any thread. `curl_multi_cleanup`
/// runs in `deinit`, when no thread can reach the handle any more (the driver thread holds a
/// reference for as long as it runs).
final class MultiHandle: @unchecked Sendable {  // safe: see the proof above
    let raw: UnsafeMutableRawPointer

    init?() {
        guard let raw = curl_multi_init() else { return nil }
        self.raw = raw
    }

    func wakeUp() {
        _ = curl_multi_wakeup(raw)
    }

    deinit {
        curl_multi_cleanup(raw)
    }
}

/// The state shared between callers and the driver thread: a command queue under a mutex, the
/// spare easy handles under another, and the multi handle for wake-ups. The transfers in flight
/// live in `CurlLoop`, on the thread.
///
/// The driver is also a `TaskExecutor` (SE-0417): jobs of tasks that prefer it run on the driver
/// thread between two `curl_multi_poll`s. A request sent from such a task costs no thread hop at
/// all — its transfer is configured and added on that thread, and the completion resumes the task
/// there too. Jobs that arrive after the thread has stopped go to the global concurrent executor,
/// so nothing that prefers a stopped client is ever stranded.
final class CurlDriver: TaskExecutor {
    struct State {
        var commands: [DriverCommand] = []
        var jobs: [UnownedJob] = []
        var shutdownRequested = false
        var stopped = false
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        /// The thread is in (or about to enter) `curl_multi_poll`: work queued now needs a wake-up.
        /// While it runs, it looks at the queues again before it sleeps, so none is needed.
        var sleeping = false
        /// A wake-up was sent since the thread went to sleep: later work rides on it.
        var wakeUpSent = false

        /// Whoever queues work calls this under the lock: `true` when they must wake the thread.
        mutating func needsWakeUp() -> Bool {
            guard sleeping, !wakeUpSent else { return false }
            wakeUpSent = true
            return true
        }
    }

    let multi: MultiHandle
    let configuration: CurlHTTPClient.Configuration
    /// The client certificate and key read when the client was created, for every handle it sets up.
    let clientCredential: ClientCredential?
    let state = LockedState(State())
    /// The driver thread, once it runs (tests check that preferring tasks run there).
    let thread = LockedState<pthread_t?>(nil)
    /// Easy handles created so far (tests check that handles are recycled, not replaced).
    let createdHandles = Atomic<Int>(0)
    /// Handles between two transfers, with the client's options and their caches: a caller takes
    /// one to configure its request on its own thread (`takeHandle`), the driver thread puts it
    /// back when the transfer has left the multi handle (`recycle`). `nil` once the thread stopped.
    private let spareHandles = LockedState<[EasyHandle]?>([])
    /// What a request gets once the client is shutting down.
    static let shutdownError = NetworkError(.shutdown, "the HTTP client was shut down")
    private let maximumSpareHandles = 64

    private init(multi: MultiHandle, configuration: CurlHTTPClient.Configuration, clientCredential: ClientCredential?) {
        self.multi = multi
        self.configuration = configuration
        self.clientCredential = clientCredential
    }

    /// Creates the multi handle and starts the driver thread; its handles present `clientCredential`.
    static func start(configuration: CurlHTTPClient.Configuration, clientCredential: ClientCredential?) throws -> CurlDriver {
        guard let multi = MultiHandle() else {
            throw NetworkError(.other, "libcurl could not create a multi handle")
        }
        let maxPerHost = max(1, configuration.maximumConnectionsPerHost)
        _ = loginkit_curl_multi_setopt_long(multi.raw, CURLMOPT_MAX_HOST_CONNECTIONS, maxPerHost)
        _ = loginkit_curl_multi_setopt_long(multi.raw, CURLMOPT_MAXCONNECTS, max(maxPerHost, 16))
        _ = loginkit_curl_multi_setopt_long(multi.raw, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        let driver = CurlDriver(multi: multi, configuration: configuration, clientCredential: clientCredential)
        let loop = CurlLoop(driver: driver)
        let context = Unmanaged.passRetained(loop).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let loop = Unmanaged<CurlLoop>.fromOpaque(context).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<CurlLoop>.fromOpaque(context).release()
            throw NetworkError(.other, "could not start the HTTP driver thread (error \(result))")
        }
        pthread_detach(thread)
        return driver
    }

    /// A handle with the client's options for a caller to configure: a spare one, or a new one;
    /// `.shutdown` once the thread has stopped (no handle is made for a request that would be refused).
    func takeHandle() -> Result<EasyHandle, NetworkError> {
        let (spare, stopped) = spareHandles.withLock { spares in (spares?.popLast(), spares == nil) }
        if let spare { return .success(spare) }
        if stopped { return .failure(Self.shutdownError) }
        guard let handle = EasyHandle() else {
            return .failure(NetworkError(.other, "libcurl could not create an easy handle"))
        }
        createdHandles.add(1, ordering: .relaxed)
        let code = handle.applyClientOptions(configuration, credential: clientCredential)
        guard code == CURLE_OK else { return .failure(Transfer.refusedOption(code)) }
        return .success(handle)
    }

    /// Takes back the handle of a transfer that is not (or no longer) in the multi handle: libcurl
    /// lets go of the transfer's header lines and callback context first. Kept for the next request
    /// unless there are enough spares or the thread has stopped.
    func recycle(_ transfer: Transfer) {
        transfer.handle.detachFromTransfer()
        transfer.releaseResources()
        let handle = transfer.handle
        spareHandles.withLock { spares in
            if let count = spares?.count, count < maximumSpareHandles { spares?.append(handle) }
        }
    }

    /// The thread is stopping: spare handles are freed, and later ones are not kept.
    func dropSpareHandles() {
        let dropped = spareHandles.withLock { spares in
            defer { spares = nil }
            return spares ?? []
        }
        _ = dropped  // freed here, outside the lock
    }

    /// Queues a command and wakes the thread if it sleeps; `false` when the driver is shutting down.
    ///
    /// At most one wake-up per sleep: a command queued while the thread runs (from a task on the
    /// thread itself, or while it works through a burst) is seen before it sleeps again, and costs
    /// no `curl_multi_wakeup` system call.
    func enqueue(_ command: DriverCommand) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.shutdownRequested else { return (false, false) }
            state.commands.append(command)
            return (true, state.needsWakeUp())
        }
        if wake { multi.wakeUp() }
        return accepted
    }

    /// Runs `job` on the driver thread, or on the global concurrent executor once the thread has
    /// stopped.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.stopped else { return (false, false) }
            state.jobs.append(job)
            return (true, state.needsWakeUp())
        }
        if accepted {
            if wake { multi.wakeUp() }
        } else {
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }

    /// Asks the thread to fail everything in flight and end; does not wait.
    func requestShutdown() {
        state.withLock { $0.shutdownRequested = true }
        multi.wakeUp()
    }

    /// Waits until the thread has ended, without asking it to.
    func waitUntilStopped() async {
        await withCheckedContinuation { continuation in
            let alreadyStopped = state.withLock { state -> Bool in
                if state.stopped { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if alreadyStopped { continuation.resume() }
        }
    }

    /// Asks the thread to end and waits until it has.
    func shutdown() async {
        await withCheckedContinuation { continuation in
            let alreadyStopped = state.withLock { state -> Bool in
                state.shutdownRequested = true
                if state.stopped { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if alreadyStopped { continuation.resume() } else { multi.wakeUp() }
        }
    }
}
