import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// `loginkit exchange` and the client-credentials login with the dev server's confidential client
/// `loginkit-service` (secret `dev-secret`): what the provider refuses, and what is said about it.
@Suite(.timeLimit(.minutes(3)))
struct ConfidentialClientCLITests {
    /// An exchange that asks for more scope than the subject token has is refused by the provider
    /// (`invalid_scope`): exit 4 naming it, as for a refused subject token or target — not exit 2
    /// advising `--scope`, which was given.
    @Test func anExchangeForAWiderScopeThanTheSubjectsExits4() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let common = ["--store", directory + "/tokens.json"]
                let login = try await loginkit(
                    ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + common,
                    input: "demo\n")
                try #require(login.status == 0, "\(login.stderr)")
                let subject = try await loginkit(["token", "--access"] + common)
                try #require(subject.status == 0, "\(subject.stderr)")
                let exchange = ["exchange", "--issuer", server.issuer, "--client-id", "loginkit-service", "--subject-token", "-"]
                let secret = ["LOGINKIT_CLIENT_SECRET": "dev-secret"]

                let wider = try await loginkit(exchange + ["--scope", "openid admin"], input: subject.stdout, environment: secret)
                #expect(wider.status == 4, "\(wider.stderr)")
                #expect(wider.stderr.contains("invalid_scope"), "\(wider.stderr)")
                #expect(!wider.stderr.contains("choose the scope with --scope"), "\(wider.stderr)")
                #expect(wider.stdout.isEmpty)

                let within = try await loginkit(exchange + ["--scope", "openid"], input: subject.stdout, environment: secret)
                #expect(within.status == 0, "\(within.stderr)")
            }
        }
    }

    /// The help's continued lines read as text: no backslash of the source's line continuations.
    @Test func exchangeHelpHasNoStrayBackslashes() async throws {
        let help = try await loginkit(["exchange", "--help"])
        #expect(help.status == 0, "\(help.all)")
        #expect(help.stdout.contains("The subject token comes from standard input"), "\(help.stdout)")
        #expect(!help.stdout.contains("\\"), "\(help.stdout)")
    }

    /// A confidential client run without `LOGINKIT_CLIENT_SECRET` sends its requests unauthenticated;
    /// the provider's `invalid_client` is then reported as the missing secret it is, not as "check
    /// the client configuration". With a secret given (a wrong one), the refusal is the provider's.
    @Test func aConfidentialClientWithoutItsSecretIsToldThatNoSecretWasSupplied() async throws {
        try await withTemporaryDirectory { directory in
            try await DevServer.withServer { server in
                let login = ["login", "--issuer", server.issuer, "--client-id", "loginkit-service", "--client-credentials", "--store", directory + "/tokens.json"]
                let exchange = ["exchange", "--issuer", server.issuer, "--client-id", "loginkit-service", "--subject-token", "-"]
                let loggedIn = try await loginkit(login)
                let exchanged = try await loginkit(exchange, input: "at.some-subject-token\n")
                for run in [loggedIn, exchanged] {
                    #expect(run.status == 4, "\(run.stderr)")
                    #expect(run.stderr.contains("no client secret was supplied"), "\(run.stderr)")
                    #expect(run.stderr.contains("LOGINKIT_CLIENT_SECRET"), "\(run.stderr)")
                    #expect(run.stderr.contains("--private-key"), "\(run.stderr)")
                    #expect(!run.stderr.contains("check the client configuration"), "\(run.stderr)")
                }

                let wrong = try await loginkit(login, environment: ["LOGINKIT_CLIENT_SECRET": "not-the-secret"])
                #expect(wrong.status == 4, "\(wrong.stderr)")
                #expect(!wrong.stderr.contains("no client secret was supplied"), "\(wrong.stderr)")
                #expect(try await loginkit(login, environment: ["LOGINKIT_CLIENT_SECRET": "dev-secret"]).status == 0)
            }
        }
    }
}
