#if Vapor
import Foundation
import Hoard
import HoardTesting
@testable import HoardVapor
import MetricsTestKit
import NIOCore
import TestSupport
import Testing
import Vapor
import VaporTesting

/// An application for a test, with its Hoard store at `path` on a manual clock, shut down after `body`.
func withApp<R>(
    storeAt path: String, clock: ManualClock = ManualClock(), _ body: (Application) async throws -> R
) async throws -> R {
    let app = try await Application.make(.testing)
    do {
        try app.hoard.open(at: path, options: .testing(clock: clock))
        let result = try await body(app)
        try await app.asyncShutdown()
        return result
    } catch {
        try await app.asyncShutdown()
        throw error
    }
}

/// An application made and shut down as Vapor's synchronous API does, in `defer { app.shutdown() }`
/// style: what suites written before `Application.make` do (Vapor marks it deprecated, and
/// `noasync`: here it is reached through a protocol of its own, from synchronous code).
protocol SynchronousApplication {
    init(_ environment: Environment, _ eventLoopGroupProvider: Application.EventLoopGroupProvider)
    func shutdown()
}

extension Application: SynchronousApplication {}

/// The synchronous calls, through the protocol.
enum Synchronously {
    static func make<A: SynchronousApplication>(_ type: A.Type = Application.self) -> A { A(.testing, .singleton) }
    static func shutDown(_ app: some SynchronousApplication) { app.shutdown() }
}

/// Vapor's own cache cases (missing key, set and get, expiry, delete; the future API and the
/// async one), run against the Hoard provider, then Hoard's.
@Suite("HoardVapor cache")
struct HoardCacheTests {
    struct Profile: Codable, Equatable, Sendable {
        var name: String
        var visits: Int
    }

