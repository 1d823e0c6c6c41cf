import Foundation
import LoginKit
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(3)))
struct LoopbackReceiverTests {
    @Test func listenAddressesParseLikeKubeloginsFlag() {
        #expect(ListenAddress("127.0.0.1:8000") == ListenAddress(host: "127.0.0.1", port: 8000))
        #expect(ListenAddress("[::1]:0") == ListenAddress(host: "::1", port: 0))
        #expect(ListenAddress("localhost:18000")?.isLoopback == true)
        #expect(ListenAddress("0.0.0.0:8000")?.isLoopback == false)
        for text in ["127.0.0.1", "::1:80", "127.0.0.1:65536", ":80", "[::1]80", "127.0.0.1:x", "127.0.0.1:-1"] {
            #expect(ListenAddress(text) == nil, "\(text)")
        }
    }

    @Test func aNonLoopbackAddressIsRefusedUnlessAllowed() throws {
        let refused = #expect(throws: LoginError.self) {
            try LoopbackReceiver(addresses: [ListenAddress(host: "0.0.0.0", port: 0)])
        }
        #expect(refused?.code == .invalidConfiguration)
        try LoopbackReceiver(addresses: [ListenAddress(host: "0.0.0.0", port: 0)], allowsNonLoopback: true).close()
    }

    @Test func theFirstAddressThatBindsIsTaken() throws {
        let taken = try LoopbackReceiver()
        defer { taken.close() }
        #expect(taken.defaultRedirectURI == "http://127.0.0.1:\(taken.port)/callback")
        let next = try LoopbackReceiver(addresses: [ListenAddress(port: taken.port), ListenAddress(port: 0)])
        defer { next.close() }
        #expect(next.port != taken.port)
        let error = #expect(throws: LoginError.self) {
            try LoopbackReceiver(addresses: [ListenAddress(port: taken.port)])
        }
        #expect(error?.code == .cannotListen)
    }

    /// Served from `start` on, with no task waiting for the result yet: serving does not wait for
    /// the task that calls `receive` to get a cooperative thread, which under load can take long
    /// enough for the browser's request to time out.
    @Test func itAnswersOnlyGETOnItsCallbackPathThenCloses() async throws {
        try await CurlHTTPClient.withClient { client in
            let receiver = try LoopbackReceiver()
            let base = "http://127.0.0.1:\(receiver.port)"
            try receiver.start(path: "/callback") { query in
                query == "code=abc"
                    ? ReceiverReply(status: 200, page: "done", outcome: .success("abc"))
                    : ReceiverReply(status: 400, page: "not yet")
            }
            func status(_ method: HTTPRequest.Method, _ path: String) async throws -> Int {
                let request = try #require(HTTPRequest(method: method, url: base + path))
                return try await client.send(request, body: nil).0.status.code
            }
            #expect(try await status(.get, "/favicon.ico") == 404)
            #expect(try await status(.post, "/callback") == 405)
            #expect(try await status(.get, "/callback?other=1") == 400)  // no outcome: it keeps waiting
            #expect(try await status(.get, "/callback?code=abc") == 200)
            #expect(try await receiver.result() == "abc")
            let refused = await thrown { try await status(.get, "/callback?code=abc") }
            #expect((refused as? NetworkError)?.code == .connectFailed, "\(String(describing: refused))")
        }
    }

    @Test func closingBeforeOrWhileWaitingFreesThePort() async throws {
        let early = try LoopbackReceiver()
        early.close()
        #expect(throws: CancellationError.self) {
            try early.start(path: "/callback") { _ in ReceiverReply(status: 200, page: "") }
        }
        await #expect(throws: CancellationError.self) { try await early.result() }
        try LoopbackReceiver(addresses: [ListenAddress(port: early.port)]).close()

        let waiting = try LoopbackReceiver()
        try waiting.start(path: "/callback") { _ in ReceiverReply(status: 200, page: "") }
        let task = Task { try await waiting.result() }
        waiting.close()
        await #expect(throws: CancellationError.self) { try await task.value }
        try LoopbackReceiver(addresses: [ListenAddress(port: waiting.port)]).close()
    }
}
