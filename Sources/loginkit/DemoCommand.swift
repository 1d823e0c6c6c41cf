import ArgumentParser
import HTTPTypes
import LoginKit
import LoginKitDevServer

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `loginkit demo`: a guided tour against the embedded dev identity provider on a free port.
///
/// Today it shows the transport layer (one libcurl multi thread, keep-alive, cancellation, the
/// safety refusals); the login, token and version-gate steps join as their layers land.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start the dev identity provider on a free loopback port and walk through LoginKit."
    )

    func run() async throws {
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { client in
                try await tour(server: server, client: client)
            }
        }
    }

    private func tour(server: DevServer, client: CurlHTTPClient) async throws {
        print("LoginKit demo — dev identity provider at \(server.baseURL)\n")

        step(1, "A JSON POST round trip through CurlHTTPClient")
        let request = try require(HTTPRequest(method: .post, url: server.url("/test/echo"), headerFields: [.contentType: "application/json"]))
        let (response, body) = try await client.send(request, body: Data(#"{"hello":"loginkit"}"#.utf8))
        let echo = try JSONDecoder().decode(EchoReply.self, from: body)
        print("   status \(response.status.code), the server saw \(echo.method) \(echo.uri) with \(Data(base64Encoded: echo.body)?.count ?? 0) body bytes\n")

        step(2, "100 concurrent requests on one libcurl multi thread")
        server.monitor.reset()
        let started = ContinuousClock.now
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    let get = try require(HTTPRequest(method: .get, url: server.url("/test/status/200")))
                    return try await client.send(get, body: nil).0.status.code
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - started
        print("   \(statuses.filter { $0 == 200 }.count) × 200 OK in \(elapsed.formatted(.units(allowed: [.milliseconds]))), over \(server.monitor.connectionCount) connections\n")

        step(3, "100 sequential requests reuse one kept-alive connection")
        server.monitor.reset()
        for _ in 0..<100 {
            let get = try require(HTTPRequest(method: .get, url: server.url("/test/status/200")))
            _ = try await client.send(get, body: nil)
        }
        print("   the server counted \(server.monitor.connectionCount) connection(s) for 100 requests\n")

        step(4, "Cancelling a request the server holds for 30 s")
        let arrivals = server.monitor.arrivals()
        let slow = try require(HTTPRequest(method: .get, url: server.url("/test/delay/30000")))
        let task = Task { try await client.send(slow, body: nil) }
        for await path in arrivals where path == "/test/delay/30000" { break }
        let cancelledAt = ContinuousClock.now
        task.cancel()
        let outcome: String
        do {
            _ = try await task.value
            outcome = "unexpectedly completed"
        } catch is CancellationError {
            outcome = "CancellationError after \((ContinuousClock.now - cancelledAt).formatted(.units(allowed: [.milliseconds])))"
        }
        print("   \(outcome)\n")

        step(5, "Safety refusals")
        do {
            let insecure = try require(HTTPRequest(method: .get, url: "http://example.com/token"))
            _ = try await client.send(insecure, body: nil)
            print("   plain http to example.com: unexpectedly sent")
        } catch let error as NetworkError {
            print("   plain http to example.com: refused without touching the network (\(error.code))")
        }
        let redirect = try require(HTTPRequest(method: .post, url: server.url("/test/redirect")))
        let (redirected, _) = try await client.send(redirect, body: Data("secret".utf8))
        print("   a 302 from the token endpoint: returned as \(redirected.status.code), not followed\n")

        print("Done. Next: `make test` runs the whole suite.")
    }

    private func step(_ number: Int, _ title: String) {
        print("\(number). \(title)")
    }
}

/// Unwraps a value the demo built from constants; a `nil` is a bug in the demo, reported as an error.
private func require<T>(_ value: T?) throws -> T {
    guard let value else { throw ValidationError("the demo built an invalid request") }
    return value
}
