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
///
/// One allocation: the value and the mutex live in one heap object (`Storage`, a `ManagedBuffer`:
/// the value its header, the mutex its one tail element), at addresses that stay put for the
/// object's life. A copy of a `LockedState` is the same lock and the same value.
package struct LockedState<Value>: @unchecked Sendable {  // safe: the proof is just below
    // Safety proof for @unchecked Sendable: the value in `storage` is only ever touched inside
    // `withLock` (and by init and `Storage`'s deinit, which no other thread can overlap), between
    // `pthread_mutex_lock` and `pthread_mutex_unlock` of the mutex stored beside it; `storage` is a
    // `let`, made in init, and never handed out (`@usableFromInline` only so that the inlined
    // `withLock` can reach it). The object owns the mutex for its whole life. So no two threads
    // access the value at the same time, and each sees the last write (the mutex orders them). The
    // closure cannot escape the value's storage: it gets it `inout` for its duration only.
    // `Value` need not be Sendable, as with `Synchronization.Mutex`: the initial value is taken as
    // `sending` and whatever `withLock` returns is `sending`, so the compiler's region checking
    // refuses to hand a non-Sendable reference into or out of the lock while someone else keeps it.
    //
    // The value is reached through a pointer, not as a stored property: an `inout` access to a
    // class's stored property is checked for exclusivity at run time (`swift_beginAccess`) on every
    // call, and the mutex already makes the access exclusive. `withLock` is inlinable so that each
    // caller gets it specialised for its value and closure (no generic dispatch on every lock).
    @usableFromInline let storage: Storage

    /// The value (header) and the mutex (the one element) in one allocation.
    @usableFromInline final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            // The header (the value) is destroyed by ManagedBuffer; the element is ours to destroy.
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                mutex.deinitialize(count: 1)
            }
        }
    }

    /// Guards `value`.
    package init(_ value: sending Value) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in value }
        // `create` called on `Storage` makes a `Storage`; the downcast only restates its type.
        storage = unsafeDowncast(buffer, to: Storage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }
    }

    /// Runs `body` with the value while holding the lock. Do not await or re-enter inside.
    @inlinable
    package func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        // The pointers stay valid while `storage` lives. `withUnsafeMutablePointers` promises them
        // only inside its closure (which cannot forward `throws(E)` and `sending`), so `storage` is
        // kept alive past the unlock explicitly: `_fixLifetime`, as `ManagedBuffer` itself does
        // (transparent: no code, no metadata; `withExtendedLifetime` fetched the generic class's
        // metadata on every lock).
        let (value, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
        pthread_mutex_lock(mutex)
        defer {
            pthread_mutex_unlock(mutex)
            _fixLifetime(storage)
        }
        return try body(&value.pointee)
    }
}
