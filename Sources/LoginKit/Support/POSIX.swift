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

/// Writes every byte of `bytes` to a blocking `descriptor`, resuming after `EINTR` and short
/// writes. Returns 0, or the `errno` of the write that failed.
package func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return 0 }
            return write(descriptor, base + offset, buffer.count - offset)
        }
        if count < 0 {
            if errno == EINTR { continue }
            return errno
        }
        guard count > 0 else { return EIO }  // nothing written: never loop for ever
        offset += count
    }
    return 0
}
