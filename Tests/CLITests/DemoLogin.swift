import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// Logs demo in at `server` with `loginkit login … --password-stdin` followed by `arguments` (run
/// from `directory` when one is given), and requires the login to succeed; its run.
@discardableResult
func logInDemo(at server: DevServer, _ arguments: [String], in directory: String? = nil) async throws -> Run {
    let command: [String] =
        ["login", "--issuer", server.issuer, "--client-id", "loginkit-cli", "--username", "demo", "--password-stdin"] + arguments
    let login: Run
    if let directory {
        login = try await loginkitInDirectory(directory, command, input: "demo\n")
    } else {
        login = try await loginkit(command, input: "demo\n")
    }
    try #require(login.status == 0, "\(login.stderr)")
    return login
}

/// Runs `body` with a quiet dev provider and a fresh directory holding `tokens.json`, a store in
/// which demo has logged in (profile `default`): the provider, the directory and the store's path.
func withDemoLoggedIn<T>(
    _ body: (_ server: DevServer, _ directory: String, _ storePath: String) async throws -> T
) async throws -> T {
    try await withTemporaryDirectory { directory in
        try await DevServer.withServer(configuration: .quiet) { server in
            let storePath = directory + "/tokens.json"
            try await logInDemo(at: server, ["--store", storePath])
            return try await body(server, directory, storePath)
        }
    }
}

/// The access token profile `default` holds in the store file at `storePath`.
func storedAccessToken(_ storePath: String) async throws -> String {
    let profile = try await IDTokenStore(path: storePath).profile(named: "default")
    return try #require(profile?.credentials.accessToken)
}
