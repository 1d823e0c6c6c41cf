import Foundation
import LoginKit

/// A Secret Service of the test's own: a private D-Bus session bus (`dbus-daemon` with a
/// configuration that activates nothing, so a killed keyring stays dead) and a GNOME Keyring
/// daemon on it, unlocked with a throwaway password, its keyring files in a temporary directory.
/// Stopped in all cases when `body` ends.
public final class PrivateSecretService: Sendable {
    /// `DBUS_SESSION_BUS_ADDRESS` and the keyring's `XDG_*`/`HOME`: what a process needs to use it.
    public let environment: [String: String]
    private let bus: ChildProcess
    private let keyring: SpawnedProcess

    /// Whether the programs it needs are installed (`make test` installs them).
    public static var isInstalled: Bool {
        ["/usr/bin/dbus-daemon", "/usr/bin/gnome-keyring-daemon", "/usr/bin/gdbus", "/usr/bin/dbus-send"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// Runs `body` with a fresh, unlocked Secret Service.
    public static func with<T>(_ body: (PrivateSecretService) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let service = try await PrivateSecretService(directory: directory)
            do {
                let result = try await body(service)
                await service.stop()
                return result
            } catch {
                await service.stop()
                throw error
            }
        }
    }

    private init(directory: String) async throws {
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:dir=\(directory)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try configuration.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let bus = try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(directory)/bus.conf", "--nofork", "--print-address=1"])
        var lines = bus.lines.makeAsyncIterator()
        guard let address = await lines.next(), address.hasPrefix("unix:") else {
            bus.kill()
            throw PrivateSecretServiceError("dbus-daemon printed no address")
        }
        let data = directory + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let environment = [
            "DBUS_SESSION_BUS_ADDRESS": address, "HOME": directory, "XDG_DATA_HOME": data, "XDG_RUNTIME_DIR": directory,
            "XDG_CONFIG_HOME": directory + "/config",
        ]
        let password = try TestPipe()
        let keyring: SpawnedProcess
        do {
            keyring = try SpawnedProcess(
                "/usr/bin/gnome-keyring-daemon", ["--foreground", "--unlock", "--components=secrets"],
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                stdin: .descriptor(password.readEnd), stdout: .null, stderr: .null)
        } catch {
            bus.kill()
            throw error
        }
        close(password.readEnd)
        password.writeAndClose(Data("throwaway-test-password".utf8))
        // Waits (no polling) until the daemon owns org.freedesktop.secrets on the bus.
        let waited = await run("/usr/bin/env", ["DBUS_SESSION_BUS_ADDRESS=\(address)", "/usr/bin/gdbus", "wait", "--session", "--timeout", "30", "org.freedesktop.secrets"])
        guard waited == 0 else {
            keyring.kill(.SIGKILL)
            bus.kill()
            throw PrivateSecretServiceError("gnome-keyring-daemon did not appear on the bus (gdbus wait: \(waited))")
        }
        self.bus = bus
        self.keyring = keyring
        self.environment = environment
    }

    /// Locks the login collection (as a screen lock or `Lock` from a keyring manager does).
    public func lockCollection() async throws {
        let status = await run("/usr/bin/env", [
            "DBUS_SESSION_BUS_ADDRESS=\(environment["DBUS_SESSION_BUS_ADDRESS"] ?? "")", "/usr/bin/dbus-send", "--session", "--print-reply",
            "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/collection/login",
        ])
        guard status == 0 else { throw PrivateSecretServiceError("dbus-send Lock failed: \(status)") }
    }

    /// Kills the keyring daemon (SIGKILL) and waits for it to be gone; the bus stays up.
    public func killKeyringDaemon() async {
        keyring.kill(.SIGKILL)
        _ = await keyring.exitStatus()
    }

    private func stop() async {
        keyring.kill(.SIGKILL)
        _ = await keyring.exitStatus()
        bus.kill()
        _ = await bus.waitForExit()
    }
}

/// The private Secret Service could not be started.
public struct PrivateSecretServiceError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
