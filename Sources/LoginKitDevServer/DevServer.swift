// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import Hummingbird
import LoginKitHTTP
package import Logging
import NIOCore
import ServiceLifecycle

/// An embedded HTTP identity provider on 127.0.0.1, for the demo, local development and the
/// integration tests.
///
/// Start one with ``start(configuration:)``; it listens on a free loopback port unless told
/// otherwise and runs until ``stop()``, or, added to a `ServiceGroup`, until the group shuts down
/// (``run()``: a graceful shutdown lets requests in progress finish). Besides the identity-provider
/// endpoints, a protected resource (`/api/resource`, Bearer or DPoP) and a second issuer of
/// workload identity tokens (`/workload`, which the identity provider trusts) it serves test endpoints
/// under `/test/` that the transport tests use (echo, status, delay, sized bodies, broken
/// connections) and counts the client connections and the requests per path it has seen.
///
/// Concurrency contract: every member may be used from any task.
public final class DevServer: Sendable {
    /// Where and how the server listens.
    public struct Configuration: Sendable {
        /// The loopback address to bind: `127.0.0.0/8`, `::1` or `localhost`. Default `127.0.0.1`.
        /// Any other address is refused unless ``allowsNonLoopbackBind`` is set.
        package var host: String = "127.0.0.1"
        /// Whether ``host`` may be an address other hosts can reach. Default `false`: the dev
        /// server has well-known users, passwords and client secrets, and serves test endpoints; it
        /// is for this machine only.
        package var allowsNonLoopbackBind = false
        /// The port; 0 picks a free one. Default 0.
        public var port: Int = 0
        /// Log level for the server's own logger. Default `.warning`.
        package var logLevel: Logger.Level = .warning
        /// Users, clients, token lifetimes and the clock of the identity provider.
        public var identityProvider = IdentityProviderConfiguration()

        /// The default configuration: 127.0.0.1, a free port.
        public init() {}

        /// 127.0.0.1, a free port, and only critical log lines (stopping by cancellation makes
        /// Hummingbird log errors that say nothing about the test).
        public static var quiet: Configuration {
            var configuration = Configuration()
            configuration.logLevel = .critical
            return configuration
        }
    }

    /// The port the server listens on.
    public let port: Int
    /// `http://127.0.0.1:<port>`.
    package let baseURL: String
    /// The switches a test flips while the server runs: injected faults, the version policy.
    public let monitor: DevServerMonitor
    let provider: IdentityProvider
    /// The task serving the application (it ends when the server has stopped), and the stop under
    /// way, which every caller of ``stop()`` awaits.
    let lifecycle: LockedState<Lifecycle>
    struct Lifecycle {
        let running: Task<Void, Never>
        var stopping: Task<Void, Never>?
    }
    /// Runs the Hummingbird application; its graceful shutdown is ``run()``'s.
    let services: ServiceGroup

    private init(
        port: Int, host: String, monitor: DevServerMonitor, provider: IdentityProvider, runTask: Task<Void, Never>,
        services: ServiceGroup
    ) {
        self.port = port
        self.baseURL = "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        self.monitor = monitor
        self.provider = provider
        self.lifecycle = LockedState(Lifecycle(running: runTask))
        self.services = services
    }

    /// The OpenID issuer: the base URL. Discovery is at `issuer + "/.well-known/openid-configuration"`.
    public var issuer: String { baseURL }

    /// The identity provider's settings; change them while the server runs (lifetimes, users, rotation).
    package var identityProvider: IdentityProviderConfiguration {
        get { provider.configuration }
        set { provider.configuration = newValue }
    }

    /// Approves a pending device-flow user code for `username`, as the verification page would.
    /// Returns `false` for an unknown or expired code or user.
    @discardableResult
    package func approveDevice(userCode: String, username: String) -> Bool {
        provider.decideDevice(userCode: userCode, username: username, approve: true)
    }

    /// Denies a pending device-flow user code.
    @discardableResult
    package func denyDevice(userCode: String) -> Bool {
        provider.decideDevice(userCode: userCode, username: nil, approve: false)
    }

    /// Makes every access token issued so far expired: `/api/resource` answers `invalid_token` to
    /// each, and a token exchange refuses it (`POST /test/expire-access-tokens` does the same).
    /// Returns how many were live.
    @discardableResult
    package func expireAccessTokens() -> Int {
        provider.expireAccessTokens()
    }

    /// Replaces the server's DPoP nonce: where a nonce is required, the next proof without the new
    /// one gets a `use_dpop_nonce` challenge (`POST /test/rotate-dpop-nonce` does the same).
    /// Returns the new nonce.
    @discardableResult
    package func rotateDPoPNonce() -> String {
        provider.rotateDPoPNonce()
    }

