/// The head of one HTTP/1.x request as the loopback receiver accepts it, parsed strictly (RFC 9112):
/// a request line `METHOD SP /target SP HTTP/1.x`, header lines `name: value`, every line ended by
/// CRLF, printable ASCII only, at most 8 KiB and 64 headers, no body. Anything else is refused
/// rather than guessed at: the receiver only ever needs one `GET /callback?…` from a browser.
package struct CallbackHTTPRequest: Sendable, Equatable {
    /// The method, e.g. `GET`.
    package let method: String
    /// The path, without the query, exactly as sent (not percent-decoded).
    package let path: String
    /// The query, without `?`; empty when there is none.
    package let query: String

    /// A head whose request target is already split into `path` and `query`.
    package init(method: String, path: String, query: String) {
        self.method = method
        self.path = path
        self.query = query
    }

    /// The longest head accepted, CRLF CRLF included: 8 KiB.
    package static let maximumHeadSize = 8 * 1024
    /// The most header lines accepted.
    package static let maximumHeaderCount = 64

    /// What the bytes received so far amount to.
    package enum Parse: Sendable, Equatable {
        /// The head has not ended yet; read more.
        case incomplete
        /// The head is longer than ``maximumHeadSize`` (answer 431).
        case tooLarge
        /// Not a request this receiver accepts (answer 400); the reason is for tests and logs.
        case invalid(String)
        /// A complete, valid head.
        case complete(CallbackHTTPRequest)
    }

    /// Parses the bytes received so far on a connection.
    package static func parse(_ bytes: [UInt8]) -> Parse {
        guard let end = headEnd(bytes) else { return bytes.count >= maximumHeadSize ? .tooLarge : .incomplete }
        guard end + 4 <= maximumHeadSize else { return .tooLarge }
        guard let allLines = lines(bytes[..<end]) else {
            return .invalid("a line is not ended by CRLF or holds a control character")
        }
        guard let requestLine = allLines.first else { return .invalid("no request line") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .invalid("the request line is not METHOD SP TARGET SP VERSION") }
        let (method, target, version) = (parts[0], parts[1], parts[2])
        guard !method.isEmpty, method.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
            return .invalid("the method is not an upper-case token")
        }
        guard target.hasPrefix("/") else { return .invalid("the target is not in origin form") }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .invalid("the version is not HTTP/1.0 or HTTP/1.1")
        }

        let headerLines = allLines.dropFirst()
        guard headerLines.count <= maximumHeaderCount else {
            return .invalid("more than \(maximumHeaderCount) headers")
        }
        var hosts = 0
        for line in headerLines {
            guard let colon = line.firstIndex(of: ":") else { return .invalid("a header line has no colon") }
            let name = line[..<colon]
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else {
                return .invalid("a header name is empty or not a token (or the line is folded)")
            }
            let value = line[line.index(after: colon)...].trimmingOptionalWhitespace()
            switch name.lowercased() {
            case "host": hosts += 1
            case "transfer-encoding": return .invalid("a callback has no body")
            case "content-length": guard value == "0" else { return .invalid("a callback has no body") }
            default: break
            }
        }
        guard version == "HTTP/1.0" ? hosts <= 1 : hosts == 1 else {
            return .invalid("an HTTP/1.1 request has exactly one Host header")
        }

        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return .complete(
            CallbackHTTPRequest(
                method: String(method), path: String(pieces[0]), query: pieces.count > 1 ? String(pieces[1]) : ""
            ))
    }

    /// The index where CR LF CR LF starts, if it has arrived.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// The head split at CRLF; `nil` when a CR or LF stands alone or a byte is neither printable
    /// ASCII nor a horizontal tab.
    private static func lines(_ head: ArraySlice<UInt8>) -> [Substring]? {
        var lines: [Substring] = []
        var current: [UInt8] = []
        var index = head.startIndex
        while index < head.endIndex {
            let byte = head[index]
            switch byte {
            case 13:
                guard index + 1 < head.endIndex, head[index + 1] == 10 else { return nil }
                lines.append(Substring(String(decoding: current, as: UTF8.self)))
                current.removeAll(keepingCapacity: true)
                index += 2
                continue
            case 9, 0x20...0x7E:
                current.append(byte)
            default:
                return nil
            }
            index += 1
        }
        lines.append(Substring(String(decoding: current, as: UTF8.self)))
        return lines
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (RFC 9110 `OWS`).
    fileprivate func trimmingOptionalWhitespace() -> Substring {
        let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isOWS($0) }), let last = lastIndex(where: { !isOWS($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
