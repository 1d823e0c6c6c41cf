// libFuzzer entry: what the CLI reads from its environment: store key, URLs, names.
// A crash, or `abort()` on a broken invariant, is a finding: Fuzz/run.sh keeps the input.
import Glibc
import LoginKitFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    if !FuzzEntries.cliConfiguration(UnsafeRawBufferPointer(start: start, count: count)) { abort() }
    return 0
}
