#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
package import Darwin
#endif

/// A value behind a `pthread_mutex_t`: what every LoginKit type uses for state shared between
/// threads (the libcurl thread, the cooperative pool, test threads).
///
/// Why not `Synchronization.Mutex`: on Linux it locks with raw `futex` calls inside the prebuilt
/// standard library, which ThreadSanitizer cannot see, so every access under it is reported as a
/// race and real races drown in the noise. `pthread_mutex_lock` is intercepted by the sanitizer,
/// so the suite runs TSan-clean with real races still reported. The API mirrors `Mutex.withLock`.
package final class LockedState<Value>: @unchecked Sendable {  // safe: the proof is just below
    // Safety proof for @unchecked Sendable: the storage `value` points to is only ever touched
    // inside `withLock` (and by init and deinit, which no other thread can overlap), between
    // `pthread_mutex_lock` and `pthread_mutex_unlock` of `mutex`; both pointers are `let`,
    // allocated in init and freed in deinit, and never handed out (`@usableFromInline` only so that
    // the inlined `withLock` can reach them). This object owns the mutex for its whole life. So no
    // two threads access `value` at the same time, and each sees the last write (the mutex orders
    // them). The closure cannot escape `value`'s storage: it gets it `inout` for its duration only.
    // `Value` need not be Sendable, as with `Synchronization.Mutex`: the initial value is taken as
    // `sending` and whatever `withLock` returns is `sending`, so the compiler's region checking
    // refuses to hand a non-Sendable reference into or out of the lock while someone else keeps it.
    //
    // The value lives behind a pointer, not in a stored property: an `inout` access to a class's
    // stored property is checked for exclusivity at run time (`swift_beginAccess`) on every call,
    // and the mutex already makes the access exclusive. `withLock` is inlinable so that each caller
    // gets it specialised for its value and closure (no generic dispatch on every lock).
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Guards `value`.
    package init(_ value: sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with the value while holding the lock. Do not await or re-enter inside.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
