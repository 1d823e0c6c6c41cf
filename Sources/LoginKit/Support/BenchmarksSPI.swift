public import LoginKitCurl

extension CurlHTTPClient {
    /// The client's driver thread as a task executor (SE-0417): a task that prefers it sends and
    /// resumes without a thread hop. For the benchmarks (`Benchmarks/`, `@_spi(Benchmarks) import
    /// LoginKit`), which measure LoginKit's HTTP path with and without that hop; not API.
    @_spi(Benchmarks) public var driverExecutor: any TaskExecutor { taskExecutor }
}
