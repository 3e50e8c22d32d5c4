internal import CLMDB

extension Transaction where Access == ReadWriteAccess {
    /// Runs `body` in a transaction nested in this one: when `body` throws, what it wrote is
    /// undone and this transaction goes on without it; when it returns, its writes become part of
    /// this transaction, committed or aborted with it.
    ///
    /// This is how one write transaction can carry the writes of several callers that must not
    /// fail each other (a group commit): each runs nested, and a failing one leaves the others.
    /// While `body` runs, use only the transaction it is handed, not this one (LMDB refuses
    /// operations on a parent with an open child, with ``LMDBError/Kind/badState``).
    ///
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (nothing of it stays), or ``LMDBError`` when the nested
    ///   transaction cannot begin or be merged into this one.
    ///
    /// The corresponding C functions are `mdb_txn_begin` with a parent, `mdb_txn_commit` and `mdb_txn_abort`.
    public func nested<R>(_ body: (borrowing WriteTransaction) throws -> R) throws -> R {
        var child: OpaquePointer?
        try check(
            mdb_txn_begin(environment.handle, handle, 0, &child), "mdb_txn_begin",
            "a nested transaction in \(environment.path)")
        guard let child else {
            throw LMDBError(
                .badState, operation: "mdb_txn_begin", context: "no nested transaction returned in \(environment.path)")
        }
        // LMDB closes the child's cursors when the child ends, however it ends.
        defer { if state?.keptCursor?.txn == child { state?.keptCursor = nil } }
        let result: R
        // What the child asks to run on commit goes with the child's writes when it is undone.
        let actionsBefore = state?.afterCommit.count ?? 0
        let marks = state?.journalMarks() ?? []
        do {
            result = try body(WriteTransaction(handle: child, environment: environment, state: state))
        } catch {
            mdb_txn_abort(child)
            state?.afterCommit.removeSubrange(actionsBefore...)
            state?.undoJournals(to: marks)
            throw error
        }
        let rc = mdb_txn_commit(child)  // frees the child whatever the outcome
        if rc != 0 {
            // The child's writes are gone: so is what it recorded.
            state?.afterCommit.removeSubrange(actionsBefore...)
            state?.undoJournals(to: marks)
        }
        if rc == MDB_MAP_FULL { state?.mapFull = true }
        try check(rc, "mdb_txn_commit", "a nested transaction in \(environment.path)")
        return result
    }
}

extension Transaction where Access == ReadWriteAccess {
    /// The object kept with this write transaction under `key`, made by `make` at the first call:
    /// for what a layer above must remember from one call to the next within a transaction (the
    /// keys it wrote, say) and forget when it ends. The transactions nested in this one share it,
    /// and a nested transaction that is undone does not undo what it kept here, unless the object
    /// is a ``TransactionJournal``, which is told to forget what was recorded in it. A write that runs
    /// again after the map grew starts with nothing kept.
    // Inlinable, so that the callers' cast to their own class is specialized: the generic one
    // cost about as much as the rest of recording a change.
    @inlinable
    package func local<T: AnyObject>(_ key: ObjectIdentifier, make: () -> T) -> T {
        guard let state else { return make() }
        if let kept = state.local(key) as? T { return kept }
        let made = make()
        state.keep(made, as: key)
        return made
    }

    /// The object kept with this write transaction under `key` (``local(_:make:)``), if there is
    /// one of type `T`.
    @inlinable
    package func local<T: AnyObject>(_ key: ObjectIdentifier, as type: T.Type) -> T? {
        state?.local(key) as? T
    }

    /// Runs `action` once this transaction has committed, on the committing thread, after the
    /// commit: for what must count only writes that took effect (statistics). It never runs when
    /// the transaction is aborted, when a nested transaction it was asked in is undone, or for an
    /// attempt that LMDB runs again after the map grew.
    package func onCommit(_ action: @escaping () -> Void) {
        state?.afterCommit.append(action)
    }
}
