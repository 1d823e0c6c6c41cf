// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import HTTPTypes
import Hummingbird
import NIOCore

/// Applies the next injected `DevFault` for a request's path, if any.
struct FaultMiddleware: RouterMiddleware {
    typealias Context = DevRequestContext
    let monitor: DevServerMonitor
    let provider: IdentityProvider

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let fault = monitor.takeFault(path: request.uri.path) else { return try await next(request, context) }
        switch fault {
        case .status(let code):
            return IdentityProviderRoutes.json(.init(code: code), ["error": .string(code >= 500 ? "server_error" : "invalid_request")])
        case .oauthError(let code):
            return IdentityProviderRoutes.json(.badRequest, ["error": .string(code)])
        case .tooManyRequests(let seconds):
            var response = IdentityProviderRoutes.json(.tooManyRequests, ["error": .string("slow_down")])
            response.headers[.retryAfter] = "\(seconds)"
            return response
        case .delay(let milliseconds):
            try await Task.sleep(for: .milliseconds(milliseconds))
            return try await next(request, context)
        case .malformedBody:
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{\"access_token\": oops")))
        case .truncatedBody:
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{\"access_token\":\"at.abc\",\"expires_in\":3")))
        case .htmlErrorPage(let code):
            return IdentityProviderRoutes.html("<html><body><h1>\(code) Bad Gateway</h1><p>nginx</p></body></html>", status: .init(code: code))
        case .wrongContentType:
            var response = try await next(request, context)
            response.headers[.contentType] = "text/plain"
            return response
        case .hugeBody(let bytes):
            let body = ResponseBody.filled(with: UInt8(ascii: " "), count: bytes)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: body)
        case .forgedIDToken(let forgery):
            provider.forgeNextIDToken(forgery)
            return try await next(request, context)
        case .dropConnection:
            try? await context.channel.close()  // no response at all: the client sees an empty reply
            throw DevServerError("dropped the connection on purpose")
        }
    }
}
#endif
