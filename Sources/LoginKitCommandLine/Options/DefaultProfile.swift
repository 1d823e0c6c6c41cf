// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import LoginKit

/// The store's default profile (`loginkit profiles default NAME`): the profile whose attribute
/// `default` is `"true"`. It lives in the store itself — any store, file or database, through the
/// `TokenStore` protocol — and is changed in one transaction under the store's lock, so that at
/// most one profile holds it and concurrent processes see the store's answer, never a file of
/// their own half-written.
///
/// A login replaces its profile's attributes but keeps the mark: its save copies the attribute from
/// the profile it replaces in the same transaction (``ProfileCall/attributesKeptAcrossLogins``), so
/// no process ever sees the store without its default, and a profile that lost the mark meanwhile
/// does not get it back.
enum DefaultProfile {
    /// The attribute, and its value on the default profile.
    static let attribute = "default"
    static let marked = "true"

    /// The default profile's name, or `nil`. Target profiles (``parent(ofTarget:)``) never are.
    ///
    /// - Throws: what reading the store throws.
    static func name(in store: any TokenStore) async throws -> String? {
        for name in try await profileNames(carrying: attribute, in: store) where parent(ofTarget: name) == nil {
            if try await store.profile(named: name)?.attributes[attribute] == marked { return name }
        }
        return nil
    }

    /// The profiles that may carry `attribute`, sorted: from the store's index when it keeps one
    /// (a file store in format 2: one small directory read, whatever the number of profiles), else
    /// every profile.
    ///
    /// - Throws: what reading the store throws.
    static func profileNames(carrying attribute: String, in store: any TokenStore) async throws -> [String] {
        if let indexed = store as? any AttributeIndexedStore, let names = try await indexed.profileNames(carrying: attribute) {
            return names
        }
        return try await store.profileNames()
    }

    /// Whether `profile` is marked as the default.
    static func isDefault(_ profile: StoredProfile?) -> Bool {
        profile?.attributes[attribute] == marked
    }

    /// Makes `name` the default — or, with `nil`, leaves the store without one — in one
    /// transaction: every other profile loses the mark.
    ///
    /// - Returns: `false` (and changes nothing) when there is no profile `name`, or `name` is a
    ///   target's (``parent(ofTarget:)``), which is never the default.
    /// - Throws: what the store throws.
    @discardableResult
    static func set(_ name: String?, in store: any TokenStore) async throws -> Bool {
        if let name, parent(ofTarget: name) != nil { return false }
        return try await store.withExclusiveAccess { transaction in
            if let name, transaction[name] == nil { return false }
            for other in transaction.profiles.keys where other != name && isDefault(transaction[other]) {
                transaction[other]?.attributes[attribute] = nil
            }
            if let name, !isDefault(transaction[name]) { transaction[name]?.attributes[attribute] = marked }
            return true
        }
    }

    /// The profile whose client-credentials token for a target `name` holds, when `name` is one
    /// (`<profile>#<32 hex digits>`, as `ClientCredentialsTokens` names them); `nil` otherwise.
    static func parent(ofTarget name: String) -> String? {
        guard let hash = name.lastIndex(of: "#") else { return nil }
        let digits = name[name.index(after: hash)...]
        guard digits.count == 32, digits.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) || ("a"..."f").contains($0) }) else { return nil }
        return String(name[..<hash])
    }
}
#endif
