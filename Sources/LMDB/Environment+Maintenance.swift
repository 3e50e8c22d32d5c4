internal import CLMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

// MARK: - Information and maintenance

extension Environment {
    /// Page-level statistics of a B-tree.
    public struct Statistics: Sendable, Hashable {
        /// The page size in bytes.
        public var pageSize: Int
        /// The depth of the B-tree.
        public var depth: Int
        /// Internal (non-leaf) pages.
        public var branchPages: Int
        /// Leaf pages.
        public var leafPages: Int
        /// Overflow pages (values larger than about half a page).
        public var overflowPages: Int
        /// Data items (key/value pairs).
        public var entries: Int

        init(_ s: MDB_stat) {
            pageSize = Int(s.ms_psize)
            depth = Int(s.ms_depth)
            branchPages = s.ms_branch_pages
            leafPages = s.ms_leaf_pages
            overflowPages = s.ms_overflow_pages
            entries = s.ms_entries
        }

        /// Bytes in pages of this tree.
        public var bytes: Int { (branchPages + leafPages + overflowPages) * pageSize }
    }

    /// Facts about the environment as a whole.
    public struct Info: Sendable, Hashable {
        /// The current map size in bytes.
        public var mapSize: Int
        /// The last page number in use.
        public var lastPageNumber: Int
        /// The id of the last committed transaction.
        public var lastTransactionID: Int
        /// The maximum number of reader slots.
        public var maxReaders: Int
        /// Reader slots ever used (not all of them are necessarily in use now).
        public var readerSlotsUsed: Int
    }

    /// Statistics of the main database (which lists the named databases).
    ///
    /// The corresponding C function is `mdb_env_stat`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func statistics() throws(LMDBError) -> Statistics {
        try withHandle("mdb_env_stat") { (_) throws(LMDBError) in try statisticsHeld() }
    }

    /// ``statistics()`` while the gate is held (a resize, which no close can overlap).
    func statisticsHeld() throws(LMDBError) -> Statistics {
        var s = MDB_stat()
        try check(mdb_env_stat(handle, &s), "mdb_env_stat", path)
        return Statistics(s)
    }

    /// The map size, last page and last transaction of the environment.
    ///
    /// The corresponding C function is `mdb_env_info`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func info() throws(LMDBError) -> Info {
        try withHandle("mdb_env_info") { (_) throws(LMDBError) in try infoHeld() }
    }

    /// ``info()`` while the gate is held (a resize, which no close can overlap).
    func infoHeld() throws(LMDBError) -> Info {
        var i = MDB_envinfo()
        try check(mdb_env_info(handle, &i), "mdb_env_info", path)
        return Info(
            mapSize: i.me_mapsize,
            lastPageNumber: i.me_last_pgno,
            lastTransactionID: i.me_last_txnid,
            maxReaders: Int(i.me_maxreaders),
            readerSlotsUsed: Int(i.me_numreaders)
        )
    }

    /// Flushes data to disk; needed only with a durability mode that skips syncs.
    ///
    /// - Parameter force: flush even when the mode says not to (`MDB_NOSYNC`).
    ///
    /// The corresponding C function is `mdb_env_sync`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func sync(force: Bool = true) throws(LMDBError) {
        try withHandle("mdb_env_sync") { (handle) throws(LMDBError) in
            try check(mdb_env_sync(handle, force ? 1 : 0), "mdb_env_sync", path)
        }
    }

    /// Clears reader slots left by processes that died inside a read transaction.
    ///
    /// - Returns: how many stale slots were cleared.
    ///
    /// The corresponding C function is `mdb_reader_check`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    @discardableResult
    public func clearStaleReaders() throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try withHandle("mdb_reader_check") { (handle) throws(LMDBError) in
            try check(mdb_reader_check(handle, &dead), "mdb_reader_check", path)
        }
        return Int(dead)
    }

    /// Writes a consistent copy of the environment to `destination`, optionally compacted.
    ///
    /// The copy is taken from one read snapshot, so it may run while writers commit. With the
    /// directory layout `destination` is a directory (created with mode 0700 when missing) that must
    /// not already hold a `data.mdb`; with the single-file layout it is the new data file.
    ///
    /// The copy is written to a file beside its final name (`data.mdb.partial`, or the data
    /// file's name with `.partial`), flushed, and only then given its name: a copy cut short
    /// (the process killed, the disk full) never looks like a store. LMDB writes a copy's meta
    /// pages first, pointing at pages that come later, so a partial copy under the final name
    /// would open as a store whose pages are missing (and an empty file as an empty store). A
    /// leftover `.partial` is replaced.
    ///
    /// - Parameters:
    ///   - destination: the directory for the copy (directory layout) or the new data file (single-file layout).
    ///   - compacting: omit free pages and renumber pages (`MDB_CP_COMPACT`): smaller, slower.
    /// - Throws: ``LMDBError`` if the destination exists or cannot be written.
    ///
    /// The corresponding C function is `mdb_env_copyfd2`.
    public func copy(to destination: String, compacting: Bool = false) throws(LMDBError) {
        let target: String
        if options.layout == .directory {
            try FileSystem.makeDirectories(destination, mode: 0o700)
            target = destination + "/data.mdb"
        } else {
            try FileSystem.makeDirectories(FileSystem.parent(of: destination), mode: 0o700)
            target = destination
        }
        if try FileSystem.status(target) != nil {
            throw LMDBError(
                code: EEXIST, operation: "mdb_env_copy", context: "\(target) exists; a copy never replaces a store")
        }
        let partial = target + ".partial"
        let fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try checkSystem(fd, "open", partial)
        var closed = false
        defer { if !closed { closeFile(fd); unlink(partial) } }
        do {
            // The copy runs its own read transaction inside LMDB; it must not overlap a map resize.
            try withHandle("mdb_env_copyfd2") { (handle) throws(LMDBError) in
                try check(
                    mdb_env_copyfd2(handle, fd, compacting ? flags(MDB_CP_COMPACT) : 0), "mdb_env_copyfd2",
                    "from \(path) to \(partial)")
            }
        }
        try checkSystem(fsync(fd), "fsync", partial)
        closed = true
        closeFile(fd)
        // link, not rename: it fails rather than replace a store that appeared meanwhile.
        if link(partial, target) == 0 {
            unlink(partial)
        } else if errno == EPERM || errno == EOPNOTSUPP || errno == ENOSYS {
            // No hard links on this file system: rename (the target was checked to be absent above).
            if rename(partial, target) != 0 {
                let code = errno
                unlink(partial)
                throw LMDBError(code: code, operation: "rename", context: "\(partial) to \(target)")
            }
        } else {
            let code = errno
            unlink(partial)
            throw LMDBError(code: code, operation: "link", context: "\(partial) to \(target)")
        }
        try FileSystem.syncDirectory(FileSystem.parent(of: target))
    }
}

