#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
import LoginKitJOSE

extension IdentitySource {
    /// The variable GitHub Actions sets to the URL that hands out the job's OIDC token.
    static let gitHubRequestURLVariable = "ACTIONS_ID_TOKEN_REQUEST_URL"
    /// The variable GitHub Actions sets to the bearer token that authorizes that request.
    static let gitHubRequestTokenVariable = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"

    /// The token `url` answers with `headers`: its JSON member at `field`, or the whole body.
    func fetchFromURL(_ url: String, headers: [String: String], field: String?, transport: any HTTPTransport) async throws -> FetchedToken {
        var fields: HTTPFields = [.accept: field == nil ? "*/*" : "application/json"]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard let fieldName = HTTPField.Name(name) else {
                throw LoginError(.invalidConfiguration, "\(displayName): \"\(printableExcerpt(name))\" is no valid header name")
            }
            fields[fieldName] = value
        }
        guard let request = HTTPRequest(method: .get, url: url, headerFields: fields) else {
            throw LoginError(.invalidConfiguration, "\(displayName): the URL is no absolute http(s) URL without user info")
        }
        let (response, body) = try await receive(request, over: transport)
        let status = response.status.code
        let token: String
        var statedExpiry: Date?
        if let field {
            guard let json = try? JSONValue.parse(Array(body)) else {
                throw ServerError(
                    .malformedResponse, "\(displayName) answered with no JSON, so it has no \"\(printableExcerpt(field))\"", status: status)
            }
            guard let value = Self.member(at: field, of: json)?.stringValue else {
                throw ServerError(
                    .malformedResponse, "\(displayName) answered with no string at \"\(printableExcerpt(field))\"", status: status)
            }
            token = Self.trimmed(value)
            statedExpiry = Self.expiry(statedBy: json["expires_in"], now: Self.clock())
        } else {
            let type = response.headerFields[.contentType]?.lowercased() ?? ""
            guard !type.hasPrefix("text/html") else {
                throw ServerError(.malformedResponse, "\(displayName) answered with an HTML page, not a token", status: status)
            }
            guard body.count <= Self.maximumTokenLength else {
                throw ServerError(.malformedResponse, "\(displayName) answered with more than 64 KiB, not a token", status: status)
            }
            token = Self.trimmed(String(decoding: body, as: UTF8.self))
        }
        if let problem = Self.problem(with: token) {
            throw ServerError(.malformedResponse, "\(displayName) answered, but \(problem)", status: status)
        }
        return FetchedToken(token: token, statedExpiry: statedExpiry, validator: .unchanging)
    }

    /// The GitHub Actions job's OIDC token for `audience`: `GET $ACTIONS_ID_TOKEN_REQUEST_URL`
    /// (plus `audience`) with `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the answer's
    /// `value`.
    func fetchFromGitHubActions(audience: String?, transport: any HTTPTransport, environment: [String: String]) async throws -> FetchedToken {
        let requestURL = environment[Self.gitHubRequestURLVariable] ?? ""
        let requestToken = environment[Self.gitHubRequestTokenVariable] ?? ""
        guard !requestURL.isEmpty, !requestToken.isEmpty else {
            throw LoginError(
                .invalidConfiguration,
                "\(displayName): \(Self.gitHubRequestURLVariable) and \(Self.gitHubRequestTokenVariable) are not both set;"
                    + " GitHub Actions sets them in a job with `permissions: id-token: write`")
        }
        var url = requestURL
        if let audience, !audience.isEmpty {
            url += (requestURL.contains("?") ? "&" : "?") + "audience=" + Self.percentEncoded(audience)
        }
        let headers: HTTPFields = [.authorization: "bearer " + requestToken, .accept: "application/json"]
        guard let request = HTTPRequest(method: .get, url: url, headerFields: headers) else {
            throw LoginError(.invalidConfiguration, "\(displayName): \(Self.gitHubRequestURLVariable) is no absolute http(s) URL")
        }
        let (response, body) = try await receive(request, over: transport)
        guard let value = (try? JSONValue.parse(Array(body)))?["value"]?.stringValue else {
            throw ServerError(
                .malformedResponse, "\(displayName) answered with no token (no string \"value\" in a JSON object)", status: response.status.code)
        }
        let token = Self.trimmed(value)
        if let problem = Self.problem(with: token) {
            throw ServerError(.malformedResponse, "\(displayName) answered, but \(problem)", status: response.status.code)
        }
        return FetchedToken(token: token, statedExpiry: nil, validator: .unchanging)
    }

    /// Sends `request` and returns a 2xx answer.
    ///
    /// - Throws: `ServerError` `.unexpectedStatus` for any other status, naming the OAuth `error`
    ///   (and its description) or a JSON `message` when the body has one — printable and short;
    ///   no other body (an HTML page) is repeated. `NetworkError` from the transport.
    private func receive(_ request: HTTPRequest, over transport: any HTTPTransport) async throws -> (HTTPResponse, Data) {
        // A metadata service answers plain HTTP on a link-local address: allowed for this request only.
        let (response, body) = try await LinkLocalHTTP.$isAllowed.withValue(true) { try await transport.send(request, body: nil) }
        let status = response.status.code
        guard (200..<300).contains(status) else {
            let refusal = Self.refusal(in: body)
            throw ServerError(
                .unexpectedStatus, "\(displayName) answered HTTP \(status)\(refusal.map { " (\($0.text))" } ?? "")", status: status,
                providerError: refusal?.code)
        }
        return (response, body)
    }

    /// What an error answer says, when it is a small JSON object with an OAuth `error` (and
    /// `error_description`) or a `message`: printable excerpts only.
    static func refusal(in body: Data) -> (code: String?, text: String)? {
        guard body.count <= 16 * 1024, let object = (try? JSONValue.parse(Array(body)))?.objectValue else { return nil }
        if let error = object["error"]?.stringValue {
            let code = printableExcerpt(error, limit: 64)
            guard let description = object["error_description"]?.stringValue else { return (code, code) }
            return (code, code + ": " + printableExcerpt(description, limit: 200))
        }
        if let message = object["message"]?.stringValue { return (nil, printableExcerpt(message, limit: 200)) }
        return nil
    }

    /// The member of `json` at the dot-separated `path` (an array's element by its index).
    static func member(at path: String, of json: JSONValue) -> JSONValue? {
        var value: JSONValue? = json
        for component in path.split(separator: ".", omittingEmptySubsequences: false) {
            if let object = value?.objectValue {
                value = object[String(component)]
            } else if let array = value?.arrayValue, let index = Int(component), array.indices.contains(index) {
                value = array[index]
            } else {
                return nil
            }
        }
        return value
    }

    /// The expiry an `expires_in` states (seconds from `now`, a number or a numeric string, as
    /// metadata services send it); `nil` without a usable one.
    static func expiry(statedBy value: JSONValue?, now: Date) -> Date? {
        guard let value, let seconds = value.int64Value ?? value.stringValue.flatMap({ Int64($0) }), seconds > 0 else { return nil }
        return now.addingTimeInterval(Double(min(seconds, 1_000_000_000)))
    }

    /// `text` with every byte but RFC 3986's unreserved ones written `%XX`: a query parameter's value.
    static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                output.append(byte)
            default:
                output += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
