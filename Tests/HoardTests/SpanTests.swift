import Foundation
import Hoard
import HoardTestSupport
import HoardTesting
import InMemoryTracing
import Testing
import Tracing

/// The spans a store makes, caught by swift-distributed-tracing's in-memory tracer given in the
/// store's options (the process-wide tracer can be bootstrapped only once).
@Suite("Spans")
struct SpanTests {
    static func options(_ tracer: InMemoryTracer, clock: ManualClock? = nil) -> Store.Options {
        var options = Store.Options.testing(clock: clock)
        options.spans = .tracer(tracer)
        return options
    }

    static func named(_ name: String, in tracer: InMemoryTracer) -> [FinishedInMemorySpan] {
        tracer.finishedSpans.filter { $0.operationName == name }
    }

    @Test(
        "a read-through miss makes its span, the fetch a child of it, and the commit of what was fetched its own; a hit makes none"
    )
    func missFetchAndCommit() async throws {
        let tracer = InMemoryTracer()
        try await withTemporaryStore(options: Self.options(tracer)) { store in
            let notes = try store.collection(Note.self, named: "notes")
            let upstream = FakeUpstream(open: true)
            #expect(try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })?.text == "v1")

            let miss = try #require(Self.named("read_through notes", in: tracer).first)
            let fetch = try #require(Self.named("fetch notes", in: tracer).first)
            #expect(miss.attributes.get("db.system.name") == "hoard")
            #expect(miss.attributes.get("db.collection.name") == "notes")
            #expect(miss.attributes.get("db.operation.name") == "read_through")
            #expect(miss.attributes.get("hoard.outcome") == "fetched")
            #expect(fetch.parentSpanID == miss.spanID && fetch.traceID == miss.traceID)
            #expect(fetch.attributes.get("db.operation.batch.size") == 1)
            #expect(fetch.attributes.get("hoard.outcome") == "stored")
            let commits = Self.named("commit", in: tracer)
            #expect(commits.count == 1)
            #expect(commits.first?.attributes.get("db.operation.batch.size") == 1)
            #expect(commits.first?.attributes.get("hoard.outcome") == "committed")
            #expect(commits.first?.attributes.get("db.namespace") == .string(store.path))

            tracer.clearFinishedSpans()
            #expect(try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })?.text == "v1")
            #expect(tracer.finishedSpans.isEmpty, "a hit makes no span")
        }
    }

