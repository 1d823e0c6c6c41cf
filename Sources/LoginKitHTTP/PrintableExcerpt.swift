/// `s` made safe to put into an error message or a log line: printable ASCII is kept, a backslash
/// is doubled, every other character (control characters, ESC, DEL, non-ASCII) is written as a
/// `\u{…}` escape, and the result is cut to at most `limit` characters, then marked with `...`.
///
/// For every string a token, a key set or a server chose (a JWT `kid` or `iss`, an OAuth `error`
/// code, a URL from a discovery document): a hostile value can neither forge log lines (newlines)
/// nor drive the terminal that shows the message (escape sequences), nor flood it.
package func printableExcerpt(_ s: String, limit: Int = 64) -> String {
    var result = ""
    var count = 0
    for scalar in s.unicodeScalars {
        let piece: String
        switch scalar.value {
        case 0x5C: piece = "\\\\"
        case 0x20..<0x7F: piece = String(Character(scalar))
        default: piece = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        }
        guard count + piece.utf8.count <= limit else { return result + "..." }
        result += piece
        count += piece.utf8.count
    }
    return result
}

/// `text` with its control characters (C0, DEL, C1: ESC, newline, CSI…) and bidirectional
/// formatting characters written as `\u{…}` escapes; everything else, non-ASCII included, is kept.
/// Returns `text` itself when there is nothing to escape.
///
/// The last line of defence of an error type's message: whatever a caller interpolated, the
/// message stays one line and cannot move a terminal's cursor or change its colours.
package func escapingControlCharacters(_ text: String) -> String {
    func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00..<0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
        if isControl(scalar) {
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}
