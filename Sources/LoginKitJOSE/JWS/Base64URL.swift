/// base64url without padding (RFC 4648 §5, as JOSE uses it, RFC 7515 §2).
///
/// Decoding is strict: only the URL-safe alphabet, no padding, no whitespace, no impossible length,
/// and the unused low bits of the last character must be zero, so every byte string has exactly one
/// accepted encoding.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes` without padding.
    package static func encode(_ bytes: some Collection<UInt8>) -> String {
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
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var text = String(text)
        return text.withUTF8 { decode(bytes: $0) }
    }

    /// Decodes strict base64url from UTF-8 bytes; `nil` for anything else.
    package static func decode(utf8 input: some Collection<UInt8>) -> [UInt8]? {
        if let decoded = input.withContiguousStorageIfAvailable({ decode(bytes: $0) }) { return decoded }
        return Array(input).withUnsafeBufferPointer { decode(bytes: $0) }
    }

    /// The decoder: four characters to three bytes at a time, into an output allocated once.
    static func decode(bytes input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = input.count
        let remainder = count % 4
        guard remainder != 1 else { return nil }
        let outputCount = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        return decodeTable.withUnsafeBufferPointer { table -> [UInt8]? in
            var valid = true
            let output = [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                initialized = 0
                var inIndex = 0
                var outIndex = 0
                // Every valid value is below 64, the invalid marker 0xFF is not: one test per block.
                while inIndex + 4 <= count {
                    let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])]
                    let c = table[Int(input[inIndex + 2])], d = table[Int(input[inIndex + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else {
                        valid = false
                        return
                    }
                    out[outIndex] = a << 2 | b >> 4
                    out[outIndex + 1] = (b & 0x0F) << 4 | c >> 2
                    out[outIndex + 2] = (c & 0x03) << 6 | d
                    inIndex += 4
                    outIndex += 3
                }
                // The unused low bits of the last character must be zero (one canonical encoding).
                if remainder == 2 {
                    let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])]
                    guard (a | b) & 0xC0 == 0, b & 0x0F == 0 else {
                        valid = false
                        return
                    }
                    out[outIndex] = a << 2 | b >> 4
                    outIndex += 1
                } else if remainder == 3 {
                    let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])], c = table[Int(input[inIndex + 2])]
                    guard (a | b | c) & 0xC0 == 0, c & 0x03 == 0 else {
                        valid = false
                        return
                    }
                    out[outIndex] = a << 2 | b >> 4
                    out[outIndex + 1] = (b & 0x0F) << 4 | c >> 2
                    outIndex += 2
                }
                initialized = outIndex
            }
            return valid ? output : nil
        }
    }
}
