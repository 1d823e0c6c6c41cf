import Foundation
import LoginKitCurl
import LoginKitDevServer
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// The JWKS cache's limits over real HTTP (the dev server's `/test/jwks`), on a hand-moved clock:
/// a floor on the cache lifetime, backoff while the endpoint fails, a maximum staleness, a key cap,
/// and algorithm bindings that survive refetches.
@Suite(.timeLimit(.minutes(2)))
struct JWKSSourceHardeningTests {
    let clock = TestWallClock()

    func withSource(
        _ configuration: JWKSSource.Configuration = .init(), _ body: (DevServer, JWKSSource, IDTokenVerifier) async throws -> Void
    ) async throws {
        try await DevServer.withServer { server in
            try await CurlHTTPClient.withClient { client in
                let source = JWKSSource(url: server.url("/test/jwks"), transport: client, configuration: configuration, now: clock.reader)
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

    func breakEndpoint(of server: DevServer) {
        server.monitor.testKeySet = .init(json: "<html>oops</html>")
    }

    func requests(_ server: DevServer) -> Int {
        server.monitor.requestCount(path: "/test/jwks")
    }

    /// A fresh token (valid at the clock's current time) signed by `key`.
    func token(_ key: SigningKey) throws -> String {
        try signedToken(idTokenClaims(now: clock.now), key: key)
    }

    /// `count` copies of `key`'s public JWK, with `kid`s `k0`, `k1`, …
    func keySetDocument(of key: SigningKey, count: Int) throws -> String {
        let members = try key.publicJWK().json.objectValue ?? [:]
        var entries: [JSONValue] = []
        for index in 0..<count {
            var copy = members
            copy["kid"] = .string("k\(index)")
            entries.append(.object(copy))
        }
        return JSONValue.object(["keys": .array(entries)]).serialized
    }

    @Test(arguments: ["no-store", "max-age=0", "no-cache, max-age=0"])
    func aKeySetThatMayNotBeCachedIsFetchedAtMostOncePerFloor(_ cacheControl: String) async throws {
        try await withSource { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            try publish([key], on: server, cacheControl: cacheControl)
            for _ in 0..<10 {
                _ = try await verifier.verify(try token(key))
            }
            #expect(requests(server) == 1)
            clock.advance(by: 4.9)  // inside the 5 s floor
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 1)
            clock.advance(by: 0.2)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 2)
        }
    }

    @Test func fetchesBackOffExponentiallyWhileTheEndpointFails() async throws {
        var configuration = JWKSSource.Configuration()
        configuration.initialBackoff = .seconds(10)
        configuration.maximumBackoff = .seconds(40)
        try await withSource(configuration) { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            try publish([key], on: server, cacheControl: "max-age=10")
            _ = try await verifier.verify(try token(key))
            breakEndpoint(of: server)

            clock.advance(by: 11)  // expired: one fetch, which fails; the stale keys serve
            _ = try await verifier.verify(try token(key))
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 2)
            // Waits of 10, 20, 40, then 40 s (the maximum), each from the failed fetch before it:
            // nothing a second before the wait ends, one fetch half a second after.
            for (wait, expected) in [(10.0, 3), (20, 4), (40, 5), (40, 6)] {
                clock.advance(by: wait - 1)
                _ = try await verifier.verify(try token(key))
                #expect(requests(server) == expected - 1, "before the \(wait) s wait ends")
                clock.advance(by: 1.5)
                _ = try await verifier.verify(try token(key))
                #expect(requests(server) == expected, "after the \(wait) s wait")
            }

            // The endpoint recovers: the next fetch succeeds and the backoff starts over from 10 s.
            try publish([key], on: server, cacheControl: "max-age=10")
            clock.advance(by: 40.5)
            _ = try await verifier.verify(try token(key))
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 7)
            breakEndpoint(of: server)
            clock.advance(by: 11)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 8)
            clock.advance(by: 9)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 8)
            clock.advance(by: 2)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 9)
        }
    }

    @Test func withoutCachedKeysABackingOffSourceThrowsWithoutARequest() async throws {
        try await withSource { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            breakEndpoint(of: server)
            #expect(await verificationCode { try await verifier.verify(try token(key)) } == .keySetUnavailable)
            #expect(await verificationCode { try await verifier.verify(try token(key)) } == .keySetUnavailable)
            #expect(requests(server) == 1)
            try publish([key], on: server)
            clock.advance(by: 2.5)  // past the default 2 s first backoff
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 2)
        }
    }

    @Test func staleKeysStopBeingTrustedAfterTheMaximumStaleness() async throws {
        var configuration = JWKSSource.Configuration()
        configuration.maximumStaleness = .seconds(60)
        configuration.initialBackoff = .seconds(1)
        try await withSource(configuration) { server, _, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k")
            try publish([key], on: server, cacheControl: "max-age=10")
            _ = try await verifier.verify(try token(key))
            breakEndpoint(of: server)

            clock.advance(by: 11)
            _ = try await verifier.verify(try token(key))
            clock.advance(by: 58)  // 59 s past expiry: still within the 60 s
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 3)

            clock.advance(by: 2.5)  // 61.5 s past expiry: the refetch fails and the old keys are out
            #expect(await verificationCode { try await verifier.verify(try token(key)) } == .keySetUnavailable)
            #expect(requests(server) == 4)
            #expect(await verificationCode { try await verifier.verify(try token(key)) } == .keySetUnavailable)
            #expect(requests(server) == 4)  // backing off: no request

            try publish([key], on: server, cacheControl: "max-age=10")
            clock.advance(by: 5)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 5)
        }
    }

    @Test func aKeySetWithTooManyKeysIsRefusedAndNotCached() async throws {
        try await withSource { server, source, verifier in
            let key = try SigningKey.generate(.es256, keyID: "k0")
            server.monitor.testKeySet = .init(json: try keySetDocument(of: key, count: 101))
            #expect(await verificationCode { try await verifier.verify(try token(key)) } == .keySetTooLarge)
            let error = await thrown { try await source.currentKeySet() }
            #expect((error as? TokenVerificationError)?.code == .keySetTooLarge)  // nothing cached to fall back on
            #expect(requests(server) == 1)

            server.monitor.testKeySet = .init(json: try keySetDocument(of: key, count: 100))
            clock.advance(by: 2.5)
            _ = try await verifier.verify(try token(key))
            #expect(requests(server) == 2)
        }
    }

    @Test func aKeySetDocumentIsCappedAtAHundredKeys() throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let hundred = try JWKSet(jsonText: Array(try keySetDocument(of: key, count: 100).utf8))
        #expect(hundred.keys.count == 100)
        #expect(JWKSet.defaultMaximumKeyCount == 100)
        #expect(throws: TokenVerificationError.self) { try JWKSet(jsonText: Array(try keySetDocument(of: key, count: 101).utf8)) }
        let three = try keySetDocument(of: key, count: 3)
        #expect(throws: TokenVerificationError.self) { try JWKSet(jsonText: Array(three.utf8), maximumKeyCount: 2) }
    }

    @Test func aKeyWithoutAlgStaysBoundToItsFirstAlgorithmAcrossRefetches() async throws {
        try await withSource { server, _, verifier in
            let rs256 = try SigningKey.generate(.rs256, keyID: "k")
            let ps256 = try rs256.signing(with: .ps256)  // the same RSA key
            var members = try #require(try rs256.publicJWK().json.objectValue)
            members["alg"] = nil
            let document = JSONValue.object(["keys": .array([.object(members)])]).serialized
            server.monitor.testKeySet = .init(json: document, cacheControl: "max-age=10")

            _ = try await verifier.verify(try token(rs256))
            #expect(await verificationCode { try await verifier.verify(try token(ps256)) } == .unknownKey)
            clock.advance(by: 31)  // past the cache lifetime and the unknown-kid limit: the same document again
            #expect(await verificationCode { try await verifier.verify(try token(ps256)) } == .unknownKey)
            #expect(requests(server) == 2)
            _ = try await verifier.verify(try token(rs256))
        }
    }
}
