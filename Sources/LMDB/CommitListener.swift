import Synchronization

/// What a layer above wants to hear about the write transactions of an environment (every one,
/// or those that kept an object): the last moment to write in it, and whether it committed. Set
/// with ``Environment/setCommitListener(_:everyCommit:)``.
///
/// Its calls run on the committing thread, ``willCommit(_:)`` inside LMDB's writer lock and the
/// others after the commit released it: keep them short.
package protocol CommitListener: AnyObject, Sendable {
    /// Called after the transaction's closure returned and just before it commits: what is
    /// written here commits with the rest. It may run more than once for one write, when LMDB
    /// runs the write again after the map grew.
    ///
    /// - Throws: what stops the commit: the transaction is aborted and the write throws it.
    func willCommit(_ txn: borrowing WriteTransaction) throws
    /// Called once the transaction with id `transaction` committed, before the write returns.
    /// `local` finds what the transaction kept (``Transaction/local(_:make:)``).
    func didCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?)
    /// Called when a transaction that ``willCommit(_:)`` was called for did not commit after
    /// all (the call threw, the commit failed, or LMDB runs the write again after the map grew).
    /// `local` finds what the transaction kept.
    func didNotCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?)
}

/// An object kept with a write transaction (``Transaction/local(_:make:)``) that must forget
/// what a nested transaction recorded when that nested transaction is undone.
package protocol TransactionJournal: AnyObject {
    /// A position in what has been recorded so far.
    var mark: Int { get }
    /// Forgets everything recorded after `mark`.
    func undo(to mark: Int)
}

extension Environment {
    /// Sets (or, with `nil`, removes) the object told about the write transactions of this
    /// environment in this process: every one, or with `everyCommit` false only those that kept
    /// an object (``Transaction/local(_:make:)``), which spares the others the listener's calls.
    /// Costs a writer one atomic load a commit when none is set.
    package func setCommitListener(_ listener: (any CommitListener)?, everyCommit: Bool = true) {
        commitListener.withLock { $0 = listener }
        listenerHearsEveryCommit.store(everyCommit, ordering: .releasing)
        hasCommitListener.store(listener != nil, ordering: .releasing)
    }

    /// The listener, if one is set.
    package var currentCommitListener: (any CommitListener)? {
        guard hasCommitListener.load(ordering: .acquiring) else { return nil }
        return commitListener.withLock { $0 }
    }
}

extension WriteState {
    /// The position of each journal kept so far, before a nested transaction starts.
    func journalMarks() -> [(journal: any TransactionJournal, mark: Int)] {
        locals.compactMap { $0 as? any TransactionJournal }.map { ($0, $0.mark) }
    }

    /// Undoes what journals recorded since `marks` were taken (a journal made since then forgets all).
    func undoJournals(to marks: [(journal: any TransactionJournal, mark: Int)]) {
        for case let journal as any TransactionJournal in locals {
            let mark = marks.first { $0.journal === journal }?.mark ?? 0
            journal.undo(to: mark)
        }
    }
}
