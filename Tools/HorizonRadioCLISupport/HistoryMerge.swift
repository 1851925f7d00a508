/// A payment the wallet keeps pending (sent, answer not heard) may also be settled: its receipt
/// stored, or listed by the server, before the pending row is cleared (a Ctrl-C after
/// confirming clears it only at the next `pay`). The history shows each payment once, and the
/// settled one wins.
public enum HistoryMerge {
    public static func unsettled<Pending>(
        _ pending: [Pending], id: (Pending) -> String, settled: some Sequence<String>
    ) -> [Pending] {
        let settled = Set(settled.map { $0.lowercased() })
        return pending.filter { !settled.contains(id($0).lowercased()) }
    }
}
