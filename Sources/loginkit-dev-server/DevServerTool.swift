// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import ArgumentParser
import LoginKitHTTP
import Foundation
import LoginKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit-dev-server`: the dev identity provider as its own executable, so that `loginkit` links
/// no server framework; `loginkit dev-server` runs it in its place and `loginkit demo` starts it as a
/// child. `browse` is a scripted browser for it. Documented in docs/cli.md.
struct DevServerToolCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loginkit-dev-server",
        abstract: "The LoginKit development identity provider (loopback only), and a scripted browser for it.",
        discussion: "Exit codes: 0 ok, 1 failure, 2 usage.",
        subcommands: [ServeCommand.self, BrowseCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}

@main
enum DevServerTool {
    static func main() async {
        // A parent that stops reading our output must not kill the server mid-shutdown.
        signal(SIGPIPE, SIG_IGN)
        var command: any ParsableCommand
        do {
            command = try DevServerToolCommand.parseAsRoot()
        } catch {
            exitIfHelp(error)
            let message = DevServerToolCommand.fullMessage(for: error)
            if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
            exit(2)  // usage, as `loginkit` reports it (ArgumentParser would use 64)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as ToolFailure {
            failure.report()
            exit(failure.exitCode)
        } catch {
            exitIfHelp(error)  // `--help` at the root: the help command's `run()` throws it
            ToolFailure("\(error)").report()
            exit(1)
        }
    }

    /// ArgumentParser answers `--help`, `help` and `--version` by throwing, while parsing or from
    /// its help command's `run()`: such an error is printed as the help it holds, and the process
    /// exits 0. Any other error returns.
    private static func exitIfHelp(_ error: any Error) {
        guard DevServerToolCommand.exitCode(for: error) == .success else { return }
        let message = DevServerToolCommand.fullMessage(for: error)
        if !message.isEmpty { print(message) }
        exit(0)
    }
}

/// A failure reported as one line on stderr, with the exit code the process ends with.
struct ToolFailure: Error {
    let exitCode: Int32
    let message: String

    init(exitCode: Int32 = 1, _ message: String) {
        self.exitCode = exitCode
        self.message = message
    }

    /// `loginkit-dev-server: <message>` on stderr, control characters escaped (messages quote URLs
    /// and pages that another program chose).
    func report() {
        let text = escapingControlCharacters(message)
        FileHandle.standardError.write(Data("loginkit-dev-server: \(text)\n".utf8))
    }
}
#else
import Foundation

/// Built without the trait this tool needs: says so and exits 2.
@main
enum LoginKitDevServerWithoutTrait {
    static func main() {
        FileHandle.standardError.write(Data("loginkit-dev-server: built without LoginKit's \"DevServer\" trait; build with `swift build --enable-all-traits` (make does)\n".utf8))
        exit(2)
    }
}
#endif