    /// Starts a server and returns once it accepts connections.
    ///
    /// - Throws: an error whose description says why when the server stopped before it started; the
    ///   bind error when the port cannot be used.
    public static func start(configuration: Configuration = Configuration()) async throws -> DevServer {
        guard configuration.allowsNonLoopbackBind || isLoopback(configuration.host) else {
            throw DevServerError(
                "the dev server binds only loopback addresses (127.0.0.0/8, ::1, localhost), not \"\(printableExcerpt(configuration.host))\"; "
                    + "set allowsNonLoopbackBind to expose it to other hosts"
            )
        }
        let monitor = DevServerMonitor()
        let provider = try IdentityProvider(configuration: configuration.identityProvider, monitor: monitor)
        let router = Router(context: DevRequestContext.self)
        router.add(middleware: CountingMiddleware(monitor: monitor))
        router.add(middleware: FaultMiddleware(monitor: monitor, provider: provider))
        TestRoutes(monitor: monitor, provider: provider).register(on: router)
        IdentityProviderRoutes(provider: provider).register(on: router)
        let host = configuration.host

        var logger = Logger(label: "loginkit.dev-server")
        logger.logLevel = configuration.logLevel
        let (started, startedContinuation) = AsyncStream<Result<Int, any Error>>.makeStream()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                provider.issuer = "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
                startedContinuation.yield(.success(port))
            },
            logger: logger
        )
        let services = ServiceGroup(services: [app], logger: logger)
        let runTask = Task {
            do {
                try await services.run()
                startedContinuation.yield(.failure(DevServerError("the dev server stopped before it started")))
            } catch {
                startedContinuation.yield(.failure(error))
            }
            startedContinuation.finish()
        }
        var iterator = started.makeAsyncIterator()
        guard let first = await iterator.next() else {
            // The caller was cancelled while the server started: it must not go on serving unowned.
            await stop(runTask, services: services)
            throw CancellationError()
        }
        switch first {
        case .success(let port):
            return DevServer(
                port: port, host: configuration.host, monitor: monitor, provider: provider, runTask: runTask, services: services)
        case .failure(let error):
            runTask.cancel()
            await runTask.value
            throw error
        }
    }

    /// Starts a server, runs `body` with it, and stops it whatever `body` does.
    public nonisolated(nonsending) static func withServer<T>(
        configuration: Configuration = .quiet,
        _ body: (DevServer) async throws -> T
    ) async throws -> T {
        let server = try await start(configuration: configuration)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// How long ``stop()`` lets the requests in progress finish before it cancels them.
    static let stopGrace = Duration.seconds(1)

    /// Stops the server: it stops accepting connections, the requests in progress get up to one
    /// second to finish, then they are cancelled and every connection is closed. Returns once the
    /// server has stopped, whoever else is stopping it. Idempotent.
    ///
    /// Not a bare cancellation of the serving task: connections accepted but not yet taken up by
    /// the server (a burst of connects, clients that gave up) would then be dropped unserved, and NIO
    /// traps on each ("Deinited NIOAsyncWriter without calling finish()": swift-nio issues 2637 and
    /// 3481). A graceful shutdown closes the listener and hands what was already accepted to the
    /// server (an idle connection is then closed without a response); the cancellation after the
    /// grace period ends only requests that were being served. It narrows the window, it does not
    /// close it: a connection still being set up by NIO at the moment the listener closes is dropped
    /// as well (swift-nio issue 2813).
    public func stop() async {
        let services = self.services
        let stopping = lifecycle.withLock { state -> Task<Void, Never> in
            if let stopping = state.stopping { return stopping }
            let running = state.running
            let stopping = Task { await Self.stop(running, services: services) }
            state.stopping = stopping
            return stopping
        }
        await stopping.value
    }

    /// Shuts `services` (running in `task`) down gracefully, and cancels `task` if it has not ended
    /// within ``stopGrace``.
    static func stop(_ task: Task<Void, Never>, services: ServiceGroup) async {
        await services.triggerGracefulShutdown()
        let deadline = Task {
            try await Task.sleep(for: stopGrace)
            task.cancel()
        }
        await task.value
        deadline.cancel()
    }

    /// Whether `host` (an address or a name, IPv6 with or without brackets) is loopback.
    package static func isLoopback(_ host: String) -> Bool {
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return URLParts("http://\(bracketed)/")?.isLoopback ?? false
    }

    /// The URL of `path` on this server, e.g. `url("/test/echo")`.
    package func url(_ path: String) -> String {
        baseURL + path
    }
}

/// The dev server could not start, or a test route dropped a connection on purpose.
package struct DevServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    package let message: String
    init(_ message: String) { self.message = message }
    package var description: String { "DevServerError: \(message)" }
}

/// The request context: Hummingbird's basics plus the client's address, for connection counting.
struct DevRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: String?
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.description
        self.channel = source.channel
    }
}

/// Records every request's connection and path in the monitor before routing.
struct CountingMiddleware: RouterMiddleware {
    typealias Context = DevRequestContext
    let monitor: DevServerMonitor

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        monitor.record(path: request.uri.path, connection: context.remoteAddress)
        return try await next(request, context)
    }
}
#endif
