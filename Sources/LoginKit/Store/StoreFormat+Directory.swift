#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// The store, format version 2 (docs/storage.md, "Format 2: a file per profile"): the store's path
/// holds a marker, and every profile is a file of its own in the directory beside it.
///
///     tokens.json            {"format": "loginkit.tokens", "version": 2, "layout": "directory", …}
///     tokens.json.d/p-work.json
///         {"format": "loginkit.profile", "version": 2, "name": "work", "profile": {…}}
///         {"format": "loginkit.profile", "version": 2, "name": "work", "sealed": {"alg": "A256GCM", "box": "…"}}
///
/// A sealed profile's box holds `{"profile": {…}}`, with the associated data
/// `loginkit.tokens/v2`, a zero byte and the profile's name: a file copied over another profile's
/// does not open as that profile. The marker never has a `sealed` member: a LoginKit that reads
/// format 1 only decodes the marker's header, meets version 2 and refuses the store as newer,
/// leaving it untouched (its decoding of a `sealed` member of another shape would call the file
/// corrupt, and its next save would move the marker aside).
enum StoreDirectoryFormat {
    static let version = 2
    static let profileFormat = "loginkit.profile"
    static let journalFormat = "loginkit.journal"
    static let layout = "directory"

    /// The marker at the store's path.
    struct Marker: Codable, Equatable {
        struct Sealing: Codable, Equatable {
            var alg: String
            /// The provider and id of the key (absent: an explicit key, `LOGINKIT_STORE_KEY` or a file).
            var key: StoreKeyReference?
        }
        var format = StoreFormat.formatName
        var version = StoreDirectoryFormat.version
        var layout = StoreDirectoryFormat.layout
        /// `"plaintext"` when plain by choice.
        var storage: String?
        /// How every profile file is sealed; absent in a plain store.
        var sealing: Sealing?
        /// `true` while every file is rewritten for a new sealing (files of either kind are read
        /// meanwhile; a whole-store step finishes the rewrite after a crash).
        var resealing: Bool?
    }

    /// One profile's file.
    struct ProfileDocument: Codable {
        var format = StoreDirectoryFormat.profileFormat
        var version = StoreDirectoryFormat.version
        var name: String
        var profile: StoredProfile?
        var sealed: StoreFormat.SealedDocument.Sealed?
    }

    struct SealedProfile: Codable {
        var profile: StoredProfile
    }

    /// A multi-profile commit, durable before any profile file is replaced: replayed by the next
    /// writer when its writer died half-way.
    struct Journal: Codable {
        struct Entry: Codable {
            var name: String
            /// The profile file's bytes, base64url; absent: the profile is removed.
            var document: String?
            /// The indexed attributes the profile carries (names only).
            var attributes: [String]
        }
        var format = StoreDirectoryFormat.journalFormat
        var version = StoreDirectoryFormat.version
        var entries: [Entry]
    }

    static func associatedData(for name: String) -> [UInt8] {
        Array("loginkit.tokens/v2".utf8) + [0] + Array(name.utf8)
    }

    static func marker(for sealing: FileSealing) -> Marker {
        Marker(
            storage: sealing.isChosenPlaintext ? "plaintext" : nil,
            sealing: sealing.key == nil ? nil : Marker.Sealing(alg: "A256GCM", key: sealing.reference))
    }

    /// The marker of a file whose header said version 2.
    ///
    /// - Throws: `.corrupt`.
    static func decodeMarker(_ bytes: [UInt8], path: String) throws(TokenStoreError) -> Marker {
        let marker: Marker
        do {
            marker = try StoreFormat.decoder().decode(Marker.self, from: Data(bytes))
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is a format 2 store whose marker is damaged; it is kept, and the next save moves it aside with its directory")
        }
        guard marker.layout == layout, marker.sealing.map({ $0.alg == "A256GCM" }) ?? true else {
            throw TokenStoreError(
                .unsupportedVersion, path: path,
                "\(path) is a format 2 store of a layout or sealing this LoginKit cannot read (a newer one wrote it?); upgrade LoginKit — it is left untouched")
        }
        guard marker.sealing?.key?.isWellFormed ?? true else {
            throw TokenStoreError(.corrupt, path: path, "\(path) names its key in a form LoginKit does not read")
        }
        return marker
    }

