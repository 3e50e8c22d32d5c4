#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

// The public API speaks `Duration` and `Date`; records keep milliseconds since 1970
// (docs/FORMAT.md). These are the only conversions between the two, to the nearest millisecond
// and saturating at Int64's ends (a duration of `.seconds(Int64.max)` means "as good as never",
// not a trap).

extension Duration {
    /// Whole milliseconds, saturating.
    var storedMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole.addingSaturating(attoseconds / 1_000_000_000_000_000)
    }
}

extension Date {
    /// Milliseconds since 1970, rounded to the nearest.
    var storedMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        guard milliseconds.isFinite else { return milliseconds < 0 ? .min : .max }
        return Int64(exactly: milliseconds) ?? (milliseconds < 0 ? .min : .max)
    }

    /// The instant `milliseconds` after 1970.
    init(storedMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension Int64 {
    /// `self + other`, clamped to Int64's range.
    func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other < 0 ? .min : .max) : sum
    }
}
