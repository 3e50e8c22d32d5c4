internal import CLMDB

/// Map growth. LMDB lets a process change its map size only while none of its transactions is
/// open, and poisons a transaction that hit `MDB_MAP_FULL`; so growth happens here, in one place,
/// between two attempts of a write, with the ``TransactionGate`` holding new transactions back.
extension Environment {
    /// Doubles the map (up to the cap) unless another thread already grew it past `failedSize`.
    func growMap(from failedSize: Int) throws(LMDBError) {
        let grown: Void? = try gate.exclusively { () throws(LMDBError) -> Void in
            // The gate is held: `info()` and `statistics()` would wait for it.
            let current = try infoHeld().mapSize
            if current > failedSize { return }  // someone grew it while we waited
            var target = current > Int.max / 2 ? Int.max : current * 2
            let page = try statisticsHeld().pageSize
            target = (target + page - 1) / page * page
            if let cap = options.maxMapSize {
                target = min(target, cap / page * page)
                guard target > current else {
                    throw LMDBError(
                        code: MDB_MAP_FULL, operation: "write",
                        context:
                            "\(path): the map reached its cap of \(cap) bytes (Options.maxMapSize); nothing of this write was stored"
                    )
                }
            }
            try check(
                mdb_env_set_mapsize(handle, target), "mdb_env_set_mapsize",
                "\(path): growing the map to \(target) bytes")
        }
        if grown == nil {
            throw LMDBError(
                code: MDB_MAP_FULL, operation: "write",
                context:
                    "\(path): the map is full and cannot grow while this thread holds another transaction of the environment; end it first"
            )
        }
    }

    /// Adopts the larger map another process has set (`mdb_env_set_mapsize(env, 0)`).
    func adoptMapGrownElsewhere() throws(LMDBError) {
        let adopted: Void? = try gate.exclusively { () throws(LMDBError) -> Void in
            try check(
                mdb_env_set_mapsize(handle, 0), "mdb_env_set_mapsize",
                "\(path): adopting the map size set by another process")
        }
        if adopted == nil {
            throw LMDBError(
                code: MDB_MAP_RESIZED, operation: "mdb_txn_begin",
                context:
                    "\(path): another process grew the map; this thread must end its open transactions before a new one can begin"
            )
        }
    }
}
