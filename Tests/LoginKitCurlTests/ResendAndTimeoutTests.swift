import Foundation
import HTTPTypes
@testable import LoginKitCurl
import LoginKitHTTP
import LoginKitTestSupport
import Testing

/// What reaches the server when a connection dies, and what a timeout leaves: against
/// `RawHTTPServer`, which decides for each request whether to answer it or to read it whole and
/// close the connection unanswered (a server that processed it and went away).
@Suite(.timeLimit(.minutes(2)))
struct ResendAndTimeoutTests {
    /// libcurl resends a request once when a kept-alive connection it reused turns out dead: what
    /// makes keep-alive safe against idle timeouts, and what would send a one-time credential twice.
    /// This shows the server below provokes it.
    @Test func anOrdinaryRequestOnADeadKeptAliveConnectionIsResent() async throws {
        // Each connection's first request is answered; a later one is read and left unanswered.
        let server = try RawHTTPServer { $0.index == 0 ? .answer(status: 200, body: "{}") : .close }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let status1 = try await client.send(.get, server.url("/first")).0.status
            #expect(status1 == .ok)
            let status2 = try await client.send(.get, server.url("/second")).0.status
            #expect(status2 == .ok)
            #expect(server.count(path: "/second") == 2)  // on the kept connection, then on a new one
            #expect(server.connectionCount == 2)
        }
    }

    /// The same scenario for a request sent with `sendNeverResent` (a refresh token, a code): it goes
    /// on a connection of its own, so a connection that dies after the request left fails the
    /// request, which reached the server exactly once. Without `CURLOPT_FRESH_CONNECT` it would go
    /// on the kept connection, die there, and arrive a second time on a new one.
    @Test func aOneTimeCredentialReachesTheServerOnceAndFails() async throws {
        let server = try RawHTTPServer { request in
            request.index == 0 && request.path != "/token" ? .answer(status: 200, body: "{}") : .close
        }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let status3 = try await client.send(.get, server.url("/first")).0.status
            #expect(status3 == .ok)  // a kept-alive connection
            let request = try #require(HTTPRequest(
                method: .post, url: server.url("/token"), headerFields: [.contentType: "application/x-www-form-urlencoded"]))
            let error = await thrown {
                try await client.sendNeverResent(request, body: Data("grant_type=refresh_token&refresh_token=rt-1".utf8))
            }
            let networkError = try #require(error as? NetworkError, "\(String(describing: error))")
            #expect(networkError.code == .connectionLost)
            #expect(networkError.requestSent == true)
            #expect(server.count(path: "/token") == 1)
            #expect(server.requests.first { $0.path == "/token" }?.connection == 2)  // a connection of its own
            #expect(server.requests.first { $0.path == "/token" }?.body == "grant_type=refresh_token&refresh_token=rt-1")
        }
    }

    /// The connection a one-time credential went on is closed after it (`CURLOPT_FORBID_REUSE`), and
    /// the next ordinary request goes on the connection kept from before.
    @Test func aOneTimeCredentialsConnectionIsNotKept() async throws {
        let server = try RawHTTPServer { _ in .answer(status: 200, body: "{}") }
        defer { server.stop() }
        try await CurlHTTPClient.withClient { client in
            let status4 = try await client.send(.get, server.url("/first")).0.status
            #expect(status4 == .ok)
            let request = try #require(HTTPRequest(method: .post, url: server.url("/token")))
            let status5 = try await client.sendNeverResent(request, body: Data("grant_type=authorization_code&code=c".utf8)).0.status
            #expect(status5 == .ok)
            await server.awaitClosedByClient(2)
            let status6 = try await client.send(.get, server.url("/second")).0.status
            #expect(status6 == .ok)
            #expect(server.connectionCount == 2)
            #expect(server.requests.map(\.connection) == [1, 2, 1])
        }
    }

    /// A request that fails before anything was written says so: the server cannot have acted on it.
    @Test func aFailureBeforeSendingSaysNothingWasSent() async throws {
        let port = try freeLoopbackPort()  // nothing listens there
        try await CurlHTTPClient.withClient { client in
            let request = try #require(HTTPRequest(method: .post, url: "http://127.0.0.1:\(port)/token"))
            let error = await thrown { try await client.sendNeverResent(request, body: Data("grant_type=refresh_token".utf8)) }
            let networkError = try #require(error as? NetworkError, "\(String(describing: error))")
            #expect(networkError.code == .connectFailed)
            #expect(networkError.requestSent == false)
        }
    }

    /// A process stopped (Ctrl-Z, a frozen cgroup, a paused container) after the provider answered
    /// resumes past its total timeout with the answer waiting in its socket: the answer is read, not
    /// dropped. Here the client's driver thread is what stops: a job that prefers it blocks it (the
    /// thread itself, not a task) from just after the request arrived; the server answers; then the
    /// client's deadline clock jumps past the request's deadline and the thread goes on. With
    /// libcurl's `CURLOPT_TIMEOUT_MS` as the total timeout the request would fail with `.timedOut`:
    /// libcurl checks it before it reads.
    @Test func anAnswerThatArrivedWhileTheClientWasStoppedIsReadNotTimedOut() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.totalTimeout = .seconds(2)
        let timeout = configuration.totalTimeout
        let clock = LockedState<UInt64>(1_000_000_000)
        configuration.monotonicClock = { clock.withLock { $0 } }
        let resume = try ThreadLatch()
        try await CurlHTTPClient.withClient(configuration: configuration) { client in
            let stop = LockedState<Task<Void, Never>?>(nil)
            let server = try RawHTTPServer(
                respond: { _ in
                    guard let stopped = try? ThreadLatch() else { return .close }
                    stop.withLock {
                        $0 = Task(executorPreference: client.taskExecutor) {
                            stopped.open()
                            resume.wait()  // the driver thread stops here
                        }
                    }
                    stopped.wait()  // the driver thread is stopped: now the provider answers
                    return .answer(status: 200, body: #"{"access_token":"fresh"}"#)
                },
                answered: { _ in
                    // The answer is in the client's socket: the stop lasts past the deadline.
                    clock.withLock { $0 += UInt64(timeout.components.seconds + 1) * 1_000_000_000 }
                    resume.open()
                })
            defer {
                resume.open()
                server.stop()
            }
            let (response, body) = try await client.send(.get, server.url("/token"))
            #expect(response.status == .ok)
            #expect(String(decoding: body, as: UTF8.self) == #"{"access_token":"fresh"}"#)
            let stopping = stop.withLock { $0 }
            await stopping?.value
        }
    }

    /// The total timeout still ends a request the server never answers, on time, with libcurl's code
    /// for it and whether the request was sent.
    @Test func aRequestWithoutAnAnswerTimesOutAfterItWasSent() async throws {
        let release = try ThreadLatch()
        let server = try RawHTTPServer { _ in
            release.wait()
            return .close
        }
        defer {
            release.open()
            server.stop()
        }
        var configuration = CurlHTTPClient.Configuration()
        configuration.totalTimeout = .milliseconds(300)
        try await CurlHTTPClient.withClient(configuration: configuration) { client in
            let error = await thrown { try await client.send(.get, server.url("/slow")) }
            let networkError = try #require(error as? NetworkError, "\(String(describing: error))")
            #expect(networkError.code == .timedOut)
            #expect(networkError.transportCode == 28)
            #expect(networkError.requestSent == true)
        }
    }
}
