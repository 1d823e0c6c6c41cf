// This module's dependencies come with the "DevServer" package trait (Package.swift): without it they are
// not resolved, and this module cannot build. Enable it where LoginKit is declared
// (.package(url: …, traits: ["DevServer"])), or build this repository with --enable-all-traits (make does).
#if !DevServer
#error("LoginKitDevServer needs LoginKit's \"DevServer\" trait: swift build --enable-all-traits (make does), or traits: [\"DevServer\"] on the dependency")
#endif
