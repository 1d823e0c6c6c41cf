#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
import LoginKitJOSE

/// One function per fuzzed entry point: feeds arbitrary bytes to a parser that untrusted input
/// reaches, and checks what must hold whatever the input. Returns `false` when an invariant broke
/// (the fuzz executables in `Fuzz/` then abort, which libFuzzer records as a finding); a crash is
/// a finding too. `make test` replays every committed corpus file through these functions.
///
/// An SPI for the fuzzers (`Fuzz/`, `@_spi(Fuzzing) import LoginKit`) and the corpus replay
/// (`FuzzCorpusTests`), not API: it may change at any time.
@_spi(Fuzzing) public enum FuzzEntries {
    /// Keys made once per process: verification paths run against real keys of each type.
    static let keys: [(JWK, JWSAlgorithm)] = {
        var keys: [(JWK, JWSAlgorithm)] = []
        for algorithm in [JWSAlgorithm.rs256, .es256, .edDSA] {
            guard let key = try? SigningKey.generate(algorithm, keyID: "fuzz-\(algorithm.rawValue)"), let jwk = try? key.publicJWK() else { continue }
            keys.append((jwk, algorithm))
        }
        return keys
    }()

    static let sealingKey = try? SymmetricKey(bytes: Array(repeating: 7, count: 32))

    /// JWS/JWT: compact parsing, signature checks with every key and algorithm, claims, and the
    /// verifier's claim checks. A token that parses must re-serialise to the same signing input.
    @_spi(Fuzzing) public static func jws(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let jws = try? CompactJWS(parsing: text) else { return true }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, Array("\(parts[0]).\(parts[1])".utf8) == jws.signingInput else { return false }
        for (key, algorithm) in keys {
            for candidate in JWSAlgorithm.allCases {
                // Input the fuzzer made never carries a valid signature of a key made here, and a
                // key never accepts an algorithm of another key type.
                if jws.hasValidSignature(key: key, algorithm: candidate) { return false }
                if key.canVerify(candidate), candidate.keyType != algorithm.keyType { return false }
            }
        }
        if let claims = try? JWTClaims(payload: jws.payload) {
            let verifier = IDTokenVerifier(configuration: .init(issuer: "https://issuer.fuzz", audience: "fuzz"), keys: StaticJWKS(JWKSet(keys: keys.map(\.0))))
            _ = try? verifier.check(claims)
        }
        return true
    }

    /// A private key as an application loads one for `private_key_jwt`: PEM text, or (first
    /// non-blank byte `{`) a private JWK. A key that loads must sign a JWS its own public JWK
    /// verifies, with an algorithm of its own type; none may be loaded with another type's.
    @_spi(Fuzzing) public static func signingKey(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let isJWK = bytes.first { ![0x20, 0x0A, 0x0D, 0x09].contains($0) } == UInt8(ascii: "{")
        let key = isJWK ? try? SigningKey(jwkText: Array(bytes)) : try? SigningKey(pem: String(decoding: bytes, as: UTF8.self))
        guard let key else { return true }
        guard let token = try? CompactJWS.sign(payload: Array("{}".utf8), with: key), let jwk = try? key.publicJWK(),
            let parsed = try? CompactJWS(parsing: token), parsed.hasValidSignature(key: jwk, algorithm: key.algorithm)
        else { return false }
        for other in JWSAlgorithm.allCases where other.keyType != key.algorithm.keyType {
            if (try? key.signing(with: other)) != nil { return false }
        }
        return !key.description.contains("PRIVATE")
    }

    /// A JWK Set document: parsing, key import, and which algorithms each key accepts.
    @_spi(Fuzzing) public static func jwks(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let set = try? JWKSet(jsonText: Array(bytes)) else { return true }
        for key in set.keys {
            for algorithm in JWSAlgorithm.allCases where key.canVerify(algorithm) {
                // A key only ever accepts algorithms of its own type.
                if algorithm.keyType.rawValue != key.json["kty"]?.stringValue { return false }
            }
        }
        return true
    }

