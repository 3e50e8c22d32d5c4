#if Hummingbird
// A Hummingbird application runs its services in a ServiceGroup: with `import HoardHummingbird`
// the store's maintenance is one of them (`StoreMaintenance(store: store).service`) without a
// second import.
@_exported public import HoardServiceLifecycle
#endif
