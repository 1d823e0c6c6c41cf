import LoginKitHTTP
import Testing

@Suite struct NetworkErrorTests {
    @Test func codesCompareAndDescribeThemselves() {
        let error = NetworkError(.timedOut, "request to example.com timed out", transportCode: 28)
        #expect(error.code == .timedOut)
        #expect(error.code != .connectFailed)
        #expect(error.description == "NetworkError(timed out): request to example.com timed out [transport code 28]")
        #expect(error.file.hasSuffix("NetworkErrorTests.swift"))
    }
}
