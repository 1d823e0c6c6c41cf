// libFuzzer entry: OAuth 2.0 token responses (RFC 6749 §5.1) and error bodies (§5.2).
// A crash, or `abort()` on a broken invariant, is a finding: Fuzz/run.sh keeps the input.
import Glibc
import LoginKitFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    if !FuzzEntries.tokenResponse(UnsafeRawBufferPointer(start: start, count: count)) { abort() }
    return 0
}
