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
            let message = DevServerToolCommand.fullMessage(for: error)
            if DevServerToolCommand.exitCode(for: error) == .success {
                if !message.isEmpty { print(message) }
                exit(0)
            }
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
            // `--help` at the root: ArgumentParser's help command answers by throwing, as it does
            // for `help serve`. Printed as help, not as a failure.
            if DevServerToolCommand.exitCode(for: error) == .success {
                let message = DevServerToolCommand.fullMessage(for: error)
                if !message.isEmpty { print(message) }
                exit(0)
            }
            ToolFailure("\(error)").report()
            exit(1)
        }
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