    static func encode(_ value: some Encodable, path: String) throws(TokenStoreError) -> [UInt8] {
        do {
            return try StoreFileEncoder.encode(value) + [0x0A]
        } catch EncodingError.invalidValue {
            throw TokenStoreError(.io, path: path, "could not encode the token store: a date is not a finite number")
        } catch {
            throw TokenStoreError(.io, path: path, "could not encode the token store: \(error)")
        }
    }

    /// A profile file's bytes, sealed with `sealing`'s key when it has one.
    static func encodeProfile(_ profile: StoredProfile, name: String, sealing: FileSealing, path: String) throws(TokenStoreError) -> [UInt8] {
        guard let key = sealing.key else {
            return try encode(ProfileDocument(name: name, profile: profile), path: path)
        }
        let contents = try encode(SealedProfile(profile: profile), path: path)
        let box: [UInt8]
        do {
            box = try AESGCM.seal(contents, key: key, associatedData: associatedData(for: name))
        } catch {
            throw TokenStoreError(.io, path: path, "could not seal the profile \"\(name)\"")
        }
        let sealed = StoreFormat.SealedDocument.Sealed(alg: "A256GCM", key: sealing.reference, box: Base64URL.encode(box))
        return try encode(ProfileDocument(name: name, sealed: sealed), path: path)
    }

    /// A profile file's clear part: its name and, when sealed, its sealed section.
    ///
    /// - Throws: `.corrupt`, `.unsupportedVersion`.
    static func decodeProfileDocument(_ bytes: [UInt8], path: String) throws(TokenStoreError) -> ProfileDocument {
        let document: ProfileDocument
        do {
            document = try StoreFormat.decoder().decode(ProfileDocument.self, from: Data(bytes))
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is not a readable LoginKit profile file; it is kept, and the next save of that profile moves it aside")
        }
        guard document.format == profileFormat else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has format \"\(printableExcerpt(document.format, limit: 40))\", not \(profileFormat)")
        }
        guard document.version <= version else {
            throw TokenStoreError(
                .unsupportedVersion, path: path,
                "\(path) was written by a newer LoginKit (format version \(document.version), this one reads \(version)); upgrade LoginKit — the file is left untouched")
        }
        guard (document.profile == nil) != (document.sealed == nil) else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has neither or both of a profile and a sealed section")
        }
        return document
    }

    /// The profile `name` from its file's document, opened with `key` when sealed; `sealed`: whether
    /// the store seals (a plain file in a sealed store is refused: whoever put it there would choose
    /// the issuer, endpoints and client its next refresh trusts).
    ///
    /// - Throws: `.corrupt` (another profile's file, a plain file where sealed ones belong),
    ///   `.wrongKey`, `.sealedWithoutKey`.
    static func openProfile(
        _ document: ProfileDocument, name: String, key: SymmetricKey?, storeSeals: Bool, path: String
    ) throws(TokenStoreError) -> StoredProfile {
        guard document.name == name else {
            throw TokenStoreError(.corrupt, path: path, "\(path) holds another profile than \"\(name)\"; it is not read")
        }
        guard let sealed = document.sealed else {
            guard !storeSeals, let profile = document.profile else {
                throw TokenStoreError(
                    .corrupt, path: path,
                    "\(path) is not sealed, but this store seals; it is not read — it is kept, and the next save of that profile moves it aside")
            }
            return profile
        }
        let plaintext = try StoreFormat.open(
            sealed, key: key, associatedData: associatedData(for: name), path: path,
            wrongKey: "\(path) does not open as profile \"\(name)\" with its key (another key, another profile's file, or the file was altered); it is left untouched")
        do {
            return try StoreFormat.decoder().decode(SealedProfile.self, from: Data(plaintext)).profile
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) opened but its contents are damaged")
        }
    }

    static func decodeJournal(_ bytes: [UInt8], path: String) throws(TokenStoreError) -> Journal {
        let journal: Journal
        do {
            journal = try StoreFormat.decoder().decode(Journal.self, from: Data(bytes))
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is a damaged commit journal; it is left untouched")
        }
        guard journal.format == journalFormat else {
            throw TokenStoreError(.corrupt, path: path, "\(path) is not a commit journal LoginKit reads; it is left untouched")
        }
        guard journal.version <= version else {
            throw TokenStoreError(
                .unsupportedVersion, path: path,
                "\(path) is a commit journal of a newer LoginKit (version \(journal.version)); upgrade LoginKit — it is left untouched")
        }
        return journal
    }
}

