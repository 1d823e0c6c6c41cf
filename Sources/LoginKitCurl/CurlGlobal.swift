internal import CCurl

/// `curl_global_init` runs exactly once per process: Swift initialises globals lazily and
/// thread-safely (`swift_once`), before the first client is made.
private let curlGlobalInitResult: Int = Int(curl_global_init(Int(CURL_GLOBAL_DEFAULT)).rawValue)

/// Initialises libcurl once; returns whether it succeeded.
func ensureCurlGlobalInit() -> Bool {
    curlGlobalInitResult == Int(CURLE_OK.rawValue)
}
