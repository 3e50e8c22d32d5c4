#if Postgres
internal import Foundation
internal import Hoard
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A store's claim to run a bus: an exclusive `flock` on a file beside the store (`bus.lock` in
/// the store's directory, or `PATH-bus.lock` beside a store that is a single file), held while
/// ``PostgresBus/run()`` runs. A store has one lease and one position per bus, and two buses
/// renewing, applying and vouching for one store would undo each other's work, so a second bus,
/// in this process or another, is refused. The kernel drops the lock when the process ends, so a
/// process killed with SIGKILL leaves nothing to clean up. (`flock` locks belong to an open file,
/// not to a process: a second open in the same process conflicts too.)
final class BusClaim: Sendable {
    private let descriptor: Int32

    /// Takes the claim on `store`.
    ///
    /// - Throws: ``PostgresBusError/storeHasABus(store:lockFile:)`` when a bus holds it,
    ///   ``PostgresBusError/cannotLockStore(store:lockFile:reason:)`` when the file cannot be opened.
    init(store: Store) throws {
        let path = Self.lockFile(of: store.path)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw PostgresBusError.cannotLockStore(
                store: store.path, lockFile: path, reason: String(cString: strerror(errno)))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { throw PostgresBusError.storeHasABus(store: store.path, lockFile: path) }
            throw PostgresBusError.cannotLockStore(
                store: store.path, lockFile: path, reason: String(cString: strerror(code)))
        }
        self.descriptor = descriptor
    }

    /// Gives the claim up.
    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// The lock file of the store at `path`.
    static func lockFile(of path: String) -> String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            return path + "/bus.lock"
        }
        return path + "-bus.lock"
    }
}
#endif
