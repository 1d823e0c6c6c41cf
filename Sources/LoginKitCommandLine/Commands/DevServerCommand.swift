// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser

/// `loginkit dev-server`: runs the `loginkit-dev-server` beside this executable in this process's
/// place, so that `loginkit` itself links no server framework, without the variables that hold
/// secrets. Its options are that executable's (`loginkit-dev-server serve --help`); they are passed
/// on unchanged.
struct DevServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-server",
        abstract: "Run the development identity provider on 127.0.0.1 until interrupted (runs loginkit-dev-server).",
        discussion: """
            Runs the loginkit-dev-server installed beside loginkit (never one found on PATH) with the \
            same arguments: --host A (loopback only unless --allow-non-loopback), --port N, \
            --token-lifetime SECONDS, --exit-on-stdin-eof, --quiet; see `loginkit-dev-server serve \
            --help`. Its environment lacks LOGINKIT_CLIENT_SECRET, LOGINKIT_STORE_KEY, PGPASSWORD and \
            LOGINKIT_STORE. It prints `issuer: URL` on stdout once it listens. The dev server has \
            well-known users, passwords and client secrets: it listens on loopback only. Exit 2 when \
            loginkit-dev-server is missing.
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "Options for loginkit-dev-server serve.")
    var arguments: [String] = []

    func run() throws {
        try DevServerProcess.replaceCurrentProcess(arguments: ["serve"] + arguments)
    }
}
#endif