    @Test("a failed fetch marks both spans as errors with the error's type")
    func failedFetch() async throws {
        let tracer = InMemoryTracer()
        try await withTemporaryStore(options: Self.options(tracer)) { store in
            let notes = try store.collection(Note.self, named: "notes")
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            await #expect(throws: FakeUpstream.Failure.self) {
                try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })
            }
            let miss = try #require(Self.named("read_through notes", in: tracer).first)
            let fetch = try #require(Self.named("fetch notes", in: tracer).first)
            for span in [miss, fetch] {
                #expect(span.status?.code == .error)
                #expect(span.errors.count == 1)
                #expect(span.attributes.get("error.type") == .string(String(reflecting: FakeUpstream.Failure.self)))
            }
            #expect(fetch.attributes.get("hoard.outcome") == "failed")
            #expect(Self.named("commit", in: tracer).isEmpty, "nothing was written")
        }
    }

    @Test("a background refresh has its span, a child of the read that served the stale record")
    func refresh() async throws {
        let tracer = InMemoryTracer()
        let clock = ManualClock()
        try await withTemporaryStore(options: Self.options(tracer, clock: clock)) { store in
            let notes = try store.collection(
                Note.self, named: "notes", timeToLive: .seconds(60),
                freshness: Freshness(staleWhileRevalidate: .seconds(30)))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            clock.advance(by: .seconds(70))
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: "new")
            let served = try await tracer.withSpan("request") { span in
                (try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text, span.context)
            }
            #expect(served.0 == "old")
            try await eventually("the refresh ended") { notes.statistics().fetchesInFlight == 0 }
            let request = try #require(Self.named("request", in: tracer).first)
            let refresh = try #require(Self.named("refresh notes", in: tracer).first)
            #expect(refresh.parentSpanID == request.spanID)
            #expect(refresh.attributes.get("hoard.outcome") == "stored")
            #expect(Self.named("read_through notes", in: tracer).isEmpty, "serving the stale record is no miss")
        }
    }

    @Test("an async synchronize has its span with what it changed")
    func synchronize() async throws {
        let tracer = InMemoryTracer()
        try await withTemporaryStore(options: Self.options(tracer)) { store in
            let notes = try store.collection(Note.self, named: "notes")
            try await notes.put([
                Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 2, pinned: false),
            ])
            try await notes.synchronize(with: [
                Note(id: 2, text: "b2", stars: 2, pinned: false), Note(id: 3, text: "c", stars: 3, pinned: false),
            ])
            let span = try #require(Self.named("synchronize notes", in: tracer).first)
            #expect(span.attributes.get("db.operation.batch.size") == 2)
            #expect(span.attributes.get("hoard.synchronize.added") == 1)
            #expect(span.attributes.get("hoard.synchronize.updated") == 1)
            #expect(span.attributes.get("hoard.synchronize.removed") == 1)
        }
    }

    @Test("a fetch whose every answer is \"not modified\" says so on its span")
    func notModified() async throws {
        let tracer = InMemoryTracer()
        let clock = ManualClock()
        try await withTemporaryStore(options: Self.options(tracer, clock: clock)) { store in
            let notes = try store.collection(Note.self, named: "notes", timeToLive: .seconds(60))
            let stored = Note(id: 1, text: "etag 1", stars: 1, pinned: false)
            try await notes.put(stored)
            clock.advance(by: .seconds(70))
            #expect(try await notes.get(1, orRevalidate: { _, _ in .notModified() }) == stored)
            #expect(
                try await notes.get(
                    2, orRevalidate: { id, _ in .model(Note(id: id, text: "new", stars: 0, pinned: false)) })?.text
                    == "new")
            #expect(
                Self.named("fetch notes", in: tracer).map { $0.attributes.get("hoard.outcome") } == [
                    "not modified", "stored",
                ])
        }
    }

    @Test("an invalidation by tag or of the whole collection has its span with what it removed")
    func invalidations() async throws {
        let tracer = InMemoryTracer()
        try await withTemporaryStore(options: Self.options(tracer)) { store in
            let notes = try store.collection(Note.self, named: "notes")
            for id: Int64 in 1...5 {
                try await notes.put(
                    Note(id: id, text: "\(id)", stars: Int(id), pinned: false), tags: id <= 3 ? ["low"] : [])
            }
            #expect(try await notes.invalidate(tag: "low") == 3)
            #expect(try await notes.invalidateAll() == 2)
            let byTag = try #require(Self.named("invalidate_tag notes", in: tracer).first)
            #expect(byTag.attributes.get("hoard.tag") == "low")
            #expect(byTag.attributes.get("hoard.removed") == 3)
            let all = try #require(Self.named("invalidate_all notes", in: tracer).first)
            #expect(all.attributes.get("hoard.removed") == 2)
            #expect(all.attributes.get("db.operation.name") == "invalidate_all")
        }
    }

    @Test("with spans off, the store makes none")
    func off() async throws {
        let tracer = InMemoryTracer()
        var options = Self.options(tracer)
        options.spans = .off
        try await withTemporaryStore(options: options) { store in
            let notes = try store.collection(Note.self, named: "notes")
            let upstream = FakeUpstream(open: true)
            _ = try await tracer.withSpan("request") { _ in
                try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })
            }
            #expect(tracer.finishedSpans.map(\.operationName) == ["request"])
        }
    }
}