    /// A token endpoint answer: the first byte picks the status and grant, the rest is the body.
    /// Only a 2xx yields credentials; everything else is one of the kit's typed errors.
    @_spi(Fuzzing) public static func tokenResponse(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first else { return true }
        let statuses = [200, 200, 200, 400, 401, 403, 429, 500, 502, 503]
        let status = statuses[Int(first) % statuses.count]
        var headers: HTTPFields = [.contentType: "application/json"]
        if status == 429 || status == 503 { headers[.retryAfter] = String(Int(first) * 37) }
        switch UntrustedInputParsers.tokenResponse(status: status, headers: headers, body: Array(bytes.dropFirst()), grant: Int(first) / 10) {
        case .success(let credentials):
            return status == 200 && credentials.expiresAt.map { $0.timeIntervalSince1970.isFinite } ?? true
        case .failure(let error):
            // Every failure is one of the kit's typed errors, whose description is one line.
            let typed = error is ServerError || error is LoginError || error is LoginRequiredError || error is TokenVerificationError
            return typed && !String(describing: error).contains("\n")
        }
    }

    /// A token store file, plain or sealed: whatever parses writes back and parses to the same
    /// profiles; anything else is a typed store error.
    @_spi(Fuzzing) public static func storeFile(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for key in [nil, sealingKey] {
            guard case .success(let profiles) = UntrustedInputParsers.storeFile(Array(bytes), key: key) else { continue }
            guard case .success(let written) = UntrustedInputParsers.encodeStoreFile(profiles, key: key),
                case .success(let reread) = UntrustedInputParsers.storeFile(written, key: key)
            else { return false }
            if reread != profiles { return false }
        }
        return true
    }

    /// A version string: a parsed version prints to a string that parses to an equal version, and
    /// compares equal to itself.
    @_spi(Fuzzing) public static func semanticVersion(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let version = try? SemanticVersion(parsing: text) else { return true }
        guard let again = try? SemanticVersion(parsing: version.description) else { return false }
        return again == version && !(version < version)
    }

    /// What the CLI takes from its environment, as `NAME=value` lines: the store key
    /// (`LOGINKIT_STORE_KEY`), issuer and endpoint URLs, profile names.
    @_spi(Fuzzing) public static func cliConfiguration(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var environment: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let pair = line.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { environment[String(pair[0])] = String(pair[1]) }
        }
        if case .success(let key?) = UntrustedInputParsers.storeKey(environment: environment), key.bytes.count != 32 { return false }
        for name in ["LOGINKIT_ISSUER", "LOGINKIT_LOGIN_URL", "LOGINKIT_COGNITO_ENDPOINT"] {
            guard let url = environment[name] else { continue }
            if let parts = URLParts(url), parts.host.isEmpty { return false }
            _ = HTTPRequest(method: .post, url: url)
        }
        return true
    }
}

/// The parsers that untrusted bytes reach before any public API returns, as ``FuzzEntries`` feeds
/// them: each returns what the parser made of the bytes, or the typed error it threw.
enum UntrustedInputParsers {
    /// A token endpoint's answer: credentials for a 2xx (no ID-token verification: the fuzzers test
    /// the parsing), else the typed error RFC 6749 §5.2 maps it to.
    static func tokenResponse(status: Int, headers: HTTPFields, body: [UInt8], grant: Int) -> Result<Credentials, any Error> {
        let response = HTTPResponse(status: .init(code: status), headerFields: headers)
        let json = try? JSONValue.parse(body)
        let grants: [TokenEndpoint.Grant] = [.password, .refresh, .clientCredentials, .deviceCode, .other]
        if let error = TokenEndpoint.error(for: response, json: json, grant: grants[abs(grant % grants.count)], host: "fuzz.test") {
            return .failure(error)
        }
        return Result {
            try TokenEndpoint.requireJSON(response, host: "fuzz.test")
            return try TokenEndpoint.parseCredentials(from: json, host: "fuzz.test", issuer: nil, now: Date(timeIntervalSince1970: 0), previous: nil).credentials
        }
    }

    /// A token store file's profiles, opened with `key` when it is sealed.
    static func storeFile(_ bytes: [UInt8], key: SymmetricKey?) -> Result<[String: StoredProfile], TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreFormat.decode(bytes, path: "fuzz.json", key: key) }
    }

    /// Profiles written back as a store file (`key` seals it).
    static func encodeStoreFile(_ profiles: [String: StoredProfile], key: SymmetricKey?) -> Result<[UInt8], TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreFormat.encode(profiles, path: "fuzz.json", key: key) }
    }

    /// The store key as `LOGINKIT_STORE_KEY` would give it.
    static func storeKey(environment: [String: String]) -> Result<SymmetricKey?, TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreSealing.environment.resolveKey(environment: environment) }
    }
}
