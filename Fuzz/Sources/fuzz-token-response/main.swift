// libFuzzer entry: OAuth 2.0 token responses (RFC 6749 §5.1) and error bodies (§5.2).
// A crash, or `abort()` on a broken invariant, is a finding: Fuzz/run.sh keeps the input.
import FuzzDriver
import Glibc
@_spi(Fuzzing) import LoginKit

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    if !FuzzEntries.tokenResponse(UnsafeRawBufferPointer(start: start, count: count)) { abort() }
    return 0
}

/// SwiftPM makes `fuzz_token_response_main` the executable's `main`: hand over to libFuzzer's driver.
@_cdecl("fuzz_token_response_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    loginkit_fuzz_run(argc, argv, fuzz)
}
