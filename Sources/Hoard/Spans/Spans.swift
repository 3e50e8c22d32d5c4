public import Tracing

// Spans for the work a request may wait on beyond a read of the map: a read-through miss and the
// fetch it starts, a background refresh, a synchronize, an invalidation by tag or of a whole
// collection, a group commit. A hit makes none. The attributes follow OpenTelemetry's database
// conventions where one fits (db.system.name, db.collection.name, db.operation.name,
// db.operation.batch.size, db.namespace, error.type); what is Hoard's own is under `hoard.`.

/// Where a store's spans go.
public enum SpanDestination: Sendable {
    /// To the tracer the application bootstrapped (`InstrumentationSystem.bootstrap`) before
    /// the store opened, as with metrics; none, at no cost, unless it did.
    case system
    /// To this tracer (a test's in-memory tracer, say), whatever the application bootstrapped.
    case tracer(any Tracer)
    /// Nowhere: the instrumentation is skipped altogether.
    case off
}

extension Span {
    /// Records `error` on the span (its type, its description, the error status) for a failure
    /// that is handled rather than thrown out of the span.
    func recordFailure(_ error: any Error) {
        attributes[SpanKey.errorType] = String(reflecting: type(of: error))
        attributes[SpanKey.outcome] = "failed"
        recordError(error)
        setStatus(SpanStatus(code: .error))
    }
}

/// The attribute names Hoard sets.
enum SpanKey {
    static let system = "db.system.name"
    static let collection = "db.collection.name"
    static let operation = "db.operation.name"
    static let batchSize = "db.operation.batch.size"
    static let namespace = "db.namespace"
    static let errorType = "error.type"
    /// What became of the operation: `fetched`, `joined`, `absent`, `stale`, `timed out`, `stored`,
    /// `not modified`, `failed`, `committed`; for a shared fill `shared`, `waited`, `fetched`.
    static let outcome = "hoard.outcome"
    /// The tag an invalidation removed the records of.
    static let tag = "hoard.tag"
    /// How many records an invalidation removed.
    static let removed = "hoard.removed"
    /// How many records a shared fill tier supplied.
    static let sharedRecords = "hoard.shared.records"
}

extension SpanDestination {
    /// The tracer the spans go to, resolved when a store opens; `nil` when they are off or go to
    /// swift-distributed-tracing's no-op tracer, so that a store without tracing skips the
    /// instrumentation altogether (even a no-op span's attributes are built in a dictionary).
    var resolved: (any Tracer)? {
        let tracer: any Tracer
        switch self {
        case .system: tracer = InstrumentationSystem.tracer
        case .tracer(let chosen): tracer = chosen
        case .off: return nil
        }
        return tracer is NoOpTracer ? nil : tracer
    }
}

extension Store {
    /// Runs `body` in a span named "`operation` `collection`" (the conventions' form), a child of
    /// the task's current span; `body` gets `nil` when spans are off. A thrown error is recorded
    /// on the span with its type.
    func withSpan<R>(
        _ operation: String, collection: String, _ body: (_ span: (any Span)?) async throws -> R
    ) async rethrows -> R {
        guard let tracer else { return try await body(nil) }
        return try await Self.withSpan(tracer, operation, collection, body)
    }

    private static func withSpan<T: Tracer, R>(
        _ tracer: T, _ operation: String, _ collection: String, _ body: (_ span: (any Span)?) async throws -> R
    ) async rethrows -> R {
        try await tracer.withSpan("\(operation) \(collection)", ofKind: .internal) { span in
            span.updateAttributes { attributes in
                attributes[SpanKey.system] = "hoard"
                attributes[SpanKey.collection] = collection
                attributes[SpanKey.operation] = operation
            }
            do {
                return try await body(span)
            } catch {
                span.attributes[SpanKey.errorType] = String(reflecting: type(of: error))
                throw error
            }
        }
    }

    /// Starts a span for a group commit on the writer's thread (no task there: it is ended by hand).
    func startCommitSpan() -> (any Span)? {
        guard let tracer else { return nil }
        return Self.startCommitSpan(tracer, path: path)
    }

    private static func startCommitSpan<T: Tracer>(_ tracer: T, path: String) -> any Span {
        let span = tracer.startSpan("commit", context: .topLevel, ofKind: .internal)
        span.updateAttributes { attributes in
            attributes[SpanKey.system] = "hoard"
            attributes[SpanKey.operation] = "commit"
            attributes[SpanKey.namespace] = path
        }
        return span
    }
}
