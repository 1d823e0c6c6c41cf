#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import HTTPTypes
public import LoginKitJOSE

/// The parsers that untrusted bytes reach before any public API returns, opened to the fuzzers
/// (`LoginKitFuzzing`, `Fuzz/`) and their corpus replay in `make test`. Not API: an SPI that may
/// change at any time.
@_spi(Fuzzing) public enum UntrustedInputParsers {
    /// A token endpoint's answer: credentials for a 2xx (no ID-token verification: the fuzzers test
    /// the parsing), else the typed error RFC 6749 §5.2 maps it to.
    public static func tokenResponse(status: Int, headers: HTTPFields, body: [UInt8], grant: Int) -> Result<Credentials, any Error> {
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
    public static func storeFile(_ bytes: [UInt8], key: SymmetricKey?) -> Result<[String: StoredProfile], TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreFormat.decode(bytes, path: "fuzz.json", key: key) }
    }

    /// Profiles written back as a store file (`key` seals it).
    public static func encodeStoreFile(_ profiles: [String: StoredProfile], key: SymmetricKey?) -> Result<[UInt8], TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreFormat.encode(profiles, path: "fuzz.json", key: key) }
    }

    /// The store key as `LOGINKIT_STORE_KEY` would give it.
    public static func storeKey(environment: [String: String]) -> Result<SymmetricKey?, TokenStoreError> {
        Result { () throws(TokenStoreError) in try StoreSealing.environment.resolveKey(environment: environment) }
    }
}
