import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing
@testable import VariableCodingMacrosPlugin

/// What `@VariablyCoded` refuses, and how it says so. (What it writes is tested by compiling and
/// running models that use it: GeneratedCodingTests in HoardTests.)
@Suite("@VariablyCoded refuses what it cannot code, with a message")
struct DiagnosticsTests {
    func expectRefusal(_ source: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let expanded = String(source.dropFirst("@VariablyCoded\n".count))
        assertMacroExpansion(
            source, expandedSource: expanded,
            diagnostics: [DiagnosticSpec(message: message, line: 1, column: 1)],
            macroSpecs: ["VariablyCoded": MacroSpec(type: VariablyCodedMacro.self)],
            failureHandler: { Issue.record(Comment(rawValue: $0.message), sourceLocation: sourceLocation) }
        )
    }

    @Test("not a struct")
    func notAStruct() {
        expectRefusal("@VariablyCoded\nenum Kind {\n}", "@VariablyCoded applies to structs")
        expectRefusal("@VariablyCoded\nclass User {\n}", "@VariablyCoded applies to structs")
    }

    @Test("a generic struct")
    func generic() {
        expectRefusal(
            "@VariablyCoded\nstruct Box<T> {\n    var value: T\n}",
            "@VariablyCoded does not support generic structs; write init(from:) and encode(to:) by hand")
    }

    @Test("a stored property without a type annotation")
    func noAnnotation() {
        expectRefusal(
            "@VariablyCoded\nstruct User {\n    var name = \"\"\n}", "@VariablyCoded needs a type annotation on 'name'")
    }

    @Test("a property wrapper")
    func wrapper() {
        expectRefusal(
            "@VariablyCoded\nstruct User {\n    @Clamped var age: Int\n}",
            "@VariablyCoded does not support property wrappers or attributes ('age'); write init(from:) and encode(to:) by hand"
        )
    }

    @Test("an implicitly unwrapped optional")
    func implicitlyUnwrapped() {
        expectRefusal(
            "@VariablyCoded\nstruct User {\n    var name: String!\n}",
            "@VariablyCoded does not support implicitly unwrapped optionals ('name')")
    }

    @Test("a tuple pattern")
    func tuplePattern() {
        expectRefusal(
            "@VariablyCoded\nstruct Point {\n    var (x, y): (Int, Int)\n}",
            "@VariablyCoded needs one name per stored property")
    }
}
