import CoreMetrics
import Synchronization

/// A metrics backend that adds up what it is given with atomics: about the least a real backend
/// (swift-prometheus' counters and histograms) does per call.
final class CountingMetrics: MetricsFactory {
    final class Handler: CounterHandler, RecorderHandler, TimerHandler, MeterHandler, Sendable {
        let total = Atomic<Int64>(0)
        let count = Atomic<Int64>(0)
        func increment(by amount: Int64) { total.add(amount, ordering: .relaxed) }
        func reset() { total.store(0, ordering: .relaxed) }
        func record(_ value: Int64) {
            total.add(value, ordering: .relaxed)
            count.add(1, ordering: .relaxed)
        }
        func record(_ value: Double) { record(Int64(value)) }
        func recordNanoseconds(_ duration: Int64) { record(duration) }
        func set(_ value: Int64) { total.store(value, ordering: .relaxed) }
        func set(_ value: Double) { set(Int64(value)) }
        func decrement(by amount: Double) { total.add(-Int64(amount), ordering: .relaxed) }
        func increment(by amount: Double) { total.add(Int64(amount), ordering: .relaxed) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        Handler()
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { Handler() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
}
