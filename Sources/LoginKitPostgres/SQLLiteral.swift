// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
/// `value` as a PostgreSQL string literal that is safe to paste into `psql` whatever it holds: for
/// the SQL an error message suggests (queries bind their values instead).
///
/// Single quotes are doubled. A value with a backslash or a control character becomes an escape
/// string (`E'…'`) with those escaped (`\\`, `\x0A`, `\u0085`), so that the literal means the same
/// whatever `standard_conforming_strings` is, and no control character reaches the terminal that
/// shows the message.
func sqlLiteral(_ value: String) -> String {
    var body = ""
    var escaped = false
    for scalar in value.unicodeScalars {
        switch scalar.value {
        case 0x27:  // '
            body += "''"
        case 0x5C:  // \
            body += "\\\\"
            escaped = true
        case 0x00..<0x20, 0x7F:
            body += "\\x" + hexadecimal(scalar.value, digits: 2)
            escaped = true
        case 0x80..<0xA0:
            body += "\\u" + hexadecimal(scalar.value, digits: 4)
            escaped = true
        default:
            body.unicodeScalars.append(scalar)
        }
    }
    return escaped ? "E'\(body)'" : "'\(body)'"
}

private func hexadecimal(_ value: UInt32, digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}
#endif
