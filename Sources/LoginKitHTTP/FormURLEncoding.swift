/// `application/x-www-form-urlencoded` (the WHATWG URL standard's serializer and parser), as OAuth 2.0
/// token, revocation and device-authorization requests use it.
package enum FormURLEncoding {
    /// Encodes `pairs` in order: unreserved bytes stay, space becomes `+`, everything else `%XX`.
    package static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    /// Decodes a form body into pairs, in order. Malformed percent escapes are kept literally,
    /// as the standard says.
    package static func decode(_ body: some StringProtocol) -> [(String, String)] {
        body.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    /// Decodes into a dictionary; the first value of a repeated name wins, and `duplicates` lists the
    /// names that were repeated (OAuth 2.0 §3.2 forbids repeating a parameter).
    package static func decodeFields(_ body: some StringProtocol) -> (fields: [String: String], duplicates: Set<String>) {
        var fields: [String: String] = [:]
        var duplicates: Set<String> = []
        for (name, value) in decode(body) {
            if fields[name] == nil { fields[name] = value } else { duplicates.insert(name) }
        }
        return (fields, duplicates)
    }

    static func escape(_ text: String) -> String {
        var output = [UInt8]()
        output.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                output.append(byte)
            case UInt8(ascii: " "):
                output.append(UInt8(ascii: "+"))
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func unescape(_ text: some StringProtocol) -> String {
        let bytes = Array(text.utf8)
        var output = [UInt8]()
        output.reserveCapacity(bytes.count)
        var index = 0
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                output.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 2
            } else {
                output.append(byte)
            }
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }
}
