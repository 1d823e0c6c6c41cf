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

/// `loginkit docker-credential get|list|store|erase` — also run as `docker-credential-loginkit`, a
/// link to `loginkit` that docker finds on `PATH` (``toolArguments(_:)``): docker's credential-helper
/// protocol (docker-credential-helpers). A registry is served by the profile that names it in its
/// ``DockerRegistries`` (`configure`); any other registry is not found.
struct DockerCredentialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "docker's credential helper: a profile's access token for the registries it serves.",
        discussion: """
            Link it as docker-credential-loginkit (ln -s "$(command -v loginkit)" ~/.local/bin/docker-credential-loginkit), \
            name the registry with `loginkit docker-credential configure --registry HOST`, and map it to \
            the helper in ~/.docker/config.json: {"credHelpers": {"HOST": "loginkit"}}. Answers go to \
            stdout, as docker reads them, failures too.
            """,
        subcommands: [
            GetOperation.self, ListOperation.self, StoreOperation.self, EraseOperation.self, ConfigureOperation.self, VersionOperation.self,
        ])

    /// The name docker runs for the `credHelpers` value `loginkit`.
    static let executableName = "docker-credential-loginkit"
    /// The protocol's answer for a registry the helper holds nothing for: docker then goes on
    /// without credentials (a public image is still pulled).
    static let notFoundMessage = "credentials not found in native keychain"

    /// The arguments the tool parses: `arguments` without the executable's name — after
    /// `docker-credential` when that name is ``executableName``, so that the link speaks docker's
    /// protocol (`docker-credential-loginkit get`).
    static func toolArguments(_ arguments: [String]) -> [String] {
        let rest = Array(arguments.dropFirst())
        guard let invoked = arguments.first, invoked.split(separator: "/").last.map(String.init) == executableName else { return rest }
        return ["docker-credential"] + rest
    }

    /// A registry no profile serves, or one whose profile has no usable session.
    struct NotFound: Error {}

    /// Runs `body` as docker's helpers run: a failure is one line on stdout, which docker shows (it
    /// does not read stderr), and a non-zero exit — ``notFoundMessage`` and exit 1 for ``NotFound``,
    /// else `loginkit: <message>` and the contract's exit code.
    static func speakingProtocol(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch is NotFound {
            Terminal.writeAll(notFoundMessage + "\n", to: STDOUT_FILENO)
            throw ExitCode(1)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            let failure = CLIFailure(error)
            Terminal.writeAll("loginkit: \(Terminal.printable(failure.message, limit: 1000))\n", to: STDOUT_FILENO)
            throw ExitCode(failure.exitCode)
        }
    }

    /// The server URL docker writes on stdin (to its end), without surrounding white space.
    ///
    /// - Throws: `CLIFailure` exit 1 when there is none (docker's "no credentials server URL"), exit
    ///   2 beyond 64 KiB.
    static func serverURL() async throws -> String {
        let bytes = try await BoundedInput.readRequest(untilBlankLine: false)
        var text = Substring(String(decoding: bytes, as: UTF8.self))
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        guard !text.isEmpty else { throw CLIFailure(exitCode: 1, "no credentials server URL") }
        return String(text)
    }

    /// The registry whose server URL docker wrote on stdin, and the profile that serves it.
    struct ServedRegistry {
        /// The server URL as docker wrote it.
        let serverURL: String
        /// The profile serving the registry.
        let profile: String
        /// The registry's username (``DockerRegistries``).
        let username: String
        /// The store holding the profile.
        let store: any TokenStore
        /// The client configuration the network options make.
        let network: CurlHTTPClient.Configuration
    }

    /// Reads the server URL on stdin and finds the profile serving its registry in the store the
    /// options open — the registry names the profile: no profile is chosen by context.
    ///
    /// - Throws: ``NotFound`` when no profile serves it; what ``serverURL()``, the network options
    ///   and opening the store throw.
    static func servedRegistry(network networkOptions: NetworkOptions, store storeOptions: StoreOptions) async throws -> ServedRegistry {
        let serverURL = try await DockerCredentialCommand.serverURL()
        guard let key = DockerRegistries.key(for: serverURL) else { throw NotFound() }
        let network = try networkOptions.clientConfiguration()
        let store = try await storeOptions.openStore(choosingProfile: false).store
        guard let served = try await DockerRegistries.all(in: store)[key] else { throw NotFound() }
        return ServedRegistry(
            serverURL: serverURL, profile: served.profile, username: served.username, store: store, network: network)
    }

    /// What `get` prints: `{"Secret":…,"ServerURL":…,"Username":…}` on one line.
    struct Answer: Encodable {
        let serverURL: String
        let username: String
        let secret: String

        enum CodingKeys: String, CodingKey {
            case serverURL = "ServerURL", username = "Username", secret = "Secret"
        }
    }

    /// `value` as one line of JSON, keys sorted, slashes not escaped.
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

