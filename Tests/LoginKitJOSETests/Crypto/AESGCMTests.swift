import LoginKitJOSE
import Testing

@Suite struct AESGCMTests {
    @Test func sealsAndOpens() throws {
        let key = try SymmetricKey.random()
        for plaintext in [[UInt8](), Array("x".utf8), Array(repeating: 0xAB, count: 10_000)] {
            let sealed = try AESGCM.seal(plaintext, key: key, associatedData: Array("profile".utf8))
            #expect(sealed.count == AESGCM.nonceSize + plaintext.count + AESGCM.tagSize)
            #expect(try AESGCM.open(sealed, key: key, associatedData: Array("profile".utf8)) == plaintext)
        }
    }

    @Test func everySealUsesAFreshNonce() throws {
        let key = try SymmetricKey.random()
        let first = try AESGCM.seal(Array("same".utf8), key: key)
        let second = try AESGCM.seal(Array("same".utf8), key: key)
        #expect(first.prefix(AESGCM.nonceSize) != second.prefix(AESGCM.nonceSize))
        #expect(first != second)
    }

    @Test func theWrongKeyFails() throws {
        let sealed = try AESGCM.seal(Array("secret".utf8), key: try SymmetricKey.random())
        let error = #expect(throws: TokenVerificationError.self) { try AESGCM.open(sealed, key: try SymmetricKey.random()) }
        #expect(error?.code == .authenticationFailed)
    }

    @Test func anyFlippedByteFails() throws {
        let key = try SymmetricKey.random()
        let sealed = try AESGCM.seal(Array("refresh-token-value".utf8), key: key, associatedData: [1, 2, 3])
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x80
            let error = #expect(throws: TokenVerificationError.self) { try AESGCM.open(tampered, key: key, associatedData: [1, 2, 3]) }
            #expect(error?.code == .authenticationFailed, "byte \(index)")
        }
        let wrongData = #expect(throws: TokenVerificationError.self) { try AESGCM.open(sealed, key: key, associatedData: [1, 2, 4]) }
        #expect(wrongData?.code == .authenticationFailed)
    }

    @Test func truncatedBoxesAreMalformedOrUnauthentic() throws {
        let key = try SymmetricKey.random()
        let sealed = try AESGCM.seal(Array("secret".utf8), key: key)
        #expect((#expect(throws: TokenVerificationError.self) { try AESGCM.open(Array(sealed.prefix(27)), key: key) })?.code == .malformed)
        #expect((#expect(throws: TokenVerificationError.self) { try AESGCM.open(Array(sealed.dropLast()), key: key) })?.code == .authenticationFailed)
    }

    @Test func keysMustBe32BytesAndNeverPrint() throws {
        #expect((#expect(throws: TokenVerificationError.self) { try SymmetricKey(bytes: [UInt8](repeating: 1, count: 16)) })?.code == .invalidKey)
        let key = try SymmetricKey(bytes: [UInt8](repeating: 0x41, count: 32))
        #expect(!String(describing: key).contains("AAAA"))
        #expect(!String(reflecting: key).contains("65"))
    }

    @Test func randomBytesDiffer() throws {
        #expect(try SecureRandom.bytes(32) != SecureRandom.bytes(32))
        #expect(try SecureRandom.bytes(0).isEmpty)
    }
}
