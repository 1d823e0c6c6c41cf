#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// The store file, version 1 (docs/storage.md):
///
///     {"format": "loginkit.tokens", "version": 1, "profiles": {"default": {…}}}
///     {"format": "loginkit.tokens", "version": 1, "sealed": {"alg": "A256GCM", "box": "<base64url>"}}
///
/// The sealed box holds `{"profiles": {…}}`, with the associated data `loginkit.tokens/v1`.
enum StoreFormat {
    static let formatName = "loginkit.tokens"
    static let currentVersion = 1
    static let associatedData = Array("loginkit.tokens/v1".utf8)

    /// What is read before anything else: format, version, and the sealed section if there is one
    /// (the profiles are decoded only once the version is known to be readable).
    struct Header: Decodable {
        let format: String
        let version: Int
        let sealed: SealedDocument.Sealed?
        /// `"plaintext"` in a plain file its user chose to keep plain.
        let storage: String?
    }

    struct PlainDocument: Codable {
        var format = StoreFormat.formatName
        var version = StoreFormat.currentVersion
        /// `"plaintext"` when plain by choice (absent in a fallback or an older file).
        var storage: String?
        var profiles: [String: StoredProfile]
    }

    struct SealedDocument: Codable {
        struct Sealed: Codable {
            var alg: String
            /// The provider and id of the key (absent: an explicit key, `LOGINKIT_STORE_KEY` or a file).
            var key: StoreKeyReference?
            var box: String
        }
        var format = StoreFormat.formatName
        var version = StoreFormat.currentVersion
        var sealed: Sealed
    }

    struct SealedContents: Codable {
        var profiles: [String: StoredProfile]
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }

    /// The store file's only writer: sorted keys, pretty printed, dates as seconds since 1970 (what
    /// `decoder()` reads), so the file is written from the same types it is read into.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return encoder
    }

    /// The header: format, version, and the sealed section (naming its key) if there is one.
    ///
    /// - Throws: `.corrupt`, `.unsupportedVersion`.
    static func header(_ bytes: [UInt8], path: String) throws(TokenStoreError) -> Header {
        let header: Header
        do {
            header = try decoder().decode(Header.self, from: Data(bytes))
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is not a LoginKit token store (no readable format header); it is kept, and the next save moves it aside")
        }
        guard header.format == formatName else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has format \"\(header.format)\", not \(formatName)")
        }
        guard header.version <= StoreDirectoryFormat.version else {
            throw TokenStoreError(
                .unsupportedVersion, path: path,
                "\(path) was written by a newer LoginKit (format version \(header.version), this one reads \(StoreDirectoryFormat.version)); upgrade LoginKit — the file is left untouched"
            )
        }
        guard header.version >= 1 else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has an invalid format version \(header.version)")
        }
        return header
    }

    /// The profiles of a file whose `header` was read, opened with `key` when it is sealed.
    static func decode(_ bytes: [UInt8], path: String, key: SymmetricKey?) throws(TokenStoreError) -> [String: StoredProfile] {
        try decode(bytes, header: header(bytes, path: path), path: path, key: key)
    }

    static func decode(_ bytes: [UInt8], header: Header, path: String, key: SymmetricKey?) throws(TokenStoreError) -> [String: StoredProfile] {
        let data = Data(bytes)
        if let sealed = header.sealed {
            let plaintext = try open(
                sealed, key: key, associatedData: associatedData, path: path,
                wrongKey: "\(path) does not open with its key (another key, or the file was altered); it is left untouched")
            do {
                return try decoder().decode(SealedContents.self, from: Data(plaintext)).profiles
            } catch {
                throw TokenStoreError(.corrupt, path: path, "\(path) opened but its contents are damaged")
            }
        }
        do {
            return try decoder().decode(PlainDocument.self, from: data).profiles
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is damaged (\(Self.describe(error))); it is kept, and the next save moves it aside")
        }
    }

    /// A sealed section's plaintext, opened with `key` and `associatedData`.
    ///
    /// - Throws: `.sealedWithoutKey` (no key), `.corrupt` (not a box LoginKit reads), `.wrongKey`
    ///   with the message `wrongKey` (another key, or altered).
    static func open(
        _ sealed: SealedDocument.Sealed, key: SymmetricKey?, associatedData: [UInt8], path: String, wrongKey: String
    ) throws(TokenStoreError) -> [UInt8] {
        guard let key else {
            throw TokenStoreError(.sealedWithoutKey, path: path, "\(path) is sealed; set LOGINKIT_STORE_KEY (or the key file) to the key it was sealed with")
        }
        guard sealed.alg == "A256GCM", let box = Base64URL.decode(sealed.box) else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has a sealed section LoginKit cannot read")
        }
        do {
            return try AESGCM.open(box, key: key, associatedData: associatedData)
        } catch {
            throw TokenStoreError(.wrongKey, path: path, wrongKey)
        }
    }

    /// The file's bytes: `encoder()` applied to the types `decode` reads — `PlainDocument`, or
    /// `SealedDocument` around the sealed `SealedContents` — and a trailing newline.
    ///
    /// - Throws: `.io` when a date is not a finite number (JSON cannot carry it) or sealing fails.
    static func encode(
        _ profiles: [String: StoredProfile], path: String, key: SymmetricKey?, reference: StoreKeyReference? = nil, chosenPlaintext: Bool = false
    ) throws(TokenStoreError) -> [UInt8] {
        // The bytes `encoder()` would write (StoreFileEncoderTests), from the same Codable types.
        do {
            let document: [UInt8]
            if let key {
                let contents = try StoreFileEncoder.encode(SealedContents(profiles: profiles))
                let box = try AESGCM.seal(contents, key: key, associatedData: associatedData)
                document = try StoreFileEncoder.encode(SealedDocument(sealed: .init(alg: "A256GCM", key: reference, box: Base64URL.encode(box))))
            } else {
                document = try StoreFileEncoder.encode(PlainDocument(storage: chosenPlaintext ? "plaintext" : nil, profiles: profiles))
            }
            return document + [0x0A]
        } catch EncodingError.invalidValue {
            // Dates are the only numbers these types hold that are not integers, so the only values
            // JSON cannot carry (the encoder's non-conforming float strategy is `.throw`).
            throw TokenStoreError(.io, path: path, "could not encode the token store: a date is not a finite number")
        } catch {
            throw TokenStoreError(.io, path: path, "could not encode the token store: \(error)")
        }
    }

    /// A decoding error's shape, without any value from the file (which may be a token).
    private static func describe(_ error: any Error) -> String {
        guard let decodingError = error as? DecodingError else { return "not valid JSON" }
        switch decodingError {
        case .keyNotFound(let key, _): return "missing \"\(key.stringValue)\""
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case .dataCorrupted: return "not valid JSON"
        @unknown default: return "not valid JSON"
        }
    }
}
