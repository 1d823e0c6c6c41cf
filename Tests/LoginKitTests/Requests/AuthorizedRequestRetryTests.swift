import Foundation
import HTTPTypes
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import Logging
import Testing

/// The retries of `AuthorizedRequestLoop` at their edges: the nonce a retry proves with, a caller
/// cancelled while its request was out, and a service's replacement token that comes back refused.
@Suite(.timeLimit(.minutes(3)))
struct AuthorizedRequestRetryTests {
    typealias Scripted = AuthorizedRequestTests

    /// Refreshes answered at once (refresh `n`, from 1, brings access-`n`) and counted; client
    /// credentials numbered by `clientToken` (token `n` is access-`clientToken(n)`); authorized
    /// requests over `httpTransport`.
    struct CountingAPI: AuthorizedRequestAPI, ClientCredentialsAPI {
        let httpTransport: any HTTPTransport
        var clientToken: @Sendable (Int) -> Int = { $0 }
        let dpopNonces = DPoPNonces()
        let refreshes = LockedState(0)
        let issued = LockedState(0)
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            let number = refreshes.withLock { count -> Int in
                count += 1
                return count
            }
            return Race.credentials(number, issuedAt: Scripted.now)
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
        func clientCredentials(scope: String?) async throws -> Credentials {
            let number = issued.withLock { count -> Int in
                count += 1
                return count
            }
            return Race.credentials(clientToken(number), issuedAt: Race.t0)
        }
    }

    /// Answers every request with `answer`, after cancelling the task that sends it.
    final class CancellingTransport: HTTPTransport {
        let answer: (HTTPResponse, Data)
        private let count = LockedState(0)

        init(answering answer: (HTTPResponse, Data)) {
            self.answer = answer
        }

        /// How many requests were sent.
        var sentCount: Int { count.withLock { $0 } }

        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            count.withLock { $0 += 1 }
            withUnsafeCurrentTask { task in
                if let task { task.cancel() }
            }
            return answer
        }
    }

    /// A log handler that hands every message to `action`, at every level.
    struct ActingLogHandler: LogHandler {
        let action: @Sendable (String) -> Void
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            action("\(event.message)")
        }
    }

    // MARK: The nonce retry

    /// A response from the same origin that arrives between the challenge and the retry (another
    /// request's, as under concurrency) stores its nonce, n-2, in the API's memory: the retry
    /// still proves with n-1, the nonce the challenge offered. The response is stored when the
    /// loop logs the retry — after it remembered the challenge's nonce, before it makes the proof.
    @Test func theNonceRetryProvesWithTheNonceTheChallengeOffered() async throws {
        let transport = Scripted.ScriptedResourceTransport([Scripted.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-1"), Scripted.ok])
        let api = CountingAPI(httpTransport: transport)
        let elsewhere = "https://api.test/other"
        let logger = Logger(label: "test") { _ in
            ActingLogHandler(action: { message in
                guard message.contains("asked for a DPoP nonce") else { return }
                api.dpopNonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: "n-2"]), for: elsewhere)
            })
        }
        let loop = try AuthorizedRequestLoop(api: api, clock: ManualClock(start: Scripted.now), profile: "default", logger: logger)
        let credentials = try Scripted.dpopBound()
        let (response, _) = try await loop.send(Scripted.request, body: nil, credentials: { credentials }, replacing: { _, _ in credentials })
        #expect(response.status == .ok)
        let sent = transport.sent
        #expect(sent.count == 2)
        #expect(try Scripted.claims(sent.last?.headerFields[.dpop])["nonce"] as? String == "n-1")
        #expect(api.dpopNonces.nonce(for: elsewhere) == "n-2", "the other response's nonce stays for the next request")
    }

    // MARK: Cancellation

    /// The caller is cancelled while its request is out, and the answer is `invalid_token`: no
    /// refresh is started (it would rotate the refresh token for a caller that is gone) and the
    /// request is not sent again.
    @Test func aCallerCancelledWhileItsTokenWasRefusedStartsNoRefresh() async throws {
        let transport = CancellingTransport(answering: Scripted.unauthorized(#"Bearer error="invalid_token""#))
        let api = CountingAPI(httpTransport: transport)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Scripted.now))
        let call = Task { try await service.send(Scripted.request) }
        await #expect(throws: CancellationError.self) { try await call.value }
        await service.shutdown()  // a refresh that was started would be awaited here
        #expect(api.refreshes.withLock { $0 } == 0)
        #expect(transport.sentCount == 1)
    }

    /// The same for a nonce challenge: the request is not sent again.
    @Test func aCallerCancelledWhileANonceWasAskedSendsNothingMore() async throws {
        let transport = CancellingTransport(answering: Scripted.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-1"))
        let api = CountingAPI(httpTransport: transport)
        let credentials = try Scripted.dpopBound()
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(credentials)])
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Scripted.now))
        let call = Task { try await service.send(Scripted.request) }
        await #expect(throws: CancellationError.self) { try await call.value }
        await service.shutdown()
        #expect(api.refreshes.withLock { $0 } == 0)
        #expect(transport.sentCount == 1)
    }

    // MARK: A service's replacement token

    /// The replacement for a refused token brings that very token back — issued by then, so it
    /// is what was refused (as when the request it joined read the store before the token was
    /// dropped): a new one is asked for once more, and kept.
    @Test func aReplacementThatBringsBackTheRefusedTokenIsAskedForOnceMore() async throws {
        let clock = ManualClock(start: Scripted.now)
        let api = CountingAPI(httpTransport: Scripted.ScriptedResourceTransport([]))
        let tokens = ClientCredentialsTokens(api: api, store: InMemoryTokenStore(), clock: clock)
        let replacement = try await tokens.replacement(for: "access-1", sentAt: clock.now, target: TokenTarget())
        #expect(replacement.accessToken == "access-2")
        #expect(api.issued.withLock { $0 } == 2)
        #expect(try await tokens.accessToken() == "access-2")
        #expect(api.issued.withLock { $0 } == 2)
    }

    /// Once more at most: a provider that keeps issuing the refused token gets two requests, and
    /// the refused token is handed back (`send` returns the 401).
    @Test func aReplacementIsAskedForTwiceAtMost() async throws {
        let clock = ManualClock(start: Scripted.now)
        var api = CountingAPI(httpTransport: Scripted.ScriptedResourceTransport([]))
        api.clientToken = { _ in 1 }
        let tokens = ClientCredentialsTokens(api: api, store: InMemoryTokenStore(), clock: clock)
        let replacement = try await tokens.replacement(for: "access-1", sentAt: clock.now, target: TokenTarget())
        #expect(replacement.accessToken == "access-1")
        #expect(api.issued.withLock { $0 } == 2)
    }
}
