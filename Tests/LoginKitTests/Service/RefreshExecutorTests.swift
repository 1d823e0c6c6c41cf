import Dispatch
import Foundation
import HTTPTypes
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Synchronization
import Testing

/// The shared refresh runs on the API's transport executor (the many callers queued on the global
/// executor must not delay it), unless the configuration says otherwise.
@Suite(.timeLimit(.minutes(3)))
struct RefreshExecutorTests {
    /// A task executor on a serial queue, which it marks so that code can tell it runs there.
    final class QueueExecutor: TaskExecutor {
        static let marker = DispatchSpecificKey<Bool>()
        let queue = DispatchQueue(label: "loginkit.tests.refresh-executor")

        init() {
            queue.setSpecific(key: Self.marker, value: true)
        }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let executor = asUnownedTaskExecutor()
            queue.async { job.runSynchronously(on: executor) }
        }

        static var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) == true }
    }

    /// Refreshes, noting whether each refresh ran on the executor; its transport executor is `executor`.
    final class ExecutorAPI: AuthAPI, PrefersTaskExecutor {
        let executor: QueueExecutor
        let refreshesOnExecutor = LockedList<Bool>()

        init(executor: QueueExecutor) { self.executor = executor }

        var source: CredentialSource { Race.source }
        var preferredTaskExecutor: (any TaskExecutor)? { executor }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            refreshesOnExecutor.append(QueueExecutor.isCurrent)
            return Race.credentials(1, issuedAt: Date(), lifetime: 3600)
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { true }
    }

    func refreshOnce(runsOnTransportExecutor: Bool) async throws -> [Bool] {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            try await store.save(Race.profile(Race.credentials(0, issuedAt: Date(timeIntervalSinceNow: -7200), lifetime: 3600)), as: "default")
            let api = ExecutorAPI(executor: QueueExecutor())
            var configuration = AuthService.Configuration()
            configuration.runsRefreshOnTransportExecutor = runsOnTransportExecutor
            let service = AuthService(api: api, store: store, configuration: configuration)
            #expect(try await service.validAccessToken() == "access-1")
            #expect(QueueExecutor.isCurrent == false, "the caller itself never moved to the executor")
            return api.refreshesOnExecutor.values
        }
    }

    @Test func theSharedRefreshRunsOnTheTransportsExecutor() async throws {
        #expect(try await refreshOnce(runsOnTransportExecutor: true) == [true])
    }

    @Test func theConfigurationCanKeepTheRefreshOnTheGlobalExecutor() async throws {
        #expect(try await refreshOnce(runsOnTransportExecutor: false) == [false])
    }

    @Test func theHTTPAPIsOfferTheirTransportsExecutor() async throws {
        let executor = QueueExecutor()
        let transport = ExecutorTransport(executor: executor)
        let apis: [any AuthAPI] = [
            OAuth2API(configuration: .init(issuer: "https://issuer.test", clientID: "cli"), transport: transport),
            JSONLoginAPI(configuration: .init(loginURL: "https://login.test/login"), transport: transport),
            CognitoAPI(configuration: .init(poolID: "eu-west-1_abc", clientID: "cli", region: "eu-west-1"), transport: transport),
        ]
        for api in apis {
            #expect((api as? any PrefersTaskExecutor)?.preferredTaskExecutor as? QueueExecutor === executor)
        }
        let mock: any AuthAPI = MockAuthAPI()
        #expect(!(mock is any PrefersTaskExecutor))
        #expect(OAuth2API(configuration: .init(issuer: "https://issuer.test", clientID: "cli"), transport: MockHTTPTransport()).preferredTaskExecutor == nil)
    }

    struct ExecutorTransport: HTTPTransport, PrefersTaskExecutor {
        let executor: QueueExecutor
        var preferredTaskExecutor: (any TaskExecutor)? { executor }
        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) { throw CancellationError() }
    }
}

/// Values appended from any thread.
final class LockedList<Element: Sendable>: Sendable {
    private let storage = Mutex<[Element]>([])
    func append(_ element: Element) { storage.withLock { $0.append(element) } }
    var values: [Element] { storage.withLock { $0 } }
}
