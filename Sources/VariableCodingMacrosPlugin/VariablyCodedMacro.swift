// The `@VariablyCoded` macro: writes a struct's VariablyCodable code from its stored properties.
//
// For every stored property it writes the line a person would write in `init(from:)` and
// `encode(to:)`. When every property has one of the plain types a scanner reads (String, Bool,
// the integers, Double, Float, and optionals of them), it also writes `scan` and `emit`, the
// same reading and writing by property number (see FieldScanning.swift in VariableCoding).
import SwiftCompilerPlugin
import SwiftSyntax
import SwiftSyntaxMacros

@main
struct VariableCodingMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [VariablyCodedMacro.self]
}

struct MacroError: Error, CustomStringConvertible {
    let description: String
}

struct VariablyCodedMacro: ExtensionMacro {
    static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard let structDecl = declaration.as(StructDeclSyntax.self) else {
            throw MacroError(description: "@VariablyCoded applies to structs")
        }
        guard structDecl.genericParameterClause == nil else {
            throw MacroError(
                description:
                    "@VariablyCoded does not support generic structs; write init(from:) and encode(to:) by hand")
        }
        let properties = try storedProperties(of: structDecl)
        let access = accessLevel(of: structDecl)
        let members = structDecl.memberBlock.members.map(\.decl)
        let writesDecoding = !members.contains { decl in
            guard let initializer = decl.as(InitializerDeclSyntax.self) else { return false }
            return initializer.signature.parameterClause.parameters.first?.firstName.text == "from"
                && "\(initializer.signature.parameterClause.parameters)".contains("DecodingContainer")
        }
        let writesEncoding = !members.contains { decl in
            guard let function = decl.as(FunctionDeclSyntax.self), function.name.text == "encode" else { return false }
            return function.signature.parameterClause.parameters.first?.firstName.text == "to"
                && "\(function.signature.parameterClause.parameters)".contains("EncodingContainer")
        }
        // Generated scanning and emitting stand in for the ordinary code, so they exist only
        // where this macro also wrote that code, and only for plain types.
        let plain = !properties.isEmpty && properties.allSatisfy { $0.plain != nil }

