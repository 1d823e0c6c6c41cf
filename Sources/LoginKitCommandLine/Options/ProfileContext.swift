// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit
import LoginKitHTTP

/// The profile a command uses, and where that choice came from (`status` says it).
struct ProfileChoice: Sendable, Equatable {
    /// What chose the profile.
    enum Origin: Sendable, Equatable {
        /// `--profile`.
        case flag
        /// `LOGINKIT_PROFILE`.
        case environment
        /// The `profile` line of this `.loginkit` file.
        case file(path: String)
        /// The profile the store marks as its default (`loginkit profiles default NAME`).
        case storeDefault
        /// Nothing did: the name `default`.
        case fallback
    }

    let name: String
    let origin: Origin

    /// Where the choice came from, as `status` prints it after the name; `nil` for the fallback.
    var provenance: String? {
        switch origin {
        case .flag: "from --profile"
        case .environment: "from $LOGINKIT_PROFILE"
        case .file(let path): "from \(Terminal.printable(path, limit: 500))"
        case .storeDefault: "the store's default"
        case .fallback: nil
        }
    }

    /// The origin's name in `status --json` (`profile_source`).
    var sourceName: String {
        switch origin {
        case .flag: "flag"
        case .environment: "environment"
        case .file: "file"
        case .storeDefault: "store_default"
        case .fallback: "fallback"
        }
    }

    /// The `.loginkit` file that chose it, if one did.
    var file: String? {
        if case .file(let path) = origin { return path }
        return nil
    }
}

/// How a command that is not given a profile finds one — without a global "active profile" that
/// concurrent processes would trip over. The order (docs/cli.md, "Which profile"):
///
/// 1. `--profile NAME`;
/// 2. `LOGINKIT_PROFILE` (when not empty);
/// 3. the nearest `.loginkit` file that names a profile, from the working directory upwards
///    (``ContextFile``: its checks and format);
/// 4. the store's default profile (``DefaultProfile``: an attribute of one profile in the store);
/// 5. `default`.
///
/// The choice depends only on this process's flags, environment and working directory, and on the
/// store: two processes in two directories each get their own.
enum ProfileContext {
    /// The name used when nothing chose a profile.
    static let fallbackName = "default"

    /// The profile for a run: the one place the order above is kept.
    ///
    /// A store whose default cannot be read (corrupt, sealed with a key that is gone, unreachable)
    /// has none: the choice is then `default`, and the command meets the store's error itself
    /// (a login sets a corrupt file aside, as it always does).
    ///
    /// - Parameters:
    ///   - directory: where the `.loginkit` search starts; `nil` for the working directory.
    /// - Throws: `CLIFailure` exit 2 naming the `.loginkit` file that is unsafe or malformed.
    static func choose(
        flag: String?, environment: [String: String], directory: String? = nil, store: any TokenStore
    ) async throws -> ProfileChoice {
        if let explicit = explicitChoice(flag: flag, environment: environment) { return explicit }
        if let start = directory ?? workingDirectory(), let found = try ContextFile.nearestProfile(from: start) {
            return ProfileChoice(name: found.name, origin: .file(path: found.path))
        }
        if let name = try? await DefaultProfile.name(in: store) {
            return ProfileChoice(name: name, origin: .storeDefault)
        }
        return ProfileChoice(name: fallbackName, origin: .fallback)
    }

    /// `--profile`, else a non-empty `LOGINKIT_PROFILE`: the choices that need neither the file
    /// system nor the store.
    static func explicitChoice(flag: String?, environment: [String: String]) -> ProfileChoice? {
        if let flag { return ProfileChoice(name: flag, origin: .flag) }
        if let variable = environment["LOGINKIT_PROFILE"], !variable.isEmpty { return ProfileChoice(name: variable, origin: .environment) }
        return nil
    }

    /// The working directory as an absolute path (the kernel's: no symbolic links), or `nil` when
    /// it cannot be had (removed meanwhile): the search is then skipped.
    static func workingDirectory() -> String? {
        let path = FileManager.default.currentDirectoryPath
        return path.hasPrefix("/") ? path : nil
    }

    /// The choice this run made. The CLI runs one command per process, and every command that
    /// uses a profile opens its store first (`StoreOptions.openStore()`, which chooses): one value
    /// per process, written once, before anything reads it.
    private static let made = LockedState<ProfileChoice?>(nil)

    /// The choice this run made, once the store was opened; `nil` before.
    static var current: ProfileChoice? {
        get { made.withLock { $0 } }
        set { made.withLock { $0 = newValue } }
    }
}
#endif
