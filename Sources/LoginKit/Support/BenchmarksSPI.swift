#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import LoginKitCurl
import LoginKitJOSE

extension CurlHTTPClient {
    /// The client's driver thread as a task executor (SE-0417): a task that prefers it sends and
    /// resumes without a thread hop. For the benchmarks (`Benchmarks/`, `@_spi(Benchmarks) import
    /// LoginKit`), which measure LoginKit's HTTP path with and without that hop; not API.
    @_spi(Benchmarks) public var driverExecutor: any TaskExecutor { taskExecutor }
}

/// One DPoP proof as an authorized request makes it: ES256, with a key generated once, for a fixed
/// method, URL and access token. For the benchmarks (`Benchmarks/`, `@_spi(Benchmarks) import
/// LoginKit`), which compare it with OpenSSL's own ES256 signing; not API.
@_spi(Benchmarks) public struct DPoPProofBench: Sendable {
    private let key: DPoPKey

    /// Generates the ES256 key.
    ///
    /// - Throws: `TokenVerificationError` when OpenSSL fails.
    @_spi(Benchmarks) public init() throws {
        key = try DPoPKey.generate(.es256)
    }

    /// One proof for `GET https://api.example.com/v1/orders?page=2` with a 43-character access
    /// token and no nonce, at the current time: the compact JWS.
    ///
    /// - Throws: `TokenVerificationError` when OpenSSL fails.
    @_spi(Benchmarks) public func proof() throws -> String {
        try key.proof(
            method: "GET", url: "https://api.example.com/v1/orders?page=2", nonce: nil,
            accessToken: "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU", now: Date())
    }
}
