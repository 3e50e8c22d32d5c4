import Foundation
import Testing
import TestSupport

/// What `@VariablyCoded` refuses, and how it says so, as a user meets it: a file that applies it
/// where it cannot code is type-checked by `swiftc` with this build's macro plugin, and the
/// compiler must print the macro's message at the attribute. (What it writes is tested by compiling
/// and running models that use it: GeneratedCodingTests in HoardTests.)
///
/// The compiler runs in a process rather than the macro in this one: a test target that links the
/// macro's target makes SwiftPM build the whole test product a second time, for the host.
@Suite("@VariablyCoded refuses what it cannot code, with a message")
struct DiagnosticsTests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        /// The declaration after `@VariablyCoded`.
        var declaration: String
        var message: String
        var testDescription: String { name }
    }

    static let refusals = [
        Refusal(name: "an enum", declaration: "enum Kind {\n}", message: "@VariablyCoded applies to structs"),
        Refusal(name: "a class", declaration: "class User {\n}", message: "@VariablyCoded applies to structs"),
        Refusal(
            name: "a generic struct", declaration: "struct Box<T> {\n    var value: T\n}",
            message: "@VariablyCoded does not support generic structs; write init(from:) and encode(to:) by hand"),
        Refusal(
            name: "a stored property without a type annotation", declaration: "struct User {\n    var name = \"\"\n}",
            message: "@VariablyCoded needs a type annotation on 'name'"),
        Refusal(
            name: "a property wrapper", declaration: "struct User {\n    @Clamped var age: Int\n}",
            message:
                "@VariablyCoded does not support property wrappers or attributes ('age'); write init(from:) and encode(to:) by hand"
        ),
        Refusal(
            name: "an implicitly unwrapped optional", declaration: "struct User {\n    var name: String!\n}",
            message: "@VariablyCoded does not support implicitly unwrapped optionals ('name')"),
        Refusal(
            name: "a tuple pattern", declaration: "struct Point {\n    var (x, y): (Int, Int)\n}",
            message: "@VariablyCoded needs one name per stored property"),
    ]

    /// The source: the imports on line 1, the attribute on line 2, then the declaration, then a
    /// property wrapper the declarations may use (so that its absence is not what fails).
    static func source(_ declaration: String) -> String {
        """
        import VariableCoding; import VariableCodingMacros
        @VariablyCoded
        \(declaration)
        @propertyWrapper struct Clamped { var wrappedValue: Int }

        """
    }

    /// `swiftc -typecheck` of `source`, with the modules and the macro plugin of this build.
    static func typecheck(_ source: String) throws -> (status: Int32, diagnostics: String) {
        let products = try productsDirectory()
        let plugin = products + "/VariableCodingMacrosPlugin-tool"
        guard access(plugin, X_OK) == 0 else { throw TestSupportError("\(plugin) is not built") }
        return try withTemporaryDirectory { directory in
            let file = directory + "/Model.swift"
            try writeFile(file, Array(source.utf8))
            let result = try runProcess(
                try swiftc(),
                [
                    "-typecheck", "-swift-version", "6", "-I", products + "/Modules",
                    "-load-plugin-executable", plugin + "#VariableCodingMacrosPlugin", file,
                ])
            return (result.status, result.stderr.replacingOccurrences(of: directory + "/", with: ""))
        }
    }

    /// The compiler on `PATH` (the toolchain that built this package).
    static func swiftc() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"
        for directory in path.split(separator: ":") where access("\(directory)/swiftc", X_OK) == 0 {
            return "\(directory)/swiftc"
        }
        throw TestSupportError("no swiftc on PATH (\(path))")
    }

    @Test("the message at the attribute", arguments: refusals)
    func refused(_ refusal: Refusal) throws {
        let (status, diagnostics) = try Self.typecheck(Self.source(refusal.declaration))
        #expect(status != 0, "\(diagnostics)")
        let errors = diagnostics.split(separator: "\n").filter {
            $0.hasPrefix("Model.swift:") && $0.contains(": error: ")
        }
        #expect(errors == ["Model.swift:2:1: error: \(refusal.message) (from macro 'VariablyCoded')"], "\(diagnostics)")
    }

    /// The control: the same file with a struct the macro can code type-checks without a word, so
    /// the refusals above come from the macro and not from how the compiler is run.
    @Test("a struct it can code type-checks cleanly")
    func accepted() throws {
        let model = """
            struct User {
                var id: Int64
                var name: String?
                static let keySets = KeySets<User>(local: [1: [\\.id: "id", \\.name: "name"]])
            }
            """
        let (status, diagnostics) = try Self.typecheck(Self.source(model))
        #expect(status == 0, "\(diagnostics)")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
    }
}