    @Test("the future API: a missing key, set and get, expiry, delete")
    func futureAPI() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            try await withApp(storeAt: directory + "/store", clock: clock) { app in
                app.caches.use(.hoard())
                #expect(try await app.cache.get("foo", as: String.self).get() == nil)
                try await app.cache.set("foo", to: "bar").get()
                #expect(try await app.cache.get("foo", as: String.self).get() == "bar")

                try await app.cache.set("foo2", to: "bar2", expiresIn: .seconds(1)).get()
                #expect(try await app.cache.get("foo2", as: String.self).get() == "bar2")
                clock.advance(by: .seconds(2))
                #expect(try await app.cache.get("foo2", as: String.self).get() == nil)

                try await app.cache.set("foo3", to: "bar3").get()
                #expect(try await app.cache.get("foo3", as: String.self).get() == "bar3")
                try await app.cache.delete("foo3").get()
                #expect(try await app.cache.get("foo3", as: String.self).get() == nil)
            }
        }
    }

    @Test("the async API: a missing key, set and get, expiry, delete, set to nil")
    func asyncAPI() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            try await withApp(storeAt: directory + "/store", clock: clock) { app in
                app.caches.use(.hoard())
                #expect(try await app.cache.get("foo", as: String.self) == nil)
                try await app.cache.set("foo", to: Profile(name: "Ada", visits: 3))
                #expect(try await app.cache.get("foo", as: Profile.self) == Profile(name: "Ada", visits: 3))

                try await app.cache.set("foo2", to: "bar2", expiresIn: .seconds(1))
                clock.advance(by: .milliseconds(999))
                #expect(try await app.cache.get("foo2", as: String.self) == "bar2")
                clock.advance(by: .milliseconds(1))
                #expect(try await app.cache.get("foo2", as: String.self) == nil, "expired at its expiry time exactly")

                try await app.cache.delete("foo")
                #expect(try await app.cache.get("foo", as: Profile.self) == nil)
                try await app.cache.set("foo4", to: 4)
                try await app.cache.set("foo4", to: Int?.none)
                #expect(try await app.cache.get("foo4", as: Int.self) == nil)
            }
        }
    }

    @Test("app.cache and req.cache are the provider's: a route reads what the app stored, and the reverse")
    func routedThroughProvider() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard(collection: "routed"))
                #expect(app.cache is HoardCache)
                try await app.cache.set("greeting", to: "hello")
                app.get("greeting") { req async throws -> String in
                    let greeting = try await req.cache.get("greeting", as: String.self) ?? "none"
                    try await req.cache.set("seen", to: true)
                    return greeting
                }
                try await app.testing().test(.GET, "greeting") { response in
                    #expect(response.status == .ok)
                    #expect(response.body.string == "hello")
                }
                #expect(try await app.cache.get("seen", as: Bool.self) == true)
                let values = try app.hoard.store.collection(CachedValue.self, named: "routed")
                #expect(try values.count() == 2)
            }
        }
    }

    @Test("a value that no longer decodes (its type changed) is a miss, removed, logged and counted")
    func changedTypeIsAMiss() async throws {
        try await withTemporaryDirectory { directory in
            let app = try await Application.make(.testing)
            let metrics = TestMetrics()
            var options = Store.Options.testing()
            options.metricsFactory = metrics
            try app.hoard.open(at: directory + "/store", options: options)
            app.caches.use(.hoard())
            try await app.cache.set("n", to: "not a number")
            try await app.cache.set("m", to: 7)
            #expect(try await app.cache.get("n", as: Int.self) == nil)
            #expect(try await app.cache.get("m", as: Int.self) == 7)
            let counter = try metrics.expectCounter(
                "hoard_vapor_cache_mismatches_total", [("collection", "vapor-cache")])
            #expect(counter.totalValue == 1)
            let values = try app.hoard.store.collection(CachedValue.self, named: "vapor-cache")
            var yields = 0
            while try values.get("n") != nil, yields < 1_000_000 {
                await Task.yield()
                yields += 1
            }
            #expect(try values.get("n") == nil, "the value that no longer decodes is removed")
            #expect(try values.get("m") != nil)
            try await app.asyncShutdown()
        }
    }

    @Test("with mismatch: .error, a value read as another type is an error naming the key, collection and type")
    func wrongType() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard(mismatch: .error))
                try await app.cache.set("n", to: "not a number")
                do {
                    _ = try await app.cache.get("n", as: Int.self)
                    Issue.record("a string read as an Int did not throw")
                } catch let error as HoardVaporError {
                    guard case .valueMismatch(let collection, let key, let type, _) = error else {
                        Issue.record("unexpected \(error)")
                        return
                    }
                    #expect(collection == "vapor-cache" && key == "n" && type == "Int")
                }
                #expect(try await app.cache.get("n", as: String.self) == "not a number", "the value is intact")
            }
        }
    }

    @Test("a key longer than LMDB's 511 bytes is Hoard's invalidID error, and nothing is stored")
    func overlongKey() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard())
                let key = String(repeating: "k", count: 600)
                do {
                    try await app.cache.set(key, to: "v")
                    Issue.record("a 600-byte key was stored")
                } catch let error as HoardError {
                    guard case .invalidID = error else {
                        Issue.record("unexpected \(error)")
                        return
                    }
                }
                #expect(try app.hoard.store.collection(CachedValue.self, named: "vapor-cache").count() == 0)
            }
        }
    }

    @Test("50 concurrent sets of one key leave one record holding one of the values")
    func concurrentSets() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard())
                let cache = try #require(app.cache as? HoardCache)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for value in 0..<50 {
                        group.addTask { try await cache.set("shared", to: value) }
                    }
                    try await group.waitForAll()
                }
                let value = try #require(try await cache.get("shared", as: Int.self))
                #expect((0..<50).contains(value))
                #expect(try app.hoard.store.collection(CachedValue.self, named: "vapor-cache").count() == 1)
            }
        }
    }

    @Test("a bounded cache evicts: 200 sets into a capacity of 50 records leave at most 50, the last one among them")
    func boundedCacheEvicts() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard(collection: "bounded", capacity: .records(50)))
                for index in 0..<200 {
                    try await app.cache.set("key\(index)", to: index)
                }
                let count = try app.hoard.store.collection(CachedValue.self, named: "bounded").count()
                #expect(count <= 50 && count > 0)
                #expect(try await app.cache.get("key199", as: Int.self) == 199)
            }
        }
    }

    @Test("a time to live applies to values set without expiresIn; expiresIn overrides it")
    func timeToLive() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            try await withApp(storeAt: directory + "/store", clock: clock) { app in
                app.caches.use(.hoard(timeToLive: .seconds(10)))
                try await app.cache.set("short", to: 1)
                try await app.cache.set("long", to: 2, expiresIn: .minutes(1))
                clock.advance(by: .seconds(10))
                #expect(try await app.cache.get("short", as: Int.self) == nil)
                #expect(try await app.cache.get("long", as: Int.self) == 2)
            }
        }
    }

    @Test("the future of req.cache completes on the request's event loop, for reads and writes")
    func completesOnRequestEventLoop() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.caches.use(.hoard())
                let loop = app.eventLoopGroup.any()
                let request = Request(application: app, on: loop)
                let cache = request.cache
                let wrote = try await cache.set("k", to: "v").map { loop.inEventLoop }.get()
                let read = try await cache.get("k", as: String.self).map { ($0, loop.inEventLoop) }.get()
                #expect(wrote)
                #expect(read.0 == "v" && read.1)
            }
        }
    }

    @Test("values survive a restarted app, and another process reads and writes them (the hoard tool)")
    func survivesRestartAndSharesWithProcesses() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            try await withApp(storeAt: path) { app in
                app.caches.use(.hoard())
                try await app.cache.set("kept", to: Profile(name: "Grace", visits: 7))
            }
            let read = try runProcess(try builtExecutable("hoard"), ["get", path, "vapor-cache", "kept", "--json"])
            #expect(read.status == 0, "\(read.stderr)")
            #expect(read.stdout.contains(#"Grace"#))
            let put = try runProcess(
                try builtExecutable("hoard"),
                ["put", path, "vapor-cache", "written", "--value", #"{"KEY": "written", "JSON": "\"from outside\""}"#])
            #expect(put.status == 0, "\(put.stderr)")

            try await withApp(storeAt: path) { (app: Application) async throws in
                app.caches.use(.hoard())
                #expect(try await app.cache.get("kept", as: Profile.self) == Profile(name: "Grace", visits: 7))
                #expect(try await app.cache.get("written", as: String.self) == "from outside")
            }
        }
    }

    @Test("at shutdown the store closes although the app and a cache are still held; the cache then throws storeClosed")
    func closedAtShutdown() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let app = try await Application.make(.testing)
            try app.hoard.open(at: path, options: .testing())
            app.caches.use(.hoard())
            app.sessions.use(.hoard())
            let cache = app.cache
            try await cache.set("k", to: "v")
            try await app.asyncShutdown()
            // LMDB lets a process open an environment once: this open succeeds only if the app's is closed.
            let reopened = try Store(path: path, options: .testing())
            #expect(try reopened.collection(CachedValue.self, named: "vapor-cache").get("k")?.json == #""v""#)
            do {
                _ = try await cache.get("k", as: String.self)
                Issue.record("a cache of a shut-down application answered")
            } catch let error as HoardVaporError {
                guard case .storeClosed(let closed) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(closed == path)
            }
            _ = app
        }
    }

    @Test("open, synchronous shutdown, open again at the same path: 100 of 100, the values kept")
    func synchronousShutdownCloses() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            for round in 0..<100 {
                let app: Application = Synchronously.make()
                try app.hoard.open(at: path, options: .testing())
                app.caches.use(.hoard())
                if round > 0 { #expect(try await app.cache.get("round", as: Int.self) == round - 1) }
                try await app.cache.set("round", to: round)
                Synchronously.shutDown(app)
            }
            #expect(
                try Store(path: path, options: .testing()).collection(CachedValue.self, named: "vapor-cache").count()
                    == 1)
        }
    }

    @Test("a failed open fails the first cache use with its error, and opens no store at the default path")
    func failedOpenIsAnErrorAtFirstUse() async throws {
        try await withTemporaryDirectory { directory in
            let app = try await Application.make(.testing)
            app.directory = DirectoryConfiguration(workingDirectory: directory + "/")
            let file = directory + "/a-file"
            #expect(FileManager.default.createFile(atPath: file, contents: Data([1])))
            #expect(throws: HoardError.self) { try app.hoard.open(at: file, options: .testing()) }
            app.caches.use(.hoard())
            app.sessions.use(.hoard())
            for use in 0..<2 {
                await #expect("use \(use)") {
                    try await app.cache.get("k", as: String.self)
                } throws: { error in
                    (error as? HoardError)?.storageKind == .notADirectory && "\(error)".contains(file)
                }
            }
            let request = Request(application: app, on: app.eventLoopGroup.any())
            await #expect {
                try await app.sessions.driver.readSession(SessionID(string: "s"), for: request).get()
            } throws: { error in
                (error as? HoardError)?.storageKind == .notADirectory
            }
            #expect(!FileManager.default.fileExists(atPath: app.hoard.defaultPath), "no second store")
            #expect(throws: HoardError.self) { _ = try app.hoard.store }
            try await app.asyncShutdown()
        }
    }

    @Test("the store opens once per application, however often app.cache is asked for; another path is refused")
    func oneStorePerApplication() async throws {
        try await withTemporaryDirectory { directory in
            let app = try await Application.make(.testing)
            let first = try app.hoard.open(at: directory + "/store", options: .testing())
            app.caches.use(.hoard())
            for _ in 0..<10 { _ = app.cache }
            #expect(try app.hoard.store === first)
            #expect(try app.hoard.open(at: directory + "/store") === first, "a second open returns the first store")
            #expect(throws: HoardVaporError.self, "a second store is refused") {
                try app.hoard.open(at: directory + "/elsewhere")
            }
            try await app.asyncShutdown()
        }
    }
}

#endif
