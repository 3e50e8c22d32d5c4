// One import: an app that writes `import Hoard` declares its models (`VariablyCodable`,
// `KeySets`, and with the trait `Macros` `@VariablyCoded`) and stores them, as `import GRDB` is
// all a GRDB user writes. VariableCoding stays a module of its own for those who want only the
// coding layer.
@_exported public import VariableCoding

#if Macros
@_exported public import VariableCodingMacros
#endif
