import HorizonCore

/// A min-heap of timed actions. Ties on time run in the order they were scheduled, which is what
/// makes a simulation replay exactly.
struct EventQueue {
    struct Event {
        let time: Instant
        let sequence: UInt64
        let handle: ScheduledAction
        let action: @Sendable () -> Void

        func runsBefore(_ other: Event) -> Bool {
            time != other.time ? time < other.time : sequence < other.sequence
        }
    }

    private var heap: [Event] = []
    private var nextSequence: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    var nextTime: Instant? { heap.first?.time }

    // The heap is reordered through its buffer: comparing two events reads their keys in place
    // and swapping moves them, where `heap[i]` and `Array.swapAt` copied whole events (a retain
    // and a release of the handle and of the action for each), thousands a simulated payment.

    mutating func push(time: Instant, handle: ScheduledAction, action: @escaping @Sendable () -> Void) {
        heap.append(Event(time: time, sequence: nextSequence, handle: handle, action: action))
        nextSequence += 1
        heap.withUnsafeMutableBufferPointer { heap in
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard heap[child].runsBefore(heap[parent]) else { break }
                heap.swapAt(child, parent)
                child = parent
            }
        }
    }

    mutating func pop() -> Event? {
        guard !heap.isEmpty else { return nil }
        heap.withUnsafeMutableBufferPointer { $0.swapAt(0, $0.count - 1) }
        let event = heap.removeLast()
        heap.withUnsafeMutableBufferPointer { heap in
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var first = parent
                if left < heap.count, heap[left].runsBefore(heap[first]) { first = left }
                if right < heap.count, heap[right].runsBefore(heap[first]) { first = right }
                if first == parent { break }
                heap.swapAt(parent, first)
                parent = first
            }
        }
        return event
    }
}
