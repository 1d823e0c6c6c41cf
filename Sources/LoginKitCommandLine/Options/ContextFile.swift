// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `.loginkit` files: a directory's choice of profile (docs/cli.md, "Which profile").
///
/// **The search.** From the working directory upwards, at most ``maximumLevels`` directories, up to
/// and including `/`. It stops, without an error, at a directory that belongs to another user than
/// the current one or root (above it the tree is not the user's to configure), or one that cannot
/// be examined. The nearest file that names a profile decides; a file without a `profile` line
/// decides nothing and the search goes on above it (it is still checked). Each directory is opened
/// once (`O_DIRECTORY | O_NOFOLLOW`) and both its own checks and its `.loginkit` go through that
/// descriptor, so the directory checked is the one read from.
///
/// **A directory group or others can write** (such as `/tmp`): anyone there could have put the
/// entry. One that is not a regular file of the current user's own (another user's file, a
/// symbolic link, a FIFO, a directory, root's) is skipped without a word and the search stops
/// there: it neither fails every command run below it nor lets the search reach further up. The
/// user's own file there is refused (exit 2, with the `chmod` that makes the directory theirs
/// alone). A directory like that with no `.loginkit` in it is passed, as any other.
///
/// **In a directory only the user or root can write**, a `.loginkit` that is a symbolic link, not
/// a regular file, owned by another user than the current one or root, writable by group or
/// others, or larger than ``maximumFileSize`` is refused — exit 2 naming it — never skipped: only
/// the user or root could have put it there.
///
/// **The format.** UTF-8 lines, TOML-like: `profile = "NAME"` (or `'NAME'`), whitespace around
/// `=` optional, `#` starts a comment, blank lines ignored; other bare keys are ignored whatever
/// their value (later versions may read them), and so is everything after a `[table]` header. A
/// line that is none of these, a `profile` given twice, or a profile name that is empty or holds a
/// control character is exit 2 naming the file and the line.
package enum ContextFile {
    /// The file's name.
    static let name = ".loginkit"
    /// The most directories the search examines.
    static let maximumLevels = 64
    /// The largest file read, in bytes.
    static let maximumFileSize = 4096

    /// A line that does not parse.
    struct Malformed: Error, Equatable {
        /// 1-based.
        let line: Int
        let reason: String
    }

    /// What one directory says.
    private enum Finding {
        /// Its `.loginkit` names this profile.
        case profile(String)
        /// Nothing: the search goes on above it.
        case nothing
        /// The search ends here without a profile.
        case stop
    }

    /// The nearest `.loginkit` from `directory` (absolute) upwards that names a profile: the name
    /// and the file's path; `nil` when none does.
    ///
    /// - Parameter uid: the user the search is made for (`nil`: this process's effective user),
    ///   whose files and directories are trusted besides root's.
    /// - Throws: `CLIFailure` exit 2 naming a file that is unsafe, unreadable or malformed.
    package static func nearestProfile(from directory: String, uid: UInt32? = nil) throws -> (name: String, path: String)? {
        let me = uid ?? geteuid()
        var current = normalized(directory)
        for _ in 0..<maximumLevels {
            // O_NOFOLLOW: a symbolic link in the directory's place ends the search, as another
            // user's directory does.
            let directoryDescriptor = open(current, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard directoryDescriptor >= 0 else { return nil }
            defer { _ = close(directoryDescriptor) }
            var info = stat()
            guard fstat(directoryDescriptor, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return nil }
            guard info.st_uid == me || info.st_uid == 0 else { return nil }
            let path = current == "/" ? "/" + name : current + "/" + name
            let finding: Finding
            if info.st_mode & 0o022 == 0 {
                finding = try profile(in: directoryDescriptor, path: path, uid: me)
            } else {
                finding = try sharedEntry(in: directoryDescriptor, path: path, directory: current, directoryMode: info.st_mode, uid: me)
            }
            switch finding {
            case .profile(let named): return (named, path)
            case .stop: return nil
            case .nothing: break
            }
            guard current != "/" else { return nil }
            current = parent(of: current)
        }
        return nil
    }

    /// The `.loginkit` of a directory that group or others can write (its descriptor
    /// `directoryDescriptor`), examined without opening it: none, or one that is not a regular file
    /// of user `me`'s own, says nothing and ends the search here, except that no entry at all lets
    /// it go on; the user's own file is refused.
    ///
    /// - Throws: `CLIFailure` exit 2 for the user's own file.
    private static func sharedEntry(
        in directoryDescriptor: Int32, path: String, directory: String, directoryMode: mode_t, uid me: UInt32
    ) throws -> Finding {
        var info = stat()
        guard fstatat(directoryDescriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            return errno == ENOENT ? .nothing : .stop
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == me else { return .stop }
        throw refusal(
            path,
            "is in \(directory), which group or others can write (mode \(String(directoryMode & 0o7777, radix: 8))), so anyone there could replace it; "
                + "run `chmod go-w \(directory)`, or keep the file in a directory of your own")
    }

    /// The profile the `.loginkit` of a directory only user `me` or root can write (its descriptor
    /// `directoryDescriptor`) names: `.nothing` when there is no such file or it names none.
    ///
    /// - Throws: `CLIFailure` exit 2 when it is unsafe (see the type's rules), cannot be read, or is
    ///   malformed.
    private static func profile(in directoryDescriptor: Int32, path: String, uid me: UInt32) throws -> Finding {
        // O_NOFOLLOW: a symbolic link is refused, never followed; O_NONBLOCK: a FIFO put there
        // does not block the open (fstat refuses it).
        let descriptor = openat(directoryDescriptor, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR: return .nothing
            case ELOOP: throw refusal(path, "is a symbolic link; write the file itself there")
            default: throw refusal(path, "cannot be opened (\(String(cString: strerror(code))))")
            }
        }
        defer { _ = close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw refusal(path, "cannot be examined (\(String(cString: strerror(errno))))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw refusal(path, "is not a regular file") }
        guard info.st_uid == me || info.st_uid == 0 else {
            throw refusal(path, "belongs to another user (uid \(info.st_uid)), who could choose the profile your tokens go to; remove it")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw refusal(path, "can be written by group or others (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod go-w \(path)`")
        }
        guard Int(info.st_size) <= maximumFileSize else { throw refusal(path, "is larger than \(maximumFileSize) bytes") }
        var bytes = [UInt8](repeating: 0, count: maximumFileSize + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return read(descriptor, base + count, buffer.count - count)
            }
            if got < 0 {
                let code = errno
                if code == EINTR { continue }
                throw refusal(path, "cannot be read (\(String(cString: strerror(code))))")
            }
            if got == 0 { break }
            count += got
        }
        guard count <= maximumFileSize else { throw refusal(path, "is larger than \(maximumFileSize) bytes") }
        guard let text = String(validating: bytes.prefix(count), as: UTF8.self) else { throw refusal(path, "is not UTF-8 text") }
        do throws(Malformed) {
            return try parse(text).map { Finding.profile($0) } ?? .nothing
        } catch {
            throw refusal("\(path):\(error.line)", "is malformed: \(error.reason)")
        }
    }

    /// The `profile` that `text` names, or `nil` (see the type's format).
    static func parse(_ text: String) throws(Malformed) -> String? {
        var profile: String?
        var inTable = false
        var number = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0.isNewline }) {
            number += 1
            let line = trimmed(raw)
            if line.isEmpty || line.first == "#" { continue }
            if line.first == "[" {
                guard let close = line.firstIndex(of: "]"), isEnd(line[line.index(after: close)...]) else {
                    throw Malformed(line: number, reason: "a table header is `[name]`")
                }
                inTable = true
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { throw Malformed(line: number, reason: "expected `key = value`, such as `profile = \"work\"`") }
            let key = trimmed(line[..<equals])
            guard !key.isEmpty, key.unicodeScalars.allSatisfy(isBareKeyScalar) else {
                throw Malformed(line: number, reason: "the key is not a bare key (letters, digits, `_`, `-`, `.`)")
            }
            let value = trimmed(line[line.index(after: equals)...])
            guard !value.isEmpty else { throw Malformed(line: number, reason: "`\(key) =` has no value") }
            guard key == "profile", !inTable else { continue }  // unknown keys, and those of a table: later versions' business
            guard profile == nil else { throw Malformed(line: number, reason: "`profile` is given twice") }
            let (name, rest) = try quoted(value, line: number)
            guard isEnd(rest) else { throw Malformed(line: number, reason: "unexpected text after the profile name") }
            guard !name.isEmpty else { throw Malformed(line: number, reason: "the profile name is empty") }
            guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw Malformed(line: number, reason: "the profile name holds a control character")
            }
            profile = name
        }
        return profile
    }

    /// A TOML basic string (`"…"`, escapes `\"` and `\\`) or literal string (`'…'`) at the start of
    /// `text`: its value and what follows it.
    private static func quoted(_ text: Substring, line: Int) throws(Malformed) -> (String, Substring) {
        guard let quote = text.first, quote == "\"" || quote == "'" else {
            throw Malformed(line: line, reason: "the profile name must be quoted: `profile = \"NAME\"`")
        }
        var value = ""
        var index = text.index(after: text.startIndex)
        while index < text.endIndex {
            let character = text[index]
            if character == quote { return (value, text[text.index(after: index)...]) }
            if quote == "\"", character == "\\" {
                let next = text.index(after: index)
                guard next < text.endIndex, text[next] == "\"" || text[next] == "\\" else {
                    throw Malformed(line: line, reason: "only `\\\"` and `\\\\` are escapes in a profile name")
                }
                value.append(text[next])
                index = text.index(after: next)
                continue
            }
            value.append(character)
            index = text.index(after: index)
        }
        throw Malformed(line: line, reason: "the quoted profile name is not closed")
    }

    /// Whether `rest` holds nothing but whitespace and a comment.
    private static func isEnd(_ rest: Substring) -> Bool {
        let left = trimmed(rest)
        return left.isEmpty || left.first == "#"
    }

    private static func trimmed(_ text: Substring) -> Substring {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else {
            return text[text.endIndex...]
        }
        return text[first...last]
    }

    private static func isBareKeyScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "_", "-", ".": true
        default: false
        }
    }

    /// `path` without trailing slashes (`/` stays `/`).
    private static func normalized(_ path: String) -> String {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }

    /// The directory above `path` (absolute, normalized).
    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private static func refusal(_ what: String, _ reason: String) -> CLIFailure {
        CLIFailure.usage("the profile file \(Terminal.printable(what, limit: 500)) \(reason)")
    }
}
#endif
