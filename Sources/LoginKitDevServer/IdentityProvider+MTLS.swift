// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitJOSE

/// Mutual TLS (RFC 8705) as a provider behind a TLS-terminating proxy does it: the proxy passes the
/// client certificate it received in a request header (`mtlsCertificateHeader`); clients registered
/// for `tls_client_auth` (a subject DN) or `self_signed_tls_client_auth` (certificate thumbprints)
/// authenticate with it; the access tokens issued to a request that carries one are bound to it
/// (`cnf.x5t#S256`, §3), and `/api/resource` wants the same certificate with them.
extension IdentityProvider {
    /// A TLS client certificate the proxy says the client presented.
    struct PresentedCertificate: Sendable, Hashable {
        /// `x5t#S256` (RFC 8705 §3.1): base64url of the SHA-256 of the certificate's DER.
        let thumbprint: String
        /// The subject as an RFC 4514 string (``CertificateSubject``); `nil` when the DER does not
        /// read as a certificate that far.
        let subjectDN: String?
    }

    /// The `x5t#S256` of the certificate the token request being served came with: the token,
    /// PAR, device and revocation endpoints set it for the time they run the request, and every
    /// access token issued meanwhile is bound to it. `nil`: no certificate.
    @TaskLocal static var requestCertificateThumbprint: String? = nil

    /// Runs `body` with ``requestCertificateThumbprint`` set to `certificate`'s thumbprint.
    static func withRequestCertificate<R>(_ certificate: PresentedCertificate?, _ body: () throws -> R) rethrows -> R {
        try $requestCertificateThumbprint.withValue(certificate?.thumbprint, operation: body)
    }

    /// The certificate `headers` carry in ``IdentityProviderConfiguration/mtlsCertificateHeader``;
    /// `nil` when that is not set, or the header is absent, empty (nginx's variable when the client
    /// sent none) or holds no PEM certificate.
    func presentedCertificate(in headers: HTTPFields) -> PresentedCertificate? {
        guard let header = configuration.mtlsCertificateHeader, let name = HTTPField.Name(header), let value = headers[name],
            !value.isEmpty
        else { return nil }
        return Self.certificate(fromEscapedPEM: value)
    }

    /// The certificate in `value`: a PEM certificate, percent-encoded (`+` stays `+`, as in
    /// nginx's `$ssl_client_escaped_cert`); `nil` when it holds none.
    static func certificate(fromEscapedPEM value: String) -> PresentedCertificate? {
        guard let pem = percentDecoded(value), let der = firstCertificateDER(inPEM: pem),
            let digest = try? MessageDigest.sha256(der)
        else { return nil }
        return PresentedCertificate(thumbprint: Base64URL.encode(digest), subjectDN: CertificateSubject.rfc4514(ofCertificate: der))
    }

    /// Authenticates `client`, registered for `tls_client_auth` or `self_signed_tls_client_auth`,
    /// by the `certificate` its request came with: the registered subject DN, or one of the
    /// registered thumbprints. The chain is not verified (a development provider: the proxy asks
    /// for any certificate, `optional_no_ca`).
    ///
    /// - Throws: `OAuthError` 401 `invalid_client`.
    func authenticateCertificate(of client: DevClient, certificate: PresentedCertificate?) throws(OAuthError) {
        guard let certificate else {
            throw OAuthError(
                status: 401, code: "invalid_client",
                description: "this client authenticates with a TLS client certificate (RFC 8705); the request came without one")
        }
        if let subjectDN = client.tlsClientAuthSubjectDN {
            guard certificate.subjectDN == subjectDN else {
                throw OAuthError(
                    status: 401, code: "invalid_client", description: "the TLS client certificate's subject is not the one registered for this client")
            }
            return
        }
        guard client.selfSignedCertificateThumbprints.contains(certificate.thumbprint) else {
            throw OAuthError(status: 401, code: "invalid_client", description: "the TLS client certificate is not one registered for this client")
        }
    }

