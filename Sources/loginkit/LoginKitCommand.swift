import ArgumentParser
import LoginKitDevServer

/// `loginkit`: log in, print tokens, run the dev identity provider. See docs/cli.md.
@main
struct LoginKitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loginkit",
        abstract: "Log in over HTTP and hand out valid tokens.",
        version: "0.1.0",
        subcommands: [DemoCommand.self, DevServerCommand.self]
    )
}

/// `loginkit dev-server`: the embedded identity provider in the foreground.
struct DevServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-server",
        abstract: "Run the embedded development identity provider on 127.0.0.1 until interrupted."
    )

    @Option(help: "The port to listen on (0 picks a free one).")
    var port: Int = 0

    func run() async throws {
        var configuration = DevServer.Configuration()
        configuration.port = port
        let server = try await DevServer.start(configuration: configuration)
        print("LoginKit dev server listening on \(server.baseURL)")
        print("Press Ctrl-C to stop.")
        while !Task.isCancelled {
            try await Task.sleep(for: .seconds(3600))
        }
        await server.stop()
    }
}
