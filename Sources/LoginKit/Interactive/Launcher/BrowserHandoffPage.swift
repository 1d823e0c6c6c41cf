import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The page a browser is handed instead of the authorization URL, so that the URL — its `state`,
/// PKCE challenge and loopback port — is never on a command line or in an environment, which every
/// local user can read (`/proc/PID/cmdline`, `/proc/PID/environ`) for as long as the browser runs.
///
/// ``write(leadingTo:environment:)`` makes a fresh directory with `mkdtemp` (mode 0700) under
/// `$XDG_RUNTIME_DIR` when that is a directory the user owns with mode 0700, else under `$TMPDIR`
/// (else `/tmp`) where no other user can move entries (owned by the user or root, and not writable
/// by others unless sticky), and in it one file with a random name, created with `O_CREAT | O_EXCL |
/// O_NOFOLLOW` and mode 0600: a short HTML page whose `<meta http-equiv="refresh">`, script
/// (`location.replace`) and link send the browser on to the URL. The browser gets its `file://`
/// URL. ``remove()`` deletes the file and the directory; whoever writes a page removes it once the
/// login it serves has ended.
///
/// What it does not hide the URL from: a process running as the same user (it may read the page, or
/// the browser's memory), root, and anyone who can read the user's terminal, where the URL is printed.
package struct BrowserHandoffPage: Sendable {
    /// The directory made for the page (mode 0700).
    package let directory: String
    /// The page's path (mode 0600).
    package let path: String

    /// The page as a `file://` URL, its path percent-encoded: what the browser is given.
    package var fileURL: String {
        "file://" + Self.percentEncodedPath(path)
    }

    /// Writes a page that leads to `url`, in a fresh private directory chosen from `environment`
    /// (`XDG_RUNTIME_DIR`, `TMPDIR`).
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when no directory or file can be made (the login
    ///   then shows the URL and accepts a pasted redirect); nothing is left behind.
    package static func write(leadingTo url: String, environment: [String: String]) throws(LoginError) -> BrowserHandoffPage {
        let name: String
        do {
            name = "login-" + (try randomURLSafeToken(bytes: 16)) + ".html"
        } catch {
            throw LoginError(.browserUnavailable, "could not name the page that hands the sign-in to the browser: \(error)")
        }
        var failures: [String] = []
        for base in baseDirectories(environment) {
            var template = "\(base)/loginkit-XXXXXX".utf8CString
            let made = template.withUnsafeMutableBufferPointer {
                (buffer: inout UnsafeMutableBufferPointer<CChar>) -> String? in
                guard let start = buffer.baseAddress, let directory = mkdtemp(start) else { return nil }
                return String(cString: directory)
            }
            let code = errno
            guard let directory = made else {
                failures.append("\(printableExcerpt(base, limit: 200)): \(systemErrorMessage(code))")
                continue
            }
            _ = chmod(directory, 0o700)  // mkdtemp's 0700 less the umask: exactly 0700
            let page = BrowserHandoffPage(directory: directory, path: directory + "/" + name)
            let failure = writeFile(html(leadingTo: url), to: page.path)
            guard failure == 0 else {
                page.remove()
                failures.append("\(printableExcerpt(directory, limit: 200)): \(systemErrorMessage(failure))")
                continue
            }
            return page
        }
        throw LoginError(
            .browserUnavailable,
            "could not write the page that hands the sign-in to the browser (\(failures.joined(separator: "; ")))")
    }

    /// Deletes the page and its directory. Idempotent.
    package func remove() {
        _ = unlink(path)
        _ = rmdir(directory)
    }

    /// The page: a refresh, a script and a link to `url`, every one HTML-escaped. The script reads the
    /// address from the link, so the URL never has to be escaped for JavaScript too.
    package static func html(leadingTo url: String) -> String {
        let target = escapingHTML(url)
        return """
            <!doctype html><html lang="en"><head><meta charset="utf-8">\
            <meta name="referrer" content="no-referrer">\
            <meta http-equiv="refresh" content="0;url=\(target)">\
            <title>Sign in</title></head>\
            <body><p>Opening the sign-in page. If it does not open, \
            <a id="continue" href="\(target)" rel="noreferrer">continue to sign in</a>.</p>\
            <script>location.replace(document.getElementById("continue").href)</script></body></html>

            """
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` as character references.
    package static func escapingHTML(_ text: String) -> String {
        LoginKitHTTP.escapingHTML(text)
    }

    /// Where a page's directory may be made, in order: `$XDG_RUNTIME_DIR` when it is a directory
    /// (not a link) owned by this user with mode 0700, `$TMPDIR` when absolute, `/tmp`.
    package static func baseDirectories(_ environment: [String: String]) -> [String] {
        var candidates: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"].map(withoutTrailingSlashes), runtime.hasPrefix("/") {
            var info = stat()
            if lstat(runtime, &info) == 0, info.st_mode & 0o170000 == 0o040000, info.st_uid == geteuid(),
                info.st_mode & 0o777 == 0o700
            {
                candidates.append(runtime)
            }
        }
        if let temporary = environment["TMPDIR"].map(withoutTrailingSlashes), temporary.hasPrefix("/"),
            othersCannotMoveEntries(temporary)
        {
            candidates.append(temporary)
        }
        if !candidates.contains("/tmp"), othersCannotMoveEntries("/tmp") { candidates.append("/tmp") }
        return candidates
    }

    /// Whether no other user can rename or replace an entry this user makes in the directory `path`
    /// (links followed): it belongs to this user or root, and neither group nor others may write it,
    /// or it has the sticky bit (as `/tmp`), under which only an entry's owner may move it. Anywhere
    /// else another user could move the page's directory away and put one of theirs, holding a page
    /// of their choosing, in its place before the browser reads it.
    private static func othersCannotMoveEntries(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o170000 == 0o040000 else { return false }
        guard info.st_uid == geteuid() || info.st_uid == 0 else { return false }
        return info.st_mode & 0o022 == 0 || info.st_mode & 0o1000 != 0
    }

    private static func withoutTrailingSlashes(_ path: String) -> String {
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }

    /// Creates `path` (never following a link, never reusing a file), mode 0600, holding `text`.
    /// Returns 0, or the `errno` of the call that failed.
    private static func writeFile(_ text: String, to path: String) -> Int32 {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return errno }
        defer { closeDescriptor(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else { return errno }
        return writeAll(Array(text.utf8), to: descriptor)
    }

    /// `path` with every byte but unreserved characters and `/` percent-encoded (RFC 3986 §2.1).
    private static func percentEncodedPath(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
