import Foundation
import LoginKitHTTP
import LoginKitTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A git server over git's "dumb" HTTP protocol on 127.0.0.1: the files of a directory (bare
/// repositories prepared with `git update-server-info`) to `GET` requests whose `Authorization:
/// Basic` credentials `accepts` takes, `401` with `WWW-Authenticate: Basic realm="git"` to the
/// others — a server that takes only a valid token as the password. POSIX sockets, a thread per
/// connection (kept alive, as git's libcurl keeps it).
final class GitHTTPServer: Sendable {
    /// One request as the server saw it.
    struct Request: Sendable {
        let path: String
        /// The Basic credentials, when the request carried some.
        let username: String?
        let password: String?
        /// The status answered.
        let status: Int
    }

    let port: Int
    private let listener: Int32
    private let root: String
    private let accepts: @Sendable (_ username: String, _ password: String) -> Bool

    private struct State {
        var requests: [Request] = []
        var open: [Int32] = []
        var stopped = false
    }
    private let state = LockedState(State())

    /// Serves the files under `root` on an ephemeral port of 127.0.0.1.
    init(root: String, accepts: @escaping @Sendable (_ username: String, _ password: String) -> Bool) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        guard let port = bindToLoopback(descriptor, listen: true) else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.listener = descriptor
        self.port = port
        self.root = root
        self.accepts = accepts
        Thread.detachNewThread { [self] in acceptConnections() }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)\(path)"
    }

    /// Every request answered so far, in order.
    var requests: [Request] { state.withLock { $0.requests } }

    /// Stops accepting and ends every connection; the threads end on their own.
    func stop() {
        state.withLock { state in
            state.stopped = true
            for descriptor in state.open { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))  // wakes `accept`, whose thread then closes it
    }

    // MARK: The threads

    private func acceptConnections() {
        defer { close(listener) }
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return  // shut down by `stop`
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            let admitted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.open.append(connection)
                return true
            }
            guard admitted else {
                close(connection)
                return
            }
            Thread.detachNewThread { [self] in serve(connection) }
        }
    }

    private func serve(_ connection: Int32) {
        var buffer: [UInt8] = []
        while let head = Self.readHead(from: connection, buffer: &buffer) {
            let (status, headers, body, request) = respond(to: head)
            state.withLock { $0.requests.append(request) }
            var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
            for (name, value) in headers { text += "\(name): \(value)\r\n" }
            text += "Content-Length: \(body.count)\r\n\r\n"
            guard Self.transmit(Array(text.utf8) + body, to: connection) else { break }
        }
        state.withLock { $0.open.removeAll { $0 == connection } }
        close(connection)
    }

    /// The answer to a request whose head (request line and header lines) is `head`.
    private func respond(to head: String) -> (Int, [(String, String)], [UInt8], Request) {
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.first.map { $0.split(separator: " ") } ?? []
        let method = requestLine.first.map(String.init) ?? ""
        let target = requestLine.dropFirst().first.map(String.init) ?? "/"
        let path = String(target.prefix { $0 != "?" })
        var credentials: (username: String, password: String)?
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "authorization" else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            guard value.lowercased().hasPrefix("basic "),
                let decoded = Data(base64Encoded: String(value.dropFirst("basic ".count))).flatMap({ String(data: $0, encoding: .utf8) }),
                let colon = decoded.firstIndex(of: ":")
            else { continue }
            credentials = (String(decoded[..<colon]), String(decoded[decoded.index(after: colon)...]))
        }
        func answer(_ status: Int, _ headers: [(String, String)] = [], _ body: [UInt8] = []) -> (Int, [(String, String)], [UInt8], Request) {
            (status, headers, body, Request(path: path, username: credentials?.username, password: credentials?.password, status: status))
        }
        guard let given = credentials, accepts(given.username, given.password) else {
            return answer(401, [("WWW-Authenticate", "Basic realm=\"git\"")])
        }
        guard method == "GET", path.hasPrefix("/"), !path.split(separator: "/").contains("..") else { return answer(404) }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root + path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let contents = FileManager.default.contents(atPath: root + path)
        else { return answer(404) }
        // `info/refs` as a plain file: git sees no smart server and fetches the files one by one.
        let type = path.hasSuffix("/info/refs") ? "text/plain; charset=utf-8" : "application/octet-stream"
        return answer(200, [("Content-Type", type)], Array(contents))
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 401: "Unauthorized"
        default: "Not Found"
        }
    }

    /// The next request's head, without its blank line; `nil` when the client closed the
    /// connection first. The requests git sends here have no body.
    private static func readHead(from connection: Int32, buffer: inout [UInt8]) -> String? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if buffer.count >= separator.count,
                let end = (0...(buffer.count - separator.count)).first(where: { buffer[$0..<($0 + separator.count)].elementsEqual(separator) })
            {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + separator.count)
                return head
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    /// Writes all of `bytes` (never raising `SIGPIPE` on a connection the client closed).
    private static func transmit(_ bytes: [UInt8], to connection: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return send(connection, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
