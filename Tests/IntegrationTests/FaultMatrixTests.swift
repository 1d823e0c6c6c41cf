import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// One fault of the dev server, and the typed error it must become.
struct FaultCase: Sendable, CustomTestStringConvertible {
    let name: String
    let faults: [DevFault]
    let expected: String
    let matches: @Sendable (any Error) -> Bool

    var testDescription: String { name }

    static func server(_ code: ServerError.Code) -> @Sendable (any Error) -> Bool { { ($0 as? ServerError)?.code == code } }
    static func network(_ code: NetworkError.Code) -> @Sendable (any Error) -> Bool { { ($0 as? NetworkError)?.code == code } }
    static func verification(_ code: TokenVerificationError.Code) -> @Sendable (any Error) -> Bool { { ($0 as? TokenVerificationError)?.code == code } }

    static let all: [FaultCase] = [
        FaultCase(name: "delay past the timeout (8 s, client 5 s)", faults: [.delay(milliseconds: 8000)], expected: "NetworkError.timedOut", matches: network(.timedOut)),
        // libcurl resends a login's request once on a fresh connection when a reused one dies: drop
        // both. A refresh goes on a connection of its own and is never resent: the first drop ends it.
        FaultCase(name: "connection reset", faults: [.dropConnection, .dropConnection], expected: "NetworkError", matches: { $0 is NetworkError }),
        FaultCase(name: "HTTP 500", faults: [.status(500)], expected: "ServerError.unavailable", matches: server(.unavailable)),
        FaultCase(name: "HTTP 502 (HTML error page)", faults: [.htmlErrorPage(502)], expected: "ServerError.unavailable", matches: server(.unavailable)),
        FaultCase(name: "HTTP 503", faults: [.status(503)], expected: "ServerError.unavailable", matches: server(.unavailable)),
        FaultCase(
            name: "HTTP 429, Retry-After: 7", faults: [.tooManyRequests(retryAfter: 7)], expected: "ServerError.rateLimited, retryAfter 7 s",
            matches: { ($0 as? ServerError)?.code == .rateLimited && ($0 as? ServerError)?.retryAfter == .seconds(7) }),
        FaultCase(name: "truncated body", faults: [.truncatedBody], expected: "ServerError.malformedResponse", matches: server(.malformedResponse)),
        FaultCase(name: "malformed JSON", faults: [.malformedBody], expected: "ServerError.malformedResponse", matches: server(.malformedResponse)),
        FaultCase(name: "HTML error page (HTTP 400)", faults: [.htmlErrorPage(400)], expected: "ServerError.unexpectedStatus", matches: server(.unexpectedStatus)),
        FaultCase(name: "wrong content type (JSON as text/plain)", faults: [.wrongContentType], expected: "ServerError.malformedResponse", matches: server(.malformedResponse)),
        FaultCase(name: "50 MB body (cap 4 MB)", faults: [.hugeBody(bytes: 50_000_000)], expected: "NetworkError.responseTooLarge", matches: network(.responseTooLarge)),
        FaultCase(name: "id_token signed by an unknown key", faults: [.forgedIDToken(.unknownKey)], expected: "TokenVerificationError.unknownKey", matches: verification(.unknownKey)),
        FaultCase(name: "id_token with alg: none", faults: [.forgedIDToken(.algNone)], expected: "TokenVerificationError.algorithmNotAllowed", matches: verification(.algorithmNotAllowed)),
        FaultCase(name: "expired id_token", faults: [.forgedIDToken(.expired)], expected: "TokenVerificationError.expired", matches: verification(.expired)),
        FaultCase(name: "id_token from another issuer", faults: [.forgedIDToken(.wrongIssuer)], expected: "TokenVerificationError.wrongIssuer", matches: verification(.wrongIssuer)),
        FaultCase(name: "id_token for another audience", faults: [.forgedIDToken(.wrongAudience)], expected: "TokenVerificationError.wrongAudience", matches: verification(.wrongAudience)),
    ]
}

enum FaultOperation: String, Sendable, CaseIterable {
    case login, refresh
}