    /// ``IdentityProviderConfiguration/mtlsBaseURL`` without a trailing `/`.
    var mutualTLSBaseURL: String? {
        configuration.mtlsBaseURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    /// The base URL a request was sent to: the proxy's (``IdentityProviderConfiguration/mtlsBaseURL``)
    /// when it came with a certificate (`thumbprint`), the issuer otherwise. DPoP proofs name it in `htu`.
    func baseURL(presenting thumbprint: String?) -> String {
        guard thumbprint != nil, let base = mutualTLSBaseURL else { return issuer }
        return base
    }

    /// What discovery says of mutual TLS when the configuration turns it on: the two methods in
    /// `token_endpoint_auth_methods_supported`, `tls_client_certificate_bound_access_tokens`, and
    /// `mtls_endpoint_aliases` at the proxy's origin when it is known (RFC 8705 §3.3, §5).
    func addMutualTLSMetadata(to document: inout [String: JSONValue]) {
        let configuration = self.configuration
        guard configuration.mtlsCertificateHeader != nil else { return }
        let methods = document["token_endpoint_auth_methods_supported"]?.arrayValue ?? []
        document["token_endpoint_auth_methods_supported"] = .array(
            methods + [.string("tls_client_auth"), .string("self_signed_tls_client_auth")])
        document["tls_client_certificate_bound_access_tokens"] = .bool(true)
        guard let base = mutualTLSBaseURL else { return }
        var aliases: [String: JSONValue] = [
            "token_endpoint": .string(base + Self.tokenPath),
            "revocation_endpoint": .string(base + "/oauth/revoke"),
            "device_authorization_endpoint": .string(base + "/oauth/device_authorization"),
        ]
        if configuration.par != .absent { aliases["pushed_authorization_request_endpoint"] = .string(base + Self.parPath) }
        document["mtls_endpoint_aliases"] = .object(aliases)
    }

    /// `text` with each `%XX` replaced by its byte; `nil` for a `%` not followed by two hex digits.
    /// `+` is kept: this is not a form.
    static func percentDecoded(_ text: String) -> String? {
        let input = Array(text.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count)
        var index = 0
        while index < input.count {
            guard input[index] == UInt8(ascii: "%") else {
                bytes.append(input[index])
                index += 1
                continue
            }
            guard index + 2 < input.count, let high = hexValue(input[index + 1]), let low = hexValue(input[index + 2]) else { return nil }
            bytes.append(high << 4 | low)
            index += 3
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The DER of the first `CERTIFICATE` block of `pem`; `nil` when there is none or its base64
    /// does not decode.
    static func firstCertificateDER(inPEM pem: String) -> [UInt8]? {
        guard let begin = pem.firstRange(of: "-----BEGIN CERTIFICATE-----"),
            let end = pem[begin.upperBound...].firstRange(of: "-----END CERTIFICATE-----")
        else { return nil }
        let body = pem[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)), !data.isEmpty else { return nil }
        return [UInt8](data)
    }
}

extension DevClient {
    /// Whether the client is registered for `tls_client_auth` or `self_signed_tls_client_auth`,
    /// and so authenticates with its TLS client certificate only.
    var authenticatesWithCertificate: Bool {
        tlsClientAuthSubjectDN != nil || !selfSignedCertificateThumbprints.isEmpty
    }
}

/// A certificate's subject as an RFC 4514 string: the RDNs last first, separated by `,`, the
/// attributes of a multi-valued RDN by `+`; the types RFC 4514 §3 names by their short names (CN,
/// L, ST, O, OU, C, STREET, DC, UID) with their string values escaped (§2.4), any other type, or a
/// value of another ASN.1 type, as its dotted OID and `#` with the hex of the value's DER.
/// Only as much DER (X.690) as that needs is read: one-byte tags, definite lengths.
enum CertificateSubject {
    /// The subject of the certificate `der`; `nil` when it does not read as one.
    static func rfc4514(ofCertificate der: [UInt8]) -> String? {
        var outer = DERReader(der[...])
        guard let certificate = outer.next(), certificate.tag == 0x30 else { return nil }
        var parts = DERReader(certificate.contents)
        guard let tbs = parts.next(), tbs.tag == 0x30 else { return nil }
        var fields = DERReader(tbs.contents)
        var field = fields.next()
        if field?.tag == 0xA0 { field = fields.next() }  // [0] version
        // serialNumber, signature, issuer, validity, subject.
        guard field?.tag == 0x02, fields.next()?.tag == 0x30, fields.next()?.tag == 0x30, fields.next()?.tag == 0x30,
            let subject = fields.next(), subject.tag == 0x30
        else { return nil }
        return name(subject.contents)
    }

    /// The RDN sequence `contents` (a `Name`'s), as RFC 4514 writes it.
    static func name(_ contents: ArraySlice<UInt8>) -> String? {
        var relativeNames: [String] = []
        var reader = DERReader(contents)
        while !reader.isAtEnd {
            guard let set = reader.next(), set.tag == 0x31 else { return nil }
            var attributes: [String] = []
            var members = DERReader(set.contents)
            while !members.isAtEnd {
                guard let pair = members.next(), pair.tag == 0x30 else { return nil }
                var items = DERReader(pair.contents)
                guard let type = items.next(), type.tag == 0x06, let value = items.next(), let oid = objectIdentifier(type.contents) else {
                    return nil
                }
                if let short = shortNames[oid], let text = text(of: value) {
                    attributes.append(short + "=" + escaped(text))
                } else {
                    attributes.append(oid + "=#" + hex(value.encoding))
                }
            }
            relativeNames.append(attributes.joined(separator: "+"))
        }
        return relativeNames.reversed().joined(separator: ",")
    }

    /// RFC 4514 §3's short names, by OID.
    static let shortNames: [String: String] = [
        "2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.6": "C", "2.5.4.9": "STREET",
        "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
    ]

    /// The dotted form of an OBJECT IDENTIFIER's contents; `nil` when malformed.
    static func objectIdentifier(_ contents: ArraySlice<UInt8>) -> String? {
        guard let last = contents.last, last & 0x80 == 0 else { return nil }
        var arcs: [UInt64] = []
        var value: UInt64 = 0
        for byte in contents {
            guard value < 1 << 56 else { return nil }
            value = value << 7 | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 {
                arcs.append(value)
                value = 0
            }
        }
        guard let head = arcs.first else { return nil }
        let (first, second): (UInt64, UInt64) = head < 40 ? (0, head) : head < 80 ? (1, head - 40) : (2, head - 80)
        return ([first, second] + arcs.dropFirst()).map { String($0) }.joined(separator: ".")
    }

    /// The text of a UTF8String, PrintableString, IA5String, TeletexString (read as Latin-1) or
    /// BMPString; `nil` for another type.
    static func text(of item: DERReader.Item) -> String? {
        switch item.tag {
        case 0x0C, 0x13, 0x16: return String(decoding: item.contents, as: UTF8.self)
        case 0x14: return String(String.UnicodeScalarView(item.contents.map { Unicode.Scalar($0) }))
        case 0x1E:
            guard item.contents.count % 2 == 0 else { return nil }
            let bytes = Array(item.contents)
            let units = stride(from: 0, to: bytes.count, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
            return String(decoding: units, as: UTF16.self)
        default: return nil
        }
    }

    /// `value` escaped as RFC 4514 §2.4 asks: `"`, `+`, `,`, `;`, `<`, `>` and `\` always, a
    /// space first or last, `#` first, and NUL.
    static func escaped(_ value: String) -> String {
        let scalars = Array(value.unicodeScalars)
        var result = String.UnicodeScalarView()
        for (index, scalar) in scalars.enumerated() {
            switch scalar {
            case "\"", "+", ",", ";", "<", ">", "\\":
                result.append("\\")
                result.append(scalar)
            case " " where index == 0 || index == scalars.count - 1, "#" where index == 0:
                result.append("\\")
                result.append(scalar)
            case "\u{0}":
                result.append(contentsOf: "\\00".unicodeScalars)
            default:
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// Lower-case hex of `bytes`.
    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }
}

/// Reads DER items one after the other: a one-byte tag, a definite length (at most four length
/// bytes), the contents.
struct DERReader {
    /// An item: its tag, its contents, and its whole encoding (tag and length included).
    struct Item {
        let tag: UInt8
        let contents: ArraySlice<UInt8>
        let encoding: ArraySlice<UInt8>
    }

    private var rest: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        rest = bytes
    }

    var isAtEnd: Bool { rest.isEmpty }

    /// The next item; `nil` at the end or when the bytes are not a DER item.
    mutating func next() -> Item? {
        let whole = rest
        guard let tag = rest.first, tag & 0x1F != 0x1F, let lengthByte = rest.dropFirst().first else { return nil }
        var remaining = rest.dropFirst(2)
        var length = 0
        if lengthByte < 0x80 {
            length = Int(lengthByte)
        } else {
            let count = Int(lengthByte & 0x7F)
            guard (1...4).contains(count), remaining.count >= count else { return nil }
            for byte in remaining.prefix(count) { length = length << 8 | Int(byte) }
            remaining = remaining.dropFirst(count)
        }
        guard remaining.count >= length else { return nil }
        let contents = remaining.prefix(length)
        rest = remaining.dropFirst(length)
        return Item(tag: tag, contents: contents, encoding: whole[whole.startIndex..<contents.endIndex])
    }
}
#endif
