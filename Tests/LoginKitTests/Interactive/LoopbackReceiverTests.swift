import Foundation
import Glibc
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

    /// A browser's connection, opened before sixteen idle ones from another local process, is still
    /// open when the browser sends its request on it: idle connections do not push it out.
    // A receiver that drops the connection never returns: the time limit ends the test, and
    // cancelling it closes the receiver.
    @Test(.timeLimit(.minutes(1))) func aBrowsersConnectionOutlivesSixteenIdleOnesOpenedAfterIt() async throws {
        let receiver = try Self.receiverExpecting("abc")
        defer { receiver.close() }
        var connections = try [connectToLoopback(port: receiver.port)]
        defer { for connection in connections { close(connection) } }
        for _ in 0..<16 { connections.append(try connectToLoopback(port: receiver.port)) }
        sendText("GET /callback?code=abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: connections[0])
        #expect(try await receiver.result() == "abc")
    }

    /// Sixteen idle connections opened first, then the browser's: its redirect is received at once.
    // A receiver that drops the connection never returns: the time limit ends the test, and
    // cancelling it closes the receiver.
    @Test(.timeLimit(.minutes(1))) func sixteenIdleConnectionsOpenedFirstDoNotHoldUpTheRedirect() async throws {
        let receiver = try Self.receiverExpecting("abc")
        defer { receiver.close() }
        var connections: [Int32] = []
        defer { for connection in connections { close(connection) } }
        for _ in 0..<16 { connections.append(try connectToLoopback(port: receiver.port)) }
        // One more that sends half a request and stalls.
        connections.append(try connectToLoopback(port: receiver.port))
        sendText("GET /callback?code=abc HTTP/1.1\r\n", on: connections[16])
        connections.append(try connectToLoopback(port: receiver.port))
        sendText("GET /callback?code=abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: connections[17])
        #expect(try await receiver.result() == "abc")
    }

    /// A started receiver whose callback ends the login with `code` when the query is `code=…`.
    private static func receiverExpecting(_ code: String) throws -> LoopbackReceiver {
        let receiver = try LoopbackReceiver()
        try receiver.start(path: "/callback") { query in
            query == "code=\(code)"
                ? ReceiverReply(status: 200, page: "done", outcome: .success(code))
                : ReceiverReply(status: 400, page: "not yet")
        }
        return receiver
    }
}

/// A TCP connection to `127.0.0.1:port`, established by the kernel whether or not the receiver has
/// accepted it yet.
private func connectToLoopback(port: Int) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(descriptor >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
    let result = withUnsafePointer(to: address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    let code = errno
    guard result == 0 else {
        close(descriptor)
        throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
    }
    return descriptor
}

/// Sends `text` on `descriptor` (never raising SIGPIPE should the peer be gone).
private func sendText(_ text: String, on descriptor: Int32) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}