/// Every fault of the matrix, for a login and for a refresh: the right typed error, the store
/// byte-for-byte unchanged, in bounded time (the delay case ends by the client's own 5 s limit, as
/// its `.timedOut` error shows; every case has a one-minute limit, so a hang fails it). A refresh
/// whose answer may have been lost (the timeout, the dropped connection) changes one thing only: the
/// profile's mark of it (`AuthService.lostAnswerAttribute`), which a later refusal of the refresh
/// token reads to say why; its credentials stay byte for byte. With
/// LOGINKIT_FAULT_REPORT set, each case appends a table row, with the time it took, to that file
/// (`make reliability` puts the table in docs/reliability.md).
@Suite(.timeLimit(.minutes(3)))
struct FaultMatrixTests {
    @Test(.timeLimit(.minutes(3)), arguments: FaultCase.all, FaultOperation.allCases)
    func aFaultIsATypedErrorAndLeavesTheStoreAsItWas(_ fault: FaultCase, _ operation: FaultOperation) async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                // 5 s: short enough for the delay fault, long enough for a sanitized build's setup.
                var transport = CurlHTTPClient.Configuration()
                transport.totalTimeout = .seconds(5)
                try await CurlHTTPClient.withClient(configuration: transport) { client in
                    let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                    let path = directory + "/tokens.json"
                    let store = try IDTokenStore(path: path, sealing: .none)
                    var configuration = AuthService.Configuration()
                    configuration.maximumRetries = 0  // each fault once: the retry policy has tests of its own
                    let service = AuthService(api: api, store: store, configuration: configuration)
                    _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                    if operation == .refresh { try await expireStoredCredentials(in: store) }
                    let before = try storeFiles(at: path)
                    // Decoded from the file, as `after` below is (a date read back from the file may differ from
                    // the one in memory in its last bit).
                    let profileBefore = try await IDTokenStore(path: path, sealing: .none).profile(named: "default")

                    server.monitor.injectFaults(fault.faults, path: "/oauth/token")
                    let started = ContinuousClock.now  // for the report only
                    let error = await thrown {
                        switch operation {
                        case .login: _ = try await service.logIn(for: User.ID(rawValue: "demo"), with: "demo")
                        case .refresh: _ = try await service.validIDToken()
                        }
                    }
                    let elapsed = ContinuousClock.now - started
                    var unchanged = try storeFiles(at: path) == before
                    var marked = false
                    if !unchanged, operation == .refresh, let after = try await IDTokenStore(path: path, sealing: .none).profile(named: "default") {
                        var unmarked = after
                        unmarked.attributes[AuthService.lostAnswerAttribute] = nil
                        marked = after.attributes[AuthService.lostAnswerAttribute] != nil && unmarked == profileBefore
                        unchanged = marked
                    }
                    let matched = error.map(fault.matches) ?? false

                    #expect(matched, "\(fault.name), \(operation): expected \(fault.expected), got \(String(describing: error))")
                    #expect(unchanged, "\(fault.name), \(operation): the store changed")
                    #expect(!String(describing: error as Any).contains("demo\""), "no secret in the error")
                    report(fault, operation, error: error, elapsed: elapsed, unchanged: unchanged, marked: marked, matched: matched)
                }
            }
        }
    }

    func report(_ fault: FaultCase, _ operation: FaultOperation, error: (any Error)?, elapsed: Duration, unchanged: Bool, marked: Bool, matched: Bool) {
        guard let file = ProcessInfo.processInfo.environment["LOGINKIT_FAULT_REPORT"] else { return }
        let kind = error.map { error -> String in
            let name = String(describing: type(of: error))
            if let code = (error as? ServerError)?.code { return "\(name).\(code)" }
            if let code = (error as? NetworkError)?.code { return "\(name).\(code)" }
            if let code = (error as? TokenVerificationError)?.code { return "\(name).\(code)" }
            return name
        } ?? "no error"
        let milliseconds = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        let store = marked ? "unchanged, answer lost marked" : unchanged ? "unchanged" : "**changed**"
        let line = "| \(fault.name) | \(operation.rawValue) | \(kind) | \(store) | \(milliseconds) ms | \(matched && unchanged ? "pass" : "FAIL") |\n"
        let descriptor = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        _ = line.utf8CString.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
    }
}
