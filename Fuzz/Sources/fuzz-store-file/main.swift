// libFuzzer entry: token store files, plain and sealed.
// A crash, or `abort()` on a broken invariant, is a finding: Fuzz/run.sh keeps the input.
import Glibc
import LoginKitFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    if !FuzzEntries.storeFile(UnsafeRawBufferPointer(start: start, count: count)) { abort() }
    return 0
}
