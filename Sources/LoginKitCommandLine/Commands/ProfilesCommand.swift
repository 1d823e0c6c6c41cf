// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit

/// `loginkit profiles [list] [--json]`, `loginkit profiles default [NAME | --unset]`,
/// `loginkit profiles rm NAME [--no-revoke]`: the store's profiles, its default, and removing one.
/// These name their profiles as arguments: no `.loginkit` file or default takes part.
struct ProfilesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profiles",
        abstract: "List the store's profiles, set the default one, remove one.",
        discussion: """
            Without --profile, a command uses $LOGINKIT_PROFILE, else the nearest .loginkit file's profile \
            from the working directory upwards, else the store's default profile (`profiles default NAME`), \
            else "default". The default is kept in the store itself, so every process using the store \
            sees the same one. Client-credentials tokens kept for a target (<profile>#<hash>) are not \
            listed: --json counts them per profile.
            """,
        subcommands: [List.self, Default.self, Remove.self],
        defaultSubcommand: List.self)

    /// These commands name their profiles as arguments.
    static func refuseProfileFlag(_ storeOptions: StoreOptions) throws {
        if storeOptions.profile != nil { throw ValidationError("`profiles` takes profile names as arguments; --profile does not apply") }
    }
}

extension ProfilesCommand {
    /// `loginkit profiles [list]`: one row per profile, the default marked `*`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List every profile: name, user, issuer, client, expiry, storage (the default marked *).")

        @Flag(help: "Print a JSON array on stdout.") var json = false
        @OptionGroup var storeOptions: StoreOptions

        func validate() throws { try ProfilesCommand.refuseProfileFlag(storeOptions) }

        func run() async throws {
            try await reportingFailures {
                let opened = try await storeOptions.openStore(choosingProfile: false)
                let names = try await opened.store.profileNames()
                var targets: [String: Int] = [:]
                var rows: [Row] = []
                for name in names {
                    if let parent = DefaultProfile.parent(ofTarget: name) {
                        targets[parent, default: 0] += 1
                    } else if let profile = try await opened.store.profile(named: name) {
                        rows.append(Row(name: name, profile: profile))
                    }
                }
                let protection = try? await (opened.store as? IDTokenStore)?.protection()
                let storage = protection?.level ?? (opened.isSealed ? "sealed" : "plaintext")
                if json {
                    JSONOutput.printArray(rows.map { $0.json(storage: storage, targets: targets[$0.name] ?? 0) })
                } else if rows.isEmpty {
                    Terminal.standardError("No profiles in the store \(Terminal.printable(opened.location, limit: 500)).")
                } else {
                    print(Self.table(rows, storage: storage), terminator: "")
                }
                let hidden = targets.values.reduce(0, +)
                if !json, hidden > 0 {
                    Terminal.standardError(
                        "\(hidden) client-credentials token(s) kept for a target (<profile>#<hash>) are not listed; --json counts them per profile.")
                }
            }
        }

        /// One profile as the list shows it.
        struct Row {
            let name: String
            let profile: StoredProfile

            var isDefault: Bool { DefaultProfile.isDefault(profile) }
            var identity: UserIdentity { UserIdentity(profile: profile) }
            var issuer: String { profile.credentials.issuer ?? profile.source.endpoint }
            /// A client's login (`--client-credentials`) or a workload's (`--jwt-bearer`): no user.
            var isClient: Bool { StoredProfile.clientGrants.contains(profile.attributes["grant"] ?? "") }
            /// The workload a JWT-bearer login recorded (the access token's `sub`); `nil` for a client's login.
            var workload: String? { isClient ? profile.attributes[UserIdentity.displayNameAttribute] : nil }
            var expired: Bool { profile.credentials.expiresAt.map { $0 <= Date() } ?? false }

            /// Who, escaped: `alice (alice@example.test)`, else the stored user ID; for a client's
            /// login, the workload it names, else `(the client)`.
            var who: String {
                if isClient { return workload.map { Terminal.printable($0, limit: 100) } ?? "(the client)" }
                return identity.shown ?? profile.userID.map { Terminal.printable($0, limit: 100) } ?? "-"
            }

            func json(storage: String, targets: Int) -> [String: JSONOutput.Value] {
                let identity = self.identity
                return [
                    "name": .text(name), "default": .flag(isDefault),
                    "user": .textOrNull(isClient ? workload : identity.displayName ?? profile.userID),
                    "display_name": .textOrNull(identity.displayName), "email": .textOrNull(identity.email),
                    "subject": .textOrNull(profile.userID), "issuer": .text(issuer), "api": .text(profile.source.kind.rawValue),
                    "client_id": .textOrNull(profile.source.clientID), "expires_at": JSONOutput.timestamp(profile.credentials.expiresAt),
                    "expired": .flag(expired), "storage": .text(storage), "targets": .number(Int64(targets)),
                ]
            }
        }

