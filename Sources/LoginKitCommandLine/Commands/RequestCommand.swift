// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import LoginKit

/// `loginkit request`: sends one HTTP request with the profile's access token — `Bearer`, or `DPoP`
/// with a fresh proof — and writes the response body to stdout byte for byte. The exit status says
/// how it went; no token, proof or `Authorization` value is ever printed.
struct RequestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Send an HTTP request with the profile's access token and print the response body.",
        discussion: """
            Adds Authorization itself: Bearer, or for a DPoP-bound profile DPoP with a fresh proof (and \
            the server's nonce when it asks for one). Refreshes the token as `token` does; a token the \
            server rejects as invalid_token is refreshed once and the request sent once more. The \
            response body goes to stdout unchanged; with --include, the status line and the response's \
            headers first (CRLF line ends, as curl -i prints them). The request's own headers are never \
            printed. No Content-Type is added: pass one with -H.

            Exit status: 0 for a response below 400; 22 for a response of 400 or more (the body is \
            still printed; `loginkit: HTTP <status> from <host>` on stderr, as curl --fail exits); 3 \
            login required; 10 the server asks for a stronger or more recent sign-in (stderr names \
            what it asked for and the `loginkit login --acr-values … --max-age …` to run); 5 network \
            or server failure; 2 usage.
            """
    )

    @Option(name: [.customShort("X", allowingJoined: true), .customLong("request")], help: ArgumentHelp("The method (default: GET, or POST with -d).", valueName: "method"))
    var method: String?
    @Argument(help: "The absolute http or https URL.") var url: String
    @Option(
        name: [.customShort("H", allowingJoined: true), .customLong("header")], parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A header to send, 'Name: value' (repeatable); not Authorization or DPoP, which loginkit adds.", valueName: "header"))
    var headers: [String] = []
    @Option(
        name: [.customShort("d", allowingJoined: true), .customLong("data")], parsing: .unconditional,
        help: ArgumentHelp("The body: @FILE (the file's bytes as they are), - (standard input) or the text itself; the method is then POST unless -X says otherwise.", valueName: "data"))
    var data: String?
    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the response's status line and headers before its body.")
    var include = false
    @OptionGroup var networkOptions: NetworkOptions
    @OptionGroup var storeOptions: StoreOptions

    /// The method sent, upper-cased: `-X`, else POST with `-d`, else GET.
    var methodName: String { (method ?? (data != nil ? "POST" : "GET")).uppercased() }

    func validate() throws {
        guard HTTPRequest.Method(methodName) != nil else {
            throw ValidationError("-X \(Terminal.printable(methodName, limit: 100)) is not an HTTP method")
        }
        guard HTTPRequest(method: .get, url: url) != nil else {
            throw ValidationError("\(Terminal.printable(url, limit: 300)) is not an absolute http or https URL")
        }
        _ = try headerFields()
        if data == "@" { throw ValidationError("-d @FILE needs a file name") }
    }

    /// The `-H` headers as fields, in order.
    ///
    /// - Throws: `ValidationError` for a header that is not `Name: value`, or that names
    ///   `Authorization` or `DPoP` (which this command adds itself).
    func headerFields() throws -> HTTPFields {
        var fields = HTTPFields()
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), let name = HTTPField.Name(String(header[..<colon])) else {
                throw ValidationError("-H \(Terminal.printable(header, limit: 200)): expected 'Name: value', such as 'Accept: application/json'")
            }
            if name == .authorization { throw ValidationError("loginkit request adds Authorization itself") }
            if name.canonicalName == "dpop" { throw ValidationError("loginkit request adds DPoP itself") }
            var value = header[header.index(after: colon)...]
            while let first = value.first, first == " " || first == "\t" { value.removeFirst() }
            while let last = value.last, last == " " || last == "\t" { value.removeLast() }
            guard HTTPField.isValidValue(String(value)) else {
                throw ValidationError("-H \(name.rawName): the value holds characters a header cannot carry (a line break, NUL, a control character)")
            }
            fields.append(HTTPField(name: name, value: String(value)))
        }
        return fields
    }

    func run() async throws {
        try await reportingFailures {
            let fields = try headerFields()
            guard let request = HTTPRequest(method: HTTPRequest.Method(methodName) ?? .get, url: url, headerFields: fields) else {
                throw CLIFailure.usage("\(Terminal.printable(url, limit: 300)) is not an absolute http or https URL")
            }
            let body = try await requestBody()
            let networkConfiguration = try networkOptions.clientConfiguration()
            let store = try await storeOptions.openStore().store
            // The certificate the profile's login recorded, unless --client-cert names one.
            let clientConfiguration = await ClientCertificateOptions.presenting(networkConfiguration, profile: storeOptions.profileName, in: store)
            var unsaved: TokenStoreError?  // a refresh whose credentials could not be saved: the response is printed anyway, then this is said
            let (response, responseBody) = try await CurlHTTPClient.withClient(configuration: clientConfiguration) {
                (client: CurlHTTPClient) async throws -> (HTTPResponse, Data) in
                let name = storeOptions.profileName
                guard let stored = try await store.profile(named: name) else {
                    throw CLIFailure(exitCode: 3, "not logged in (profile \"\(Terminal.printable(name, limit: 100))\"); run `loginkit login`")
                }
                let api = try APIFactory.api(
                    for: stored.source, attributes: stored.attributes, from: store, transport: client, clientSecret: APIFactory.environmentSecret)
                let call = await ProfileCall.run(api: api, store: store, profile: name) { service in
                    try await ClientAuthOptions.namingMissingCredential(of: (api as? OAuth2API)?.configuration) {
                        try await service.send(request, body: body)
                    }
                }
                unsaved = call.unsaved
                do {
                    return try call.result.get()
                } catch {
                    // A refresh whose credentials could not be saved is said even when the request
                    // then failed: the session ends with this process either way.
                    if let unsaved = call.unsaved { ProfileCall.unsavedFailure(unsaved).report() }
                    if let stepUp = error as? LoginRequiredError, stepUp.code == .stepUpRequired {
                        throw CLIFailure.stepUpRequired(stepUp, loginArguments: Self.loginArguments(for: stored, profile: name))
                    }
                    throw error
                }
            }
            var output: [UInt8] = []
            if include { output += Array(Self.head(of: response).utf8) }
            output += responseBody
            _ = LoginKit.writeAll(output, to: STDOUT_FILENO)
            let status = response.status.code
            let refused = status >= 400 ? CLIFailure(exitCode: CLIFailure.httpErrorExitCode, "HTTP \(status) from \(request.authority ?? url)") : nil
            if let unsaved {
                refused?.report()
                throw ProfileCall.unsavedFailure(unsaved)
            }
            if let refused { throw refused }
        }
    }

    /// The status line and the response's header fields, each line ending in CRLF, and the empty
    /// line: `HTTP <status>[ <reason>]`, then `Name: value` as the server sent them.
    static func head(of response: HTTPResponse) -> String {
        let reason = response.status.reasonPhrase
        var text = "HTTP \(response.status.code)\(reason.isEmpty ? "" : " " + reason)\r\n"
        for field in response.headerFields { text += "\(field.name.rawName): \(field.value)\r\n" }
        return text + "\r\n"
    }

    /// The arguments of the `loginkit login` that logs profile `name` in again as `stored` was: its
    /// provider and client, the DPoP algorithm it recorded, and the profile when it is not the
    /// default. Provider-chosen text is escaped and quoted for the shell.
    static func loginArguments(for stored: StoredProfile, profile name: String) -> [String] {
        var arguments: [String] = []
        if stored.source.kind == .oauth2, let clientID = stored.source.clientID {
            arguments += ["--issuer", Terminal.shellWord(Terminal.printable(stored.source.endpoint, limit: 500))]
            arguments += ["--client-id", Terminal.shellWord(Terminal.printable(clientID, limit: 200))]
            if let algorithm = stored.attributes["dpop_alg"].flatMap(JWSAlgorithm.init(rawValue:)) {
                arguments += ["--dpop-alg", algorithm.rawValue]
            }
        }
        if name != "default" { arguments += ["--profile", Terminal.shellWord(Terminal.printable(name, limit: 100))] }
        return arguments
    }

    /// The body `-d` names: the text itself, a file's bytes (`@FILE`), or standard input (`-`, `@-`),
    /// read to its end; `nil` without `-d`.
    ///
    /// - Throws: `CLIFailure` (exit 2) for a file that cannot be opened, (exit 1) for a read that fails.
    private func requestBody() async throws -> Data? {
        guard let data else { return nil }
        if data == "-" || data == "@-" { return Data(try await Self.readToEnd(descriptor: STDIN_FILENO, what: "standard input")) }
        guard data.hasPrefix("@") else { return Data(data.utf8) }
        let path = String(data.dropFirst())
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIFailure.usage("cannot read the body file \(Terminal.printable(path, limit: 300)) (-d @FILE): \(reason)")
        }
        defer { close(descriptor) }
        return Data(try await Self.readToEnd(descriptor: descriptor, what: "the body file \(Terminal.printable(path, limit: 300))"))
    }

    /// Every byte from `descriptor` until its end, read on a thread of its own (a pipe or a terminal
    /// may block for as long as its writer takes).
    private static func readToEnd(descriptor: Int32, what: String) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
            runOnThreadOfItsOwn {
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count > 0 {
                        bytes += buffer[..<count]
                    } else if count == 0 {
                        continuation.resume(returning: bytes)
                        return
                    } else if errno != EINTR {
                        let reason = String(cString: strerror(errno))
                        continuation.resume(throwing: CLIFailure(exitCode: 1, "cannot read \(what): \(reason)"))
                        return
                    }
                }
            }
        }
    }
}
#endif
