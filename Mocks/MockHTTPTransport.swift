#if canImport(FoundationEssentials)
public import FoundationEssentials
import LoginKitHTTP
#else
public import Foundation
#endif
public import LoginKit

/// An `HTTPTransport` that answers from a script, and suspends any request the script does not
/// cover until the test resumes it (`nextRequest()`).
public final class MockHTTPTransport: HTTPTransport {
    /// A request the script did not cover, suspended until the test resumes it with a response.
    public typealias RequestCall = SuspendedCall<(request: HTTPRequest, body: Data?), (HTTPResponse, Data)>

    private let script = LockedState<[Result<(HTTPResponse, Data), any Error>]>([])
    private let requests = CallQueue<RequestCall>()

    /// A transport with an empty script: each request suspends until the test resumes it, unless
    /// a response was queued with `enqueue`.
    public init() {}

    /// Queues a canned response for the next unscripted request.
    public func enqueue(status: HTTPResponse.Status, headers: HTTPFields = [:], body: Data = Data()) {
        script.withLock { $0.append(.success((HTTPResponse(status: status, headerFields: headers), body))) }
    }

    /// Queues an error for the next request.
    public func enqueue(error: any Error) {
        script.withLock { $0.append(.failure(error)) }
    }

    public func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        let call = RequestCall(name: "send(\(request.method) \(request.path ?? "/"))", arguments: (request, body))
        requests.arrive(call)
        if let scripted = script.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            call.resume(with: scripted)
        }
        return try await call.value()
    }

    /// Waits for the next request (scripted or suspended).
    public func nextRequest() async -> RequestCall { await requests.next() }

    /// Every request so far.
    package var requestCount: Int { requests.all.count }

    /// Reports (and releases) requests never resumed.
    public func verify() {
        requests.verify()
    }
}
