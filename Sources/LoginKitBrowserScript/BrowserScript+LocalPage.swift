#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension BrowserScript {
    /// Where a browser given `url` goes: `url` itself, unless it is a `file://` page — what
    /// LoginKit's `SystemBrowserLauncher` hands a browser instead of the authorization URL — whose
    /// `<meta http-equiv="refresh" content="0;url=…">` it follows, as a browser would.
    ///
    /// - Throws: ``Failure`` when the page cannot be read or leads nowhere.
    package static func followingLocalPage(_ url: String) throws -> String {
        let scheme = "file://"
        guard url.lowercased().hasPrefix(scheme) else { return url }
        guard let path = percentDecoded(url.dropFirst(scheme.count)), path.hasPrefix("/"),
            let data = FileManager.default.contents(atPath: path)
        else {
            throw Failure("could not read the local page \(url)")
        }
        let page = String(decoding: data, as: UTF8.self)
        let marker = "http-equiv=\"refresh\" content=\"0;url="
        guard let start = page.firstRange(of: marker), let end = page[start.upperBound...].firstIndex(of: "\"") else {
            throw Failure("the local page \(url) leads nowhere")
        }
        return htmlUnescaped(page[start.upperBound..<end])
    }

    /// `text` with `%XX` escapes decoded; `nil` for a malformed escape or bytes that are not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var utf8 = text.utf8.makeIterator()
        while let byte = utf8.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = utf8.next().flatMap(hexValue), let low = utf8.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `text` with the character references LoginKit's page uses decoded.
    private static func htmlUnescaped(_ text: Substring) -> String {
        String(text)
            .replacing("&lt;", with: "<").replacing("&gt;", with: ">").replacing("&quot;", with: "\"")
            .replacing("&#39;", with: "'").replacing("&amp;", with: "&")
    }
}