extension DockerCredentialCommand {
    /// `get`: the server URL on stdin; the credentials on stdout.
    struct GetOperation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Read a server URL on stdin; print the access token of the profile serving that registry.",
            discussion: """
                Prints {"Secret": "<access token>", "ServerURL": "<as given>", "Username": "<the registry's \
                username>"}. A registry no profile serves, or whose profile has no usable session or cannot \
                refresh (the reason on stderr): `credentials not found in native keychain`, exit 1.
                """)

        @OptionGroup var networkOptions: NetworkOptions
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            try await DockerCredentialCommand.speakingProtocol {
                let registry = try await DockerCredentialCommand.servedRegistry(network: networkOptions, store: storeOptions)
                let issued: ProfileAccessToken.Issued
                do {
                    issued = try await ProfileAccessToken.valid(
                        profile: registry.profile, store: registry.store, network: registry.network, minimumValidity: .zero)
                } catch {
                    // No usable session, a refused client, an unreachable provider: docker goes on
                    // without credentials; the reason is for whoever reads stderr.
                    let failure = CLIFailure(error)
                    guard [3, 4, 5].contains(failure.exitCode) else { throw failure }
                    failure.report()
                    throw NotFound()
                }
                let answer = Answer(serverURL: registry.serverURL, username: registry.username, secret: issued.token)
                Terminal.writeAll(try DockerCredentialCommand.json(answer) + "\n", to: STDOUT_FILENO)
                // The answer stands (docker reads it only with exit 0); the lost save is said on stderr.
                if let unsaved = issued.unsaved { ProfileCall.unsavedFailure(unsaved).report() }
            }
        }
    }

    /// `list`: every registry served, with its Username.
    struct ListOperation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Print the registries the store's profiles serve: {\"HOST\": \"USERNAME\", …}.")

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            try await DockerCredentialCommand.speakingProtocol {
                let store = try await storeOptions.openStore(choosingProfile: false).store
                let usernames = try await DockerRegistries.all(in: store).mapValues { $0.username }
                Terminal.writeAll(try DockerCredentialCommand.json(usernames) + "\n", to: STDOUT_FILENO)
            }
        }
    }

    /// `store`: accepted and ignored.
    struct StoreOperation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "store",
            abstract: "Accept docker's credentials (JSON on stdin) and keep nothing.",
            discussion: """
                The profile's token is the credential: what docker offers to store (its own copy of that \
                token after `docker login`, or what was typed there) is never kept. Registries are named \
                with `loginkit docker-credential configure`.
                """)

        func run() async throws {
            try await DockerCredentialCommand.speakingProtocol {
                let bytes = try await BoundedInput.readRequest(untilBlankLine: false)
                guard (try? JSONDecoder().decode(Offered.self, from: Data(bytes))) != nil else {
                    throw CLIFailure(exitCode: 1, "expected docker's credentials as JSON on standard input ({\"ServerURL\": …})")
                }
            }
        }

        /// What docker sends; only its shape is checked.
        private struct Offered: Decodable {
            let serverURL: String

            enum CodingKeys: String, CodingKey {
                case serverURL = "ServerURL"
            }
        }
    }

    /// `erase`: the registry's token is replaced.
    struct EraseOperation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "erase",
            abstract: "Read a server URL on stdin; refresh the access token of the profile serving it.",
            discussion: """
                `docker logout HOST` runs it: the next `get` serves a new token (the registry keeps being \
                served; `configure --remove` stops that, `loginkit logout` ends the session). A registry no \
                profile serves: `credentials not found in native keychain`, exit 1.
                """)

        @OptionGroup var networkOptions: NetworkOptions
        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            try await DockerCredentialCommand.speakingProtocol {
                let registry = try await DockerCredentialCommand.servedRegistry(network: networkOptions, store: storeOptions)
                _ = try await ProfileAccessToken.replace(
                    nil, profile: registry.profile, store: registry.store, network: registry.network)
            }
        }
    }

    /// `version`, as docker's own helpers answer it.
    struct VersionOperation: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the helper's name and version.")

        func run() {
            Terminal.writeAll("\(DockerCredentialCommand.executableName) (loginkit) \(LoginKitCLI.version.description)\n", to: STDOUT_FILENO)
        }
    }
}
#endif
