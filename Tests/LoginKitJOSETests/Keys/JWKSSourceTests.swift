import Foundation
import LoginKitCurl
import LoginKitDevServer
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// JWKS over real HTTP from the dev server's `/test/jwks`, with a hand-moved clock.
@Suite(.timeLimit(.minutes(2)))
struct JWKSSourceTests {
    let clock = TestWallClock()

    func withSource(_ body: (DevServer, JWKSSource, IDTokenVerifier) async throws -> Void) async throws {
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { client in
                let source = JWKSSource(url: server.url("/test/jwks"), transport: client, now: clock.reader)
                let verifier = IDTokenVerifier(
                    configuration: .init(issuer: "https://issuer.test", audience: "client-1"), keys: source, now: clock.reader
                )
                try await body(server, source, verifier)
            }
        }
    }

    func publish(_ keys: [SigningKey], on server: DevServer, cacheControl: String? = nil) throws {
        let set = JWKSet(keys: try keys.map { try $0.publicJWK() })
        server.monitor.testKeySet = .init(json: set.json.serialized, cacheControl: cacheControl)
    }

    @Test func aRotatedKeyIsFetchedOnce() async throws {
        try await withSource { server, source, verifier in
            let old = try SigningKey.generate(.rs256, keyID: "old")
            let new = try SigningKey.generate(.rs256, keyID: "new")
            try publish([old], on: server)
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: old))
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: old))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 1)

            try publish([old, new], on: server)
            clock.advance(by: 31)  // past the unknown-kid rate limit
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: new))
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: new))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 2)
            #expect(await source.fetchCount == 2)
        }
    }

    @Test func concurrentVerificationsWithAnUnknownKidMakeOneRequest() async throws {
        try await withSource { server, _, verifier in
            let known = try SigningKey.generate(.es256, keyID: "known")
            let rotated = try SigningKey.generate(.es256, keyID: "rotated")
            try publish([known], on: server)
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: known))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 1)

            try publish([known, rotated], on: server)
            clock.advance(by: 31)
            let token = try signedToken(idTokenClaims(now: clock.now), key: rotated)
            let failures = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<100 {
                    group.addTask { (try? await verifier.verify(token)) == nil }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(failures == 0)
            #expect(server.monitor.requestCount(path: "/test/jwks") == 2)
        }
    }

    @Test func unknownKidsAreRateLimited() async throws {
        try await withSource { server, _, verifier in
            let known = try SigningKey.generate(.es256, keyID: "known")
            let stranger = try SigningKey.generate(.es256, keyID: "made-up")
            try publish([known], on: server)
            let token = try signedToken(idTokenClaims(now: clock.now), key: stranger)
            for _ in 0..<20 {
                #expect(await verificationCode { try await verifier.verify(token) } == .unknownKey)
            }
            #expect(server.monitor.requestCount(path: "/test/jwks") == 1)
            clock.advance(by: 31)
            #expect(await verificationCode { try await verifier.verify(token) } == .unknownKey)
            #expect(server.monitor.requestCount(path: "/test/jwks") == 2)
        }
    }

    @Test func cacheControlMaxAgeIsRespected() async throws {
        try await withSource { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            try publish([key], on: server, cacheControl: "public, max-age=120")
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key))
            clock.advance(by: 119)
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 1)
            clock.advance(by: 2)
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 2)
        }
    }

    @Test func staleKeysServeWhenTheRefetchFails() async throws {
        try await withSource { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            try publish([key], on: server, cacheControl: "max-age=10")
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key))
            server.monitor.testKeySet = .init(json: "<html>oops</html>")
            clock.advance(by: 11)
            _ = try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key))
            #expect(server.monitor.requestCount(path: "/test/jwks") == 2)
        }
    }

    @Test func anUnreachableKeySetIsTyped() async throws {
        let url = try await DevServer.withServer { $0.url("/test/jwks") }
        let client = try CurlHTTPClient()
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: JWKSSource(url: url, transport: client, now: clock.reader), now: clock.reader
        )
        let key = try SigningKey.generate(.es256, keyID: "k")
        let error = await thrown { try await verifier.verify(try signedToken(idTokenClaims(now: clock.now), key: key)) }
        await client.shutdown()
        let verificationError = try #require(error as? TokenVerificationError)
        #expect(verificationError.code == .keySetUnavailable)
    }
}
