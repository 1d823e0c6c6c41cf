// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
package import LoginKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit`: log in, print tokens, run the dev identity provider. The contract (flags, variables,
/// exit codes) is in docs/cli.md.
struct LoginKitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loginkit",
        abstract: "Log in over HTTP, keep tokens safe on disk, print valid tokens.",
        discussion: """
            Exit codes: 0 ok, 1 other failure, 2 usage, 3 login required, 4 credentials rejected, \
            5 network or server failure, 6 upgrade required, 7 token verification failed, \
            8 logged out here but the revocation at the provider failed, 10 step-up required (the \
            resource server asks for a stronger or more recent sign-in), 22 HTTP status 400 or more \
            (request), 126 and 127 the command cannot be run or is not found (exec).
            """,
        version: LoginKitCLI.version.description,
        subcommands: [
            LoginCommand.self, TokenCommand.self, RequestCommand.self, ExchangeCommand.self, StatusCommand.self, LogoutCommand.self,
            StoreCommand.self, ProfilesCommand.self, VerifyCommand.self,
            GitCredentialCommand.self, DockerCredentialCommand.self, ExecCommand.self,
            DevServerCommand.self, DemoCommand.self,
        ]
    )
}

/// The command-line tool, shared by two executables: `loginkit` (file stores; it links no
/// networking framework beyond libcurl) and `loginkit-fleet` (the same commands, plus `postgres://`
/// stores through LoginKitPostgres, on swift-nio). `loginkit` hands a `postgres://` store over to
/// `loginkit-fleet` by `execv` before it parses anything (docs/cli.md, "Stores").
package enum LoginKitCLI {
    /// This CLI's version, checked against version policies: the next release (0.3.0) while it is being made.
    package static let version = SemanticVersion(major: 0, minor: 3, patch: 0, preRelease: ["dev"])

    /// Runs the tool — ``main(fleet:)`` — from an executable's synchronous `main`, and never
    /// returns. First, on the main thread and before any of the process's code runs on the
    /// concurrency runtime's threads (which block most signals), it records the signal mask the
    /// process was started with: what `exec` hands the command it runs.
    ///
    /// - Parameter fleet: as for ``main(fleet:)``.
    package static func start(fleet: (any FleetStoreOpener)?) -> Never {
        ProcessReplacement.recordStartingSignalMask()
        Task {
            await main(fleet: fleet)
        }
        dispatchMain()
    }

    /// Runs the tool with `arguments` (without the executable's name) and exits.
    ///
    /// - Parameter fleet: opens `postgres://` stores; `nil` in `loginkit`, which then replaces
    ///   itself with `loginkit-fleet` when the store named is one.
    package static func main(fleet: (any FleetStoreOpener)?) async -> Never {
        ProcessHardening.disableCoreDumps()  // before any secret is read or received
        let arguments = DockerCredentialCommand.toolArguments(CommandLine.arguments)  // as `docker-credential-loginkit`: that command
        if let remote = StoreOptions.remoteStore(arguments: arguments, environment: ProcessInfo.processInfo.environment) {
            // Refused here, before `loginkit-fleet` is run with the password on its argv too.
            if remote.fromFlag, StoreOptions.holdsPassword(remote.location) {
                StoreOptions.passwordInFlag.report()
                exit(StoreOptions.passwordInFlag.exitCode)
            }
            if fleet == nil {
                do {
                    try FleetProcess.replaceCurrentProcess(arguments: arguments)
                } catch {
                    (error as? CLIFailure)?.report()
                    exit((error as? CLIFailure)?.exitCode ?? 1)
                }
            }
        }
        StoreOptions.fleet = fleet
        // Library logs go to stderr, quiet unless asked for: stdout carries only results (tokens, JSON).
        // Control characters in them (a claim, a provider's answer) are escaped: one line per entry.
        let level = ProcessInfo.processInfo.environment["LOGINKIT_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .error
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler(label: label, stream: Terminal.EscapingStandardError())
            handler.logLevel = level
            return handler
        }
        let code = await run(arguments)
        await fleet?.shutdown()
        exit(code)
    }

    /// Parses and runs; the exit code.
    private static func run(_ arguments: [String]) async -> Int32 {
        do {
            var command = try LoginKitCommand.parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return 0
        } catch let failure as CLIFailure {
            failure.report()
            return failure.exitCode
        } catch {
            let code = LoginKitCommand.exitCode(for: error)
            let message = LoginKitCommand.fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { print(message) }
                return 0
            }
            if let exitCode = error as? ExitCode {
                return exitCode.rawValue
            }
            if !message.isEmpty { Terminal.standardError(message) }
            return 2  // the contract's usage code (ArgumentParser would use 64)
        }
    }
}
#endif
