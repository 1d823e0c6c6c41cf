import LoginKit
import Testing

@Suite struct PKCETests {
    @Test func theChallengeIsTheRFC7636AppendixBVector() throws {
        let pkce = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pkce.method == "S256")
    }

    @Test func generatedVerifiersAreFreshAndWellFormed() throws {
        let first = try PKCE.generate()
        let second = try PKCE.generate()
        #expect(first.verifier.count == 43)
        #expect(PKCE.isValidVerifier(first.verifier))
        #expect(first.verifier != second.verifier)
        let recomputed = try PKCE(verifier: first.verifier)
        #expect(first.challenge == recomputed.challenge)
        #expect(!String(describing: first).contains(first.verifier))
    }

    @Test(arguments: [
        String(repeating: "a", count: 42), String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "+",
    ])
    func malformedVerifiersAreRefused(_ verifier: String) {
        #expect((#expect(throws: LoginError.self) { try PKCE(verifier: verifier) })?.code == .invalidConfiguration)
    }
}
