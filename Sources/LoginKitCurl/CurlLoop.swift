internal import CCurl
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The driver thread's side: the transfers in the multi handle, touched by this thread only while
/// they are in it (their callers configured them before: `CurlHTTPClient.send`).
final class CurlLoop {
    private let driver: CurlDriver
    private var transfers: [UInt64: Transfer] = [:]
    private var idsByHandle: [UnsafeMutableRawPointer: UInt64] = [:]
    /// No transfer in `transfers` has an earlier deadline (`UInt64.max`: none has one); it may be
    /// earlier than the earliest left, which costs one look through them when it comes.
    private var earliestDeadline = UInt64.max

    init(driver: CurlDriver) {
        self.driver = driver
    }

    func run() {
        let multi = driver.multi.raw
        let executor = driver.asUnownedTaskExecutor()
        driver.thread.withLock { $0 = pthread_self() }
        // Named for `top -H`, `perf` and debuggers (it would otherwise carry its creator's name).
        loginkit_name_current_thread("loginkit-curl")
        // The queues are taken by swapping them with these (emptied, capacity kept): copying a
        // queue out and emptying it in place allocated a new buffer for each, on every pass.
        var jobs: [UnownedJob] = []
        var commands: [DriverCommand] = []
        while true {
            // Tasks that prefer this thread as their executor (see `CurlDriver`) run first: what
            // they send is queued as a command and started just below, in the same pass, without a
            // wake-up and without an extra `curl_multi_perform`.
            driver.state.withLock { state in swap(&state.jobs, &jobs) }
            for job in jobs { job.runSynchronously(on: executor) }
            jobs.removeAll(keepingCapacity: true)
            let shutdownRequested = driver.state.withLock { state in
                swap(&state.commands, &commands)
                return state.shutdownRequested
            }
            defer { commands.removeAll(keepingCapacity: true) }
            for command in commands {
                switch command {
                case .add(let transfer):
                    if shutdownRequested {
                        driver.recycle(transfer)
                        transfer.continuation.resume(throwing: CurlDriver.shutdownError)
                    } else {
                        start(transfer)
                    }
                case .cancel(let id):
                    cancel(id)
                }
            }
            if shutdownRequested { break }

            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectFinishedTransfers()
            // After the perform: what has arrived was read before any transfer is timed out.
            expireOverdueTransfers()
            // Completions may have resumed tasks onto this thread: run them before sleeping. The
            // decision to sleep is made under the lock that queuing takes, so work queued after it
            // sees `sleeping` and wakes the thread (`CurlDriver.State.needsWakeUp`).
            let sleeps = driver.state.withLock { state -> Bool in
                guard state.jobs.isEmpty, state.commands.isEmpty, !state.shutdownRequested else { return false }
                state.sleeping = true
                return true
            }
            if sleeps {
                var ready: Int32 = 0
                _ = curl_multi_poll(multi, nil, 0, pollTimeout(), &ready)
                driver.state.withLock { state in
                    state.sleeping = false
                    state.wakeUpSent = false
                }
            }
        }
        failAllAndStop(executor: executor)
    }

    // MARK: Starting and finishing transfers

    /// Adds a transfer its caller has configured (`CurlHTTPClient.send`) to the multi handle.
    private func start(_ transfer: Transfer) {
        let added = curl_multi_add_handle(driver.multi.raw, transfer.handle.raw)
        guard added == CURLM_OK else {
            driver.recycle(transfer)
            transfer.continuation.resume(
                throwing: NetworkError(.other, "libcurl refused the transfer (multi code \(added.rawValue))")
            )
            return
        }
        transfers[transfer.id] = transfer
        idsByHandle[transfer.handle.raw] = transfer.id
        earliestDeadline = min(earliestDeadline, transfer.deadline)
    }

    private func collectFinishedTransfers() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(driver.multi.raw, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            guard let id = idsByHandle[easy], let transfer = transfers[id] else {
                curl_multi_remove_handle(driver.multi.raw, easy)
                continue
            }
            detach(id: id, transfer: transfer)
            let result = transfer.result(code: code)
            driver.recycle(transfer)
            transfer.continuation.resume(with: result)
        }
    }

    /// Fails the transfers whose deadline has passed with `.timedOut`. Called right after
    /// `curl_multi_perform` and the collection of finished transfers, so that an answer that
    /// arrived while this thread could not run (the process stopped by a signal, a frozen cgroup, a
    /// paused container) is read and delivered rather than dropped, as libcurl's own total timeout
    /// would (it is checked before libcurl reads). Looks through the transfers only when the
    /// earliest deadline has come.
    private func expireOverdueTransfers() {
        guard earliestDeadline != .max else { return }
        let now = driver.configuration.monotonicClock()
        guard now >= earliestDeadline else { return }
        var overdue: [(UInt64, Transfer)] = []
        var next = UInt64.max
        for (id, transfer) in transfers {
            if transfer.deadline <= now { overdue.append((id, transfer)) } else { next = min(next, transfer.deadline) }
        }
        earliestDeadline = next
        for (id, transfer) in overdue {
            let result = transfer.timedOut()
            detach(id: id, transfer: transfer)
            driver.recycle(transfer)
            transfer.continuation.resume(with: result)
        }
    }

    /// How long `curl_multi_poll` may sleep: the idle interval, or less when a transfer's deadline
    /// comes sooner (libcurl shortens it further for its own timers).
    private func pollTimeout() -> Int32 {
        let idle = driver.configuration.idlePollMilliseconds
        guard earliestDeadline != .max else { return idle }
        let now = driver.configuration.monotonicClock()
        guard earliestDeadline > now else { return 0 }
        let milliseconds = (earliestDeadline - now) / 1_000_000 + 1
        return milliseconds < UInt64(max(idle, 0)) ? Int32(milliseconds) : idle
    }

    private func cancel(_ id: UInt64) {
        guard let transfer = transfers[id] else { return }  // already finished
        detach(id: id, transfer: transfer)
        driver.recycle(transfer)
        transfer.continuation.resume(throwing: CancellationError())
    }

    private func detach(id: UInt64, transfer: Transfer) {
        curl_multi_remove_handle(driver.multi.raw, transfer.handle.raw)
        transfers[id] = nil
        idsByHandle[transfer.handle.raw] = nil
        if transfers.isEmpty { earliestDeadline = .max }
    }

    private func failAllAndStop(executor: UnownedTaskExecutor) {
        for (id, transfer) in transfers {
            detach(id: id, transfer: transfer)
            transfer.handle.detachFromTransfer()  // libcurl lets go of the header lines first
            transfer.releaseResources()
            transfer.continuation.resume(throwing: CurlDriver.shutdownError)
        }
        driver.dropSpareHandles()
        // Commands that raced the shutdown flag were refused by `enqueue`; any left are failed here.
        let (leftovers, jobs, waiters) = driver.state.withLock { state in
            state.stopped = true
            let result = (state.commands, state.jobs, state.stopWaiters)
            state.commands.removeAll()
            state.jobs.removeAll()
            state.stopWaiters.removeAll()
            return result
        }
        for case .add(let transfer) in leftovers {
            driver.recycle(transfer)
            transfer.continuation.resume(throwing: CurlDriver.shutdownError)
        }
        // Jobs accepted before `stopped` was set run here, once; later ones go to the global
        // executor (`CurlDriver.enqueue`).
        for job in jobs { job.runSynchronously(on: executor) }
        loginkit_tls_thread_stop()
        for waiter in waiters { waiter.resume() }
    }
}
