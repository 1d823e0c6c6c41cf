// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import ArgumentParser
import Foundation
import LoginKitDevServer
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loginkit-dev-server [serve]`: the embedded identity provider in the foreground.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the development identity provider on 127.0.0.1 until stopped (the default command).",
        discussion: """
            Once it listens it prints exactly one line on stdout, `issuer: URL`, and a banner with the \
            demo credentials on stderr (not with --quiet). It stops, closing its connections, on \
            SIGINT (Ctrl-C) or SIGTERM, and with --exit-on-stdin-eof also when its standard input \
            reaches its end (how `loginkit demo` makes sure the server never outlives it). The dev \
            server has well-known users, passwords and client secrets: it listens on loopback only. \
            --host with another address is refused unless --allow-non-loopback is given too.
            """
    )

    @Option(help: "The address to listen on: 127.0.0.1 (default), another 127.x address, ::1 or localhost.") var host: String = "127.0.0.1"
    @Flag(name: .customLong("allow-non-loopback"), help: "Allow --host to be an address other hosts can reach.") var allowNonLoopback = false
    @Option(help: "The port to listen on (0 picks a free one).") var port: Int = 0
    @Option(name: .customLong("token-lifetime"), help: "Access and ID token lifetime in seconds.") var tokenLifetime: Int = 3600
    @Flag(name: .customLong("exit-on-stdin-eof"), help: "Also stop when standard input reaches its end (for a parent process).")
    var exitOnStdinEOF = false
    @Flag(help: "Print only the issuer line: no banner on stderr.") var quiet = false

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
        // Watch for stop requests before listening, so that none is missed.
        let (stopRequests, stop) = AsyncStream<String>.makeStream()
        var sources: [any DispatchSourceSignal] = []
        for (signalNumber, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(signalNumber, SIG_IGN)  // delivered to the dispatch source instead
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { stop.yield(name) }
            source.resume()
            sources.append(source)
        }
        defer { for source in sources { source.cancel() } }
        if exitOnStdinEOF {
            StandardInput.onEnd { stop.yield("end of standard input") }
        }

        var configuration = DevServer.Configuration.quiet
        configuration.host = host
        configuration.allowsNonLoopbackBind = allowNonLoopback
        configuration.port = port
        configuration.identityProvider.accessTokenLifetime = .seconds(tokenLifetime)
        configuration.identityProvider.idTokenLifetime = .seconds(tokenLifetime)
        let server: DevServer
        do {
            server = try await DevServer.start(configuration: configuration)
        } catch {
            throw ToolFailure("could not listen on \(host) port \(port): \(error)")
        }
        // The one line a parent process reads; written at once, not buffered.
        FileHandle.standardOutput.write(Data("issuer: \(server.issuer)\n".utf8))
        if !quiet { printBanner(issuer: server.issuer, gitHubRequestToken: server.gitHubRequestToken) }

        var requests = stopRequests.makeAsyncIterator()
        let reason = await requests.next()
        if !quiet { standardError("stopping (\(reason ?? "stopped"))") }
        await server.stop()
    }

    private func printBanner(issuer: String, gitHubRequestToken: String) {
        if allowNonLoopback {
            standardError("warning: the dev server listens on \(host), reachable from other hosts; its users and secrets are public")
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "loginkit-dev-server"
        let browse = executable + " browse"
        standardError(
            """
            LoginKit dev identity provider
              issuer:    \(issuer)
              discovery: \(issuer)/.well-known/openid-configuration
              user:      demo / demo    clients: loginkit-cli (public), loginkit-service (secret dev-secret)
              workload:  issuer \(issuer)/workload (client workload-client trusts its tokens)
                         ACTIONS_ID_TOKEN_REQUEST_URL="\(issuer)/workload/github/token?api-version=2.0" ACTIONS_ID_TOKEN_REQUEST_TOKEN=\(gitHubRequestToken)
                         metadata: \(issuer)/workload/metadata/token (header Metadata: true)
              try:       loginkit login --issuer \(issuer) --client-id loginkit-cli --username demo
              browser:   BROWSER="\(browse)" loginkit login --issuer \(issuer) --client-id loginkit-cli
            Press Ctrl-C to stop.
            """
        )
    }

    private func standardError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// The process's standard input, watched for its end.
enum StandardInput {
    /// Calls `body` once, from a thread of its own, when standard input reaches its end or fails:
    /// the parent holding its other end has closed it or exited. What is read is discarded.
    static func onEnd(_ body: @escaping @Sendable () -> Void) {
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 512)
            while true {
                let count = read(STDIN_FILENO, &buffer, buffer.count)
                if count > 0 || (count < 0 && errno == EINTR) { continue }
                break
            }
            body()
        }
    }
}
#endif
