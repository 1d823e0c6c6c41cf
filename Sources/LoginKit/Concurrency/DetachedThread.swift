#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a detached thread runs; handed to the thread through an unmanaged pointer.
private final class ThreadEntry {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Runs `body` on a new detached thread (blocking C calls never run on the cooperative pool).
/// Returns `false` when no thread could be started; `body` then never runs.
package func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    let context = Unmanaged.passRetained(ThreadEntry(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { context in
            guard let context else { return nil }
            Unmanaged<ThreadEntry>.fromOpaque(context).takeRetainedValue().body()
            return nil
        }, context)
    guard result == 0 else {
        Unmanaged<ThreadEntry>.fromOpaque(context).release()
        return false
    }
    pthread_detach(thread)
    return true
}

/// Closes a descriptor, ignoring the result (nothing useful can be done about a failed close).
func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

/// The C library's message for `code` (an `errno` value).
func systemErrorMessage(_ code: Int32) -> String {
    String(cString: strerror(code))
}
