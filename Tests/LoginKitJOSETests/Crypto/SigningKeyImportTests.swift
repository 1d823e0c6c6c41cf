import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Private keys as applications load them for `private_key_jwt`: PEM files made by `openssl`, and
/// private JWKs; each signs a JWS its public half verifies.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"), .timeLimit(.minutes(2)))
struct SigningKeyImportTests {
    /// The PEM `openssl` writes for `arguments` (run in a temporary directory, key in `key.pem`).
    func pem(_ script: String) async throws -> String {
        try await withTemporaryDirectory { directory in
            let status = await run("/bin/sh", ["-c", "cd '\(directory)' && \(script) 2>/dev/null"])
            try #require(status == 0, "openssl failed: \(script)")
            return try String(contentsOfFile: directory + "/key.pem", encoding: .utf8)
        }
    }

    func roundTrip(_ key: SigningKey) throws -> Bool {
        let token = try CompactJWS.sign(payload: Array("{\"sub\":\"c\"}".utf8), with: key)
        return try CompactJWS(parsing: token).hasValidSignature(key: key.publicJWK(), algorithm: key.algorithm)
    }

    @Test(arguments: [
        ("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem", JWSAlgorithm.rs256),
        ("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out k.pem && openssl pkey -in k.pem -traditional -out key.pem", .rs256),
        ("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem", .es256),
        ("openssl ecparam -name secp384r1 -genkey -noout -out key.pem", .es384),
        ("openssl genpkey -algorithm ED25519 -out key.pem", .edDSA),
    ])
    func pemKeysLoadWithTheirDefaultAlgorithm(_ script: String, _ expected: JWSAlgorithm) async throws {
        let key = try SigningKey(pem: try await pem(script), keyID: "k")
        #expect(key.algorithm == expected)
        #expect(key.keyID == "k")
        #expect(try roundTrip(key))
        if expected == .rs256 { #expect(try roundTrip(try key.signing(with: .ps256))) }
    }

    @Test func unusableKeysAreRefusedWithAReason() async throws {
        func refusal(_ pem: String, algorithm: JWSAlgorithm? = nil) -> String? {
            do {
                _ = try SigningKey(pem: pem, algorithm: algorithm)
                return nil
            } catch {
                #expect(error.code == .invalidKey)
                return error.message
            }
        }
        let encrypted = try await pem("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -aes256 -pass pass:secret -out key.pem")
        #expect(refusal(encrypted)?.contains("encrypted") == true)  // refused at once: no passphrase prompt
        let small = try await pem("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out key.pem")
        #expect(refusal(small)?.contains("2048") == true)
        let otherCurve = try await pem("openssl ecparam -name secp256k1 -genkey -noout -out key.pem")
        #expect(refusal(otherCurve)?.contains("curve") == true)
        let publicOnly = try await pem("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out k.pem && openssl pkey -in k.pem -pubout -out key.pem")
        #expect(refusal(publicOnly) != nil)
        let ec = try await pem("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem")
        #expect(refusal(ec, algorithm: .rs256) != nil)
        #expect(refusal(ec, algorithm: .es384) != nil)
        #expect(refusal("not a key") != nil)
        // No message quotes the key.
        let body = ec.split(separator: "\n").dropFirst().first.map(String.init) ?? "?"
        #expect(refusal(ec, algorithm: .rs256)?.contains(body) == false)
        #expect(!String(describing: try SigningKey(pem: ec)).contains(body))
    }

    @Test func privateJWKsMustBeConsistent() async throws {
        let script = "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem"
        let one = try privateJWK(dump: try await runOpenSSLText(try await pem(script)), kind: "EC")
        let other = try privateJWK(dump: try await runOpenSSLText(try await pem(script)), kind: "EC")
        let key = try SigningKey(jwk: one, keyID: "k")
        #expect(key.algorithm == .es256)
        #expect(try key.publicJWK().json["x"] == one["x"])
        #expect(try key.publicJWK().json["d"] == nil)
        func replacing(_ name: String, with value: JSONValue?, in jwk: JSONValue) -> JSONValue {
            guard case .object(var members) = jwk else { return jwk }
            members[name] = value
            return .object(members)
        }
        // Another key's private part: the halves do not belong together.
        #expect((#expect(throws: TokenVerificationError.self) { try SigningKey(jwk: replacing("d", with: other["d"], in: one)) })?.code == .invalidKey)
        #expect((#expect(throws: TokenVerificationError.self) { try SigningKey(jwk: replacing("d", with: nil, in: one)) })?.code == .invalidKey)
        #expect((#expect(throws: TokenVerificationError.self) { try SigningKey(jwk: replacing("use", with: .string("enc"), in: one)) })?.code == .invalidKey)
        #expect((#expect(throws: TokenVerificationError.self) { try SigningKey(jwk: one, algorithm: .es384) })?.code == .invalidKey)
        #expect((#expect(throws: TokenVerificationError.self) { try SigningKey(jwkText: Array("{".utf8)) })?.code == .invalidKey)
    }

    @Test func privateJWKsOfEachTypeLoad() async throws {
        // OpenSSL's own numbers for a fresh key, as a JWK.
        for (script, kind) in [
            ("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem", "RSA"),
            ("openssl genpkey -algorithm ED25519 -out key.pem", "OKP"),
            ("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out key.pem", "EC"),
        ] {
            let text = try await pem(script)
            let fromPEM = try SigningKey(pem: text)
            let jwk = try privateJWK(dump: try await runOpenSSLText(text), kind: kind)
            let fromJWK = try SigningKey(jwk: jwk)
            #expect(fromJWK.algorithm == fromPEM.algorithm)
            #expect(try fromJWK.publicJWK().json == fromPEM.publicJWK().json)
            #expect(try roundTrip(fromJWK))
        }
    }

    /// The private JWK of a PEM key, from `openssl pkey -text` (hex dumps of each part).
    func privateJWK(dump: String, kind: String) throws -> JSONValue {
        var parts: [String: [UInt8]] = [:]
        var current: String?
        for line in dump.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !line.hasPrefix(" ") {
                current = trimmed.split(separator: ":").first.map(String.init)
                if let exponent = trimmed.range(of: #"publicExponent: (\d+)"#, options: .regularExpression) {
                    let number = UInt64(trimmed[exponent].split(separator: " ")[1]) ?? 0
                    parts["publicExponent"] = withUnsafeBytes(of: number.bigEndian) { Array($0) }.drop { $0 == 0 }.map { $0 }
                }
                continue
            }
            guard let current else { continue }
            parts[current, default: []] += trimmed.split(separator: ":").compactMap { UInt8($0, radix: 16) }
        }
        func b64(_ name: String, size: Int? = nil) -> JSONValue {
            var bytes = Array((parts[name] ?? []).drop { $0 == 0 })
            if let size { bytes = Array(repeating: 0, count: max(0, size - bytes.count)) + bytes }
            return .string(Base64URL.encode(bytes))
        }
        if kind == "EC" {
            let point = Array(parts["pub"] ?? [])
            let size = (point.count - 1) / 2
            return .object([
                "kty": .string("EC"), "crv": .string(size == 48 ? "P-384" : "P-256"),
                "x": .string(Base64URL.encode(point.dropFirst().prefix(size))), "y": .string(Base64URL.encode(point.suffix(size))),
                "d": b64("priv", size: size),
            ])
        }
        if kind == "OKP" {
            return .object(["kty": .string("OKP"), "crv": .string("Ed25519"), "x": b64("pub", size: 32), "d": b64("priv", size: 32)])
        }
        return .object([
            "kty": .string("RSA"), "n": b64("modulus"), "e": b64("publicExponent"), "d": b64("privateExponent"),
            "p": b64("prime1"), "q": b64("prime2"), "dp": b64("exponent1"), "dq": b64("exponent2"), "qi": b64("coefficient"),
        ])
    }

    func runOpenSSLText(_ pem: String) async throws -> String {
        try await withTemporaryDirectory { directory in
            try pem.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
            let (status, output) = try await runCapturing("/usr/bin/openssl", ["pkey", "-in", directory + "/key.pem", "-noout", "-text"])
            try #require(status == 0)
            return output
        }
    }
}
