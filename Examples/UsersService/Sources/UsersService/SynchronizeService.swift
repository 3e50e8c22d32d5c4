import Hoard
import Logging
import ServiceLifecycle
import UsersModel

/// Brings the stored users in line with the upstream's whole list every `interval` (the first
/// time after one interval, so that a fresh store warms up by reading through first).
///
/// A failed round is logged and tried again at the next interval. On a graceful shutdown it
/// stops waiting; a synchronize in progress commits first (an async write once made is
/// carried out).
struct SynchronizeService: Service, CustomStringConvertible {
    let users: HoardCollection<User>
    let upstream: UpstreamClient
    let interval: Duration
    let logger: Logger

    var description: String { "SynchronizeService(every \(interval))" }

    func run() async throws {
        let round = self.round
        let interval = interval
        await cancelWhenGracefulShutdown {
            while true {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return  // cancelled or shutting down
                }
                await round()
            }
        }
    }

    @Sendable func round() async {
        do {
            let fresh = try await upstream.everyone()
            let result = try await users.synchronize(with: fresh)
            logger.info(
                "synchronized users",
                metadata: [
                    "added": "\(result.added.count)", "updated": "\(result.updated.count)",
                    "removed": "\(result.removed.count)", "unchanged": "\(result.unchanged)",
                ])
        } catch is CancellationError {
            return
        } catch {
            logger.warning("synchronize failed; trying again at the next interval", metadata: ["error": "\(error)"])
        }
    }
}
