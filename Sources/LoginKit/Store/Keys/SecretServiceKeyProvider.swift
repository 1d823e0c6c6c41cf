#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CKeyring
import LoginKitHTTP
import LoginKitJOSE

/// Keeps store keys in the freedesktop Secret Service (GNOME Keyring, KWallet, KeePassXC): an item
/// with the attributes `application=loginkit`, `key-id=<id>` in the default collection.
///
/// - libsecret is loaded at the first use (`dlopen`): where it is not installed the provider is
///   unavailable, saying so, and nothing crashes.
/// - The session bus is the process's (libsecret reads the process environment), used only when
///   one is advertised (`DBUS_SESSION_BUS_ADDRESS`, or `$XDG_RUNTIME_DIR/bus`): no D-Bus
///   autolaunch, no X11.
/// - Never prompts: a locked collection or item is reported (`.unavailable`, "locked"); unlock it
///   the way your desktop does (logging in usually does).
/// - Every call runs on a thread of its own and is abandoned after ``timeout`` (default 2 s): a
///   service that does not answer is unavailable, never a hang.
///
/// What that means (docs/storage.md): the key is stored encrypted under the user's login password
/// (GNOME Keyring), readable by any unsandboxed process of the same user while the collection is
/// unlocked; it survives reboots; a home-directory backup holds the sealed keyring file, not the key
/// in clear.
///
/// Concurrency contract: safe from any task; calls run on their own threads.
package struct SecretServiceKeyProvider: StoreKeyProvider {
    package let name = "secret-service"
    /// The longest a call waits for the service.
    package var timeout: Duration

    /// The provider, on the session bus of the process environment.
    package init(timeout: Duration = .seconds(2)) {
        self.timeout = timeout
    }

    package func availability() async -> StoreKeyAvailability {
        if let reason = noBusReason() { return .unavailable(reason) }
        let outcome = await call { operation, error in
            var provider: UnsafeMutablePointer<CChar>?
            let status = loginkit_secret_probe(operation, &provider, &error)
            defer { loginkit_secret_string_free(provider) }
            return (status, provider.map { String(cString: $0) })
        }
        switch outcome {
        case .success(let serving): return .available(Self.displayName(serving ?? ""))
        case .failure(let error): return .unavailable(error.message)
        }
    }

    package func key(id: String) async throws -> SymmetricKey? {
        if let reason = noBusReason() { throw TokenStoreError(.unavailable, path: name, reason) }
        let text = try await call { operation, error in
            var secret: UnsafeMutablePointer<CChar>?
            let status = loginkit_secret_lookup(operation, id, &secret, &error)
            defer { loginkit_secret_string_free(secret) }
            return (status, secret.map { String(cString: $0) })
        }.get()
        guard let text else { return nil }
        return try StoreSealing.key(base64: text, origin: "the Secret Service item for LoginKit key \(id)")
    }

    package func store(_ key: SymmetricKey, id: String, label: String) async throws {
        if let reason = noBusReason() { throw TokenStoreError(.unavailable, path: name, reason) }
        let secret = Data(key.bytes).base64EncodedString()
        _ = try await call { operation, error in
            (loginkit_secret_store(operation, id, label, secret, &error), ())
        }.get()
    }

    package func removeKey(id: String) async throws {
        if let reason = noBusReason() { throw TokenStoreError(.unavailable, path: name, reason) }
        _ = try await call { operation, error in
            (loginkit_secret_clear(operation, id, &error), ())
        }.get()
    }

    /// Why the session bus is not to be used, or `nil` when one is advertised.
    private func noBusReason() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return nil }
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), StoreFileSystem.isSocket(runtime + "/bus") { return nil }
        return "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)"
    }

    /// `GNOME Keyring` for the process name `gnome-keyring-d`, and so on.
    static func displayName(_ process: String) -> String {
        switch process {
        case let name where name.hasPrefix("gnome-keyring"): return "GNOME Keyring"
        case let name where name.hasPrefix("kwalletd") || name.hasPrefix("ksecretd"): return "KWallet"
        case let name where name.lowercased().hasPrefix("keepassxc"): return "KeePassXC"
        default: return process
        }
    }

    /// Runs one libsecret call on a thread of its own, abandoning (cancelling) it after `timeout`.
    private func call<T: Sendable>(
        _ body: @escaping @Sendable (OpaquePointer?, inout UnsafeMutablePointer<CChar>?) -> (Int32, T)
    ) async -> Result<T, TokenStoreError> {
        let name = self.name
        // The first call loads libsecret (dlopen: file I/O), so even that is off the cooperative pool.
        let created = await runOnOwnThread(timeout: timeout, onTimeout: {}) { () -> Result<SecretOperation, TokenStoreError> in
            var loadError: UnsafeMutablePointer<CChar>?
            guard let handle = loginkit_secret_operation_new(&loadError) else {
                defer { loginkit_secret_string_free(loadError) }
                let why = loadError.map { String(cString: $0) } ?? "libsecret could not be loaded"
                return .failure(TokenStoreError(.unavailable, path: name, "the Secret Service is not usable: \(why)"))
            }
            return .success(SecretOperation(handle))
        }
        let operation: SecretOperation
        switch created {
        case .success(let made)?: operation = made
        case .failure(let error)?: return .failure(error)
        case nil: return .failure(TokenStoreError(.unavailable, path: name, "libsecret did not load within \(timeout)"))
        }
        let outcome = await runOnOwnThread(timeout: timeout, onTimeout: { operation.cancel() }) { () -> Result<T, TokenStoreError> in
            var error: UnsafeMutablePointer<CChar>?
            let (status, value) = body(operation.handle, &error)
            defer { loginkit_secret_string_free(error) }
            let message = error.map { String(cString: $0) } ?? ""
            switch Int(status) {
            case LOGINKIT_SECRET_OK, LOGINKIT_SECRET_NOT_FOUND:
                return .success(value)
            case LOGINKIT_SECRET_LOCKED:
                return .failure(TokenStoreError(.unavailable, path: name, "the Secret Service is locked (\(message)); unlock your keyring and try again"))
            case LOGINKIT_SECRET_CANCELLED:
                return .failure(TokenStoreError(.unavailable, path: name, "the Secret Service did not answer in time"))
            default:
                return .failure(TokenStoreError(.unavailable, path: name, "the Secret Service is not usable: \(message)"))
            }
        }
        return outcome ?? .failure(TokenStoreError(.unavailable, path: name, "the Secret Service did not answer within \(timeout) (or no thread could be started)"))
    }
}

