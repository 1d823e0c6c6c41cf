#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
@testable import LoginKitCurl
import LoginKitDevServer
import LoginKitHTTP
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite(.timeLimit(.minutes(2)))
struct CurlHTTPClientTests {
    @Test func roundTripsMethodHeadersAndBody() async throws {
        try await withServerAndClient { server, client in
            let payload = Data("{\"grant_type\":\"password\",\"bytes\":\"\u{00e9}\u{0000}\"}".utf8)
            for method in [HTTPRequest.Method.post, .put, .patch, .delete] {
                let (response, data) = try await client.send(
                    method, server.url("/test/echo?q=1"),
                    headers: [.contentType: "application/json", HTTPField.Name("X-Test")!: "value 1"],
                    body: payload
                )
                #expect(response.status == .ok)
                #expect(response.headerFields[.contentType] == "application/json")
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.method == method.rawValue)
                #expect(echo.uri == "/test/echo?q=1")
                #expect(echo.headers["x-test"] == "value 1")
                #expect(echo.headers["content-type"] == "application/json")
                #expect(echo.headers["expect"] == nil)
                #expect(echo.headers["user-agent"] == "LoginKit/0.1")
                #expect(Data(base64Encoded: echo.body) == payload)
            }
            let (response, data) = try await client.send(.get, server.url("/test/echo"))
            #expect(response.status == .ok)
            let echo = try JSONDecoder().decode(EchoReply.self, from: data)
            #expect(echo.method == "GET")
            #expect(echo.body.isEmpty)
        }
    }

    /// The driver thread is woken only when it sleeps, once per sleep (`CurlDriver.State`). With
    /// its idle poll raised to an hour, a wake-up lost between "queue the work" and "go to sleep"
    /// would hang this test (and the suite's time limit fails it) instead of costing a second. The
    /// total timeout is an hour too: the driver sleeps at most until the earliest deadline.
    @Test func everyRequestWakesASleepingDriver() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.idlePollMilliseconds = 3_600_000
        configuration.totalTimeout = .seconds(3600)
        try await withServerAndClient(configuration: configuration) { server, client in
            let url = server.url("/test/status/200")
            // From the global executor: each request finds the thread asleep (or about to be).
            for _ in 0..<300 {
                let (response, _) = try await client.send(.get, url)
                #expect(response.status == .ok)
            }
            // Bursts from many tasks: most arrive while the thread is awake or already woken.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<32 {
                    group.addTask {
                        for _ in 0..<20 {
                            let (response, _) = try await client.send(.get, url)
                            #expect(response.status == .ok)
                        }
                    }
                }
                try await group.waitForAll()
            }
            // From a task on the driver thread itself: its submissions need no wake-up at all.
            let statuses = try await withTaskExecutorPreference(client.taskExecutor) { () async throws -> [Int] in
                var statuses: [Int] = []
                for _ in 0..<100 { statuses.append(try await client.send(.get, url).0.status.code) }
                return statuses
            }
            #expect(statuses == Array(repeating: 200, count: 100))
        }
    }

    /// A handle whose transfer was cancelled mid-flight (with a body, a custom method and a header)
    /// is recycled as it is: the next requests through it carry none of that.
    @Test func aHandleFromACancelledTransferCarriesNothingOver() async throws {
        try await withServerAndClient { server, client in
            let arrivals = server.monitor.arrivals()
            let only = try #require(HTTPField.Name("X-Only-Here"))
            let slow = Task {
                try await client.send(.get, server.url("/test/delay/600000"), headers: [only: "cancelled", .contentType: "text/plain"], body: Data("cancelled body".utf8))
            }
            await awaitArrival(of: "/test/delay/600000", in: arrivals)
            slow.cancel()
            #expect(await thrown { try await slow.value } is CancellationError)
            let (head, headData) = try await client.send(.head, server.url("/test/echo"))
            #expect(head.status == .ok)
            #expect(headData.isEmpty)
            for method in [HTTPRequest.Method.get, .post] {
                let (response, data) = try await client.send(method, server.url("/test/echo"))
                #expect(response.status == .ok)
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.method == method.rawValue)
                #expect(echo.body.isEmpty)
                #expect(echo.headers["x-only-here"] == nil)
                #expect(echo.headers["content-type"] == nil)
            }
            // One handle served all four: the cancelled transfer's was recycled, not replaced.
            #expect(client.driver.createdHandles.load(ordering: .relaxed) == 1)
        }
    }

    /// A HEAD has no body to send; libcurl would send it as a renamed POST and then wait for the
    /// response body the server announced and never sends.
    @Test func aHEADWithABodyIsRefusedBeforeAnyNetworkActivity() async throws {
        try await withServerAndClient { server, client in
            let arrivals = server.monitor.arrivals()
            await #expect(throws: NetworkError.self) {
                _ = try await client.send(.head, server.url("/test/echo"), body: Data("x".utf8))
            }
            let (response, _) = try await client.send(.get, server.url("/test/status/200"))
            #expect(response.status.code == 200)
            for await path in arrivals {
                #expect(path == "/test/status/200", "the HEAD reached the server")
                break
            }
        }
    }

    /// Sequential requests on one client reuse one easy handle, which is never reset: each
    /// request must arrive with its own method, body and headers, nothing of the one before.
    @Test func aRecycledHandleCarriesNothingOfTheRequestBefore() async throws {
        let only = try #require(HTTPField.Name("X-Only-Here"))
        let steps: [(method: HTTPRequest.Method, body: Data?, headers: HTTPFields)] = [
            (.patch, Data("patch body".utf8), [.contentType: "text/plain", only: "patch"]),
            (.get, nil, [:]),
            (.post, Data("post".utf8), [:]),
            (.head, nil, [only: "head"]),
            (.post, Data("after head".utf8), [.contentType: "application/json"]),
            (.delete, nil, [:]),
            (.put, Data(), [only: "put"]),
            (.head, nil, [:]),
            (.get, nil, [:]),
            (.get, Data("a GET with a body".utf8), [:]),
            (.post, Data("last".utf8), [:]),
        ]
        try await withServerAndClient { server, client in
            for step in steps {
                let (response, data) = try await client.send(step.method, server.url("/test/echo"), headers: step.headers, body: step.body)
                #expect(response.status == .ok, "\(step.method)")
                if step.method == .head && step.body == nil {
                    #expect(data.isEmpty)
                    continue
                }
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.method == step.method.rawValue)
                #expect(Data(base64Encoded: echo.body) == (step.body ?? Data()), "\(step.method)")
                #expect(echo.headers["x-only-here"] == step.headers[only], "\(step.method)")
                #expect(echo.headers["content-type"] == step.headers[.contentType], "\(step.method)")
                #expect(echo.headers["user-agent"] == "LoginKit/0.1")
            }
        }
    }

    /// Requests whose fields differ only in a value each send their own: a handle reuses the header
    /// lines it built only for the very same fields.
    @Test func aReusedHandleSendsEachRequestsOwnFieldValues() async throws {
        let attempt = try #require(HTTPField.Name("X-Attempt"))
        try await withServerAndClient { server, client in
            for value in ["1", "1", "2", "2", "1"] {
                let (_, data) = try await client.send(
                    .post, server.url("/test/echo"), headers: [attempt: value, .contentType: "application/json"], body: Data("{}".utf8))
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.headers["x-attempt"] == value)
                #expect(echo.headers["content-type"] == "application/json")
            }
        }
    }

    /// The header lines kept on a handle are reused only for fields equal byte for byte: a value
    /// that is the same text in another Unicode form, or a name in other letter case, is sent as the
    /// caller wrote it (`HTTPField`'s `==` would call them equal).
    @Test func reusedHeaderLinesAreTheCallersBytes() async throws {
        let name = try #require(HTTPField.Name("X-Name"))
        let lowercase = try #require(HTTPField.Name("x-name"))
        try await withServerAndClient { server, client in
            for (field, value) in [(name, "caf\u{E9}"), (name, "cafe\u{301}"), (name, "caf\u{E9}"), (lowercase, "caf\u{E9}")] {
                let (_, data) = try await client.send(.get, server.url("/test/echo"), headers: [field: value])
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.headers["x-name"].map { Array($0.utf8) } == Array(value.utf8))
            }
        }
    }

    /// Fields that may hold a secret are never kept on a handle; requests with and without them, in
    /// turn, each send exactly their own.
    @Test func requestsWithAndWithoutCredentialsSendTheirOwnFields() async throws {
        try await withServerAndClient { server, client in
            for credential in ["Basic YTpi", nil, "Basic YzpkZA", "Basic YzpkZA", nil] as [String?] {
                var headers: HTTPFields = [.accept: "application/json"]
                headers[.authorization] = credential
                let (_, data) = try await client.send(.post, server.url("/test/echo"), headers: headers, body: Data("{}".utf8))
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.headers["authorization"] == credential)
                #expect(echo.headers["accept"] == "application/json")
                #expect(echo.headers["content-type"] == nil)  // no form default for the body
            }
            for method in [HTTPRequest.Method.get, .delete, .post, .get] {
                let (_, data) = try await client.send(method, server.url("/test/echo"), headers: [.accept: "text/plain"])
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.method == method.rawValue)
                #expect(echo.headers["content-type"] == nil, "\(method)")
                #expect(echo.headers["accept"] == "text/plain")
            }
        }
    }

    /// The client's User-Agent goes with every request that has none of its own; a request's own
    /// replaces it (one User-Agent, never two; an empty one too), and the next request has the
    /// client's again.
    @Test func aRequestsOwnUserAgentReplacesTheClients() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.userAgent = "loginkit-test/2.0"
        try await withServerAndClient(configuration: configuration) { server, client in
            for own in [nil, "custom/1", nil, "custom/2", "", nil] as [String?] {
                var headers: HTTPFields = [:]
                headers[.userAgent] = own
                let (_, data) = try await client.send(.get, server.url("/test/echo"), headers: headers)
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(echo.headers["user-agent"] == own ?? "loginkit-test/2.0")
            }
        }
    }

    /// A response with more header fields than the client keeps (`HTTPFields` traps at 65,535, and
    /// libcurl lets a response's head reach 300 KB) stops the transfer with a typed error; one under
    /// the limit arrives whole, and the client keeps working.
    @Test func tooManyHeaderFieldsGiveATypedError() async throws {
        try await withServerAndClient { server, client in
            // The fields the server adds to its own (Content-Type, Content-Length, …), then the
            // limit exactly: 1,000 fields arrive, 1,001 stop the transfer.
            let (bare, _) = try await client.send(.get, server.url("/test/headers/0"))
            let own = bare.headerFields.count
            let (response, _) = try await client.send(.get, server.url("/test/headers/\(1_000 - own)"))
            #expect(response.status == .ok)
            #expect(response.headerFields.count == 1_000)
            #expect(response.headerFields[HTTPField.Name("X-Field-\(999 - own)")!] == "\(999 - own)")
            for count in [1_001 - own, 1_500, 20_000] {
                let error = await thrown { try await client.send(.get, server.url("/test/headers/\(count)")) }
                #expect((error as? NetworkError)?.code == .responseTooLarge, "\(count) fields")
                #expect((error as? NetworkError)?.message.contains("header fields") == true)
            }
            let (after, _) = try await client.send(.get, server.url("/test/status/200"))
            #expect(after.status == .ok)
        }
    }

    @Test func aBodyWithoutContentTypeIsNotSentAsAForm() async throws {
        try await withServerAndClient { server, client in
            let (_, data) = try await client.send(.post, server.url("/test/echo"), body: Data("raw".utf8))
            let echo = try JSONDecoder().decode(EchoReply.self, from: data)
            #expect(echo.headers["content-type"] == nil)
            #expect(Data(base64Encoded: echo.body) == Data("raw".utf8))
        }
    }

    @Test func returnsErrorStatusesAsResponses() async throws {
        try await withServerAndClient { server, client in
            for code in [400, 401, 404, 429, 500, 503] {
                let (response, data) = try await client.send(.get, server.url("/test/status/\(code)"))
                #expect(response.status.code == code)
                #expect(String(decoding: data, as: UTF8.self) == "status \(code)\n")
            }
        }
    }

    @Test func sequentialRequestsReuseConnections() async throws {
        try await withServerAndClient { server, client in
            for _ in 0..<1000 {
                let (response, _) = try await client.send(.get, server.url("/test/status/200"))
                #expect(response.status == .ok)
            }
            #expect(server.monitor.requestCount(path: "/test/status/200") == 1000)
            #expect(server.monitor.connectionCount <= 2)
        }
    }

    @Test func concurrentRequestsEachGetTheirOwnBody() async throws {
        try await withServerAndClient { server, client in
            let url = server.url("/test/echo")
            let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<256 {
                    group.addTask {
                        let body = Data("request-\(index)-".utf8) + Data(repeating: UInt8(index % 256), count: index * 7)
                        let (response, data) = try await client.send(.post, url, body: body)
                        let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                        return response.status == .ok && Data(base64Encoded: echo.body) == body
                    }
                }
                var mismatches = 0
                for try await matched in group where !matched { mismatches += 1 }
                return mismatches
            }
            #expect(mismatches == 0)
            #expect(server.monitor.requestCount(path: "/test/echo") == 256)
        }
    }

    /// Prompt means "without waiting for the response": the server answers after 10 minutes and
    /// the client's own timeout is as long, so only a cancellation that removes the transfer ends
    /// the request within the test's one-minute limit (and a late one would be a timeout, or a 200).
    @Test(.timeLimit(.minutes(3)))
    func cancellationIsPromptAndTheClientKeepsWorking() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.totalTimeout = .seconds(600)
        configuration.idlePollMilliseconds = 3_600_000  // a lost wake-up for the cancel would hang
        try await withServerAndClient(configuration: configuration) { server, client in
            let arrivals = server.monitor.arrivals()
            let url = server.url("/test/delay/600000")
            let request = Task { try await client.send(.get, url) }
            await awaitArrival(of: "/test/delay/600000", in: arrivals)
            request.cancel()
            let error = await thrown { try await request.value }
            #expect(error is CancellationError)

            let (response, _) = try await client.send(.get, server.url("/test/status/200"))
            #expect(response.status == .ok)
        }
    }

    @Test func aTaskCancelledBeforeSendingMakesNoRequest() async throws {
        try await withServerAndClient { server, client in
            let url = server.url("/test/status/200")
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.send(.get, url)
            }
            let error = await thrown { try await task.value }
            #expect(error is CancellationError)
            #expect(server.monitor.requestCount(path: "/test/status/200") == 0)
            // The handle the cancelled request took (and configured) went back to the spares.
            let (response, _) = try await client.send(.get, url)
            #expect(response.status == .ok)
            #expect(client.driver.createdHandles.load(ordering: .relaxed) == 1)
        }
    }

    @Test func totalTimeoutGivesATypedError() async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.totalTimeout = .milliseconds(300)
        try await withServerAndClient(configuration: configuration) { server, client in
            let error = await thrown { try await client.send(.get, server.url("/test/delay/10000")) }
            let networkError = try #require(error as? NetworkError)
            #expect(networkError.code == .timedOut)
            #expect(networkError.transportCode == 28)
        }
    }

    @Test func aRefusedConnectionGivesATypedError() async throws {
        let url = try await DevServer.withServer { $0.url("/test/status/200") }
        let client = try CurlHTTPClient()
        let error = await thrown {
            try await client.send(.post, url, headers: [.authorization: "Bearer secret-token-123"], body: Data("password=hunter2".utf8))
        }
        await client.shutdown()
        let networkError = try #require(error as? NetworkError)
        #expect(networkError.code == .connectFailed)
        #expect(networkError.message.contains("127.0.0.1"))
        for secret in ["secret-token-123", "hunter2", "/test/status"] {
            #expect(!String(describing: networkError).contains(secret))
        }
    }

    @Test(arguments: [false, true])
    func aBodyOverTheCapGivesTheTooLargeError(chunked: Bool) async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.maximumResponseSize = 100_000
        try await withServerAndClient(configuration: configuration) { server, client in
            let query = chunked ? "?chunked=1" : ""
            let (response, data) = try await client.send(.get, server.url("/test/bytes/100000\(query)"))
            #expect(response.status == .ok)
            #expect(data.count == 100_000)

            let error = await thrown { try await client.send(.get, server.url("/test/bytes/100001\(query)")) }
            #expect((error as? NetworkError)?.code == .responseTooLarge)
            let huge = await thrown { try await client.send(.get, server.url("/test/bytes/50000000\(query)")) }
            #expect((huge as? NetworkError)?.code == .responseTooLarge)
        }
    }

    @Test func redirectsAreNotFollowed() async throws {
        try await withServerAndClient { server, client in
            let (response, _) = try await client.send(.post, server.url("/test/redirect"), body: Data("secret".utf8))
            #expect(response.status == .found)
            #expect(response.headerFields[.location] == "/test/echo")
            #expect(server.monitor.requestCount(path: "/test/echo") == 0)
        }
    }

    @Test func plainHTTPToANonLoopbackHostIsRefusedBeforeAnyNetworkActivity() async throws {
        let client = try CurlHTTPClient()
        let error = await thrown { try await client.send(.get, "http://example.com/token") }
        await client.shutdown()
        let networkError = try #require(error as? NetworkError)
        #expect(networkError.code == .insecureURL)
        #expect(networkError.transportCode == nil)
    }

    /// The client keeps its last URL's check: each URL is still judged on its own, whatever came
    /// before it (loopback, then not, then loopback again, then not again).
    @Test func eachURLIsCheckedOnItsOwnWhateverTheLastOneWas() async throws {
        try await withServerAndClient { server, client in
            for _ in 0..<2 {
                let (response, _) = try await client.send(.get, server.url("/test/status/200"))
                #expect(response.status == .ok)
                let refused = await thrown { try await client.send(.get, "http://example.com/token") }
                #expect((refused as? NetworkError)?.code == .insecureURL)
                let refusedAgain = await thrown { try await client.send(.get, "http://example.com/token") }
                #expect((refusedAgain as? NetworkError)?.code == .insecureURL)
                // A loopback URL, then a longer one it is a prefix of, to another host. (What the
                // first one gets back does not matter here: it is checked, and its answer kept.)
                _ = await thrown { try await client.send(.get, "http://127.0.0.1") }
                let longer = await thrown { try await client.send(.get, "http://127.0.0.1.example.com/token") }
                #expect((longer as? NetworkError)?.code == .insecureURL)
                let withUserInfo = HTTPRequest(method: .get, scheme: "http", authority: "user@127.0.0.1", path: "/token")
                let malformed = await thrown { try await client.send(withUserInfo, body: nil) }
                #expect((malformed as? NetworkError)?.code == .invalidRequest)
            }
        }
    }

    @Test func aConnectionClosedMidBodyGivesConnectionLost() async throws {
        try await withServerAndClient { server, client in
            let error = await thrown { try await client.send(.get, server.url("/test/close-after-headers")) }
            #expect((error as? NetworkError)?.code == .connectionLost)
            let (response, _) = try await client.send(.get, server.url("/test/status/200"))
            #expect(response.status == .ok)
        }
    }

    @Test func shutdownFailsRequestsInFlightAndLaterOnes() async throws {
        let server = try await DevServer.start(configuration: .quiet)
        var configuration = CurlHTTPClient.Configuration()
        configuration.idlePollMilliseconds = 3_600_000  // a lost wake-up for the shutdown would hang
        let client = try CurlHTTPClient(configuration: configuration)
        let arrivals = server.monitor.arrivals()
        let url = server.url("/test/delay/30000")
        let requests = (0..<8).map { _ in Task { try await client.send(.get, url) } }
        await awaitArrivals(of: "/test/delay/30000", count: 8, in: arrivals)
        await client.shutdown()
        for request in requests {
            let error = await thrown { try await request.value }
            #expect((error as? NetworkError)?.code == .shutdown)
        }
        let created = client.driver.createdHandles.load(ordering: .relaxed)
        let later = await thrown { try await client.send(.get, server.url("/test/status/200")) }
        #expect((later as? NetworkError)?.code == .shutdown)
        #expect(client.driver.createdHandles.load(ordering: .relaxed) == created, "no handle is made for a refused request")
        await client.shutdown()  // idempotent
        await server.stop()
    }

    /// 1,000 sends, half of them cancelled at random points (before they reach the driver, while
    /// queued, in flight): each ends exactly once — with its response or `CancellationError` — (a
    /// continuation resumed twice traps, one never resumed hangs into the suite's time limit), the
    /// handles are reused rather than leaked, and the client still works afterwards.
    @Test func manySendsCancelledAtRandomPointsEachEndOnceAndTheClientStaysUsable() async throws {
        try await withServerAndClient { server, client in
            let url = server.url("/test/status/200")
            var random = SplitMix64(seed: 18)
            var answered = 0, cancelled = 0
            for _ in 0..<25 {
                let sends = (0..<40).map { _ in Task { try await client.send(.get, url).0.status.code } }
                for send in sends.shuffled(using: &random).prefix(20) {
                    for _ in 0..<Int.random(in: 0..<4, using: &random) { await Task.yield() }
                    send.cancel()
                }
                for send in sends {
                    do {
                        #expect(try await send.value == 200)
                        answered += 1
                    } catch is CancellationError {
                        cancelled += 1
                    } catch {
                        Issue.record("a send ended with \(error), neither its response nor a cancellation")
                    }
                }
            }
            #expect(answered + cancelled == 1_000)
            #expect(answered >= 500, "only the cancelled half may end without a response")
            #expect(cancelled > 0, "cancellation reached some sends before their response")
            let (response, _) = try await client.send(.get, url)
            #expect(response.status == .ok)
            // At most 40 sends at a time, and a handle goes back to the spares before its send
            // resumes: a handle leaked by a cancelled send would make more.
            #expect(client.driver.createdHandles.load(ordering: .relaxed) <= 40)
        }
    }

    /// Sends racing `shutdown()` from their start: each ends exactly once, with its response or the
    /// typed shutdown error, and the shutdown returns (a transfer stranded by the stop would hang).
    @Test func sendsRacingAShutdownEachEndOnce() async throws {
        try await DevServer.withServer { server in
            let url = server.url("/test/status/200")
            for round in 0..<5 {
                let client = try CurlHTTPClient()
                let sends = (0..<40).map { _ in Task { try await client.send(.get, url).0.status.code } }
                for _ in 0..<round * 2 { await Task.yield() }
                await client.shutdown()
                for send in sends {
                    do {
                        #expect(try await send.value == 200)
                    } catch let error as NetworkError {
                        #expect(error.code == .shutdown)
                    } catch {
                        Issue.record("a send ended with \(error), neither its response nor the shutdown error")
                    }
                }
            }
        }
    }

    /// A caller that took a handle and configured its transfer just before the client stopped (the
    /// race `send` meets): the driver refuses the transfer, the caller puts the handle back and the
    /// stopped driver drops it; no handle is handed out afterwards. A transfer wrongly accepted
    /// would never be resumed: the suite's time limit fails the test then.
    @Test func aTransferConfiguredAcrossAShutdownIsRefusedAndItsHandleDropped() async throws {
        let server = try await DevServer.start(configuration: .quiet)
        let client = try CurlHTTPClient()
        let driver = client.driver
        guard case .success(let handle) = driver.takeHandle() else {
            Issue.record("no handle before the shutdown")
            return
        }
        await client.shutdown()
        let url = server.url("/test/status/200")
        let parsed = try #require(URL(string: url))
        let authority = "\(try #require(parsed.host)):\(try #require(parsed.port))"
        let request = HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/test/status/200")
        let exchange = LockedState(Exchange())
        let queued = LockedState<Bool?>(nil)
        let refusedOption = LockedState<NetworkError?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let completion = Completion(exchange: exchange, continuation: continuation)
            let submission = Submission(id: 1, url: url, bypassesProxy: true, request: request, body: nil, freshConnection: false, continuation: completion)
            let transfer = Transfer(submission: submission, handle: handle, configuration: driver.configuration)
            refusedOption.withLock { $0 = transfer.configure() }
            let accepted = driver.enqueue(.add(transfer))
            queued.withLock { $0 = accepted }
            if !accepted {
                driver.recycle(transfer)
                completion.resume(throwing: NetworkError(.shutdown, "the HTTP client was shut down"))
            }
        }
        #expect(refusedOption.withLock { $0 } == nil)
        #expect(queued.withLock { $0 } == false)
        let outcome = exchange.withLock { $0.outcome }
        if case .failure(let error as NetworkError) = outcome {
            #expect(error.code == .shutdown)
        } else {
            Issue.record("the refused transfer has no shutdown outcome")
        }
        guard case .failure(let error) = driver.takeHandle() else {
            Issue.record("a handle was handed out after the shutdown")
            return
        }
        #expect(error.code == .shutdown)
        await server.stop()
    }

    @Test func tasksPreferringTheClientsExecutorRunOnItsThreadAndOutliveIt() async throws {
        let server = try await DevServer.start(configuration: .quiet)
        let client = try CurlHTTPClient()
        let driverThread = try await withTaskExecutorPreference(client.taskExecutor) {
            // A warm-up request: the driver has recorded its thread once it has served one.
            _ = try await client.send(.get, server.url("/test/status/200"))
            #if os(Linux)
            // Named for `top -H`, `perf` and debuggers, not after the pool thread that created it.
            let name = try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
            #expect(name.trimmingCharacters(in: .newlines) == "loginkit-curl")
            #endif
            return try #require(client.driver.thread.withLock { $0 })
        }
        try await withTaskExecutorPreference(client.taskExecutor) {
            for index in 0..<50 {
                let (_, data) = try await client.send(.post, server.url("/test/echo"), body: Data("seq-\(index)".utf8))
                #expect(pthread_equal(pthread_self(), driverThread) != 0, "resumed off the driver thread")
                let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                #expect(Data(base64Encoded: echo.body) == Data("seq-\(index)".utf8))
            }
            // Concurrent child tasks inherit the preference; each gets its own body.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<64 {
                    group.addTask {
                        let (_, data) = try await client.send(.post, server.url("/test/echo"), body: Data("conc-\(index)".utf8))
                        #expect(pthread_equal(pthread_self(), driverThread) != 0)
                        let echo = try JSONDecoder().decode(EchoReply.self, from: data)
                        #expect(Data(base64Encoded: echo.body) == Data("conc-\(index)".utf8))
                    }
                }
                try await group.waitForAll()
            }
            // Cancellation works from the driver thread too.
            let arrivals = server.monitor.arrivals()
            let slow = Task(executorPreference: client.taskExecutor) { try await client.send(.get, server.url("/test/delay/30000")) }
            await awaitArrivals(of: "/test/delay/30000", count: 1, in: arrivals)
            slow.cancel()
            #expect(await thrown { try await slow.value } is CancellationError)
            // Shutting the client down from a task that prefers it: the task goes on (on the
            // global executor) and later requests fail cleanly instead of hanging.
            #expect(client.preferredTaskExecutor != nil)
            await client.shutdown()
            let later = await thrown { try await client.send(.get, server.url("/test/status/200")) }
            #expect((later as? NetworkError)?.code == .shutdown)
            // A stopped client offers no executor: a refresh started now runs on the global one.
            #expect(client.preferredTaskExecutor == nil)
            #expect(pthread_equal(pthread_self(), driverThread) == 0)
        }
        await server.stop()
    }

    @Test func aReleasedClientEndsItsThread() async throws {
        try await withServerAndClient { server, _ in
            var client: CurlHTTPClient? = try CurlHTTPClient()
            let driver = try #require(client?.driver)
            let (response, _) = try #require(try await client?.send(.get, server.url("/test/status/200")))
            #expect(response.status == .ok)
            client = nil
            await driver.waitUntilStopped()  // returns only once the driver thread has left its loop
        }
    }
}

/// A deterministic random number generator (SplitMix64): a test's random choices (which sends it
/// cancels, after how many yields) are the same on every run; the threads' interleaving is not.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
