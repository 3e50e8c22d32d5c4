#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

// The public API speaks `Duration` and `Date`; records keep milliseconds since 1970. These are
// the only conversions, to the nearest millisecond and saturating at Int64's ends (a duration of
// `.seconds(Int64.max)` means "as good as never", not a trap).

extension Duration {
    /// `minutes` minutes, for a time to live or an expiry: `.minutes(5)`.
    public static func minutes(_ minutes: some BinaryInteger) -> Duration { .seconds(minutes) * 60 }

    /// `hours` hours: `timeToLive: .hours(24)`.
    public static func hours(_ hours: some BinaryInteger) -> Duration { .seconds(hours) * 3600 }

    /// `days` days of 24 hours (a record's expiry is an instant, so there are no calendar days).
    public static func days(_ days: some BinaryInteger) -> Duration { .seconds(days) * 86_400 }

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
