// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Hummingbird
import LoginKitJOSE
import NIOCore

/// What `/test/echo` answers: the request as the server saw it.
package struct EchoReply: Codable, Sendable {
    /// The request method.
    package var method: String
    /// The request path and query.
    package var uri: String
    /// Request headers, lowercased names; repeated headers joined with ", ".
    package var headers: [String: String]
    /// The request body, base64.
    package var body: String
}

/// Endpoints the transport tests need, all under `/test/`, and the identity provider's test hooks.
struct TestRoutes {
    let monitor: DevServerMonitor
    let provider: IdentityProvider
    /// The largest body `/test/bytes/N` serves: 256 MiB.
    static let maximumBytes = 256 * 1024 * 1024
    /// The most fields `/test/headers/N` sends (`HTTPFields` holds fewer than 65,535).
    static let maximumHeaderFields = 20_000

    func register(on router: Router<DevRequestContext>) {
        let group = router.group("test")

        group.on("echo", method: .get, use: echo)
        group.on("echo", method: .post, use: echo)
        group.on("echo", method: .put, use: echo)
        group.on("echo", method: .delete, use: echo)
        group.on("echo", method: .patch, use: echo)
        group.on("echo", method: .head, use: echo)

        group.get("status/:code") { _, context -> Response in
            let code = try context.parameters.require("code", as: Int.self)
            guard (200...599).contains(code) else { throw HTTPError(.badRequest, message: "status must be 200...599") }
            return Response(status: .init(code: code), headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "status \(code)\n")))
        }

        group.get("delay/:ms") { _, context -> Response in
            let milliseconds = try context.parameters.require("ms", as: Int.self)
            guard (0...600_000).contains(milliseconds) else { throw HTTPError(.badRequest, message: "delay must be 0...600000 ms") }
            try await Task.sleep(for: .milliseconds(milliseconds))
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "delayed \(milliseconds) ms\n")))
        }

        group.get("bytes/:count") { request, context -> Response in
            let count = try context.parameters.require("count", as: Int.self)
            guard (0...Self.maximumBytes).contains(count) else { throw HTTPError(.badRequest, message: "count must be 0...\(Self.maximumBytes)") }
            let chunked = request.uri.queryParameters["chunked"] == "1"
            let body = ResponseBody.filled(with: UInt8(ascii: "x"), count: count, declaringLength: !chunked)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: body)
        }

        // A response with `count` header fields (`X-Field-0: 0` …): the client's cap on fields.
        group.get("headers/:count") { _, context -> Response in
            let count = try context.parameters.require("count", as: Int.self)
            guard (0...Self.maximumHeaderFields).contains(count) else {
                throw HTTPError(.badRequest, message: "count must be 0...\(Self.maximumHeaderFields)")
            }
            var headers = HTTPFields()
            headers.reserveCapacity(count + 1)
            headers[.contentType] = "text/plain"
            for index in 0..<count {
                if let name = HTTPField.Name("X-Field-\(index)") { headers.append(HTTPField(name: name, value: "\(index)")) }
            }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "\(count) fields\n")))
        }

        for method in [HTTPRequest.Method.get, .post] {
            group.on("redirect", method: method) { _, _ -> Response in
                Response(status: .found, headers: [.location: "/test/echo"], body: .init(byteBuffer: ByteBuffer(string: "moved\n")))
            }
        }

        group.get("close-after-headers") { _, _ -> Response in
            // Promise 1000 bytes, send 10, then fail: the server closes the connection mid-body.
            let body = ResponseBody(contentLength: 1000) { writer in
                try await writer.write(ByteBuffer(string: "0123456789"))
                throw DevServerError("closing the connection after the headers on purpose")
            }
            return Response(status: .ok, body: body)
        }

        group.get("jwks") { _, _ -> Response in
            let keySet = monitor.testKeySet
            var headers: HTTPFields = [.contentType: "application/jwk-set+json"]
            if let cacheControl = keySet.cacheControl { headers[.cacheControl] = cacheControl }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: keySet.json)))
        }

        router.get("version-policy") { request, _ -> Response in
            let policy = monitor.versionPolicy
            var members: [String: JSONValue] = [
                "title": .string(policy.title), "message": .string(policy.message), "version": .string(policy.minimumVersion),
            ]
            if let url = policy.url { members["url"] = .string(url) }
            let body = JSONValue.object(members).serialized
            let etag = "\"\(String(UInt(bitPattern: body.utf8.reduce(5381) { ($0 << 5) &+ $0 &+ Int($1) }), radix: 16))\""
            if request.headers[.ifNoneMatch] == etag {
                return Response(status: .notModified, headers: [.eTag: etag])
            }
            return Response(status: .ok, headers: [.contentType: "application/json", .eTag: etag], body: .init(byteBuffer: ByteBuffer(string: body)))
        }

        group.get("connections") { _, _ -> String in
            "\(monitor.connectionCount)\n"
        }

        // The monitor for a client in another process (`loginkit demo` runs `loginkit-dev-server`):
        // `GET /test/requests?path=/oauth/token` counts a path's requests; `PUT
        // /test/minimum-version` with a version as the body sets the version policy's minimum.
        group.get("requests") { request, _ -> String in
            guard let path = request.uri.queryParameters["path"], !path.isEmpty else {
                throw HTTPError(.badRequest, message: "the path query parameter is required")
            }
            return "\(monitor.requestCount(path: String(path)))\n"
        }
        // The identity provider's hooks: every access token issued so far expires (the body says how
        // many were live); a new DPoP nonce (the body is the nonce); the DPoP, PAR, resource and
        // workload token counters.
        group.post("expire-access-tokens") { _, _ -> String in
            "\(provider.expireAccessTokens())\n"
        }
        group.post("rotate-dpop-nonce") { _, _ -> String in
            "\(provider.rotateDPoPNonce())\n"
        }
        group.get("counters") { _, _ -> Response in
            IdentityProviderRoutes.json(
                .ok,
                [
                    "dpop_proofs_accepted": .number("\(monitor.dpopProofsAccepted)"),
                    "dpop_nonce_challenges": .number("\(monitor.dpopNonceChallenges)"),
                    "par_requests": .number("\(monitor.parRequests)"),
                    "resource_requests": .number("\(monitor.resourceRequests)"),
                    "workload_tokens_issued": .number("\(monitor.workloadTokensIssued)"),
                ])
        }
        group.put("minimum-version") { request, _ -> String in
            let body = try await request.body.collect(upTo: 64)
            let version = String(buffer: body).filter { !$0.isWhitespace }
            guard !version.isEmpty, version.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-+".contains($0)) }) else {
                throw HTTPError(.badRequest, message: "the body must be a version such as 9.0.0")
            }
            monitor.versionPolicy.minimumVersion = version
            return "\(version)\n"
        }
    }

    @Sendable func echo(request: Request, context: DevRequestContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 16 * 1024 * 1024)
        var headers: [String: String] = [:]
        for field in request.headers {
            let name = field.name.canonicalName
            headers[name] = headers[name].map { "\($0), \(field.value)" } ?? field.value
        }
        let reply = EchoReply(
            method: request.method.rawValue,
            uri: request.uri.description,
            headers: headers,
            body: Data(body.readableBytesView).base64EncodedString()
        )
        let json = try JSONEncoder().encode(reply)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }
}

extension ResponseBody {
    /// `count` copies of `byte`, streamed in 64 KiB chunks; with `declaringLength` false the
    /// response is chunked (no Content-Length).
    static func filled(with byte: UInt8, count: Int, declaringLength: Bool = true) -> ResponseBody {
        ResponseBody(contentLength: declaringLength ? count : nil) { writer in
            let chunk = ByteBuffer(repeating: byte, count: min(count, 64 * 1024))
            var left = count
            while left > 0 {
                let size = min(left, chunk.readableBytes)
                try await writer.write(chunk.getSlice(at: 0, length: size) ?? chunk)
                left -= size
            }
            try await writer.finish(nil)
        }
    }
}
#endif
