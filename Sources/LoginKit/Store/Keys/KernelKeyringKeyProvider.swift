import CKeyring
import LoginKitJOSE
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Keeps store keys in the Linux kernel key retention service: a `user` key named
/// `loginkit:store:<id>` in the user's persistent keyring (`keyctl get_persistent`).
///
/// What that means (docs/storage.md): any process of the same user can read the key, root can;
/// the key is never on disk, so a backup of the home directory holds only the sealed file. The
/// persistent keyring survives logout but **not a reboot**, and the kernel drops it after
/// `/proc/sys/kernel/keys/persistent_keyring_expiry` seconds unused (3 days by default): the store
/// then reads as "log in again". Containers whose seccomp profile refuses `keyctl` (Docker's
/// default) get `EPERM` at once: ``availability()`` says so without waiting.
///
/// Concurrency contract: the system calls do not block (no upcalls are made); safe from any task.
package struct KernelKeyringKeyProvider: StoreKeyProvider {
    package let name = "kernel-keyring"

    /// The provider; it holds no state (the kernel does).
    package init() {}

    package func availability() async -> StoreKeyAvailability {
        switch persistentKeyring() {
        case .success: return .available("survives logout, not reboot")
        case .failure(let error): return .unavailable(error.message)
        }
    }

    package func key(id: String) async throws -> SymmetricKey? {
        let keyring = try persistentKeyring().get()
        let serial = try search(id, in: keyring)
        guard let serial else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        let length = buffer.withUnsafeMutableBytes { loginkit_keyctl_read(serial, $0.baseAddress, $0.count) }
        defer { for index in buffer.indices { buffer[index] = 0 } }
        guard length >= 0 else {
            // Gone between the search and the read (expired, invalidated): as if never found.
            if -length == ENOKEY || -length == EKEYEXPIRED || -length == EKEYREVOKED { return nil }
            throw failure("reading key \(Self.description(id))", code: Int32(-length))
        }
        guard length == 32, let key = try? SymmetricKey(bytes: Array(buffer[0..<32])) else {
            throw TokenStoreError(
                .invalidKey, path: name,
                "the kernel keyring's key \(Self.description(id)) is not a 32-byte LoginKit store key; remove it with `keyctl purge user \(Self.description(id))`")
        }
        return key
    }

    package func store(_ key: SymmetricKey, id: String, label: String) async throws {
        let keyring = try persistentKeyring().get()
        let serial = key.bytes.withUnsafeBytes { loginkit_keyctl_add(Self.description(id), $0.baseAddress, $0.count, keyring) }
        guard serial >= 0 else { throw failure("storing key \(Self.description(id))", code: Int32(-serial)) }
    }

    package func removeKey(id: String) async throws {
        let keyring = try persistentKeyring().get()
        guard let serial = try search(id, in: keyring) else { return }
        let result = loginkit_keyctl_invalidate(serial)
        guard result >= 0 || -result == ENOKEY else { throw failure("removing key \(Self.description(id))", code: Int32(-result)) }
    }

    /// Why the kernel keyring cannot be used here, or `nil` when it can (one system call).
    package static var unavailableReason: String? {
        if case .failure(let error) = KernelKeyringKeyProvider().persistentKeyring() { return error.message }
        return nil
    }

    /// `loginkit:store:<id>`, the key's description in the keyring.
    static func description(_ id: String) -> String { "loginkit:store:" + id }

    private func persistentKeyring() -> Result<Int, TokenStoreError> {
        let keyring = loginkit_keyctl_persistent_keyring()
        guard keyring >= 0 else {
            let code = Int32(-keyring)
            let why: String
            switch code {
            case EPERM, EACCES: why = "keyctl is refused here (a container's seccomp profile?)"
            case ENOSYS: why = "the kernel has no key retention service"
            case EOPNOTSUPP: why = "the kernel has no persistent keyrings"
            default: why = "keyctl get_persistent failed: \(systemErrorMessage(code))"
            }
            return .failure(TokenStoreError(.unavailable, path: name, "the kernel keyring is not usable: \(why)", errno: code))
        }
        return .success(keyring)
    }

    private func search(_ id: String, in keyring: Int) throws(TokenStoreError) -> Int? {
        let serial = loginkit_keyctl_search(keyring, Self.description(id))
        guard serial >= 0 else {
            let code = Int32(-serial)
            if code == ENOKEY || code == EKEYEXPIRED || code == EKEYREVOKED { return nil }
            throw failure("looking up key \(Self.description(id))", code: code)
        }
        return serial
    }

    private func failure(_ what: String, code: Int32) -> TokenStoreError {
        TokenStoreError(.unavailable, path: name, "the kernel keyring failed \(what): \(systemErrorMessage(code))", errno: code)
    }
}
