// libFuzzer entry: JWS/JWT parsing, signature verification (RS256, ES256, EdDSA keys) and claim checks.
// A crash, or `abort()` on a broken invariant, is a finding: Fuzz/run.sh keeps the input.
import Glibc
import LoginKitFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    if !FuzzEntries.jws(UnsafeRawBufferPointer(start: start, count: count)) { abort() }
    return 0
}
