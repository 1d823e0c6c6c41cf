import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// The dev provider's workload issuer (`<issuer>/workload`): its discovery document, key set and
/// token endpoints, and what the provider accepts from it — federated client assertions, the
/// JWT-bearer grant (RFC 7523 §2.1) and token exchange subject and actor tokens — over real HTTP.
@Suite(.timeLimit(.minutes(2)))
struct DevWorkloadIssuerTests {
    static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let jwtTokenType = "urn:ietf:params:oauth:token-type:jwt"

    /// An answer: the status and the JSON body (`nil` when the body is not JSON).
    struct Answer {
        let status: Int
        let body: JSONValue?

        var error: String? { body?["error"]?.stringValue }
        var description: String { body?["error_description"]?.stringValue ?? "" }
    }

    /// `GET url` with `headers`.
    func get(_ fixture: Fixture, _ url: String, headers: HTTPFields = [:]) async throws -> Answer {
        let request = try #require(HTTPRequest(method: .get, url: url, headerFields: headers))
        let (response, body) = try await fixture.client.send(request, body: nil)
        return Answer(status: response.status.code, body: try? JSONValue.parse(Array(body)))
    }

    /// A form POST of `fields` to `path` (the token endpoint by default), with a `DPoP` header when
    /// there is a `proof`.
    func post(_ fixture: Fixture, _ fields: [(String, String)], to path: String = "/oauth/token", proof: String? = nil) async throws -> Answer {
        var request = try #require(
            HTTPRequest(method: .post, url: fixture.server.url(path), headerFields: [.contentType: "application/x-www-form-urlencoded"]))
        if let proof {
            let name = try #require(HTTPField.Name("DPoP"))
            request.headerFields[name] = proof
        }
        let (response, body) = try await fixture.client.send(request, body: Data(FormURLEncoding.encode(fields).utf8))
        return Answer(status: response.status.code, body: try? JSONValue.parse(Array(body)))
    }

    /// The claim `name` of a JWT, read without verification.
    func claim(_ name: String, of token: String?) throws -> JSONValue? {
        try jwsPartJSON(try #require(token, "no token"), 1)[name]
    }

    /// `claims` as a JWT with `alg: none` and no signature.
    static func unsigned(_ claims: [String: JSONValue]) -> String {
        let header: JSONValue = .object(["alg": .string("none"), "typ": .string("JWT")])
        return Base64URL.encode(Array(header.serialized.utf8)) + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8)) + "."
    }

    /// The forgeries and overlong tokens every use of a workload identity token refuses, each
    /// with a word its refusal names: `alg: none`, the main issuer's key under the workload key's
    /// `kid`, two audiences, no `iat`, a lifetime of more than an hour (issued ten hours ago, half
    /// an hour left).
    static func forgeries(_ fixture: Fixture, subject: String) -> [(assertion: String, says: String)] {
        let server = fixture.server
        let claims = server.workloadTokenClaims(subject: subject, audience: server.issuer)
        var twoAudiences = claims
        twoAudiences["aud"] = .array([.string(server.issuer), .string("https://elsewhere.example")])
        var undated = claims
        undated["iat"] = nil
        let longLived = server.mintWorkloadToken(
            subject: subject, audience: server.issuer, lifetime: .seconds(10 * 3600 + 1800), issuedAt: fixture.clock.now.addingTimeInterval(-10 * 3600))
        return [
            (unsigned(claims), "signature"),
            (server.mintWorkloadTokenWithIssuerKey(claims: claims), "signature"),
            (server.mintWorkloadToken(claims: twoAudiences), "audience"),
            (server.mintWorkloadToken(claims: undated), "iat"),
            (longLived, "hour"),
        ]
    }

    /// A client-credentials request authenticated by `assertion` as `clientID`'s client assertion.
    func federatedClientCredentials(_ fixture: Fixture, assertion: String, clientID: String? = "workload-client") async throws -> Answer {
        var fields = [("grant_type", "client_credentials"), ("client_assertion_type", Self.assertionType), ("client_assertion", assertion)]
        if let clientID { fields.append(("client_id", clientID)) }
        return try await post(fixture, fields)
    }

    @Test func theWorkloadIssuerPublishesItsOwnKeyAndItsTokensVerifyWithIt() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            #expect(server.workloadIssuer == server.issuer + "/workload")
            let discovery = try await get(fixture, server.workloadIssuer + "/.well-known/openid-configuration")
            #expect(discovery.status == 200)
            #expect(discovery.body?["issuer"]?.stringValue == server.workloadIssuer)
            let jwksURI = try #require(discovery.body?["jwks_uri"]?.stringValue)
            #expect(jwksURI == server.workloadIssuer + "/jwks")
            let keySet = try await get(fixture, jwksURI)
            #expect(keySet.status == 200)
            #expect(keySet.body?["keys"]?.arrayValue?.count == 1)

            let clock = fixture.clock
            let now: @Sendable () -> Date = { clock.now }
            let workloadKeys = JWKSSource(url: jwksURI, transport: fixture.client, now: now)
            let verifier = IDTokenVerifier(
                configuration: .init(issuer: server.workloadIssuer, audience: "https://api.example"), keys: workloadKeys, now: now)
            let token = server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: "https://api.example")
            let verified = try await verifier.verify(token)
            #expect(verified.claims.subject == DevServer.kubernetesSubject)
            #expect(verified.claims.issuer == server.workloadIssuer)
            #expect(verified.claims["jti"]?.stringValue?.isEmpty == false)

            // A forgery with the workload key's kid does not verify; the main issuer's keys are others.
            let forged = server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: "https://api.example", signedWithForeignKey: true)
            await #expect(throws: TokenVerificationError.self) { try await verifier.verify(forged) }
            let mainKeys = JWKSSource(url: server.issuer + "/.well-known/jwks.json", transport: fixture.client, now: now)
            let mainVerifier = IDTokenVerifier(
                configuration: .init(issuer: server.workloadIssuer, audience: "https://api.example"), keys: mainKeys, now: now)
            await #expect(throws: TokenVerificationError.self) { try await mainVerifier.verify(token) }
        }
    }

    @Test func theGitHubStyleEndpointAnswersItsRequestTokenOnly() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let bearer: HTTPFields = [.authorization: "bearer " + server.gitHubRequestToken]
            let asked = try await get(fixture, server.gitHubTokenURL + "&audience=api%3A%2F%2FAzureADTokenExchange", headers: bearer)
            #expect(asked.status == 200)
            #expect(asked.body?["count"]?.int64Value == 1)
            let value = asked.body?["value"]?.stringValue
            #expect(try claim("aud", of: value)?.stringValue == "api://AzureADTokenExchange")
            #expect(try claim("sub", of: value)?.stringValue == DevServer.gitHubSubject)
            #expect(try claim("iss", of: value)?.stringValue == server.workloadIssuer)

            let byDefault = try await get(fixture, server.gitHubTokenURL, headers: [.authorization: "Bearer " + server.gitHubRequestToken])
            #expect(byDefault.status == 200)
            #expect(try claim("aud", of: byDefault.body?["value"]?.stringValue)?.stringValue == DevServer.gitHubDefaultAudience)

            #expect(try await get(fixture, server.gitHubTokenURL).status == 401)
            #expect(try await get(fixture, server.gitHubTokenURL, headers: [.authorization: "bearer not-the-request-token"]).status == 401)
            #expect(try await get(fixture, server.gitHubTokenURL, headers: [.authorization: "Basic " + server.gitHubRequestToken]).status == 401)
            #expect(server.monitor.workloadTokensIssued == 2)
        }
    }

    @Test func theMetadataStyleEndpointRequiresItsHeader() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let url = server.metadataTokenURL + "?resource=https%3A%2F%2Fapi.example"
            let withoutHeader = try await get(fixture, url)
            #expect(withoutHeader.status == 400)
            #expect(withoutHeader.error == "bad_request")

            let metadata = try #require(HTTPField.Name("Metadata"))
            let answer = try await get(fixture, url, headers: [metadata: "true"])
            #expect(answer.status == 200)
            #expect(answer.body?["token_type"]?.stringValue == "Bearer")
            #expect(answer.body?["expires_in"]?.stringValue == "300")
            let token = answer.body?["access_token"]?.stringValue
            #expect(try claim("aud", of: token)?.stringValue == "https://api.example")
            #expect(try claim("sub", of: token)?.stringValue == DevServer.metadataSubject)

            let byDefault = try await get(fixture, server.metadataTokenURL, headers: [metadata: "true"])
            #expect(try claim("aud", of: byDefault.body?["access_token"]?.stringValue)?.stringValue == server.issuer)
            #expect(server.monitor.workloadTokensIssued == 2)
        }
    }

    @Test func aFederatedAssertionAuthenticatesItsClientWherever() async throws {
        let entraStyle = DevClient(
            id: "entra-style", federatedCredentials: [DevFederatedCredential(subject: DevServer.gitHubSubject, audience: "api://AzureADTokenExchange")])
        try await withFixture(configure: { $0.clients.append(entraStyle) }) { fixture in
            let server = fixture.server
            let assertion = server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: server.issuer)
            let first = try await federatedClientCredentials(fixture, assertion: assertion)
            #expect(first.status == 200, "\(first.description)")
            let withResource = try await post(
                fixture,
                [
                    ("grant_type", "client_credentials"), ("client_id", "workload-client"), ("client_assertion_type", Self.assertionType),
                    ("client_assertion", assertion), ("resource", "https://api.example/"),
                ])
            #expect(try claim("client_id", of: withResource.body?["access_token"]?.stringValue)?.stringValue == "workload-client")
            // The platform's token is presented again until it expires: no replay refusal.
            #expect(try await federatedClientCredentials(fixture, assertion: assertion).status == 200)
            let forTokenEndpoint = server.mintWorkloadToken(subject: DevServer.metadataSubject, audience: server.url("/oauth/token"))
            #expect(try await federatedClientCredentials(fixture, assertion: forTokenEndpoint).status == 200)

            // The GitHub-style endpoint's token, asked for this provider, end to end.
            let gitHub = try await get(
                fixture, server.gitHubTokenURL + "&audience=" + server.issuer.replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: "/", with: "%2F"),
                headers: [.authorization: "bearer " + server.gitHubRequestToken])
            let gitHubToken = try #require(gitHub.body?["value"]?.stringValue)
            #expect(try await federatedClientCredentials(fixture, assertion: gitHubToken).status == 200)

            // A credential with its own audience takes that audience only.
            let entra = server.mintWorkloadToken(subject: DevServer.gitHubSubject, audience: "api://AzureADTokenExchange")
            #expect(try await federatedClientCredentials(fixture, assertion: entra, clientID: "entra-style").status == 200)
            let entraForIssuer = server.mintWorkloadToken(subject: DevServer.gitHubSubject, audience: server.issuer)
            let refused = try await federatedClientCredentials(fixture, assertion: entraForIssuer, clientID: "entra-style")
            #expect(refused.status == 401 && refused.error == "invalid_client")

            // Revocation authenticates clients the same way.
            let revoke = try await post(
                fixture,
                [("token", "at.unknown"), ("client_id", "workload-client"), ("client_assertion_type", Self.assertionType), ("client_assertion", assertion)],
                to: "/oauth/revoke")
            #expect(revoke.status == 200)
            let anonymousRevoke = try await post(fixture, [("token", "at.unknown"), ("grant_type", Self.jwtBearerGrant)], to: "/oauth/revoke")
            #expect(anonymousRevoke.status == 401)
        }
    }

    @Test func aFederatedAssertionIsRefusedNamingWhatIsWrong() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let issuer = server.issuer
            let subject = DevServer.kubernetesSubject
            var foreignIssuerClaims = server.workloadTokenClaims(subject: subject, audience: issuer)
            foreignIssuerClaims["iss"] = .string("https://token.actions.githubusercontent.com")
            let cases: [(assertion: String, clientID: String?, says: String)] = [
                (server.mintWorkloadToken(subject: subject, audience: "https://elsewhere.example"), "workload-client", "audience"),
                (server.mintWorkloadToken(subject: "system:serviceaccount:default:other", audience: issuer), "workload-client", "subject"),
                (
                    server.mintWorkloadToken(subject: subject, audience: issuer, issuedAt: fixture.clock.now.addingTimeInterval(-600)),
                    "workload-client", "expired"
                ),
                (server.mintWorkloadToken(subject: subject, audience: issuer, lifetime: .seconds(7200)), "workload-client", "hour"),
                (server.mintWorkloadToken(subject: subject, audience: issuer, signedWithForeignKey: true), "workload-client", "signature"),
                (server.mintWorkloadToken(claims: foreignIssuerClaims, signedWithForeignKey: true), "workload-client", "issuer"),
                (server.mintWorkloadToken(subject: subject, audience: issuer), "loginkit-service", "issuer"),
                (server.mintWorkloadToken(subject: subject, audience: issuer), nil, "client_id"),
            ]
            // A classic client assertion (iss = sub) made out in the workload issuer's name by a
            // client that has no federated credential, signed with that client's own secret: the
            // workload issuer is trusted for federated clients only.
            let now = Int(fixture.clock.now.timeIntervalSince1970)
            let impersonation = try ClientAssertionSigner.clientSecret("dev-secret-for-client-secret-jwt-0123456789").sign(claims: [
                "iss": .string(server.workloadIssuer), "sub": .string(server.workloadIssuer), "aud": .string(server.url("/oauth/token")),
                "jti": .string(UUID().uuidString), "iat": .number("\(now)"), "exp": .number("\(now + 60)"),
            ])
            let forged: [(assertion: String, clientID: String?, says: String)] = Self.forgeries(fixture, subject: subject).map {
                ($0.assertion, "workload-client", $0.says)
            }
            let impersonations: [(assertion: String, clientID: String?, says: String)] = [
                (impersonation, "loginkit-signed", "issuer"), (impersonation, nil, "client_id"),
            ]
            for (assertion, clientID, says) in cases + forged + impersonations {
                let answer = try await federatedClientCredentials(fixture, assertion: assertion, clientID: clientID)
                #expect(answer.status == 401, "\(says): \(answer.description)")
                #expect(answer.error == "invalid_client", "\(says)")
                #expect(answer.description.contains(says), "\(says): \(answer.description)")
            }
            // A client with federated credentials only is confidential: it cannot go without an assertion.
            let bare = try await post(fixture, [("grant_type", "client_credentials"), ("client_id", "workload-client")])
            #expect(bare.status == 401 && bare.error == "invalid_client")
            #expect(bare.description.contains("federated"), "\(bare.description)")
        }
    }

    @Test func theJWTBearerGrantIssuesATokenForTheWorkload() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let discovery = try await get(fixture, server.issuer + "/.well-known/openid-configuration")
            #expect(discovery.body?["grant_types_supported"]?.arrayValue?.contains(.string(Self.jwtBearerGrant)) == true)

            func assertion() -> String { server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: server.issuer) }
            let named = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("assertion", assertion()), ("client_id", "loginkit-cli")])
            #expect(named.status == 200, "\(named.description)")
            #expect(named.body?["token_type"]?.stringValue == "Bearer")
            #expect(named.body?["refresh_token"] == nil)
            let token = try #require(named.body?["access_token"]?.stringValue)
            #expect(try claim("sub", of: token)?.stringValue == DevServer.kubernetesSubject)
            #expect(try claim("client_id", of: token)?.stringValue == "loginkit-cli")
            #expect(try claim("iss", of: token)?.stringValue == server.issuer)
            var resource = try fixture.resourceRequest()
            resource.headerFields[.authorization] = "Bearer " + token
            let (response, body) = try await fixture.client.send(resource, body: nil)
            #expect(response.status.code == 200)
            #expect(try resourceAnswer(body)["sub"]?.stringValue == DevServer.kubernetesSubject)

            let anonymous = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("assertion", assertion()), ("scope", "api")])
            #expect(anonymous.status == 200, "\(anonymous.description)")
            #expect(try claim("client_id", of: anonymous.body?["access_token"]?.stringValue)?.stringValue == "workload")
            #expect(try claim("scope", of: anonymous.body?["access_token"]?.stringValue)?.stringValue == "api")

            let authenticated = try await post(fixture, [
                ("grant_type", Self.jwtBearerGrant), ("assertion", assertion()), ("client_id", "loginkit-service"), ("client_secret", "dev-secret"),
            ])
            #expect(try claim("client_id", of: authenticated.body?["access_token"]?.stringValue)?.stringValue == "loginkit-service")

            // The client authenticated by a federated assertion, the grant by another workload's.
            let federated = try await post(fixture, [
                ("grant_type", Self.jwtBearerGrant), ("assertion", assertion()), ("client_id", "workload-client"),
                ("client_assertion_type", Self.assertionType),
                ("client_assertion", server.mintWorkloadToken(subject: DevServer.gitHubSubject, audience: server.issuer)),
            ])
            #expect(federated.status == 200, "\(federated.description)")
            #expect(try claim("sub", of: federated.body?["access_token"]?.stringValue)?.stringValue == DevServer.kubernetesSubject)
            #expect(try claim("client_id", of: federated.body?["access_token"]?.stringValue)?.stringValue == "workload-client")

            // DPoP binds the token as for any grant.
            let key = try DPoPKey.generate()
            let proof = try key.proof(method: "POST", url: server.url("/oauth/token"), nonce: nil, accessToken: nil, now: fixture.clock.now)
            let bound = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("assertion", assertion())], proof: proof)
            #expect(bound.status == 200, "\(bound.description)")
            #expect(bound.body?["token_type"]?.stringValue == "DPoP")
            #expect(try confirmationThumbprint(of: bound.body?["access_token"]?.stringValue) == key.thumbprint)
        }
    }

    @Test func aBadJWTBearerAssertionIsAnInvalidGrant() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let issuer = server.issuer
            let subject = DevServer.kubernetesSubject
            var foreignIssuerClaims = server.workloadTokenClaims(subject: subject, audience: issuer)
            foreignIssuerClaims["iss"] = .string("https://kubernetes.default.svc")
            var subjectless = server.workloadTokenClaims(subject: subject, audience: issuer)
            subjectless["sub"] = nil
            let cases: [(assertion: String, says: String)] = [
                (server.mintWorkloadToken(subject: subject, audience: "https://elsewhere.example"), "audience"),
                (server.mintWorkloadToken(subject: subject, audience: issuer, issuedAt: fixture.clock.now.addingTimeInterval(-600)), "expired"),
                (server.mintWorkloadToken(subject: subject, audience: issuer, signedWithForeignKey: true), "signature"),
                (server.mintWorkloadToken(claims: foreignIssuerClaims), "issuer"),
                (server.mintWorkloadToken(claims: subjectless), "subject"),
                ("not-a-jwt", "JWT"),
            ]
            for (assertion, says) in cases + Self.forgeries(fixture, subject: subject) {
                let answer = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("assertion", assertion), ("client_id", "loginkit-cli")])
                #expect(answer.status == 400, "\(says): \(answer.description)")
                #expect(answer.error == "invalid_grant", "\(says)")
                #expect(answer.description.contains(says), "\(says): \(answer.description)")
            }
            let missing = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("client_id", "loginkit-cli")])
            #expect(missing.status == 400 && missing.error == "invalid_request")
            // A confidential client named without its authentication is refused as at any grant.
            let valid = server.mintWorkloadToken(subject: subject, audience: issuer)
            let unauthenticated = try await post(fixture, [("grant_type", Self.jwtBearerGrant), ("assertion", valid), ("client_id", "loginkit-service")])
            #expect(unauthenticated.status == 401 && unauthenticated.error == "invalid_client")
        }
    }

    @Test func anExchangeTakesAWorkloadSubjectToken() async throws {
        try await withFixture { fixture in
            let server = fixture.server
            let subjectToken = server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: server.issuer)
            func exchange(_ token: String, type: String, extra: [(String, String)] = []) async throws -> Answer {
                try await post(
                    fixture,
                    [
                        ("grant_type", Self.tokenExchangeGrant), ("client_id", "loginkit-service"), ("client_secret", "dev-secret"),
                        ("subject_token", token), ("subject_token_type", type), ("audience", "https://api.example"),
                    ] + extra)
            }
            let exchanged = try await exchange(subjectToken, type: Self.jwtTokenType, extra: [("scope", "api")])
            #expect(exchanged.status == 200, "\(exchanged.description)")
            let token = exchanged.body?["access_token"]?.stringValue
            #expect(try claim("sub", of: token)?.stringValue == DevServer.kubernetesSubject)
            #expect(try claim("aud", of: token)?.stringValue == "https://api.example")
            #expect(try claim("scope", of: token)?.stringValue == "api")

            let asIDToken = try await exchange(subjectToken, type: "urn:ietf:params:oauth:token-type:id_token")
            #expect(asIDToken.status == 200, "\(asIDToken.description)")

            let actorToken = server.mintWorkloadToken(subject: DevServer.gitHubSubject, audience: server.issuer)
            let delegated = try await exchange(subjectToken, type: Self.jwtTokenType, extra: [("actor_token", actorToken), ("actor_token_type", Self.jwtTokenType)])
            #expect(delegated.status == 200, "\(delegated.description)")
            #expect(try claim("act", of: delegated.body?["access_token"]?.stringValue)?["sub"]?.stringValue == DevServer.gitHubSubject)

            // Only as a JWT or ID token, only for this provider, only signed by the workload key.
            let asAccessToken = try await exchange(subjectToken, type: "urn:ietf:params:oauth:token-type:access_token")
            #expect(asAccessToken.status == 400 && asAccessToken.error == "invalid_grant")
            let elsewhere = try await exchange(
                server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: "https://elsewhere.example"), type: Self.jwtTokenType)
            #expect(elsewhere.status == 400 && elsewhere.error == "invalid_grant")
            #expect(elsewhere.description.contains("audience"), "\(elsewhere.description)")
            let forged = try await exchange(
                server.mintWorkloadToken(subject: DevServer.kubernetesSubject, audience: server.issuer, signedWithForeignKey: true), type: Self.jwtTokenType)
            #expect(forged.status == 400 && forged.description.contains("signature"), "\(forged.description)")
        }
    }
}
