import ArgumentParser
import Foundation
import LoginKitDevServer
#if canImport(Glibc)
import Glibc
#endif

/// `loginkit dev-server`: the embedded identity provider in the foreground.
struct DevServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-server",
        abstract: "Run the embedded development identity provider on 127.0.0.1 until interrupted.",
        discussion: """
            The dev server has well-known users, passwords and client secrets: it listens on loopback \
            only. --host with another address is refused unless --allow-non-loopback is given too.
            """
    )

    @Option(help: "The address to listen on: 127.0.0.1 (default), another 127.x address, ::1 or localhost.") var host: String = "127.0.0.1"
    @Flag(name: .customLong("allow-non-loopback"), help: "Allow --host to be an address other hosts can reach.") var allowNonLoopback = false
    @Option(help: "The port to listen on (0 picks a free one).") var port: Int = 0
    @Option(name: .customLong("token-lifetime"), help: "Access and ID token lifetime in seconds.") var tokenLifetime: Int = 3600

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard tokenLifetime > 0 else { throw ValidationError("--token-lifetime must be positive") }
        guard allowNonLoopback || DevServer.isLoopback(host) else {
            throw ValidationError(
                "--host \(host) is not a loopback address (127.0.0.0/8, ::1, localhost); the dev server's users and secrets are public, "
                    + "add --allow-non-loopback to expose it to other hosts anyway"
            )
        }
    }

    func run() async throws {
        var configuration = DevServer.Configuration.quiet
        configuration.host = host
        configuration.allowsNonLoopbackBind = allowNonLoopback
        configuration.port = port
        configuration.identityProvider.accessTokenLifetime = .seconds(tokenLifetime)
        configuration.identityProvider.idTokenLifetime = .seconds(tokenLifetime)
        let server = try await DevServer.start(configuration: configuration)
        if allowNonLoopback {
            Terminal.warning("the dev server listens on \(host), reachable from other hosts; its users and secrets are public")
        }
        print("LoginKit dev identity provider")
        print("  issuer:    \(server.issuer)")
        print("  discovery: \(server.issuer)/.well-known/openid-configuration")
        print("  user:      demo / demo    clients: loginkit-cli (public), loginkit-service (secret dev-secret)")
        print("  try:       loginkit login --issuer \(server.issuer) --client-id loginkit-cli --username demo")
        print("Press Ctrl-C to stop.")
        // Wait for SIGINT/SIGTERM, then stop cleanly.
        let (signals, continuation) = AsyncStream<Int32>.makeStream()
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield(signalNumber) }
            source.resume()
            sources.append(source)
        }
        for await _ in signals { break }
        for source in sources { source.cancel() }
        await server.stop()
    }
}