/// One libsecret operation's cancellation handle, freed when the last of the thread running the
/// operation and the timeout that may cancel it lets go.
///
/// `@unchecked Sendable`, safe because: the handle is immutable; the only call made from two threads
/// is `loginkit_secret_operation_cancel`, which is `g_cancellable_cancel` (documented thread-safe);
/// the operation itself runs once, on one thread; `deinit` frees it when no thread holds it.
private final class SecretOperation: @unchecked Sendable {  // safe: the proof is in the comment above
    let handle: OpaquePointer?
    init(_ handle: OpaquePointer) { self.handle = handle }
    func cancel() { loginkit_secret_operation_cancel(handle) }
    deinit { loginkit_secret_operation_free(handle) }
}

/// Runs `body` (a blocking C call) on a new thread and returns its result, or `nil` after `timeout`
/// (having called `onTimeout`, which should make `body` return soon). The thread is not awaited
/// past the timeout; it ends when `body` does.
func runOnOwnThread<T: Sendable>(
    timeout: Duration, onTimeout: @escaping @Sendable () -> Void, _ body: @escaping @Sendable () -> T
) async -> T? {
    let slot = LockedState<CheckedContinuation<T?, Never>?>(nil)
    let finish = { @Sendable (value: T?) -> Bool in
        guard let continuation = slot.withLock({ state -> CheckedContinuation<T?, Never>? in
            defer { state = nil }
            return state
        }) else { return false }
        continuation.resume(returning: value)
        return true
    }
    return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        slot.withLock { $0 = continuation }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled, finish(nil) { onTimeout() }
        }
        let started = startDetachedThread {
            let value = body()
            timer.cancel()
            _ = finish(value)
        }
        if !started {
            timer.cancel()
            _ = finish(nil)
        }
    }
}