        var body: [String] = []
        if writesDecoding {
            body.append(decodingInit(properties, access: access))
            if plain { body.append(contentsOf: scanning(properties, access: access)) }
        }
        if writesEncoding {
            body.append(encodingFunction(properties, access: access))
            if plain { body.append(contentsOf: emitting(properties, access: access)) }
        }
        let conformances = protocols.map(\.trimmedDescription)
        let clause = conformances.isEmpty ? "" : ": " + conformances.joined(separator: ", ")
        let source = "extension \(type.trimmedDescription)\(clause) {\n\(body.joined(separator: "\n\n"))\n}"
        let parsed: DeclSyntax = "\(raw: source)"
        guard let extensionDecl = parsed.as(ExtensionDeclSyntax.self) else {
            throw MacroError(description: "@VariablyCoded wrote code it cannot parse (a bug in the macro)")
        }
        return [extensionDecl]
    }

    /// One stored property: its name, its type as written, whether it is optional, the plain type
    /// a scanner reads (without the optional), and its initial value.
    struct Property {
        let name: String
        let type: String
        let isOptional: Bool
        let plain: String?
        let initialValue: String?
    }

    static let plainTypes: [String: String] = [
        "String": "string", "Bool": "bool", "Double": "double", "Float": "float",
        "Int": "int", "Int32": "int32", "Int64": "int64", "UInt64": "uint64",
    ]

    static func storedProperties(of decl: StructDeclSyntax) throws -> [Property] {
        var result: [Property] = []
        for member in decl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            let modifiers = variable.modifiers.map(\.name.text)
            if modifiers.contains("static") || modifiers.contains("class") || modifiers.contains("lazy") { continue }
            let isLet = variable.bindingSpecifier.text == "let"
            for binding in variable.bindings {
                guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self) else {
                    throw MacroError(description: "@VariablyCoded needs one name per stored property")
                }
                let name = pattern.identifier.text
                if let accessors = binding.accessorBlock {
                    // Observers (willSet/didSet) keep a property stored; anything else computes it.
                    if case .accessors(let list) = accessors.accessors,
                        list.allSatisfy({ ["willSet", "didSet"].contains($0.accessorSpecifier.text) })
                    {
                        // stored
                    } else {
                        continue
                    }
                }
                // A `let` with a value cannot be decoded (Codable leaves it out the same way).
                if isLet && binding.initializer != nil { continue }
                if !variable.attributes.isEmpty {
                    throw MacroError(
                        description:
                            "@VariablyCoded does not support property wrappers or attributes ('\(name)'); write init(from:) and encode(to:) by hand"
                    )
                }
                guard let annotation = binding.typeAnnotation?.type else {
                    throw MacroError(description: "@VariablyCoded needs a type annotation on '\(name)'")
                }
                let (isOptional, wrapped) = unwrapOptional(annotation)
                if annotation.is(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
                    throw MacroError(
                        description: "@VariablyCoded does not support implicitly unwrapped optionals ('\(name)')")
                }
                var bare = wrapped.trimmedDescription
                if bare.hasPrefix("Swift.") { bare.removeFirst("Swift.".count) }
                result.append(
                    Property(
                        name: name, type: annotation.trimmedDescription, isOptional: isOptional,
                        plain: plainTypes[bare], initialValue: binding.initializer?.value.trimmedDescription
                    ))
            }
        }
        return result
    }

    /// Whether `type` is `T?` or `Optional<T>`, and `T`.
    static func unwrapOptional(_ type: TypeSyntax) -> (Bool, TypeSyntax) {
        if let optional = type.as(OptionalTypeSyntax.self) { return (true, optional.wrappedType) }
        if let identifier = type.as(IdentifierTypeSyntax.self),
            ["Optional", "Swift.Optional"].contains(identifier.name.text),
            let argument = identifier.genericArgumentClause?.arguments.first,
            case .type(let wrapped) = argument.argument
        {
            return (true, wrapped)
        }
        if let member = type.as(MemberTypeSyntax.self), member.baseType.trimmedDescription == "Swift",
            member.name.text == "Optional",
            let argument = member.genericArgumentClause?.arguments.first,
            case .type(let wrapped) = argument.argument
        {
            return (true, wrapped)
        }
        return (false, type)
    }

    static func accessLevel(of decl: StructDeclSyntax) -> String {
        for modifier in decl.modifiers {
            switch modifier.name.text {
            case "public", "open": return "public "
            case "package": return "package "
            default: continue
            }
        }
        return ""
    }

    // MARK: The ordinary code

    static func decodingInit(_ properties: [Property], access: String) -> String {
        var lines = ["\(access)init(from container: VariableCoding.DecodingContainer<Self>) throws {"]
        for property in properties {
            let keyPath = "\\Self.\(property.name)"
            if property.isOptional {
                lines.append("    self.\(property.name) = try container.decodeValueIfPresent(for: \(keyPath))")
            } else if let initial = property.initialValue {
                lines.append(
                    "    self.\(property.name) = try container.decodeValue(for: \(keyPath), default: \(initial))")
            } else {
                lines.append("    self.\(property.name) = try container.decodeValue(for: \(keyPath))")
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    static func encodingFunction(_ properties: [Property], access: String) -> String {
        var lines = ["\(access)func encode(to container: inout VariableCoding.EncodingContainer<Self>) throws {"]
        for property in properties {
            let method = property.isOptional ? "encodeValueIfPresent" : "encodeValue"
            lines.append("    try container.\(method)(self.\(property.name), for: \\Self.\(property.name))")
        }
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    static func keyPathList(_ properties: [Property]) -> String {
        "[" + properties.map { "\\Self.\($0.name)" }.joined(separator: ", ") + "]"
    }

    // MARK: Generated reading and writing

    static func scanning(_ properties: [Property], access: String) -> [String] {
        var lines = [
            "\(access)static func scan<S: VariableCoding.FieldScanning>(_ scanner: inout S) throws(VariableCoding.FieldScanDeclined) -> Self {"
        ]
        for (index, property) in properties.enumerated() {
            // An optional property is `T??` here: `.some(nil)` is a null that was read.
            lines.append("    var v\(index): \(property.type)? = nil")
        }
        lines.append("    while let property = scanner.nextProperty() {")
        lines.append("        switch property {")
        for (index, property) in properties.enumerated() {
            let read = "scanner.\(property.plain ?? "")()"
            if property.isOptional {
                lines.append("        case \(index):")
                lines.append(
                    "            if scanner.skipNull() { v\(index) = .some(nil) } else { guard let value = \(read) else { throw VariableCoding.FieldScanDeclined() }; v\(index) = .some(value) }"
                )
            } else {
                lines.append(
                    "        case \(index): guard let value = \(read) else { throw VariableCoding.FieldScanDeclined() }; v\(index) = value"
                )
            }
        }
        lines.append("        default: throw VariableCoding.FieldScanDeclined()")
        lines.append("        }")
        lines.append("    }")
        // What the ordinary init does when a key is missing: nil, the default, or an error
        // (here: declining, so that the ordinary path gives it).
        let required = properties.indices.filter { !properties[$0].isOptional && properties[$0].initialValue == nil }
        lines.append(
            "    guard scanner.isComplete\(required.map { ", let v\($0)" }.joined()) else { throw VariableCoding.FieldScanDeclined() }"
        )
        let arguments = properties.indices.map { index -> String in
            let property = properties[index]
            if property.isOptional { return "v\(index) ?? nil" }
            if let initial = property.initialValue { return "v\(index) ?? (\(initial))" }
            return "v\(index)"
        }
        lines.append("    return Self(variablyCodedScanning: \(arguments.joined(separator: ", ")))")
        lines.append("}")
        let parameters = properties.enumerated().map {
            "\($0.offset == 0 ? "variablyCodedScanning" : "_") v\($0.offset): \($0.element.type)"
        }
        var initializer = ["private init(" + parameters.joined(separator: ", ") + ") {"]
        for (index, property) in properties.enumerated() { initializer.append("    self.\(property.name) = v\(index)") }
        initializer.append("}")
        return [
            "\(access)static var scannedProperties: [PartialKeyPath<Self>] { \(keyPathList(properties)) }",
            lines.joined(separator: "\n"),
            initializer.joined(separator: "\n"),
        ]
    }

    static func emitting(_ properties: [Property], access: String) -> [String] {
        var lines = ["\(access)func emit<E: VariableCoding.FieldEmitting & ~Copyable>(into emitter: inout E) -> Bool {"]
        let hasOptional = properties.contains { $0.isOptional }
        lines.append("    let order = emitter.propertyOrder")
        lines.append("    \(hasOptional ? "var" : "let") count = order.count")
        for (index, property) in properties.enumerated() where property.isOptional {
            lines.append("    if self.\(property.name) == nil && emitter.hasKey(\(index)) { count -= 1 }")
        }
        lines.append("    emitter.beginMap(count: count)")
        lines.append("    for property in order {")
        lines.append("        switch property {")
        for (index, property) in properties.enumerated() {
            if property.isOptional {
                lines.append(
                    "        case \(index): if let value = self.\(property.name) { emitter.emit(value, property: \(index)) }"
                )
            } else {
                lines.append("        case \(index): emitter.emit(self.\(property.name), property: \(index))")
            }
        }
        lines.append("        default: return false")
        lines.append("        }")
        lines.append("    }")
        lines.append("    return true")
        lines.append("}")
        return [
            "\(access)static var emittedProperties: [PartialKeyPath<Self>] { \(keyPathList(properties)) }",
            lines.joined(separator: "\n"),
        ]
    }
}
