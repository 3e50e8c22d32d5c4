extension Store {
    /// How a process notices the commits of other processes (``Options/otherProcesses``).
    public struct OtherProcessChanges: Sendable, Hashable {
        enum Mode: Hashable {
            case watchFile(fallback: Duration)
            case poll(Duration)
            case off
        }

        let mode: Mode

        /// Watch the data file (inotify on Linux): a commit of another process wakes the watch,
        /// and no commit means no wake-up. The watch is set for one event at a time, again at most
        /// every 100 µs: a commit made while it is not set waits for the next setting. Where the
        /// file cannot be watched (other platforms, a file replaced under the store), poll every
        /// 100 ms.
        public static let watchFile = OtherProcessChanges(mode: .watchFile(fallback: .milliseconds(100)))
        /// Read the last transaction id every `interval`.
        public static func poll(every interval: Duration) -> OtherProcessChanges {
            OtherProcessChanges(mode: .poll(interval))
        }
        /// Do not look: observers see this process's commits only.
        public static let off = OtherProcessChanges(mode: .off)
    }
}
