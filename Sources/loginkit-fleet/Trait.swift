// This module's dependencies come with the "Postgres" package trait (Package.swift): without it they are
// not resolved, and this module cannot build. Enable it where LoginKit is declared
// (.package(url: …, traits: ["Postgres"])), or build this repository with --enable-all-traits (make does).
#if !Postgres
#error("loginkit-fleet needs LoginKit's \"Postgres\" trait: swift build --enable-all-traits (make does), or traits: [\"Postgres\"] on the dependency")
#endif
