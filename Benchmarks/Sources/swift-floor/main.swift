// The smallest Swift process of the kind LoginKit runs in: the concurrency runtime with 64 child
// tasks, FoundationEssentials, one line printed. `make bench` builds it with the Swift runtime linked
// statically (and with the release link flags, as LoginKit's static process) and with the runtime as
// shared libraries, and reports each one's peak RSS less a C program's: what any Swift process adds
// to the C libraries' own memory (docs/benchmarks.md, 2026-11-26 afternoon).
import FoundationEssentials

@main
struct SwiftFloor {
    static func main() async {
        let sum = await withTaskGroup(of: Int.self) { group in
            for index in 0..<64 { group.addTask { index } }
            var sum = 0
            for await index in group { sum += index }
            return sum
        }
        print("{\"sum\": \(sum), \"now\": \(Date().timeIntervalSince1970 > 0)}")
    }
}
