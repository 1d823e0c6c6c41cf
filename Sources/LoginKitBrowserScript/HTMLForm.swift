package import HTTPTypes
import LoginKitHTTP

/// The first form of an HTML page, read as far as a scripted browser needs (`TestBrowser` in
/// LoginKitMocks, `loginkit-dev-server browse`): its method and action, its
/// `<input>` fields and its submit buttons. Not an HTML parser: a tag scanner that handles quoted,
/// unquoted and bare attributes, comments and the common character references.
package struct HTMLForm {
    struct Control {
        let tag: String
        let attributes: [String: String]
        var name: String? { attributes["name"] }
        var value: String { attributes["value"] ?? "" }
        var type: String { attributes["type"]?.lowercased() ?? (tag == "button" ? "submit" : "text") }
        var isSubmit: Bool { type == "submit" && (tag == "button" || tag == "input") }
    }

    let method: String
    let action: String?
    let controls: [Control]

    /// The first `<form>…</form>` in `html`.
    package static func first(in html: String) -> HTMLForm? {
        var form: (method: String, action: String?)?
        var controls: [Control] = []
        for (tag, attributes) in tags(in: html) {
            if form == nil {
                if tag == "form" { form = (attributes["method"]?.lowercased() ?? "get", attributes["action"]) }
                continue
            }
            if tag == "/form" { break }
            if tag == "input" || tag == "button" { controls.append(Control(tag: tag, attributes: attributes)) }
        }
        guard let form else { return nil }
        return HTMLForm(method: form.method, action: form.action, controls: controls)
    }

    /// Why a form could not be submitted as asked.
    package struct Failure: Error, Sendable {
        package let message: String
        init(_ message: String) { self.message = message }
    }

    /// The request that submits this form on the page at `pageURL`: signing in with `credentials`,
    /// or pressing the deny button when they are `nil`. Signing in fills the password field with the
    /// password and the username field (the text field named like one, else the first) with the
    /// username; a form without a password field must have exactly one text field, which gets the
    /// username.
    package func submission(signingInAs credentials: (username: String, password: String)?, on pageURL: String) throws(Failure) -> (
        method: HTTPRequest.Method, url: String, form: String?
    ) {
        let denies: (Control) -> Bool = { control in
            let text = ((control.name ?? "") + " " + control.value).lowercased()
            return ["deny", "cancel", "reject", "decline"].contains { text.contains($0) }
        }
        let buttons = controls.filter(\.isSubmit)
        let button: Control?
        var pairs: [(String, String)] = []
        switch credentials {
        case nil:
            guard let deny = buttons.first(where: denies) else {
                throw Failure("the sign-in form has no deny button")
            }
            button = deny
            for control in controls where !control.isSubmit { if let pair = Self.pair(control) { pairs.append(pair) } }
        case let (username, password)?:
            button = buttons.first { !denies($0) }
            let textFields = controls.filter { ["text", "email"].contains($0.type) && $0.name != nil }
            let usernameField =
                textFields.first { name in
                    ["user", "login", "email"].contains { (name.name ?? "").lowercased().contains($0) }
                }
                ?? textFields.first
            // Without a password field, a form that asks for one thing only (an identity picker
            // such as oidc-provider-mock's `sub` field) gets the username; anything else is refused.
            guard controls.contains(where: { $0.type == "password" && $0.name != nil }) || textFields.count == 1 else {
                throw Failure("the sign-in form has no password field")
            }
            for control in controls where !control.isSubmit {
                guard let name = control.name else { continue }
                if control.type == "password" {
                    pairs.append((name, password))
                } else if let usernameField, usernameField.name == name, ["text", "email"].contains(control.type) {
                    pairs.append((name, username))
                } else if let pair = Self.pair(control) {
                    pairs.append(pair)
                }
            }
        }
        if let button, let name = button.name { pairs.append((name, button.value)) }
        guard let target = Self.resolve(self.action ?? pageURL, against: pageURL) else {
            throw Failure("the form's action is not a usable URL")
        }
        let body = FormURLEncoding.encode(pairs)
        if method == "post" { return (.post, target, body) }
        let base = String(target.split(separator: "?", maxSplits: 1).first ?? "")
        return (.get, base + "?" + body, nil)
    }

    /// What an ordinary control submits (checkboxes and radios only when checked; no files).
    private static func pair(_ control: Control) -> (String, String)? {
        guard let name = control.name, !["submit", "button", "image", "reset", "file"].contains(control.type) else {
            return nil
        }
        if ["checkbox", "radio"].contains(control.type) && control.attributes["checked"] == nil { return nil }
        return (name, control.value)
    }

    /// `reference` resolved against `base` (absolute, scheme-relative, absolute-path, query-only or
    /// relative-path references).
    package static func resolve(_ reference: String, against base: String) -> String? {
        if URLParts(reference) != nil { return reference }
        guard let parts = URLParts(base) else { return nil }
        let origin = parts.scheme + "://" + parts.authority
        let basePath = String(
            parts.pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "/")
        if reference.hasPrefix("//") { return parts.scheme + ":" + reference }
        if reference.hasPrefix("/") { return origin + reference }
        if reference.hasPrefix("?") { return origin + basePath + reference }
        let directory = basePath.lastIndex(of: "/").map { String(basePath[...$0]) } ?? "/"
        return origin + directory + reference
    }

    // MARK: Scanning

    /// Every start and end tag in `html`, in order: its lowercased name (`/form` for an end tag) and
    /// its attributes (lowercased names, decoded values; a bare attribute has an empty value).
    static func tags(in html: String) -> [(String, [String: String])] {
        let bytes = Array(html.utf8)
        var tags: [(String, [String: String])] = []
        var index = 0
        func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0x0C
        }
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "<") else {
                index += 1
                continue
            }
            if bytes[index...].starts(with: Array("<!--".utf8)) {
                var end = index + 4
                while end + 2 < bytes.count,
                    !(bytes[end] == UInt8(ascii: "-") && bytes[end + 1] == UInt8(ascii: "-")
                        && bytes[end + 2] == UInt8(ascii: ">"))
                { end += 1 }
                index = end + 3
                continue
            }
            var cursor = index + 1
            let nameStart = cursor
            while cursor < bytes.count, !isSpace(bytes[cursor]), bytes[cursor] != UInt8(ascii: ">") {
                if bytes[cursor] == UInt8(ascii: "/") && cursor > nameStart { break }
                cursor += 1
            }
            let name = text(nameStart..<cursor).lowercased()
            var attributes: [String: String] = [:]
            while cursor < bytes.count, bytes[cursor] != UInt8(ascii: ">") {
                if isSpace(bytes[cursor]) || bytes[cursor] == UInt8(ascii: "/") {
                    cursor += 1
                    continue
                }
                let attributeStart = cursor
                while cursor < bytes.count, !isSpace(bytes[cursor]),
                    ![UInt8(ascii: "="), UInt8(ascii: ">"), UInt8(ascii: "/")].contains(bytes[cursor])
                {
                    cursor += 1
                }
                let attribute = text(attributeStart..<cursor).lowercased()
                while cursor < bytes.count, isSpace(bytes[cursor]) { cursor += 1 }
                var value = ""
                if cursor < bytes.count, bytes[cursor] == UInt8(ascii: "=") {
                    cursor += 1
                    while cursor < bytes.count, isSpace(bytes[cursor]) { cursor += 1 }
                    if cursor < bytes.count, bytes[cursor] == UInt8(ascii: "\"") || bytes[cursor] == UInt8(ascii: "'") {
                        let quote = bytes[cursor]
                        let valueStart = cursor + 1
                        cursor = valueStart
                        while cursor < bytes.count, bytes[cursor] != quote { cursor += 1 }
                        value = decodeReferences(text(valueStart..<min(cursor, bytes.count)))
                        cursor += 1
                    } else {
                        let valueStart = cursor
                        while cursor < bytes.count, !isSpace(bytes[cursor]), bytes[cursor] != UInt8(ascii: ">") {
                            cursor += 1
                        }
                        value = decodeReferences(text(valueStart..<cursor))
                    }
                }
                if !attribute.isEmpty, attributes[attribute] == nil { attributes[attribute] = value }
            }
            if !name.isEmpty { tags.append((name, attributes)) }
            index = cursor + 1
        }
        return tags
    }

    /// `text` with `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;` and numeric references decoded.
    static func decodeReferences(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var result = ""
        var rest = Substring(text)
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            let after = rest[rest.index(after: ampersand)...]
            guard let semicolon = after.prefix(10).firstIndex(of: ";") else {
                result += "&"
                rest = after
                continue
            }
            let entity = after[..<semicolon]
            let named = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"]
            if let replacement = named[String(entity)] {
                result += replacement
            } else if entity.hasPrefix("#"), let scalar = numericReference(entity.dropFirst()) {
                result.unicodeScalars.append(scalar)
            } else {
                result += "&" + String(entity) + ";"
            }
            rest = after[after.index(after: semicolon)...]
        }
        return result + rest
    }

    private static func numericReference(_ digits: Substring) -> Unicode.Scalar? {
        let value =
            digits.lowercased().hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
        return value.flatMap { Unicode.Scalar($0) }
    }
}