/// A profile's name as a file name in the store's directory, and back. Bytes in `[a-z0-9_-]` are
/// kept and every other byte is `%HH` (upper-case hex): capitals are escaped too, so that a
/// file system that ignores case never merges `Work` and `work`; dots, so that no name is `.`,
/// `..` or hidden; non-ASCII bytes, so that no file system's Unicode normalisation merges two
/// names. A name whose encoding exceeds 200 bytes (file names stop at 255) becomes `~` and the
/// SHA-256 of its bytes in hex; its file still names it.
package enum StoreProfileFileName {
    static let maximumLength = 200

    package static func encode(_ name: String) -> String {
        var encoded = ""
        encoded.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            if isKept(byte) {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += "%" + hexDigit(byte >> 4) + hexDigit(byte & 0x0F)
            }
        }
        guard encoded.utf8.count > maximumLength else { return encoded }
        let digest = (try? MessageDigest.sha256(Array(name.utf8))) ?? []
        return "~" + digest.map { hexDigit($0 >> 4) + hexDigit($0 & 0x0F) }.joined()
    }

    /// The name `encoded` stands for; `nil` for a hashed name (`~…`: read the file) and for
    /// anything ``encode(_:)`` never writes.
    package static func decode(_ encoded: String) -> String? {
        guard encoded.utf8.count <= maximumLength else { return nil }  // "": the empty name
        var bytes: [UInt8] = []
        var iterator = encoded.utf8.makeIterator()
        while let byte = iterator.next() {
            if isKept(byte) {
                bytes.append(byte)
                continue
            }
            guard byte == UInt8(ascii: "%"), let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            let decoded = high << 4 | low
            guard !isKept(decoded) else { return nil }  // encode never escapes a kept byte
            bytes.append(decoded)
        }
        guard let name = String(validating: bytes, as: UTF8.self) else { return nil }
        return name
    }

    private static func isKept(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    private static func hexDigit(_ value: UInt8) -> String {
        String(Unicode.Scalar(value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10))
    }

    /// Upper-case hex only (what encode writes).
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The steps of migrating a format 1 store to format 2, in order: a test may stop a process at each
/// (``IDTokenStore/onMigrationStep(in:_:)``).
package enum StoreMigrationStep: Sendable, Equatable, CustomStringConvertible {
    /// The new directory exists under its temporary name.
    case directoryCreated
    /// The n-th profile file (from 1) is written in it.
    case profileWritten(Int)
    /// The directory is durable under its final name; the store's path still holds format 1.
    case directoryRenamed
    /// The marker is durable under its temporary name.
    case markerWritten
    /// The marker replaced the format 1 file: the commit point has passed.
    case markerRenamed

    package var description: String {
        switch self {
        case .directoryCreated: "directory-created"
        case .profileWritten(let count): "profile-written-\(count)"
        case .directoryRenamed: "directory-renamed"
        case .markerWritten: "marker-written"
        case .markerRenamed: "marker-renamed"
        }
    }
}
