/// base64url without padding (RFC 4648 §5, as JOSE uses it, RFC 7515 §2).
///
/// Decoding is strict: only the URL-safe alphabet, no padding, no whitespace, no impossible length,
/// and the unused low bits of the last character must be zero, so every byte string has exactly one
/// accepted encoding.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes` without padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            output.append(alphabet[Int(first >> 2)])
            output.append(alphabet[Int((first & 0x03) << 4 | (second ?? 0) >> 4)])
            if let second {
                output.append(alphabet[Int((second & 0x0F) << 2 | (third ?? 0) >> 6)])
                if let third { output.append(alphabet[Int(third & 0x3F)]) }
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes strict base64url; `nil` for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(utf8: Array(text.utf8))
    }

    /// Decodes strict base64url from UTF-8 bytes; `nil` for anything else.
    public static func decode(utf8 input: some Collection<UInt8>) -> [UInt8]? {
        let remainder = input.count % 4
        guard remainder != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            let value = decodeTable[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }  // non-zero unused bits: not the canonical encoding
        return output
    }
}
