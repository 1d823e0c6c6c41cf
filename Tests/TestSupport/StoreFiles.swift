public import Foundation

// What a file store (`IDTokenStore`) keeps on disk, for tests that look at the files themselves
// (docs/storage.md): in format 2 the store's path holds a marker and every profile is a file under
// `<path>.d`; in format 1 the path holds everything.

/// The files of the store at `path` that hold its data, by path: the file at `path` and every
/// regular file under `<path>.d` at any depth. Lock files (`*.lock`) are left out: they hold no
/// data, and taking a lock may create one. Empty when there is no store.
public func storeFiles(at path: String) throws -> [String: Data] {
    let manager = FileManager.default
    var files: [String: Data] = [:]
    if isRegularFile(path) { files[path] = try Data(contentsOf: URL(fileURLWithPath: path)) }
    let directory = path + ".d"
    guard fileType(directory) == .typeDirectory else { return files }
    for relative in try manager.subpathsOfDirectory(atPath: directory) where !relative.hasSuffix(".lock") {
        let file = directory + "/" + relative
        if isRegularFile(file) { files[file] = try Data(contentsOf: URL(fileURLWithPath: file)) }
    }
    return files
}

/// Every file of the store at `path` (``storeFiles(at:)``) as one text, for checks that a secret
/// is in the clear in none of them.
public func storeText(at path: String) throws -> String {
    try storeFiles(at: path).sorted { $0.key < $1.key }.map { String(decoding: $0.value, as: UTF8.self) }.joined(separator: "\n")
}

/// The store file at `path` as a JSON object: a format 2 store's marker (`format`, `version`,
/// `layout`, `storage`, `sealing`), a format 1 store's whole document.
public func storeMarker(at path: String) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
    guard let marker = object as? [String: Any] else { throw StoreFileError("\(path) is no JSON object") }
    return marker
}

/// Every profile file of the format 2 store at `path` (`<path>.d/p-*.json`) as a JSON object, by path.
public func storeProfileDocuments(at path: String) throws -> [String: [String: Any]] {
    var documents: [String: [String: Any]] = [:]
    for (file, data) in try storeFiles(at: path) where file.hasPrefix(path + ".d/p-") && file.hasSuffix(".json") && !file.dropFirst(path.count + 3).contains("/") {
        guard let document = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw StoreFileError("\(file) is no JSON object") }
        documents[file] = document
    }
    return documents
}

/// Whether the store at `path` is plain: a format 2 marker without `sealing`, and every profile
/// file holding its profile in the clear (`profile`, no `sealed`). False for a store without profiles.
public func storeIsPlain(at path: String) throws -> Bool {
    let documents = try storeProfileDocuments(at: path)
    return try storeMarker(at: path)["sealing"] == nil && !documents.isEmpty
        && documents.values.allSatisfy { $0["profile"] != nil && $0["sealed"] == nil }
}

/// Whether the store at `path` is sealed: a format 2 marker with `sealing` (`alg` A256GCM), and
/// every profile file sealed (`sealed`, no `profile`). False for a store without profiles.
public func storeIsSealed(at path: String) throws -> Bool {
    let documents = try storeProfileDocuments(at: path)
    return (try storeMarker(at: path)["sealing"] as? [String: Any])?["alg"] as? String == "A256GCM" && !documents.isEmpty
        && documents.values.allSatisfy { $0["sealed"] != nil && $0["profile"] == nil }
}

/// The key a sealed format 2 store names in its marker (`sealing.key`: `provider`, `id`); nil for
/// a plain store and for an explicit key (which is not named).
public func storeKeyReference(at path: String) throws -> [String: String]? {
    ((try storeMarker(at: path)["sealing"] as? [String: Any])?["key"]) as? [String: String]
}

/// Copies the store at `source` to `destination` as a user copying its files would: every file of
/// ``storeFiles(at:)`` (mode 0600) to the same place under `destination`, its directories made 0700.
public func copyStore(from source: String, to destination: String) throws {
    for (file, data) in try storeFiles(at: source) {
        let target = destination + file.dropFirst(source.count)
        let parent = URL(fileURLWithPath: target).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard FileManager.default.createFile(atPath: target, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw StoreFileError("could not write \(target)")
        }
    }
}

/// What is kept aside in `directory`, at any depth: every regular file whose path below `directory`
/// has a component containing `.corrupt-` (a file, or a file in a directory, the store set aside), by path.
public func filesSetAside(in directory: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    for relative in try FileManager.default.subpathsOfDirectory(atPath: directory)
    where relative.split(separator: "/").contains(where: { $0.contains(".corrupt-") }) {
        let file = directory + "/" + relative
        if isRegularFile(file) { files[file] = try Data(contentsOf: URL(fileURLWithPath: file)) }
    }
    return files
}

/// The entries of `directory`, at any depth (paths relative to it), that contain `part`.
public func entriesBelow(_ directory: String, containing part: String) throws -> [String] {
    try FileManager.default.subpathsOfDirectory(atPath: directory).filter { $0.contains(part) }.sorted()
}

private func fileType(_ path: String) -> FileAttributeType? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
}

private func isRegularFile(_ path: String) -> Bool {
    fileType(path) == .typeRegular
}

private struct StoreFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
