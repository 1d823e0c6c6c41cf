import Foundation
import LoginKitHTTP
import LoginKitTestSupport

/// A git server over git's "dumb" HTTP protocol on 127.0.0.1: the files of a directory (bare
/// repositories prepared with `git update-server-info`) to `GET` requests whose `Authorization:
/// Basic` credentials `accepts` takes, `401` with `WWW-Authenticate: Basic realm="git"` to the
/// others — a server that takes only a valid token as the password. A `LoopbackListener`: a thread
/// per connection (kept alive, as git's libcurl keeps it).
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

    var port: Int { listener.port }
    private let listener: LoopbackListener
    private let root: String
    private let accepts: @Sendable (_ username: String, _ password: String) -> Bool
    private let answered = LockedState([Request]())

    /// Serves the files under `root` on an ephemeral port of 127.0.0.1.
    init(root: String, accepts: @escaping @Sendable (_ username: String, _ password: String) -> Bool) throws {
        self.listener = try LoopbackListener()
        self.root = root
        self.accepts = accepts
        listener.start { [self] connection in serve(connection) }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        listener.url(path)
    }

    /// Every request answered so far, in order.
    var requests: [Request] { answered.withLock { $0 } }

    /// Stops accepting and ends every connection; the threads end on their own.
    func stop() {
        listener.stop()
    }

    // MARK: The threads

    private func serve(_ connection: LoopbackListener.Connection) {
        var connection = connection
        while let request = connection.readRequest() {
            let (status, headers, body, record) = respond(to: request)
            answered.withLock { $0.append(record) }
            var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
            for (name, value) in headers { text += "\(name): \(value)\r\n" }
            text += "Content-Length: \(body.count)\r\n\r\n"
            guard connection.transmit(Array(text.utf8) + body) else { break }
        }
    }

    /// The answer to `request`.
    private func respond(to request: LoopbackHTTPRequest) -> (Int, [(String, String)], [UInt8], Request) {
        let method = request.method
        let target = request.target.isEmpty ? "/" : request.target
        let path = String(target.prefix { $0 != "?" })
        var credentials: (username: String, password: String)?
        for value in request.values(of: "authorization") {
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
}