// MARK: - Reader table

extension Environment {
    /// A slot of the reader table that holds a snapshot.
    public struct Reader: Sendable, Hashable {
        /// The process that holds it.
        public var processID: Int32
        /// The thread (or, with `MDB_NOTLS`, the transaction) that holds it, as LMDB prints it.
        public var thread: String
        /// The transaction id of its snapshot; `nil` for a slot kept by a reset transaction.
        public var transactionID: Int?
        /// The process no longer exists: the slot is stale until ``Environment/clearStaleReaders()`` or the next open clears it.
        public var isStale: Bool
    }

    /// The reader table: which processes hold read snapshots of this environment now.
    ///
    /// The corresponding C function is `mdb_reader_list`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func readers() throws(LMDBError) -> [Reader] {
        final class Lines { var lines: [String] = [] }
        let collected = Lines()
        let rc = try withHandle("mdb_reader_list") { (handle) throws(LMDBError) in
            withExtendedLifetime(collected) {
                mdb_reader_list(
                    handle,
                    { message, context in
                        guard let message, let context else { return 0 }
                        Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().lines.append(
                            String(cString: message))
                        return 0
                    }, Unmanaged.passUnretained(collected).toOpaque())
            }
        }
        if rc < 0 { try check(rc, "mdb_reader_list", path) }
        return collected.lines.flatMap { $0.split(separator: "\n") }.compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 3, let pid = Int32(fields[0]) else { return nil }  // the header line
            let alive = kill(pid, 0) == 0 || errno == EPERM
            return Reader(processID: pid, thread: String(fields[1]), transactionID: Int(fields[2]), isStale: !alive)
        }
    }
}
