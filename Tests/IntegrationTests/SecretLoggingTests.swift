import Foundation
import LoginKitHTTP
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import LoginKitViewModel
import Logging
import Testing

/// A swift-log handler that keeps every message and its metadata, at `trace`.
struct CapturingLogHandler: LogHandler {
    final class Lines: Sendable {
        let lines = LockedState<[String]>([])
        var all: [String] { lines.withLock { $0 } }
    }

    let captured: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        captured.lines.withLock { $0.append("\(event.level) \(event.message) \(merged) \(event.source) \(event.file)") }
    }
}

/// Login, refresh, failures and logout with every logger at `trace`: no password, token or client
/// secret in any log line, nor in any error's description.
@Suite(.timeLimit(.minutes(2)))
struct SecretLoggingTests {
    @Test func noSecretReachesTheLogsOrTheErrors() async throws {
        let captured = CapturingLogHandler.Lines()
        let logger = Logger(label: "test") { _ in CapturingLogHandler(captured: captured) }
        var secrets: Set<String> = ["Pa55-w0rd-demo", "dev-secret"]
        var errors: [any Error] = []
        try await withTemporaryDirectory { directory in
            var serverConfiguration = DevServer.Configuration.quiet
            serverConfiguration.identityProvider.users = [DevUser(username: "alice", password: "Pa55-w0rd-demo", subject: "1001")]
            try await DevServer.withServer(configuration: serverConfiguration) { server in
                try await CurlHTTPClient.withClient { client in
                    let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
                    var configuration = AuthService.Configuration()
                    configuration.logger = logger
                    configuration.maximumRetries = 0
                    let api = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-cli"), transport: client)
                    let service = AuthService(api: api, store: store, configuration: configuration)
                    let viewModel = await LoginViewModel(service: service, logger: logger)

                    // A rejected login, then a good one, through the view-model.
                    secrets.insert("Wr0ng-Pa55-demo")
                    await MainActor.run {
                        viewModel.id = "alice"
                        viewModel.password = "Wr0ng-Pa55-demo"
                    }
                    await viewModel.loginButtonPressed()
                    #expect(await viewModel.loginErrorMessage != nil)
                    await MainActor.run { viewModel.password = "Pa55-w0rd-demo" }
                    await viewModel.loginButtonPressed()
                    #expect(await viewModel.loginErrorMessage == nil)
                    let first = try #require(try await store.profile(named: "default")?.credentials)
                    secrets.formUnion([first.accessToken, first.refreshToken, first.idToken?.rawValue].compactMap { $0 })

                    // A refresh, then a failed one.
                    try await expireStoredCredentials(in: store)
                    _ = try await service.validIDToken()
                    let second = try #require(try await store.profile(named: "default")?.credentials)
                    secrets.formUnion([second.accessToken, second.refreshToken, second.idToken?.rawValue].compactMap { $0 })
                    try await expireStoredCredentials(in: store)
                    server.monitor.injectFaults([.status(503)], path: "/oauth/token")
                    if let error = await thrown({ try await service.validIDToken() }) { errors.append(error) }
                    server.monitor.injectFaults([.forgedIDToken(.wrongAudience)], path: "/oauth/token")
                    if let error = await thrown({ try await service.validIDToken() }) { errors.append(error) }

                    // A confidential client whose secret is wrong, then logout.
                    let wrongSecret = OAuth2API(configuration: .init(issuer: server.issuer, clientID: "loginkit-service", clientSecret: "not-the-dev-secret"), transport: client)
                    secrets.insert("not-the-dev-secret")
                    if let error = await thrown({ try await wrongSecret.clientCredentials(scope: nil) }) { errors.append(error) }
                    await service.logOut()
                    if let error = await thrown({ try await service.validIDToken() }) { errors.append(error) }
                }
            }
        }
        let lines = captured.all
        #expect(lines.contains { $0.contains("logged in") } && lines.contains { $0.contains("refreshed") } && lines.contains { $0.contains("logged out") })
        #expect(lines.contains { $0.contains("refresh failed") })
        #expect(errors.count == 4)
        let texts = lines + errors.flatMap { [String(describing: $0), String(reflecting: $0), "\($0.localizedDescription)"] }
        for secret in secrets where secret.count >= 8 {
            let leaks = texts.filter { $0.contains(secret) }
            #expect(leaks.isEmpty, "a secret (\(secret.prefix(4))…) leaked into: \(leaks.first ?? "")")
        }
    }
}
