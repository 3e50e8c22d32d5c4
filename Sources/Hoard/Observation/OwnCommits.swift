/// This process's commits that the watch has not passed yet, in the order of their ids (each
/// is begun under LMDB's writer lock, so they come in order): those being made, and those made.
/// An array rather than a dictionary: a writer adds and settles one at the end, and hashing cost
/// a commit more than that.
struct OwnCommits {
    private var commits: [(id: Int, made: Bool)] = []

    /// Notes that this process is about to commit `id`.
    mutating func begin(_ id: Int) { commits.append((id, false)) }

    /// Notes that `id` committed, or forgets it when it did not (its id may be another process's).
    mutating func settle(_ id: Int, committed: Bool) {
        guard let index = commits.lastIndex(where: { $0.id == id }) else { return }
        if committed { commits[index].made = true } else { commits.remove(at: index) }
    }

    /// Whether every commit in `range` is one this process made.
    func madeAll(_ range: ClosedRange<Int>) -> Bool {
        commits.count { range.contains($0.id) && $0.made } == range.count
    }

    /// The commits in `range` this process made, and the first one in it still being made.
    func made(in range: ClosedRange<Int>) -> (made: Set<Int>, beingMade: Int?) {
        var made = Set<Int>()
        for commit in commits where range.contains(commit.id) {
            if !commit.made { return (made, commit.id) }
            made.insert(commit.id)
        }
        return (made, nil)
    }

    /// Whether `id` is still being made.
    func isBeingMade(_ id: Int) -> Bool { commits.contains { $0.id == id && !$0.made } }

    /// Forgets the commits up to `id`, which the watch passed.
    mutating func forget(through id: Int) {
        commits.removeFirst(commits.firstIndex { $0.id > id } ?? commits.count)
    }

    mutating func removeAll() { commits.removeAll() }
}
