// This module's dependencies come with the "CLI" package trait (Package.swift): without it they are
// not resolved, and this module cannot build. Enable it where LoginKit is declared
// (.package(url: …, traits: ["CLI"])), or build this repository with --enable-all-traits (make does).
#if !CLI
#error("the loginkit command-line tool needs LoginKit's \"CLI\" trait: swift build --enable-all-traits (make does), or traits: [\"CLI\"] on the dependency")
#endif
