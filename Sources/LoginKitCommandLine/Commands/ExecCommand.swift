// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `loginkit exec [--env VAR] -- COMMAND ARGS…`: a command run with a valid access token in its
/// environment, in this process's place.
struct ExecCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a command with a valid access token in its environment.",
        discussion: """
            Gets the profile's access token — refreshed first when needed, once across processes, as \
            for `token` — and runs COMMAND in this process's place (execve) with the token in \
            $LOGINKIT_ACCESS_TOKEN (--env another variable): the exit status and the signals are the \
            command's. The token is on no command line. The command gets this environment without \
            LOGINKIT_CLIENT_SECRET, LOGINKIT_STORE_KEY, PGPASSWORD and a LOGINKIT_STORE URL that holds a \
            password; the descriptors loginkit was started with, and none it opened. COMMAND is looked \
            up in the absolute directories of PATH unless it holds a /. Exit 127 when it is not found, \
            126 when it cannot be run, 2 for a --env that is no variable name; before the command runs, \
            the codes of `token` (3 login required, 5 network or server failure, …).
            """)

    @Option(name: .customLong("env"), help: ArgumentHelp("The variable that carries the token.", valueName: "var"))
    var variable = "LOGINKIT_ACCESS_TOKEN"
    @Option(name: .customLong("min-validity"), help: "Seconds the token must stay valid (refresh otherwise).") var minValidity: Int = 0
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions
    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    static let missingCommand = "name the command after --: loginkit exec -- COMMAND ARGS…"

    func validate() throws {
        guard minValidity >= 0 else { throw ValidationError("--min-validity must be zero or more seconds") }
        guard ProcessReplacement.isValidVariableName(variable) else {
            throw ValidationError(
                "--env \(Terminal.printable(variable, limit: 100)): not a variable name (letters, digits and _, not starting with a digit)")
        }
        guard !(command.first ?? "").isEmpty else { throw ValidationError(Self.missingCommand) }
    }

    func run() async throws {
        // Before anything is opened here: what the command may inherit.
        let inherited = ProcessReplacement.openDescriptors()
        try await reportingFailures {
            let environment = ProcessInfo.processInfo.environment
            // A command that cannot run fails before any token is fetched.
            guard let name = command.first, !name.isEmpty else { throw CLIFailure.usage(Self.missingCommand) }
            let executable = try ProcessReplacement.resolve(name, path: environment["PATH"])
            let network = try networkOptions.clientConfiguration()
            let store = try await storeOptions.openStore().store
            let issued = try await ProfileAccessToken.valid(
                profile: storeOptions.profileName, store: store, network: network, minimumValidity: .seconds(minValidity))
            // The token is valid; the lost save is said now, while something can still say it.
            if let unsaved = issued.unsaved { ProfileCall.unsavedFailure(unsaved).report() }
            await StoreOptions.fleet?.shutdown()  // a postgres:// store's connections end before the command starts
            try ProcessReplacement.replaceCurrentProcess(
                executable: executable, arguments: command,
                environment: ProcessReplacement.environment(environment, setting: variable, to: issued.token), inherited: inherited)
        }
    }
}
#endif