        /// The rows as a table: a header, then one line per profile, columns two spaces apart;
        /// every value the provider chose escaped.
        static func table(_ rows: [Row], storage: String) -> String {
            let header = ["NAME", "USER", "ISSUER", "CLIENT", "EXPIRES", "STORAGE"]
            let lines: [[String]] = rows.map { row in
                let expiry = row.profile.credentials.expiresAt.map { $0.formatted(.iso8601) + (row.expired ? " (expired)" : "") } ?? "never"
                return [
                    Terminal.printable(row.name, limit: 100), row.who, Terminal.printable(row.issuer, limit: 200),
                    Terminal.printable(row.profile.source.clientID ?? "-", limit: 100), expiry, Terminal.printable(storage, limit: 100),
                ]
            }
            let widths = header.indices.map { column in ([header] + lines).map { $0[column].count }.max() ?? 0 }
            func line(_ marker: String, _ cells: [String]) -> String {
                let padded = cells.enumerated().map { index, cell in
                    index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
                }
                return marker + " " + padded.joined(separator: "  ") + "\n"
            }
            return line(" ", header) + zip(rows, lines).map { row, cells in line(row.isDefault ? "*" : " ", cells) }.joined()
        }
    }

    /// `loginkit profiles default [NAME | --unset]`.
    struct Default: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "default",
            abstract: "Print the default profile, or make NAME the default.",
            discussion: """
                The default profile is used where no --profile, $LOGINKIT_PROFILE or .loginkit file chooses \
                one. It is kept in the store (one profile carries the mark), changed under the store's lock.
                """)

        @Argument(help: "The profile to make the default (it must exist); without it, the default is printed.") var name: String?
        @Flag(help: "Leave the store without a default profile.") var unset = false
        @OptionGroup var storeOptions: StoreOptions

        func validate() throws {
            try ProfilesCommand.refuseProfileFlag(storeOptions)
            if unset, name != nil { throw ValidationError("give a profile name or --unset, not both") }
            if let name, let parent = DefaultProfile.parent(ofTarget: name) {
                let owner = Terminal.printable(parent, limit: 100)
                throw ValidationError(
                    "\"\(Terminal.printable(name, limit: 100))\" holds a token profile \"\(owner)\" keeps for one target, "
                        + "not a profile of its own; make \"\(owner)\" the default instead")
            }
        }

        func run() async throws {
            try await reportingFailures {
                let store = try await storeOptions.openStore(choosingProfile: false).store
                if unset {
                    try await DefaultProfile.set(nil, in: store)
                    Terminal.standardError("The store has no default profile now.")
                } else if let name {
                    guard try await DefaultProfile.set(name, in: store) else {
                        throw CLIFailure(
                            exitCode: 3,
                            "there is no profile \"\(Terminal.printable(name, limit: 100))\" in the store; log in with `loginkit login --profile NAME` first")
                    }
                    Terminal.standardError("Profile \"\(Terminal.printable(name, limit: 100))\" is the default now.")
                } else if let current = try await DefaultProfile.name(in: store) {
                    print(current)
                } else {
                    Terminal.standardError("The store has no default profile: \"\(ProfileContext.fallbackName)\" is used where nothing else chooses one.")
                }
            }
        }
    }

    /// `loginkit profiles rm NAME [--no-revoke]`: `logout` of that profile, and the tokens kept for
    /// its targets (`NAME#…`) deleted with it.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Log a profile out: revoke its tokens (unless --no-revoke) and delete it.",
            discussion: """
                As `loginkit --profile NAME logout`, with the same messages, --json and exit codes; the \
                client-credentials tokens kept for the profile's targets (NAME#<hash>) are deleted too, \
                unrevoked (they have no refresh token and expire on their own).
                """)

        @Argument(help: "The profile to remove.") var name: String
        @Flag(name: .customLong("no-revoke"), help: "Delete the profile without revoking at the provider.") var noRevoke = false
        @Flag(help: "Print the result as JSON on stdout.") var json = false
        @OptionGroup var networkOptions: NetworkOptions
        @OptionGroup var storeOptions: StoreOptions

        func validate() throws { try ProfilesCommand.refuseProfileFlag(storeOptions) }

        func run() async throws {
            try await reportingFailures {
                let clientConfiguration = try networkOptions.clientConfiguration()
                let opened = try await storeOptions.openStore(choosingProfile: false)
                let revocation = try await CurlHTTPClient.withClient(configuration: clientConfiguration) { client in
                    try await LogoutCommand.logOut(profile: name, from: opened, noRevoke: noRevoke, transport: client)
                }
                let targets = try await Self.removeTargets(of: name, from: opened.store)
                if targets > 0, !json {
                    Terminal.standardError("Deleted \(targets) client-credentials token(s) kept for the targets of \"\(Terminal.printable(name, limit: 100))\".")
                }
                try LogoutCommand.report(revocation, profile: name, json: json)
            }
        }

        /// Deletes the target profiles of `name` (`name#<32 hex digits>`) in one transaction; how many.
        static func removeTargets(of name: String, from store: any TokenStore) async throws -> Int {
            let owned = try await store.profileNames().filter { DefaultProfile.parent(ofTarget: $0) == name }
            guard !owned.isEmpty else { return 0 }
            return try await store.withExclusiveAccess { transaction in
                let present = owned.filter { transaction[$0] != nil }
                for target in present { transaction[target] = nil }
                return present.count
            }
        }
    }
}
#endif
