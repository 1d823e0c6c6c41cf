import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import LoginKit
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
            5 network or server failure, 6 upgrade required, 7 token verification failed.
            """,
        version: LoginKitCLI.version.description,
        subcommands: [
            LoginCommand.self, TokenCommand.self, ExchangeCommand.self, StatusCommand.self, LogoutCommand.self, VerifyCommand.self,
            DevServerCommand.self, DemoCommand.self,
        ]
    )
}

@main
enum LoginKitCLI {
    /// This CLI's version, checked against version policies: the next release (0.3.0) while it is being made.
    static let version = SemanticVersion(major: 0, minor: 3, patch: 0, preRelease: ["dev"])

    static func main() async {
        ProcessHardening.disableCoreDumps()  // before any secret is read or received
        // Library logs go to stderr, quiet unless asked for: stdout carries only results (tokens, JSON).
        // Control characters in them (a claim, a provider's answer) are escaped: one line per entry.
        let level = ProcessInfo.processInfo.environment["LOGINKIT_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .error
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler(label: label, stream: Terminal.EscapingStandardError())
            handler.logLevel = level
            return handler
        }
        do {
            var command = try LoginKitCommand.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as CLIFailure {
            failure.report()
            exit(failure.exitCode)
        } catch {
            let code = LoginKitCommand.exitCode(for: error)
            let message = LoginKitCommand.fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { print(message) }
                exit(0)
            }
            if let exitCode = error as? ExitCode {
                exit(exitCode.rawValue)
            }
            if !message.isEmpty { Terminal.standardError(message) }
            exit(2)  // the contract's usage code (ArgumentParser would use 64)
        }
    }
}
