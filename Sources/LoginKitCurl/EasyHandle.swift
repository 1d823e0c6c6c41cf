internal import CCurl

/// Owns one `CURL` easy handle and its error buffer; recycled between transfers on the driver
/// thread (`curl_easy_reset` keeps the handle's caches). Never leaves that thread.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    func reset() {
        curl_easy_reset(raw)
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }
}
