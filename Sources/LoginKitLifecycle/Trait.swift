// This module's dependencies come with the "Lifecycle" package trait (Package.swift): without it they are
// not resolved, and this module cannot build. Enable it where LoginKit is declared
// (.package(url: …, traits: ["Lifecycle"])), or build this repository with --enable-all-traits (make does).
#if !Lifecycle
#error("LoginKitLifecycle needs LoginKit's \"Lifecycle\" trait: swift build --enable-all-traits (make does), or traits: [\"Lifecycle\"] on the dependency")
#endif
