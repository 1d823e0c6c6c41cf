// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit` with a `postgres://` store: the run is handed to `loginkit-fleet`, the same commands
/// linked with LoginKitPostgres (and so swift-nio, which `loginkit` itself never links).
enum FleetProcess {
    static let executableName = "loginkit-fleet"

    /// Replaces this process with `loginkit-fleet arguments` (`execv`), same environment, same
    /// process ID and terminal. Only the one installed beside this executable is run, never one
    /// found on `PATH`: it will read the store's password. Returns only by throwing.
    ///
    /// - Throws: a usage failure (exit 2) when it is missing; exit 1 when `execv` fails.
    static func replaceCurrentProcess(arguments: [String]) throws -> Never {
        let executable: String
        do {
            executable = try locateCompanion(executableName)
        } catch let failure as CLIFailure {
            throw CLIFailure(exitCode: 2, "the store is a PostgreSQL database, which needs \(executableName): \(failure.message)")
        }
        // `loginkit-fleet` starts with the mask this process started with, not this thread's.
        ProcessReplacement.restoreStartingSignalMask()
        let failure = withCStringArray([executable] + arguments) { argv -> Int32 in
            _ = execv(executable, argv)
            return errno
        }
        throw CLIFailure(exitCode: 1, "could not run \(executable): \(String(cString: strerror(failure)))")
    }
}
#endif
