import Foundation
import HTTPTypes
import LoginKitCurl
import LoginKitJOSE
import Testing

/// A real issuer: ID tokens from moto's Cognito (started by `scripts/with-moto.sh`, which
/// `make test` wraps around the test run) verify against that pool's JWKS.
struct CognitoEnvironment {
    let endpoint: String
    let region: String
    let poolID: String
    let clientID: String
    let username: String
    let password: String

    static var current: CognitoEnvironment? {
        let environment = ProcessInfo.processInfo.environment
        guard let endpoint = environment["LOGINKIT_TEST_COGNITO_ENDPOINT"],
            let region = environment["LOGINKIT_TEST_COGNITO_REGION"],
            let poolID = environment["LOGINKIT_TEST_COGNITO_POOL_ID"],
            let clientID = environment["LOGINKIT_TEST_COGNITO_CLIENT_ID"],
            let username = environment["LOGINKIT_TEST_COGNITO_USERNAME"],
            let password = environment["LOGINKIT_TEST_COGNITO_PASSWORD"]
        else { return nil }
        return CognitoEnvironment(
            endpoint: endpoint, region: region, poolID: poolID, clientID: clientID, username: username, password: password
        )
    }

    /// `make test` sets this, so that a missing moto fails the run instead of skipping quietly.
    static var isRequired: Bool { ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_MOTO"] == "1" }
}

@Suite(
    .enabled(if: CognitoEnvironment.current != nil || CognitoEnvironment.isRequired, "needs moto: run through make test"),
    .timeLimit(.minutes(2))
)
struct CognitoTokenTests {
    @Test func cognitoIDTokensVerifyAgainstThePoolsKeySet() async throws {
        let cognito = try #require(CognitoEnvironment.current, "LOGINKIT_TEST_COGNITO_* not set; run `make test`")
        try await CurlHTTPClient.withClient { client in
            let idToken = try await logIn(cognito, client: client)
            let issuer = "https://cognito-idp.\(cognito.region).amazonaws.com/\(cognito.poolID)"
            let keys = JWKSSource(url: "\(cognito.endpoint)/\(cognito.poolID)/.well-known/jwks.json", transport: client)
            let verifier = IDTokenVerifier(configuration: .init(issuer: issuer, audience: cognito.clientID), keys: keys)
            let verified = try await verifier.verify(idToken)
            #expect(verified.algorithm == .rs256)
            #expect(verified.claims["cognito:username"]?.stringValue == cognito.username)
            #expect(verified.claims["token_use"]?.stringValue == "id")

            // The same token with one claim edited (and the signature kept) must not verify.
            let parts = idToken.split(separator: ".").map(String.init)
            let payload = try #require(Base64URL.decode(parts[1]))
            var claims = try #require(try JSONValue.parse(payload).objectValue)
            claims["cognito:username"] = .string("admin")
            let edited = parts[0] + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8)) + "." + parts[2]
            #expect(await verificationCode { try await verifier.verify(edited) } == .badSignature)

            let wrongAudience = IDTokenVerifier(configuration: .init(issuer: issuer, audience: "another-client"), keys: keys)
            #expect(await verificationCode { try await wrongAudience.verify(idToken) } == .wrongAudience)
        }
    }

    /// `InitiateAuth` with `USER_PASSWORD_AUTH`, the raw AWS JSON protocol.
    private func logIn(_ cognito: CognitoEnvironment, client: CurlHTTPClient) async throws -> String {
        let target = try #require(HTTPField.Name("X-Amz-Target"))
        let request = try #require(HTTPRequest(method: .post, url: cognito.endpoint + "/", headerFields: [
            .contentType: "application/x-amz-json-1.1",
            target: "AWSCognitoIdentityProviderService.InitiateAuth",
        ]))
        let body = JSONValue.object([
            "AuthFlow": .string("USER_PASSWORD_AUTH"),
            "ClientId": .string(cognito.clientID),
            "AuthParameters": .object(["USERNAME": .string(cognito.username), "PASSWORD": .string(cognito.password)]),
        ])
        let (response, data) = try await client.send(request, body: Data(body.serialized.utf8))
        #expect(response.status == .ok)
        let reply = try JSONValue.parse(Array(data))
        return try #require(reply["AuthenticationResult"]?["IdToken"]?.stringValue)
    }
}
