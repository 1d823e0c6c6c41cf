#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
@testable import LoginKitCurl
import Testing

/// The response head as the driver thread keeps it (bytes) and as the caller gets it (`HTTPFields`):
/// no database of servers needed, every byte value tried.
@Suite
struct ReceivedResponseTests {
    /// The driver's token check accepts exactly the names `HTTPField.Name` accepts (RFC 9110 `tchar`).
    @Test func theTokenCheckAgreesWithHTTPTypesOnEveryByte() {
        for byte in UInt8.min...UInt8.max {
            let bytes = [byte]
            let accepted = bytes.withUnsafeBytes { Transfer.isToken($0) }
            #expect(accepted == (HTTPField.Name(String(decoding: bytes, as: UTF8.self)) != nil), "byte \(byte)")
        }
        for name in ["Content-Type", "x-custom_1.2~", "a b", "", "ü", "na:me", "x\u{0}"] {
            let accepted = Array(name.utf8).withUnsafeBytes { Transfer.isToken($0) }
            #expect(accepted == (HTTPField.Name(name) != nil), "\(name.debugDescription)")
        }
    }

    /// Fields go through the byte form unchanged: order, the name's case, repeated names, empty
    /// values, and bytes that are not UTF-8 (repaired as `String(decoding:)` repairs them).
    @Test func fieldsSurviveTheByteFormInOrder() {
        let fields: [(name: [UInt8], value: [UInt8])] = [
            (Array("Content-Type".utf8), Array("application/json".utf8)),
            (Array("set-cookie".utf8), Array("a=1".utf8)),
            (Array("Set-Cookie".utf8), Array("b=2".utf8)),
            (Array("X-Empty".utf8), []),
            (Array("X-Bytes".utf8), [0x61, 0xFF, 0xC3, 0x62]),
            (Array("X-Long".utf8), Array(repeating: UInt8(ascii: "v"), count: 70_000)),
        ]
        var head: [UInt8] = []
        for field in fields {
            field.name.withUnsafeBytes { name in
                field.value.withUnsafeBytes { value in ReceivedResponse.appendField(name: name, value: value, to: &head) }
            }
        }
        let response = ReceivedResponse(status: 201, fieldCount: fields.count, head: head, body: Data("{}".utf8)).response()
        #expect(response.status.code == 201)
        #expect(response.headerFields.count == fields.count)
        for (received, sent) in zip(response.headerFields, fields) {
            #expect(Array(received.name.rawName.utf8) == sent.name)
            #expect(received.value == HTTPField(name: received.name, value: String(decoding: sent.value, as: UTF8.self)).value)
        }
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2"])
    }

    /// A name spelled like one of the common names is taken from the table without validation: it
    /// must be the very name `HTTPField.Name.init` makes of those bytes (raw and canonical), and a
    /// name that differs from it in case alone, or is longer or shorter, must not match it.
    @Test func commonNamesAreTheNamesHTTPTypesMakes() throws {
        #expect(ReceivedResponse.commonNames.count >= 10)
        for common in ReceivedResponse.commonNames {
            let made = try #require(HTTPField.Name(String(decoding: common.bytes, as: UTF8.self)))
            #expect(made.rawName == common.name.rawName)
            #expect(made.canonicalName == common.name.canonicalName)
            let variants = [common.name.rawName.lowercased(), common.name.rawName.uppercased(), common.name.rawName + "x", String(common.name.rawName.dropLast())]
            for variant in variants where variant != common.name.rawName {
                var head: [UInt8] = []
                Array(variant.utf8).withUnsafeBytes { name in
                    Array("v".utf8).withUnsafeBytes { value in ReceivedResponse.appendField(name: name, value: value, to: &head) }
                }
                let field = try #require(ReceivedResponse(status: 200, fieldCount: 1, head: head, body: Data()).response().headerFields.first)
                #expect(field.name.rawName == variant)
                #expect(field.name.canonicalName == variant.lowercased())
            }
        }
    }

    /// Kept header lines are reused only for the same bytes: a `memcmp` for native strings.
    @Test func sameBytesComparesBytesNotCharacters() {
        #expect(Transfer.sameBytes("", ""))
        #expect(Transfer.sameBytes("application/json", "application/json"))
        #expect(!Transfer.sameBytes("ab", "ac"))
        #expect(!Transfer.sameBytes("ab", "a"))
        #expect(!Transfer.sameBytes("", "a"))
        #expect(!Transfer.sameBytes("X-Attempt", "x-attempt"))
        #expect("\u{E9}" == "e\u{301}")  // equal as Swift strings…
        #expect(!Transfer.sameBytes("\u{E9}", "e\u{301}"))  // …not as bytes
        let substring = "prefix-value"[...].dropFirst(7)  // a string built from a slice
        #expect(Transfer.sameBytes(String(substring), "value"))
    }

    @Test func noFieldsIsAnEmptyHead() {
        let response = ReceivedResponse(status: 204, fieldCount: 0, head: [], body: Data()).response()
        #expect(response.status.code == 204)
        #expect(response.headerFields.isEmpty)
    }
}
